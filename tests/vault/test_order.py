"""A session's conversation order on the shared sessions with sub-agents: the fresh tail is the
newest main-thread messages, main-thread leaves follow one another in time, each leaf tells its
own thread's story, and no leaf is smaller than LCM_LEAF_MIN_TOKENS."""
from __future__ import annotations

import json
import re
import sqlite3

import pytest

import lcm.vault.db
import lcm.base.errors
import lcm.vault.schema
import lcm.vault.order
import lcm_compact
import lcm.capture.bulk
import lcm.capture.ingest
from conftest import shared_data
from transcripts import Transcript

WITH_SUBAGENTS = {  # session -> its project directory under ../shared/data/claude-projects
    "a7da6a22-facc-4fcd-8bab-f83c87862004": "-src-deep-manifest",
    "ef958aa1-0e93-49f0-bb71-150f63befcd1": "-experiments-worktrees",
    "7acd37a8-2745-4b58-a8a9-46164b22ad9e": "-Users-dain-workspace-JSSoundRecorder",
}
TAIL = 32


def main_thread_uuids(path) -> list[str]:
    """The main thread's message uuids in transcript order, read from the file itself."""
    seen: dict[str, None] = {}
    for line in path.read_bytes().split(b"\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("type") in ("user", "assistant", "system") \
                and entry.get("uuid") and not entry.get("isSidechain"):
            seen.setdefault(entry["uuid"], None)
    return list(seen)


def compact_full(monkeypatch, capsys, *args) -> sqlite3.Connection:
    monkeypatch.setenv("LCM_LLM", "none")
    assert lcm_compact.main([*args, "--full", "--json"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return lcm.vault.db.connect()  # lcm's opening: lcm_text() reads compressed text


def leaves(conn, sid: str) -> list[dict]:
    out = []
    for leaf in conn.execute("SELECT * FROM summaries WHERE session_id = ? AND kind = 'leaf'", (sid,)):
        rows = conn.execute("SELECT m.thread, m.seq, m.role, lcm_text(m.content) AS content FROM summary_sources s JOIN messages m"
                            " ON m.id = s.message_id"
                            " WHERE s.summary_id = ? ORDER BY s.ord", (leaf["id"],)).fetchall()
        out.append({**dict(leaf), "rows": rows})
    return out


@pytest.mark.parametrize("sid", sorted(WITH_SUBAGENTS))
def test_sessions_with_subagents_keep_their_conversation_order(sid, monkeypatch, capsys):
    project = shared_data("claude-projects", WITH_SUBAGENTS[sid])
    lcm.capture.bulk.ingest_paths(lcm.vault.db.connect(), [str(project)])
    conn = compact_full(monkeypatch, capsys, "--session", sid)

    # the uncovered main-thread messages are exactly the newest 32 of the transcript
    main = main_thread_uuids(project / f"{sid}.jsonl")
    loose = [r[0] for r in conn.execute(
        "SELECT m.uuid FROM messages m WHERE m.session_id = ? AND m.thread = '' AND NOT EXISTS"
        " (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id) ORDER BY m.seq", (sid,))]
    assert loose == main[-TAIL:]

    found = leaves(conn, sid)
    assert found
    main_leaves = sorted((leaf for leaf in found if leaf["rows"][0]["thread"] == ""),
                         key=lambda leaf: leaf["rows"][0]["seq"])
    assert main_leaves
    for before, after in zip(main_leaves, main_leaves[1:]):  # one after the other in time
        assert before["latest_at"] <= after["earliest_at"], (before["id"], after["id"])
    for leaf in found:
        thread = leaf["rows"][0]["thread"]
        if thread:  # a sub-agent's leaf holds its own run only (a main-thread leaf may fold a small one in)
            assert all(r["thread"] == thread for r in leaf["rows"])
        ended = re.search(r"^Ended: (.*)$", leaf["content"], re.M)
        if ended:  # the last thing said in the leaf's own thread, never a sub-agent's
            said = ended.group(1).removesuffix("...")[:60]
            own = " ".join(" ".join((r["content"] or "").split()) for r in leaf["rows"]
                           if r["thread"] == thread and r["role"] == "assistant")
            assert said in own, (leaf["id"], said)


@pytest.mark.slow  # every session of the shared data
def test_no_leaf_under_the_minimum_on_the_shared_data(monkeypatch, capsys):
    projects = shared_data("claude-projects")
    lcm.capture.bulk.ingest_paths(lcm.vault.db.connect(), [str(projects)])
    conn = compact_full(monkeypatch, capsys, "--all")
    sizes = [r[0] for r in conn.execute("SELECT source_token_count FROM summaries WHERE kind = 'leaf'")]
    assert sizes and min(sizes) >= 2000
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "5000")  # a larger minimum leaves more waiting, none smaller
    conn.execute("DELETE FROM summary_sources")
    conn.execute("DELETE FROM summaries")
    conn.commit()
    conn = compact_full(monkeypatch, capsys, "--all")
    sizes = [r[0] for r in conn.execute("SELECT source_token_count FROM summaries WHERE kind = 'leaf'")]
    assert sizes and min(sizes) >= 5000


def test_a_subagent_run_follows_the_call_that_started_it(tmp_path):
    """Ingested after the main transcript, or before it, or while the call's result is not
    written yet: the run sits right after its call once the call is known."""
    projects = tmp_path / "projects"
    main = Transcript(projects, session_id="s-order")
    main.user("look into the parser")
    call = main.tool_use("Task", {"description": "explore", "prompt": "find the parser"})
    agent = Transcript(projects, agent_id="a1", parent=main, start="2026-11-20T09:00:01.500Z")
    agent.user("find the parser")
    agent.assistant_text("It is in parser.py.")
    agent.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(agent.path)])          # the sub-agent first (SubagentStop)
    main.write()
    lcm.capture.bulk.ingest_paths(conn, [str(main.path)])
    main.tool_result(call, "It is in parser.py.", toolUseResult={"agentId": "a1", "status": "completed"})
    main.assistant_text("Found it.")
    main.write()
    lcm.capture.bulk.ingest_paths(conn, [str(main.path)])
    order = [(r["thread"], r["content"][:20]) for r in conn.execute(
        "SELECT thread, content FROM messages WHERE session_id = 's-order' ORDER BY seq")]
    assert [t for t, _ in order] == ["", "", "a1", "a1", "", ""]
    assert order[1][1].startswith("Task")


