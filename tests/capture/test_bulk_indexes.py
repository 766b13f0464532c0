"""Bulk import fills the derived search indexes (exchange windows, CJK runs) from what its parser
process found, not from the stored rows read back: the indexes must hold exactly what indexing
the stored rows gives (lcm.capture.indexes.rebuild, and a hook storing the same lines one by one)."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lcm.capture.bulk
import lcm.vault.db
import lcm.capture.indexes
import lcm.capture.ingest
import lcm.vault.schema
from transcripts import Transcript


def _postings(conn, table: str) -> list[tuple]:
    """Every (term, uuid of the row, column, offset) an FTS5 index holds, sorted: comparable
    across vaults whose ids differ (a window is filed under the id of its last turn). The
    random part of an externalised block's reference (`[file_<16 hex digits>]`) is left out."""
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_v USING fts5vocab(main, {table}, instance)")
    uuid = dict(conn.execute("SELECT id, uuid FROM messages").fetchall())
    return sorted((term, uuid[doc], col, offset) for term, doc, col, offset in
                  conn.execute(f"SELECT term, doc, col, offset FROM temp.{table}_v")
                  if not re.fullmatch("[0-9a-f]{12,16}", term))  # (porter may cut its end)


def _indexes(conn) -> dict:
    tables = [t for t in ("exchange_fts", "messages_cjk") if lcm.capture.indexes._table(conn, t)]
    return {t: _postings(conn, t) for t in tables}


def _rebuilt(conn) -> dict:
    """The indexes made afresh from the stored rows (then put back as they were)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        lcm.capture.indexes.rebuild(conn)
        return _indexes(conn)
    finally:
        conn.execute("ROLLBACK")


def _by_hooks(tmp_path, paths) -> dict:
    hooks = lcm.vault.db.connect(str(tmp_path / "hooks.db"))
    for path in paths:
        lcm.capture.ingest.ingest_file(hooks, path, patience=1.0)
    return _indexes(hooks)


def _odd_session(projects, session_id: str, cwd: str = "/home/u/app") -> Transcript:
    """Talk of every shape the windows' definition (schema.TALK_WHERE) tells apart."""
    t = Transcript(projects, session_id=session_id, cwd=cwd)
    t.user("why does the nightly export time out?")
    t.assistant_text("The export job holds a lock while it waits for the upload.")
    call = t.tool_use("Bash", {"command": "grep -n lock export.py"})
    t.tool_result(call, "12: with lock:\n" * 5)
    t.assistant_text("Edit {not a tool call: the first space is followed by a brace}")
    t.assistant_text("x" * 90 + " {a brace after the 80th character is talk}")
    t.user("what is a tool_use_id? (a prompt that names the key is left out, as in SQL)")
    t.user("a NUL\x00 cuts the stored opening short: nothing after it is in a window")
    t.user("我们决定使用PostgreSQL作为主数据库，因为它支持事务")
    t.assistant_text("了解しました。PostgreSQLの設定を確認します " + "長い返事 " * 200)
    t.entry("user", {"role": "user", "content": "<command-name>/clear</command-name>"}, isMeta=True)
    t.user("")
    return t


