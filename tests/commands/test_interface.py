"""What a person meets at the command line: printed commands that run where they are printed,
help that does not stop mid-sentence, usage errors with a hint, --json errors as JSON, honest
import counts, and markdown exports that keep parallel tool results with their own calls."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lcm_export
import lcm_grep
import lcm_ingest
import lcm_sessions
from conftest import ROOT, SCRIPTS, run
from transcripts import Transcript, coding_session

PLUGIN_ENV = ("LCM_SCRIPTS", "LCM_SESSION_ID", "LCM_DB")  # what the SessionStart hook exports


# -- every Next: line and hint runs as printed ------------------------------------------------

def plain_shell(home: Path, lcm_dir: Path | None) -> dict:
    """A terminal outside Claude Code: none of the plugin's variables, and `lcm` on PATH only
    when lcm_dir is given (where bin/lcm is linked)."""
    env = {k: v for k, v in os.environ.items() if k not in PLUGIN_ENV and not k.startswith("CLAUDE")}
    path = [d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "lcm").exists()]
    env["PATH"] = os.pathsep.join(([str(lcm_dir)] if lcm_dir else []) + path)
    env["HOME"] = str(home)
    env.pop("LCM_HOME", None)  # the vault is the default one under this HOME
    env["LCM_LLM"] = "none"
    return env


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A home with two compacted sessions and notes, as a user would have (built once)."""
    tmp_path = tmp_path_factory.mktemp("world")
    home, project = tmp_path / "home", tmp_path / "proj"
    project.mkdir()
    projects = home / ".claude" / "projects"
    first = coding_session(projects, turns=40, cwd=str(project), session_id="3f2c1a9b-1111-4222-8333-444455556666")
    first.write()
    coding_session(projects, turns=5, cwd=str(project), start="2026-11-21T09:00:00Z").write()
    env = plain_shell(home, None)
    for argv in (["lcm_ingest.py", "--all"], ["lcm_compact.py", "--all", "--full"],
                 ["lcm_remember.py", "the canary goes first"], ["lcm_remember.py", "--global", "no emoji"]):
        done = subprocess.run([sys.executable, str(SCRIPTS / argv[0]), *argv[1:]], env=env, cwd=project,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (argv, done.stderr)
    (project / "not-a-vault.db").write_text("a file that is no SQLite database\n")
    conn = __import__("sqlite3").connect(home / ".claude-lcm" / "lcm.db")
    summary = conn.execute("SELECT id FROM summaries ORDER BY depth, id LIMIT 1").fetchone()[0]
    conn.close()
    return {"home": home, "project": project, "session": first.session_id, "summary": summary,
            "lcm_dir": tmp_path / "lcm-bin"}


def scenarios(w: dict) -> list[list[str]]:
    """Commands whose output carries a Next:, a `... more:` or a Hint: line (or several)."""
    sid, summary = w["session"], w["summary"]
    return [
        ["grep", "module", "--limit", "2", "--all-sessions"],
        ["grep", "canary"],
        ["sessions", "--limit", "1"],
        ["sessions", sid[:8]],
        ["describe", summary],
        ["expand", summary, "--max-tokens", "50"],
        ["remember", "--list", "--limit", "1", "--all"],
        ["remember", "deploy on fridays is forbidden"],
        ["checkpoint", "--session", sid],
        # errors: each hint names what to run instead
        ["sessions", "nosuch"],
        ["grep", "--limit", "0", "x"],
        ["describe", "file_0123"],
        ["expand", "sum_0000000000000000"],
        ["export", "--session", "nosuch"],
        ["compact", "--session", "nosuch"],
        ["remember", "--forget", "note_nosuch"],
        ["resume", "--session", "nosuch"],
        ["llm_map", "--input", "in.jsonl", "--output", "out.jsonl", "--prompt", "x"],
        ["expand_query", "--prompt", "why", "--summary-ids", "sum_0000000000000000"],
        ["init", "--db", str(w["project"] / "not-a-vault.db")],
    ]


# `lcm VERB` only for a verb that is a command: prose ("an lcm vault") is not a command line
VERBS = "|".join(sorted((p.stem[4:].replace("_", "-") for p in SCRIPTS.glob("lcm_*.py")), key=len, reverse=True))
PREFIX = re.compile(r"(?:python3 (?P<path>/\S*/lcm_[a-z_]+\.py)|(?<![\w/.-])lcm (?P<verb>(?:%s))(?![\w-]))" % VERBS)


def printed_commands(text: str) -> tuple[list[str], list[str]]:
    """(whole commands: the rest of each Next: and `... more:` line; the other lines that name a
    command: hints, and sentences such as "lcm remember --list shows the notes")."""
    commands, hints = [], []
    for line in text.splitlines():
        line = line.strip().strip("[]")
        if line.startswith("Next: "):
            commands.append(line[len("Next: "):])
        elif re.match(r"^\.\.\. (\d+ )?more( lines)?: ", line):
            commands.append(line.split(": ", 1)[1])
        elif line.startswith("Hint: ") or PREFIX.search(line):
            hints.append(line)
    return commands, hints


def check_runs(w: dict, env: dict, with_lcm: bool) -> int:
    """Run every scenario; run each printed command; return how many were checked."""
    checked = 0
    for argv in scenarios(w):
        if with_lcm:
            start = ["lcm", argv[0].replace("_", "-")]
        else:
            start = ["python3", str(SCRIPTS / f"lcm_{argv[0]}.py")]
        if argv[0] == "llm_map":
            (w["project"] / "in.jsonl").write_text('{"a": 1}\n')
        shown = subprocess.run(start + argv[1:], env=env, cwd=w["project"], capture_output=True, text=True,
                               timeout=120)
        commands, hints = printed_commands(shown.stdout + shown.stderr)
        assert commands or hints, (argv, shown.stdout, shown.stderr)
        for text in commands + hints:
            assert "$LCM_SCRIPTS" not in text and "$LCM_SESSION_ID" not in text, (argv, text)
            # a script named without a path would not run: `lcm_x.py` alone is not a command
            assert not re.search(r"(?<![\w/.-])lcm_[a-z_]+\.py", text), (argv, text)
        for command in commands:
            assert PREFIX.match(command) and (command.startswith("lcm ") == with_lcm), (argv, command)
            done = subprocess.run(["bash", "-c", command], env=env, cwd=w["project"], capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 0, (argv, command, done.stderr[-500:])
            checked += 1
        for hint in hints:
            for found in PREFIX.finditer(hint):
                # what the hint names starts in this shell (its arguments are prose around it)
                done = subprocess.run(["bash", "-c", found.group(0) + " --help"], env=env, cwd=w["project"],
                                      capture_output=True, text=True, timeout=120)
                assert done.returncode == 0 and "usage:" in done.stdout, (argv, hint, done.stderr[-300:])
                assert (found.group("verb") is not None) == with_lcm, (argv, hint)
                checked += 1
    return checked


@pytest.mark.slow  # plain-shell runs of every printed command
def test_every_printed_command_runs_in_a_plain_shell(world):
    assert check_runs(world, plain_shell(world["home"], None), with_lcm=False) >= 20


@pytest.mark.slow  # plain-shell runs of every printed command
def test_with_lcm_on_path_printed_commands_use_it_and_run(world):
    world["lcm_dir"].mkdir()
    (world["lcm_dir"] / "lcm").symlink_to(ROOT / "bin" / "lcm")
    assert check_runs(world, plain_shell(world["home"], world["lcm_dir"]), with_lcm=True) >= 20


# -- help, usage errors, --json errors --------------------------------------------------------

def test_help_keeps_the_whole_first_paragraph(capsys):
    with pytest.raises(SystemExit):
        lcm_grep.main(["--help"])
    out = capsys.readouterr().out
    first = lcm_grep.__doc__.strip().split("\n\n")[0]
    assert first.splitlines()[-1] in out  # its last line too: the sentence ends
    assert first.rstrip().endswith(".")


def test_a_usage_error_ends_with_a_hint_that_runs(capsys):
    with pytest.raises(SystemExit) as exc:
        lcm_sessions.main(["--limit", "many"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    hint = err.splitlines()[-1]
    assert hint == f"Hint: python3 {SCRIPTS / 'lcm_sessions.py'} --help shows every option, with examples"


def test_with_json_an_error_is_one_json_document_on_stdout(capsys):
    code, out, err = run(capsys, lcm_sessions, "nosuch", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["error"].startswith("no vault") and doc["hint"]
    assert err.startswith("Error: no vault")  # a person still reads it on stderr
    with pytest.raises(SystemExit):
        lcm_sessions.main(["--json", "--limit", "0"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert "--limit" in doc["error"] and "--help" in doc["hint"] and "Hint:" in err
    # after `--`, --json is a query, not the option
    code, out, _ = run(capsys, lcm_grep, "--", "--json")
    assert code == 1 and not out.startswith("{")


# -- ingest counts ----------------------------------------------------------------------------

def test_first_import_does_not_call_repeated_lines_already_stored(tmp_path, capsys):
    projects = tmp_path / "projects"
    t = coding_session(projects, turns=2, session_id="s-one")
    t.write()
    copy = Transcript(projects, session_id="s-two")
    copy.pending = [json.dumps(t.entries[0])]  # a resumed session repeats its parent's first line
    copy.user("and something new")
    copy.write()
    code, out, _ = run(capsys, lcm_ingest, str(projects))
    assert code == 0 and "already stored" not in out
    assert re.match(rf"^{len(t.entries) + 1} new messages \(1 repeated in more than one transcript\)", out), out
    again = Transcript(projects, session_id="s-three", cwd="/home/user/other")
    again.pending = [json.dumps(t.entries[1])]
    again.write()
    code, out, _ = run(capsys, lcm_ingest, str(projects))
    assert code == 0 and out.startswith("0 new messages (1 already stored)"), out


# -- markdown export: parallel tool calls -----------------------------------------------------

def test_parallel_tool_results_are_listed_with_their_own_calls(tmp_path, capsys):
    t = Transcript(tmp_path / "projects", session_id="s-par")
    t.user("read both files")
    first, second = "toolu_" + "a" * 24, "toolu_" + "b" * 24
    t.assistant([{"type": "tool_use", "id": first, "name": "Read", "input": {"file_path": "/p/alpha.py"}}])
    t.assistant([{"type": "tool_use", "id": second, "name": "Read", "input": {"file_path": "/p/beta.py"}}])
    t.tool_result(first, "alpha contents")
    t.tool_result(second, "beta contents")
    lone = t.tool_use("Bash", {"command": "pytest -q"})
    t.tool_result(lone, "3 passed")
    t.write()
    run(capsys, lcm_ingest, str(tmp_path / "projects"))
    code, out, _ = run(capsys, lcm_export, "--session", "s-par")
    assert code == 0
    lines = [line.strip() for line in out.splitlines()]
    alpha = next(line for line in lines if "alpha contents" in line)
    beta = next(line for line in lines if "beta contents" in line)
    assert "alpha.py" in alpha and "beta.py" not in alpha
    assert "beta.py" in beta and "alpha.py" not in beta
    passed = next(line for line in lines if "3 passed" in line)
    assert passed == "- result: 3 passed"  # a lone call's result needs no name: it follows its call
