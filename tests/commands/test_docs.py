"""The docs are part of the product: Claude reads SKILL.md and references/ to decide what to run.

Rule for "commands": a scripts/lcm_*.py file with an `if __name__ == "__main__":` block is a
command the agent runs, so SKILL.md names it and references/tools.md documents it (a section
headed with its file name that mentions every flag of its --help). Modules without one (lcm.vault.db,
lcm.base.guard, lcm.capture.transcript, ...) are shared code, not commands.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lcm.base.config

ROOT = Path(__file__).resolve().parents[2]
SKILL = ROOT / "SKILL.md"
TOOLS = ROOT / "references" / "tools.md"
README = ROOT / "README.md"
SPEC_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def command_scripts() -> list[str]:
    return sorted(p.name for p in (ROOT / "scripts").glob("lcm_*.py")
                  if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8"))


def frontmatter(text: str) -> tuple[dict[str, str], str]:
    """Top-level `key: value` pairs of a YAML frontmatter (single-line values), and the body."""
    assert text.startswith("---\n"), "SKILL.md starts with a YAML frontmatter"
    head, _, body = text[4:].partition("\n---\n")
    fields: dict[str, str] = {}
    for line in head.splitlines():
        if not line.strip() or line.startswith((" ", "\t", "#")):
            continue
        key, sep, value = line.partition(":")
        assert sep, f"not a key: value line: {line!r}"
        fields[key.strip()] = value.strip()
    return fields, body


def tools_sections() -> dict[str, str]:
    sections, current = {}, None
    for line in TOOLS.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^## (lcm_\w+\.py)\s*$", line)
        if match:
            current = match.group(1)
            sections[current] = ""
        elif line.startswith("## "):
            current = None
        elif current:
            sections[current] += line + "\n"
    return sections


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)}


def doc_files() -> list[Path]:
    files = [SKILL, *sorted((ROOT / "references").glob("*.md"))]
    return files + ([README] if README.exists() else [])


# -- SKILL.md ------------------------------------------------------------------

def test_skill_frontmatter_within_agent_skills_limits():
    fields, body = frontmatter(SKILL.read_text(encoding="utf-8"))
    assert set(fields) <= SPEC_KEYS, f"non-spec keys: {set(fields) - SPEC_KEYS}"
    name = fields["name"]
    assert name == "lcm"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) and len(name) <= 64
    assert "anthropic" not in name and "claude" not in name
    description = fields["description"]
    assert 0 < len(description) <= 1024
    assert "<" not in description and ">" not in description
    assert "Use it when" in description, "the description says when to use it"
    assert not re.search(r"\b(I|you|we)\b", description, re.I), "third person"
    assert len(fields.get("compatibility", "")) <= 500
    assert len(body.splitlines()) < 500


def test_every_command_script_is_named_in_skill_md():
    text = SKILL.read_text(encoding="utf-8")
    scripts = command_scripts()
    assert "lcm_grep.py" in scripts or (ROOT / "scripts" / "lcm_db.py").exists()
    missing = [s for s in scripts if s not in text]
    assert not missing, f"SKILL.md does not mention: {missing}"


def test_skill_md_runs_commands_through_lcm_scripts_with_a_fallback():
    text = SKILL.read_text(encoding="utf-8")
    assert '${LCM_SCRIPTS:-${CLAUDE_SKILL_DIR}/scripts}' in text
    assert text.count('python3 "$LCM_SCRIPTS/') >= 10
    for needle in ("lcm_grep.py", "lcm_describe.py", "lcm_expand_query.py", "--delegated-scope",
                   "--kept-work", "LCM_FRESH_TAIL_COUNT", "lcm_checkpoint.py", "lcm_resume.py"):
        assert needle in text, needle
    # escalation order: search, then inspect, then ask the originals
    assert text.index("lcm_grep.py") < text.index("lcm_describe.py") < text.index("lcm_expand_query.py")


def test_skill_links_reference_files_one_level_deep():
    links = LINK.findall(SKILL.read_text(encoding="utf-8"))
    targets = {link.split("#")[0] for link in links if not link.startswith(("http:", "https:"))}
    assert {"references/tools.md", "references/architecture.md", "references/prompts.md"} <= targets
    for target in targets:
        assert target.count("/") <= 1, f"{target}: link one level deep from SKILL.md"


# -- references/tools.md -------------------------------------------------------

@pytest.mark.parametrize("script", command_scripts())
def test_every_command_has_a_tools_md_section_with_every_flag(script):
    sections = tools_sections()
    assert script in sections, f"references/tools.md has no '## {script}' section"
    section = sections[script]
    assert section.strip() and "(to be written)" not in section, f"{script}: section not written"
    help_text = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--help"],
                               capture_output=True, text=True, timeout=60).stdout
    usage = help_text.split("\n\n")[0] if help_text else ""
    options = help_text.split("options:", 1)[-1] if "options:" in help_text else ""
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", usage + options)) - {"--help"}
    missing = sorted(f for f in flags if f not in section and f not in {"--db", "--json"})
    assert not missing, f"{script}: flags not documented in references/tools.md: {missing}"


# -- links ---------------------------------------------------------------------

@pytest.mark.parametrize("doc", doc_files(), ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    for link in LINK.findall(doc.read_text(encoding="utf-8")):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.exists(), f"{doc.name}: broken link {link}"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{doc.name}: no heading for #{anchor} in {path.name}"


# -- README --------------------------------------------------------------------

def test_readme_documents_every_setting():
    assert README.exists(), "README.md is missing"
    text = README.read_text(encoding="utf-8")
    missing = [name for name in lcm.base.config.SETTINGS if name not in text]
    assert not missing, f"README.md does not document: {missing}"
    for name in ("LCM_DB", "LCM_HOME", "LCM_SESSION_ID", "LCM_SCRIPTS"):
        assert name in text, name


def test_readme_has_plugin_install_and_hooks_sections():
    text = README.read_text(encoding="utf-8")
    for heading in ("## Install as a plugin", "## Hooks", "## Configuration"):
        assert heading in text, heading
    assert "claude plugin marketplace add" in text and "claude plugin install lcm@lcm-tools" in text


# -- plugin manifests ----------------------------------------------------------

def test_plugin_and_marketplace_manifests_agree():
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert plugin["name"] == "lcm" and plugin["skills"] == ["./"] and plugin["license"] == "MIT"
    assert re.fullmatch(r"\d+\.\d+\.\d+", plugin["version"])
    assert plugin["description"] and plugin["author"]["name"]
    # 2.1.197's --strict validator rejects fields it does not know
    assert not {"engines", "network"} & set(plugin)
    assert market["name"] == "lcm-tools" and market["owner"]["name"] and market["description"]
    [entry] = market["plugins"]
    assert entry["name"] == "lcm" and entry["source"] == "./" and entry["version"] == plugin["version"]


def test_hooks_json_uses_quoted_plugin_root_paths_that_exist():
    config = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    for event, entries in config["hooks"].items():
        for entry in entries:
            for hook in entry["hooks"]:
                assert hook["type"] == "command"
                match = re.search(r'"\$\{CLAUDE_PLUGIN_ROOT\}/(hooks/\w+\.py)"', hook["command"])
                assert match, f"{event}: quote the ${{CLAUDE_PLUGIN_ROOT}} path: {hook['command']}"
                assert (ROOT / match.group(1)).is_file()


def test_flags_used_in_skill_md_exist():
    """Every --flag SKILL.md passes to a script is one that script accepts (per its --help)."""
    text = SKILL.read_text(encoding="utf-8").replace("\\\n", " ")
    helps: dict[str, str] = {}
    for line in text.splitlines():
        for script, rest in re.findall(r"(lcm_\w+\.py)\b(.*)", line):
            path = ROOT / "scripts" / script
            assert path.is_file(), f"SKILL.md names a missing script: {script}"
            if script not in helps:
                helps[script] = subprocess.run([sys.executable, str(path), "--help"], capture_output=True,
                                               text=True, timeout=60).stdout
            # flags up to the next script name on the line belong to this one
            own = re.split(r"lcm_\w+\.py", rest)[0]
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", own):
                assert flag in helps[script], f"SKILL.md: {script} has no {flag}"
