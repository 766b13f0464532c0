"""What Claude reads back: the injected context is plain text, and a node's description is short."""
from __future__ import annotations

import json

import lcm.summary.compact
import lcm.summary.dag
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm_describe
from transcripts import Transcript
import pytest


def compacted_session(tmp_path, monkeypatch, turns: int = 30) -> tuple:
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "4")
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "100")
    t = Transcript(tmp_path / "projects")
    for i in range(turns):
        t.user(f"run the build && check that a -> b holds for <case {i}>")
        run = t.tool_use("Bash", {"command": f"make && ./check {i} > out.txt"})
        t.tool_result(run, "error: a -> b fails & the <build> stops", is_error=True)
        t.assistant_text(f"The fix is to guard case {i} because a && b can both be unset.")
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    return conn, t


def test_injected_context_has_no_html_entities(tmp_path, monkeypatch):
    conn, t = compacted_session(tmp_path, monkeypatch)
    text = lcm.summary.dag.render_context(conn, t.session_id, max_chars=6000)
    assert "<summary id=" in text
    assert "&amp;" not in text and "&gt;" not in text and "&lt;" not in text
    assert "make && ./check" in text and "a -> b" in text


def test_describe_text_shows_a_count_and_the_ends_of_the_source_list(tmp_path, monkeypatch, capsys):
    conn, t = compacted_session(tmp_path, monkeypatch)
    leaf = conn.execute("SELECT id, descendant_count FROM summaries WHERE kind = 'leaf'"
                        " ORDER BY descendant_count DESC LIMIT 1").fetchone()
    uuids = [r[0] for r in conn.execute("SELECT m.uuid FROM summary_sources s JOIN messages m ON m.id = s.message_id"
                                        " WHERE s.summary_id = ? ORDER BY s.ord", (leaf["id"],))]
    assert len(uuids) > 10
    assert lcm_describe.main([leaf["id"]]) == 0
    out = capsys.readouterr().out
    assert f"source_ids: {len(uuids)} ({uuids[0]} .. {uuids[-1]}; --json lists all)" in out
    assert uuids[5] not in out
    assert lcm_describe.main([leaf["id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source_ids"] == uuids


@pytest.mark.parametrize("argv", [("lcm_sessions",), ("lcm_sessions", "s1"), ("lcm_grep", "parser"),
                                  ("lcm_describe", "--session", "s1"), ("lcm_status", "--session", "s1"),
                                  ("lcm_export", "--session", "s1"), ("lcm_export", "--session", "s1", "--format", "jsonl")])
def test_stored_escape_sequences_never_reach_a_terminal(tmp_path, vault, argv):
    """A transcript quotes what anyone wrote (a fetched page, a file, coloured tool output):
    lcm_sessions.py and lcm_grep.py printed its escape sequences as they were, so a person's
    terminal ran them: clear the screen, set the window title, OSC 52 (write the clipboard).
    On a terminal, control characters are shown as symbols; through a pipe (Claude, a script)
    the output is unchanged."""
    import subprocess
    import sys

    from conftest import SCRIPTS, on_terminal
    from transcripts import Transcript
    t = Transcript(tmp_path / "projects", cwd=str(tmp_path), session_id="s1")
    t.user("fix the \x1b]52;c;ZXZpbA==\x07 parser \x1b[2J\x1b[31mnow\x1b[0m\x9b2J")
    call = t.tool_use("Bash", {"command": "pytest"})
    t.tool_result(call, "\x1b[31mFAILED\x1b[0m test_parser \x1b]0;pwned\x07 parser done")
    t.write()
    assert subprocess.run([sys.executable, str(SCRIPTS / "lcm_ingest.py"), str(tmp_path / "projects")]).returncode == 0
    code, err, text = on_terminal([sys.executable, SCRIPTS / f"{argv[0]}.py", *argv[1:]], stream="stdout", timeout=60)
    assert code == 0, err
    assert "parser" in text or "s1" in text
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    piped = subprocess.run([sys.executable, str(SCRIPTS / "lcm_grep.py"), "parser"], capture_output=True, timeout=60)
    assert b"\x1b[31m" in piped.stdout  # through a pipe, unchanged