@pytest.mark.parametrize("through_process", [False, True])
def test_bulk_indexes_equal_a_rebuild_and_a_hooks_import(tmp_path, monkeypatch, through_process):
    """Several transactions (small groups), a session continued in a later file, a resumed copy
    (its repeated lines are refused: ids no longer follow staging order), a reply large enough
    to be externalised (its stored text is not what the parser saw), sub-agent threads, and
    through the parser process as well as inline."""
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "200")
    monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 3000)
    monkeypatch.setattr(lcm.capture.bulk, "PARSE_PROCESS_MIN_FILES", 1 if through_process else 10 ** 6)
    projects = tmp_path / "projects"
    first = _odd_session(projects, "s-one")
    first.write()
    agent = Transcript(projects, agent_id="a1", parent=first)
    agent.user("SUBTASK find where the lock is taken")
    agent.assistant_text("In export.py line 12, around the upload.")
    agent.write()
    resumed = Transcript(projects / "zz-resumed", session_id="s-one", cwd="/home/u/app")
    resumed.path.parent.mkdir(parents=True)
    resumed.path.write_bytes(first.path.read_bytes())  # a resumed session repeats the lines ...
    resumed.last_uuid = first.last_uuid
    resumed.user("so the upload should not hold the lock?")  # ... then goes on
    resumed.assistant_text("Right: take the lock after the upload finishes.")
    resumed.write()
    later = Transcript(projects / "zz-later", session_id="s-one", cwd="/home/u/app")
    later.user("and after the fix, does it still time out?")  # same thread, a later transaction
    later.assistant_text("No: the last three runs finished in under a minute.")
    later.write()
    _odd_session(projects, "s-two", cwd="/home/u/other").write()
    conn = lcm.vault.db.connect(str(tmp_path / "bulk.db"))
    result = lcm.capture.bulk.ingest_paths(conn, [projects])
    assert result["messages_skipped"] > 0  # the copy's lines were refused
    paths = lcm.capture.bulk.transcript_files([projects])
    bulk = _indexes(conn)
    assert bulk["exchange_fts"], "no exchange windows at all"
    assert bulk == _rebuilt(conn)
    assert bulk == _by_hooks(tmp_path, paths)
    windows = {uuid for _term, uuid, _col, _off in bulk["exchange_fts"]}
    tool_like = conn.execute("SELECT uuid FROM messages WHERE lcm_text(content) LIKE 'Edit {%'").fetchone()[0]
    assert tool_like not in windows  # a reply shaped like a tool call ends no window


TURN = st.tuples(st.sampled_from(["user", "assistant", "tool"]),
                 st.text(st.sampled_from("ab {}\x00词汇x\t_"), max_size=12),
                 st.sampled_from(["", " tool_use_id", "x" * 80]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions=st.lists(st.lists(TURN, min_size=1, max_size=9), min_size=1, max_size=3),
       group_bytes=st.sampled_from([1, 2000, 1 << 20]))
def test_bulk_indexes_equal_a_rebuild_for_any_talk(tmp_path_factory, sessions, group_bytes):
    """Any mix of prompts, replies and tool calls, whose text plays with what TALK_WHERE looks
    at (the first space, a brace after it, the 80th character, a NUL, `tool_use_id`), indexed in
    bulk in one or many transactions, gives the index a rebuild from the stored rows gives."""
    projects = tmp_path_factory.mktemp("p")
    for n, turns in enumerate(sessions):
        t = Transcript(projects, session_id=f"s{n}")
        for kind, text, tail in turns:
            if kind == "user":
                t.user(text + tail)
            elif kind == "assistant":
                t.assistant_text(tail + text)
            else:
                t.tool_use("Bash", {"command": text + tail})
        t.write()
    conn = lcm.vault.db.connect(str(projects / "v.db"))
    saved = lcm.capture.bulk.GROUP_BYTES
    lcm.capture.bulk.GROUP_BYTES = group_bytes
    try:
        lcm.capture.bulk.ingest_paths(conn, [projects])
    finally:
        lcm.capture.bulk.GROUP_BYTES = saved
    assert _indexes(conn) == _rebuilt(conn)


def _fts_settings(conn) -> dict:
    return {t: dict(conn.execute(f"SELECT k, v FROM {t}_config WHERE k IN ('hashsize', 'automerge')").fetchall())
            for t in ("messages_fts", "exchange_fts", "messages_cjk") if lcm.capture.indexes._table(conn, t)}


@pytest.mark.parametrize("fails", [False, True])
def test_bulk_import_gives_later_writes_fts5s_usual_merging_back(tmp_path, monkeypatch, fails):
    """A bulk import lets FTS5 buffer a whole group and merge 16 segments at a time; afterwards,
    and after an import that failed, hooks' writes flush at 1 MB and merge 4 at a time again
    (the settings are stored in the vault), and the index holds what a rebuild gives."""
    t = _odd_session(tmp_path / "projects", "s-one")
    t.write()
    conn = lcm.vault.db.connect(str(tmp_path / "bulk.db"))
    if fails:
        def broken(*args):
            raise RuntimeError("disk on fire")
        monkeypatch.setattr(lcm.capture.bulk, "_commit_placed", broken)
        with pytest.raises(RuntimeError):
            lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    else:
        lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
        assert _indexes(conn) == _rebuilt(conn)
    settings = _fts_settings(conn)
    assert settings and all(s == {"hashsize": 1 << 20, "automerge": 4} for s in settings.values()), settings
