"""The plugin's slash commands (commands/*.md): what the person types after `/lcm:sessions` reaches
the lcm command as words, and no shell ever reads it (issue 31.5).

Each command file's `!` shell lines are run here exactly as Claude Code runs them: Claude Code
(2.1.197, read from its bundle) first puts the typed text in place of `$ARGUMENTS`, escaping
only `!` (a `!` that starts a word or a line gets a backslash, and "!`" / "`!" get a space, so
typed text cannot start a command of its own), then hands each fenced ```! block and each inline
!`...` to bash. The commands pass the text through a quoted heredoc whose end line starts with
`!`: no typed line can equal it, since Claude Code escapes a `!` at the start of a line.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from transcripts import coding_session

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ROOT / "commands"
FENCED = re.compile(r"```!\s*\n?([\s\S]*?)\n?```")  # Claude Code's two patterns, as in its bundle
INLINE = re.compile(r"(?:(?<=^)|(?<=\s))!`([^`]+)`", re.M)
SHELL_COMMANDS = ("checkpoint", "sessions", "status")  # search and remember have Claude run lcm
HOSTILE = ["x; touch pwned", "$(touch pwned)", "`touch pwned`", "x && touch pwned", "x | touch pwned",
           "x > pwned", "x\ntouch pwned", "'; touch pwned; '", '"; touch pwned; "', "x\n!LCM_ARGUMENTS\ntouch pwned",
           "x\n!LCM_ARGUMENTS'\ntouch pwned", "```\ntouch pwned\n```", "x\n```!\ntouch pwned\n```",
           "!`touch pwned`", "x !`touch pwned`", "${IFS}touch${IFS}pwned", "x\\\ntouch pwned", "x\r\ntouch pwned"]


def escape_bang(value: str) -> str:
    """Claude Code's escaping of an argument's `!` before it substitutes it (its O6)."""
    value = value.replace("`!", "` !").replace("!`", "! `")
    return re.sub(r"(^|\s)!", lambda m: m.group(1) + "\\!", value, flags=re.M)


def rendered(name: str, arguments: str) -> str:
    """The command file's body with `$ARGUMENTS` replaced the way Claude Code replaces it."""
    text = (COMMANDS / f"{name}.md").read_text().split("---", 2)[2]
    assert "$ARGUMENTS" in text
    return text.replace("$ARGUMENTS", escape_bang(arguments.replace("\uffff", "")))


def shell_lines(text: str) -> list[str]:
    return [m.group(1).strip() for m in FENCED.finditer(text)] + [m.group(1).strip() for m in INLINE.finditer(text)]


def run_command(name: str, arguments: str, cwd: Path) -> list[subprocess.CompletedProcess]:
    env = {**os.environ, "PATH": f"{ROOT / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    lines = shell_lines(rendered(name, arguments))
    assert lines, f"commands/{name}.md runs nothing"
    return [subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
            for line in lines]


@pytest.mark.slow  # plain-shell runs
@pytest.mark.parametrize("name", SHELL_COMMANDS)
def test_typed_text_runs_nothing_in_a_plain_shell(name, tmp_path, vault):
    work = tmp_path / "work"
    work.mkdir()
    for hostile in HOSTILE:
        for proc in run_command(name, hostile, work):
            assert "Traceback" not in proc.stdout + proc.stderr, (hostile, proc.stdout + proc.stderr)
            assert "lcm" in proc.stdout.lower() or "error" in proc.stdout.lower(), (hostile, proc.stdout)
        assert not [p.name for p in work.iterdir() if "pwned" in p.name], (name, hostile)
    assert not list(tmp_path.rglob("*pwned*"))


def test_each_shell_command_passes_the_text_through_a_heredoc_never_a_shell_word():
    for name in SHELL_COMMANDS:
        lines = shell_lines((COMMANDS / f"{name}.md").read_text())
        assert len(lines) == 1
        head, body, end = lines[0].split("\n")
        assert head == f"lcm {name} --args-from-stdin 2>&1 <<'!LCM_ARGUMENTS'"
        assert body == "$ARGUMENTS" and end == "!LCM_ARGUMENTS"
        assert not [line for name in SHELL_COMMANDS for line in shell_lines(rendered(name, "a\n!LCM_ARGUMENTS\nb"))
                    if line.count("\n!LCM_ARGUMENTS") > 1]


def test_the_commands_keep_their_behaviour(tmp_path, vault, monkeypatch):
    """Options still reach each command, quoted words stay one argument, and `#` is a character."""
    projects = tmp_path / "projects"
    t = coding_session(projects, turns=2, cwd=str(tmp_path))
    t.write()
    env = {**os.environ, "PATH": f"{ROOT / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run([str(ROOT / "bin" / "lcm"), "ingest", str(t.path)], env=env, check=True, capture_output=True)

    [status] = run_command("status", "--json", tmp_path)
    assert json.loads(status.stdout)["messages"] == 14
    [sessions] = run_command("sessions", "--limit 1 --json", tmp_path)
    doc = json.loads(sessions.stdout)
    assert doc["count"] == 1 and doc["sessions"][0]["id"] == t.session_id
    [one] = run_command("sessions", t.session_id, tmp_path)
    assert one.returncode == 0 and t.session_id in one.stdout
    [missing] = run_command("sessions", "'no such #id'", tmp_path)
    assert "Error:" in missing.stdout and "no such #id" in missing.stdout
    [checkpoint] = run_command("checkpoint", f"--session {t.session_id} --output 'my notes #1.md'", tmp_path)
    assert checkpoint.returncode == 0, checkpoint.stdout
    assert (tmp_path / "my notes #1.md").is_file()
    [unclosed] = run_command("status", "'--json", tmp_path)
    assert unclosed.stdout.startswith("Error:") and "Hint:" in unclosed.stdout