def test_an_old_vault_migrates_to_the_conversation_order(tmp_path, monkeypatch):
    """A vault made before the order existed: its migration places every sub-agent message as
    ingest would have, leaves every raw line as it was, and flags summaries that mixed threads."""
    project = shared_data("claude-projects", WITH_SUBAGENTS["ef958aa1-0e93-49f0-bb71-150f63befcd1"])
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(project)])
    want = [r[0] for r in conn.execute("SELECT uuid FROM messages ORDER BY session_id, seq")]
    old_path = tmp_path / "old.db"
    # the schema as it was before this migration (later migrations may follow it in the list)
    before = next(i for i, m in enumerate(lcm.vault.schema.MIGRATIONS) if lcm.vault.schema._place_sidechains in m)
    with monkeypatch.context() as m:
        m.setattr(lcm.vault.schema, "MIGRATIONS", lcm.vault.schema.MIGRATIONS[:before])
        m.setattr(lcm.vault.schema, "SCHEMA_VERSION", before)
        lcm.vault.db.connect(str(old_path)).close()
    columns = ", ".join(r[1] for r in sqlite3.connect(old_path).execute("PRAGMA table_info(messages)"))
    conn.execute("ATTACH DATABASE ? AS old", (str(old_path),))
    with lcm.vault.db.transaction(conn):
        conn.execute(f"INSERT INTO old.messages ({columns}) SELECT {columns} FROM main.messages ORDER BY id")
        conn.execute("INSERT INTO old.sessions SELECT * FROM main.sessions")
        leaf = conn.execute("SELECT id, session_id FROM main.messages WHERE is_sidechain = 1 LIMIT 1").fetchone()
        conn.execute("INSERT INTO old.summaries (id, session_id, kind, depth, content, token_count,"
                     " source_token_count, level, first_message_id, last_message_id, created_at)"
                     " VALUES ('sum_0000000000000001', ?, 'leaf', 0, 'x', 1, 2, 'extractive', ?, ?, 'now')",
                     (leaf["session_id"], leaf["id"], leaf["id"]))
        conn.execute("INSERT INTO old.summary_sources (summary_id, ord, message_id) VALUES"
                     " ('sum_0000000000000001', 0, ?)", (leaf["id"],))
    conn.execute("DETACH DATABASE old")
    migrated = lcm.vault.db.connect(str(old_path))
    assert [r[0] for r in migrated.execute("SELECT uuid FROM messages ORDER BY session_id, seq")] == want
    assert [bytes(r[0]) for r in migrated.execute("SELECT raw FROM messages ORDER BY id")] == \
        [bytes(r[0]) for r in conn.execute("SELECT raw FROM messages ORDER BY id")]
    assert migrated.execute("SELECT built_on FROM summaries").fetchone()[0] == "ingest"


def test_summaries_built_on_ingest_order_are_rebuilt(monkeypatch, capsys):
    sid = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    project = shared_data("claude-projects", WITH_SUBAGENTS[sid])
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(project)])
    compact_full(monkeypatch, capsys, "--session", sid)
    old = {r[0] for r in conn.execute("SELECT id FROM summaries WHERE session_id = ?", (sid,))}
    with lcm.vault.db.transaction(conn):  # as the migration flags a session whose leaves mixed in sub-agents
        conn.execute("UPDATE summaries SET built_on = 'ingest' WHERE session_id = ?", (sid,))
    conn = compact_full(monkeypatch, capsys, "--session", sid)
    rows = conn.execute("SELECT id, built_on FROM summaries WHERE session_id = ?", (sid,)).fetchall()
    assert rows and not old & {r["id"] for r in rows}
    assert {r["built_on"] for r in rows} == {"conversation"}
    assert conn.execute("SELECT count(*) FROM summary_sources WHERE summary_id NOT IN (SELECT id FROM summaries)"
                        ).fetchone()[0] == 0


def test_an_sqlite_without_generated_columns_is_an_error_that_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(lcm.vault.schema.sqlite3, "sqlite_version_info", (3, 30, 1))
    monkeypatch.setattr(lcm.vault.schema.sqlite3, "sqlite_version", "3.30.1")
    with pytest.raises(lcm.base.errors.LcmError, match="needs SQLite 3.31 or newer .* has SQLite 3.30.1"):
        lcm.vault.db.connect(str(tmp_path / "v.db"))
