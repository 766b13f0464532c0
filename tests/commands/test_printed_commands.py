"""Every command lcm prints runs as printed: the `Next:` lines, hints, `... more:` lines, resume's
and checkpoint's commands, purge's, status's and doctor's advice, and what the hooks inject.

The commands and hooks run in their common states (no vault yet, right after an import, a
session compacted and checkpointed, a new session of the project, a purge), every command they
print is collected and run in a plain shell (`bash -c`), and each must end well: exit 0, or an
`Error:` with a `Hint:` (a placeholder such as ID or TERM names nothing real). Never "command not
found", never a usage error.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SCRIPTS, run
from transcripts import Transcript, coding_session

pytestmark = pytest.mark.slow

HOOKS = ROOT / "hooks"
# a command as lcm prints it (python3 and the script's path; in the hooks' text, through $LCM_SCRIPTS),
# or a script named bare, which no shell finds (it is on no PATH): both are collected and run
SCRIPT = re.compile(r'python3 (?:"\$LCM_SCRIPTS/|' + re.escape(str(SCRIPTS)) + r'/)(lcm_\w+\.py)"?'
                    r'|(?<![\w/.$"-])(lcm_\w+\.py)\b')
WORD = re.compile(r'"[^"]*"|\'[^\']*\'|\S+')
NOT_RUN = ("lcm_view.py",)  # a server: runs until stopped
WORDS_FIRST = ("lcm_grep.py", "lcm_remember.py")  # their first argument is words (a query, a note)


def value_options(script: str) -> set[str]:
    """The options of `script` that take a value, read from its --help."""
    out = subprocess.run([sys.executable, str(SCRIPTS / script), "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    found = set()
    for line in out.splitlines():
        for m in re.finditer(r"(--[a-z][\w-]*)[ =]([A-Z][A-Z_\[\],.]*|\{)", line):
            found.add(m.group(1))
    return found


_OPTIONS: dict[str, set[str]] = {}


def commands_in(text: str) -> list[str]:
    """Each command printed in `text`: the script and the words that belong to it (its options,
    their values, ids, paths, quoted text, placeholders), up to the prose that follows it."""
    found = []
    for line in text.splitlines():
        for m in SCRIPT.finditer(line):
            script = m.group(1) or m.group(2)
            if script not in _OPTIONS:
                _OPTIONS[script] = value_options(script)
            words, wants_value = [m.group(0)], False
            for w in WORD.findall(line[m.end():]):
                if w.startswith(("(", "`", "|", "&")) or SCRIPT.match(w) or w == "python3":
                    break
                stripped = w.rstrip(",;.)`") if not w.startswith(("'", '"')) else w
                last = stripped != w
                quoted = stripped[:1] in "'\""
                first_words = len(words) == 1 and script in WORDS_FIRST
                if wants_value or quoted or first_words or stripped.startswith("-") or stripped.isupper() \
                        or re.search(r"[0-9/_.\-]", stripped):
                    words.append(stripped)
                    wants_value = stripped in _OPTIONS[script]
                else:
                    break
                if last:
                    break
            found.append(" ".join(words))
    return found


def sh(command: str, env: dict, cwd: Path, env_file: Path | None = None) -> subprocess.CompletedProcess:
    line = f". {env_file}; {command}" if env_file else command
    return subprocess.run(["bash", "-c", line], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def world(tmp_path, isolated_home, monkeypatch):
    """Two projects of imported history, the current directory in the first."""
    for name in ("LCM_LLM", "LCM_LEAF_CHUNK_TOKENS", "LCM_FRESH_TAIL_COUNT", "LCM_LEAF_MIN_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "400")
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "100")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "4")
    projects = isolated_home / ".claude" / "projects"
    app = tmp_path / "app"
    app.mkdir()
    coding_session(projects, turns=12, session_id="aaaa1111-app-first", cwd=str(app),
                   start="2026-10-01T09:00:00Z").write()
    last = coding_session(projects, turns=8, session_id="bbbb2222-app-latest", cwd=str(app),
                          start="2026-10-02T09:00:00Z")
    last.user("the deploy key is in vault, remember to rotate it")
    last.write()
    other = Transcript(projects, session_id="cccc3333-other", cwd="/home/user/other", start="2026-10-03T09:00:00Z")
    other.user("please update module_1.py in the other project")
    other.assistant_text("Updated module_1.py.")
    other.write()
    monkeypatch.chdir(app)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_SESSION_ID", "CLAUDE_"))}
    return {"app": app, "env": env, "tmp": tmp_path}


def printed(capsys, module, *argv) -> str:
    code, out, err = run(capsys, module, *argv)
    return out + err


def check_all(texts: dict[str, str], world, env_file: Path | None = None) -> int:
    """Run every command of every text; fail with the list of those that did not run."""
    failures, ran = [], 0
    for where, text in texts.items():
        for command in commands_in(text):
            if any(s in command for s in NOT_RUN):
                continue
            proc = sh(command, world["env"], world["app"], env_file)
            ran += 1
            bad = proc.returncode not in (0, 1) or (proc.returncode == 1 and not (
                "Error:" in proc.stderr and "Hint:" in proc.stderr))
            if bad or "command not found" in proc.stderr or "No such file" in proc.stderr:
                failures.append(f"[{where}] {command}\n    -> exit {proc.returncode}: {proc.stderr.strip()[:300]}")
    assert not failures, "printed commands that do not run:\n" + "\n".join(failures)
    return ran


def test_every_printed_command_runs_in_a_plain_shell(world, capsys, monkeypatch):
    import lcm.vault.db
    texts = {}
    # right after install: no vault yet
    texts["doctor, no vault"] = printed(capsys, "lcm_doctor")
    texts["status, no vault"] = printed(capsys, "lcm_status")
    texts["grep, no vault"] = printed(capsys, "lcm_grep", "deploy")
    # right after the import, outside any session
    texts["ingest --all"] = printed(capsys, "lcm_ingest", "--all")
    texts["status after import"] = printed(capsys, "lcm_status")
    texts["sessions"] = printed(capsys, "lcm_sessions", "--limit", "2")
    texts["sessions ID"] = printed(capsys, "lcm_sessions", "aaaa1111")
    texts["resume, no checkpoint"] = printed(capsys, "lcm_resume")
    texts["compact --all"] = printed(capsys, "lcm_compact", "--all", "--full")
    conn = lcm.vault.db.connect(create=False, readonly=True)
    top = conn.execute("SELECT id FROM summaries WHERE session_id = 'aaaa1111-app-first'"
                       " ORDER BY depth DESC LIMIT 1").fetchone()["id"]
    leaf = conn.execute("SELECT id FROM summaries WHERE depth = 0 LIMIT 1").fetchone()["id"]
    conn.close()
    texts["grep with hits"] = printed(capsys, "lcm_grep", "module", "--limit", "3", "--context", "1")
    texts["grep elsewhere"] = printed(capsys, "lcm_grep", "other project", "--limit", "2")
    texts["grep no hit"] = printed(capsys, "lcm_grep", "zyxwvut")
    texts["grep unknown session"] = printed(capsys, "lcm_grep", "module", "--session", "nope")
    texts["describe summary"] = printed(capsys, "lcm_describe", top)
    texts["describe session"] = printed(capsys, "lcm_describe", "--session", "aaaa1111")
    texts["expand"] = printed(capsys, "lcm_expand", leaf, "--max-tokens", "300")
    texts["expand_query"] = printed(capsys, "lcm_expand_query", "--query", "module", "--prompt", "what failed?")
    texts["checkpoint"] = printed(capsys, "lcm_checkpoint", "--session", "aaaa1111",
                                  "--output", world["tmp"] / "cp.md")
    texts["checkpoint file"] = (world["tmp"] / "cp.md").read_text()
    texts["resume checkpoint"] = printed(capsys, "lcm_resume", "--checkpoint", world["tmp"] / "cp.md")
    texts["remember"] = printed(capsys, "lcm_remember", "releases go through make release-canary")
    texts["remember --list"] = printed(capsys, "lcm_remember", "--list")
    texts["doctor"] = printed(capsys, "lcm_doctor")
    texts["purge dry"] = printed(capsys, "lcm_purge", "--match", "rotate it")
    texts["purge"] = printed(capsys, "lcm_purge", "--match", "module_3.py", "--yes")
    # a new session of the project: what it starts with and what status says
    monkeypatch.setenv("LCM_SESSION_ID", "dddd4444-new")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(world["app"]))
    texts["resume in a new session"] = printed(capsys, "lcm_resume")
    texts["status in a session"] = printed(capsys, "lcm_status")
    assert "Drill further" in texts["resume in a new session"]
    assert "rebuild them now" in texts["purge"]
    assert any(commands_in(t) for t in (texts["status after import"], texts["doctor, no vault"]))
    ran = check_all(texts, world)
    assert ran >= 30, ran


def test_every_command_the_hooks_inject_runs_in_the_sessions_shell(world, capsys):
    """SessionStart exports LCM_SCRIPTS to the Bash tool through CLAUDE_ENV_FILE; the commands it
    injects run in that shell."""
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    assert run(capsys, "lcm_compact", "--all", "--full")[0] == 0
    env_file = world["tmp"] / "claude-env.sh"
    env = {**world["env"], "CLAUDE_PLUGIN_ROOT": str(ROOT), "CLAUDE_ENV_FILE": str(env_file),
           "CLAUDE_PROJECT_DIR": str(world["app"])}
    texts = {}
    for source, sid in (("startup", "dddd4444-new"), ("compact", "aaaa1111-app-first")):
        payload = {"session_id": sid, "transcript_path": "", "cwd": str(world["app"]),
                   "hook_event_name": "SessionStart", "source": source}
        proc = subprocess.run([sys.executable, "-S", str(HOOKS / "session_start.py")], input=json.dumps(payload),
                              env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        texts[f"SessionStart {source}"] = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "lcm_resume.py\" --session bbbb2222-app-latest" in texts["SessionStart startup"]
    assert check_all(texts, world, env_file) >= 4
