"""lcm_export.py: jsonl gives back the original lines, one per stored message; markdown is a
readable transcript with tool calls folded and summaries as headings."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

import lcm_compact
import lcm_export
import lcm_ingest
from conftest import SCRIPTS, one_transcript, run
from transcripts import Transcript, coding_session




def original_lines(*paths) -> list[bytes]:
    """The transcript lines lcm stores: conversation entries with a uuid, as written."""
    kept = []
    for path in paths:
        for line in path.read_bytes().split(b"\n"):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("type") in ("user", "assistant", "system") and entry.get("uuid"):
                kept.append(line)
    return kept


@pytest.fixture
def session(capsys, tmp_path):
    t = coding_session(tmp_path / "projects", turns=4)
    t.title("Parser cases")
    t.raw_line('{"type":"file-history-snapshot","messageId":"m1","snapshot":{}}')
    t.user("caf\u00e9 \u2603 and a lone \\ud800 escape: keep me byte for byte")
    t.write()
    code, _, err = run(capsys, lcm_ingest, t.path)
    assert code == 0, err
    return t


def test_jsonl_is_one_original_line_per_stored_message(capsys, tmp_path, session, monkeypatch):
    out = tmp_path / "out.jsonl"
    code, _, err = run(capsys, lcm_export, "--session", session.session_id[:8], "--format", "jsonl", "--output", out)
    assert code == 0, err
    assert out.read_bytes().split(b"\n")[:-1] == original_lines(session.path)
    assert out.stat().st_mode & 0o777 == 0o600
    # stdout and --unmasked give the same bytes here (nothing secret in it)
    monkeypatch.setenv("LCM_SESSION_ID", session.session_id)
    code = lcm_export.main(["--format", "jsonl", "--unmasked"])
    assert code == 0 and capsys.readouterr().out.encode().split(b"\n")[:-1] == original_lines(session.path)


def test_sub_agent_lines_are_exported(capsys, tmp_path):
    t = coding_session(tmp_path / "projects", turns=1)
    warmup = Transcript(tmp_path / "projects", agent_id="a0", parent=t)
    warmup.user("Warmup")
    warmup.assistant_text("Ready to search your codebase.")
    agent = Transcript(tmp_path / "projects", agent_id="a1", parent=t)
    agent.user("explore the repo")
    agent.assistant_text("found it")
    t.write(), warmup.write(), agent.write()
    run(capsys, lcm_ingest, tmp_path / "projects")
    out = tmp_path / "all.jsonl"
    assert run(capsys, lcm_export, "--session", t.session_id, "--format", "jsonl", "--output", out)[0] == 0
    assert sorted(out.read_bytes().split(b"\n")[:-1]) == sorted(original_lines(t.path, warmup.path, agent.path))
    # markdown: the sub-agent's task and answer, labelled; Claude Code's warm-up ping left out
    code, text, _ = run(capsys, lcm_export, "--session", t.session_id)
    assert "**User (sub-agent)**" in text and "explore the repo" in text and "found it" in text
    assert "Warmup" not in text and "Ready to search" not in text


def test_markdown_reads_as_a_conversation(capsys, session):
    code, out, err = run(capsys, lcm_export, "--session", session.session_id)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "# Parser cases"
    assert f"- Session: `{session.session_id}`" in lines and "- Project: /home/user/proj" in lines
    assert "**User** (2026-11-20 09:00)" in lines  # a speaker label, with the time, where the speaker changes
    assert sum(line.startswith("**User**") for line in lines) == 5
    assert sum(line.startswith("**Assistant**") for line in lines) == 4
    assert "Step 2: please update module_2.py so the parser handles case 2" in lines
    assert "- Edit: `/home/user/proj/module_1.py`" in lines
    assert "- Bash: `pytest tests/test_module_0.py -q`" in lines
    assert "  - result (error): 1 failed in 0.0s" in lines
    assert "caf\u00e9 \u2603 and a lone \\ud800 escape: keep me byte for byte" in lines
    assert not any(line.startswith("## ") for line in lines)  # nothing compacted: no summary headings
    assert '"type"' not in out and '"uuid"' not in out  # no raw JSON leaks into the text


def test_markdown_puts_each_summary_before_what_it_covers(capsys, session, monkeypatch, vault):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "4")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "150")
    assert run(capsys, lcm_compact, "--session", session.session_id, "--full")[0] == 0
    import sqlite3
    conn = sqlite3.connect(vault)
    summaries = conn.execute("SELECT s.id, m.content FROM summaries s JOIN messages m ON m.id = s.first_message_id"
                             " WHERE s.depth = 0 ORDER BY s.first_message_id").fetchall()
    assert len(summaries) >= 2
    code, out, _ = run(capsys, lcm_export, "--session", session.session_id, "--format", "markdown")
    headings = re.findall(r"^## (sum_[0-9a-f]{16}): ", out, re.M)
    assert [h for h in headings if h in dict(summaries)] == [s for s, _ in summaries]
    for sid, first_text in summaries:
        after = out.split(f"## {sid}: ")[1]
        quoted_end = next(i for i, line in enumerate(after.splitlines()[1:]) if line and not line.startswith(">"))
        assert quoted_end > 0  # the summary's text, quoted under its heading
        if first_text.startswith("Step"):
            assert first_text in after  # the messages it covers follow it


def test_output_json_report_and_errors(capsys, tmp_path, session):
    out = tmp_path / "s.md"
    code, printed, _ = run(capsys, lcm_export, "--session", session.session_id, "--output", out, "--json")
    doc = json.loads(printed)
    assert code == 0 and doc["messages"] == 29 and doc["bytes"] == out.stat().st_size and doc["format"] == "markdown"
    code, _, err = run(capsys, lcm_export, "--session", "nope")
    assert code == 1 and "Error: no session 'nope'" in err and "lcm_sessions.py" in err
    code, _, err = run(capsys, lcm_export)
    assert code == 1 and "no current session" in err
    code, _, err = run(capsys, lcm_export, "--session", session.session_id, "--output", tmp_path / "no" / "x.md")
    assert code == 1 and "is not a directory" in err and not (tmp_path / "no").exists()
    with pytest.raises(SystemExit):
        lcm_export.main(["--session", session.session_id, "--json"])
    assert "--json reports a written file" in capsys.readouterr().err


def test_closed_pipe_is_not_an_error(session):
    proc = subprocess.run(f'"{sys.executable}" "{SCRIPTS / "lcm_export.py"}" --session {session.session_id}'
                          " --format jsonl | head -c 10", shell=True, capture_output=True, env=dict(os.environ))
    assert len(proc.stdout) == 10 and b"Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "link to a fifo", "directory"])
def test_export_never_replaces_an_output_that_is_no_regular_file(capsys, isolated_home, tmp_path, kind):
    """`lcm_export.py --output /dev/full` (or a FIFO a reader waits on) renamed the export over
    the device node: run as root, /dev/full became a regular file holding a conversation.
    lcm_checkpoint.py refused such an --output already; export now does too. (A FIFO stands in
    for the device here: a test must not risk a real one.)"""
    import os
    import stat
    one_transcript(isolated_home)
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    target = tmp_path / "out"
    if kind == "directory":
        target.mkdir()
    else:
        os.mkfifo(tmp_path / "fifo")
        if kind == "fifo":
            target = tmp_path / "fifo"
        else:
            target.symlink_to(tmp_path / "fifo")
    code, out, err = run(capsys, "lcm_export", "--session", "s1", "--output", target)
    assert code == 1 and "Error:" in err and "Hint:" in err
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode) if kind != "directory" else target.is_dir()
