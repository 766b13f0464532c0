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
