"""lcm_ingest.py: exact counts on real transcripts, byte-for-byte raw lines, incremental reads,
subagents, compactions, searchable text of every block type, and refusals that change nothing."""
from __future__ import annotations

import gc
import hashlib
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lcm.vault.db
import lcm.vault.schema
import lcm.vault.store
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.capture.transcript
import lcm_ingest
from conftest import run, SCRIPTS, shared_data
from transcripts import Transcript, coding_session




def ingest_json(capsys, *argv):
    code, out, err = run(capsys, lcm_ingest, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def db(vault):
    """The vault through lcm's own opening: lcm_line() and lcm_text() read packed lines and text."""
    return lcm.vault.db.connect(str(vault), create=False)


def expected_messages(root):
    """Distinct uuids of user/assistant/system entries, counted without lcm's code."""
    uuids = set()
    for path in sorted(root.rglob("*.jsonl")):
        for line in path.read_bytes().split(b"\n"):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("type") in ("user", "assistant", "system") and entry.get("uuid"):
                uuids.add(entry["uuid"])
    return uuids


def transcript_line(path, line_no):
    return path.read_bytes().split(b"\n")[line_no - 1]


# -- real transcripts ---------------------------------------------------------------------------

def test_real_projects_store_every_distinct_message_once(capsys, vault):
    root = shared_data("claude-projects")
    expected = expected_messages(root)
    assert len(expected) == 2855
    result = ingest_json(capsys, root)
    assert set(result) >= {"files", "messages_added", "messages_skipped", "malformed_lines", "sessions", "seconds"}
    assert result["messages_added"] == 2855
    assert result["malformed_lines"] == 0
    stored = {r[0] for r in db(vault).execute("SELECT uuid FROM messages")}
    assert stored == expected
    again = ingest_json(capsys, root)
    assert again["messages_added"] == 0
    assert db(vault).execute("SELECT count(*) FROM messages").fetchone()[0] == 2855


def test_real_projects_raw_lines_are_byte_identical(capsys, vault):
    root = shared_data("claude-projects")
    ingest_json(capsys, root)
    cache = {}
    # the import packs lines as it stores them: each is read back through lcm_line, its file from its block
    rows = db(vault).execute("SELECT lcm_line(m.raw, m.block_id, m.block_pos) AS raw, coalesce(m.transcript_path,"
                             " b.transcript_path) AS transcript_path, m.line_no, m.uuid FROM messages m"
                             " LEFT JOIN blocks b ON b.id = m.block_id").fetchall()
    assert len(rows) == 2855
    for row in rows:
        if row["transcript_path"] not in cache:
            with open(row["transcript_path"], "rb") as f:
                cache[row["transcript_path"]] = f.read().split(b"\n")
        assert row["raw"] == cache[row["transcript_path"]][row["line_no"] - 1]
        assert json.loads(row["raw"])["uuid"] == row["uuid"]


def test_odd_cases_give_106_and_report_two_malformed_lines(capsys, vault):
    root = shared_data("odd-cases")
    assert len(expected_messages(root)) == 106
    code, out, err = run(capsys, lcm_ingest, root)
    assert code == 0
    assert "106 new messages" in out and "2 malformed" in out
    bad = root / "S2thend__claude-code-history__corrupted-session.jsonl"
    assert f"{bad}:3" in err and f"{bad}:4" in err
    assert db(vault).execute("SELECT count(*) FROM messages").fetchone()[0] == 106
    result = ingest_json(capsys, root)
    assert result["messages_added"] == 0 and result["malformed_lines"] == 0


def test_odd_cases_json_lists_malformed_lines(capsys):
    result = ingest_json(capsys, shared_data("odd-cases"))
    assert result["messages_added"] == 106 and result["malformed_lines"] == 2
    assert sorted(m["line"] for m in result["malformed"]) == [3, 4]
    assert all(m["path"].endswith("corrupted-session.jsonl") for m in result["malformed"])


def test_real_subagents_are_linked_to_their_parent_session(capsys, vault):
    ingest_json(capsys, shared_data("claude-projects"))
    conn = db(vault)
    agents = conn.execute("SELECT path, session_id, agent_id FROM transcripts WHERE agent_id IS NOT NULL").fetchall()
    layouts = {"subagents" in r["path"] for r in agents}
    assert layouts == {True, False}  # both the current and the old layout are present
    for row in agents:
        if row["session_id"] is None:
            continue  # an agent file with no messages
        assert conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (row["session_id"],)).fetchone()
        assert not conn.execute("SELECT 1 FROM messages WHERE transcript_path = ? AND is_sidechain = 0"
                                " AND agent_id IS NULL", (row["path"],)).fetchone()


# -- synthetic transcripts ----------------------------------------------------------------------

def test_appended_lines_add_exactly_those(capsys, tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=3)
    t.write()
    assert ingest_json(capsys, t.path)["messages_added"] == 21
    before = len(t.entries)
    t.user("one more thing")
    t.assistant_text("Sure.")
    t.write()
    result = ingest_json(capsys, t.path)
    assert result["messages_added"] == 2 and result["messages_skipped"] == 0
    new = [e["uuid"] for e in t.entries[before:]]
    rows = db(vault).execute("SELECT uuid, line_no FROM messages ORDER BY id DESC LIMIT 2").fetchall()
    assert sorted(r["uuid"] for r in rows) == sorted(new)
    assert sorted(r["line_no"] for r in rows) == [22, 23]


def test_unicode_lines_are_stored_byte_for_byte(capsys, tmp_path, vault):
    t = Transcript(tmp_path / "projects")
    t.user("café 日本語 🙂 \u2028 line-separator and \\u escapes \"quoted\"")
    t.raw_line(json.dumps({"type": "user", "uuid": "u-ascii-escaped", "sessionId": t.session_id,
                           "message": {"role": "user", "content": "naïve ☃"}}))  # \\u escapes kept as written
    t.raw_line('{"type":"assistant","uuid":"u-spaces",  "sessionId":"%s","message":{"role":"assistant",'
               '"content":[{"type":"text","text":"spacing  kept\\ttab"}]}}\r' % t.session_id)
    t.write()
    ingest_json(capsys, t.path)
    for row in db(vault).execute("SELECT lcm_line(raw, block_id, block_pos) AS raw, line_no, lcm_text(content) AS content FROM messages"):
        assert row["raw"] == transcript_line(t.path, row["line_no"])
    content = {r[0] for r in db(vault).execute("SELECT lcm_text(content) AS content FROM messages")}
    assert "naïve ☃" in content and any("🙂" in c for c in content)


def test_partial_last_line_waits_for_the_rest(capsys, tmp_path, vault):
    t = Transcript(tmp_path / "projects")
    t.user("first")
    t.write()
    line = json.dumps({"type": "user", "uuid": "late", "sessionId": t.session_id,
                       "message": {"role": "user", "content": "second"}})
    with open(t.path, "a") as f:
        f.write(line[:25])
    result = ingest_json(capsys, t.path)
    assert result["messages_added"] == 1 and result["malformed_lines"] == 0
    with open(t.path, "a") as f:
        f.write(line[25:] + "\n")
    assert ingest_json(capsys, t.path)["messages_added"] == 1
    raw = db(vault).execute("SELECT lcm_line(raw, block_id, block_pos) AS raw FROM messages WHERE uuid = 'late'").fetchone()[0]
    assert raw == line.encode()


def test_complete_final_line_without_newline_is_taken_once(capsys, tmp_path, vault):
    t = Transcript(tmp_path / "projects")
    t.user("no trailing newline")
    t.write()
    t.path.write_bytes(t.path.read_bytes().rstrip(b"\n"))
    assert ingest_json(capsys, t.path)["messages_added"] == 1
    t.user("next")
    t.path.write_bytes(t.path.read_bytes() + b"\n")
    t.write()
    result = ingest_json(capsys, t.path)
    assert result["messages_added"] == 1 and result["malformed_lines"] == 0
    assert [r[0] for r in db(vault).execute("SELECT line_no FROM messages ORDER BY id")] == [1, 2]


def test_replaced_or_shrunk_file_is_rescanned_safely(capsys, tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=2)
    t.write()
    ingest_json(capsys, t.path)
    t.path.write_bytes(b"")  # shrunk to nothing, then a different conversation is written
    other = Transcript(tmp_path / "projects", session_id=t.session_id)
    other.user("a different file now lives at this path")
    assert other.write() == t.path
    result = ingest_json(capsys, t.path)
    assert result["messages_added"] == 1
    assert db(vault).execute("SELECT count(*) FROM messages").fetchone()[0] == 15


def test_malformed_lines_reported_with_line_numbers_across_runs(capsys, tmp_path, vault):
    t = Transcript(tmp_path / "projects")
    t.user("ok")
    t.raw_line("{not json")
    t.write()
    first = ingest_json(capsys, t.path)
    assert first["malformed"] == [{"path": str(t.path), "line": 2}]
    t.user("fine")
    t.raw_line('{"type": "user", "uuid": ')
    t.raw_line("")
    t.raw_line('"a JSON string is not an entry"')
    t.write()
    second = ingest_json(capsys, t.path)
    assert second["malformed"] == [{"path": str(t.path), "line": 4}]
    assert second["messages_added"] == 1
    row = db(vault).execute("SELECT malformed_lines FROM transcripts").fetchone()
    assert row[0] == 2


def fts_hits(vault, query):
    return {r[0] for r in db(vault).execute(
        "SELECT m.uuid FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid WHERE messages_fts MATCH ?",
        (query,))}


def test_every_block_type_is_searchable(capsys, tmp_path, vault):
    t = Transcript(tmp_path / "projects")
    thought = t.thinking("pondering the zanzibar invariant")
    call = t.tool_use("Grep", {"pattern": "quuxfunction", "path": "src"})
    call_entry = t.entries[-1]
    result = t.tool_result(call, [{"type": "text", "text": "found in frobnicator.py"},
                                  {"type": "image", "source": {"type": "base64", "data": "AAAA"}}])
    failed = t.tool_result(call, "plainstring failure", is_error=True)
    t.write()
    ingest_json(capsys, t.path)
    assert fts_hits(vault, "zanzibar") == {thought["uuid"]}
    assert fts_hits(vault, "quuxfunction") == {call_entry["uuid"]}
    assert fts_hits(vault, "Grep") == {call_entry["uuid"]}
    assert fts_hits(vault, "frobnicator") == {result["uuid"]}
    assert fts_hits(vault, "plainstring") == {failed["uuid"]}
    content = db(vault).execute("SELECT lcm_text(content) AS content FROM messages WHERE uuid = ?", (result["uuid"],)).fetchone()[0]
    assert "[image]" in content and "AAAA" not in content


def test_bulk_import_indexes_each_new_message_once_and_keeps_the_live_index(capsys, tmp_path, vault, monkeypatch):
    monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 4000)  # several transactions, as in a big import
    projects = tmp_path / "projects"
    sessions = [coding_session(projects, turns=3, cwd=f"/home/u/p{i}") for i in range(9)]
    for i, t in enumerate(sessions):
        t.user(f"marker{i}word please")
        t.write()
    copy = projects / "copied" / "resumed.jsonl"          # a resumed session repeats old lines
    copy.parent.mkdir(parents=True)
    copy.write_bytes(sessions[0].path.read_bytes() + sessions[1].path.read_bytes())
    ingest_json(capsys, projects)
    conn = db(vault)  # lcm's connection: the index reads its text through lcm_text()
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")  # raises if they disagree
    conn.close()
    for i, t in enumerate(sessions):
        assert fts_hits(vault, f"marker{i}word") == {t.entries[-1]["uuid"]}
    later = sessions[2]
    later.user("a brand new zebrafinch question")
    later.write()
    ingest_json(capsys, later.path)                        # a hook-sized ingest: the trigger indexes it
    assert fts_hits(vault, "zebrafinch") == {later.entries[-1]["uuid"]}


def test_a_first_import_with_resumed_copies_leaves_no_line_plain_and_every_line_exact(capsys, tmp_path, vault,
                                                                                       monkeypatch):
    """Claude Code's resumed sessions repeat the lines of the file before: the import stores each
    line once and still packs every new line into a block in the same pass (nothing left for a
    later packing run, no page written twice), each line given back byte for byte."""
    monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 6000)  # several groups, copies and originals mixed
    projects = tmp_path / "projects"
    sessions = [coding_session(projects, turns=4, cwd=f"/home/u/p{i}") for i in range(lcm.capture.bulk.PARSE_PROCESS_MIN_FILES)]
    for t in sessions:
        t.write()
    for i in (0, 3):  # a resumed session: the old lines, then its own
        resumed = Transcript(projects, cwd=f"/home/u/p{i}")
        resumed.user(f"carry on with part {i}")
        resumed.assistant_text("resuming")
        resumed.path.parent.mkdir(parents=True, exist_ok=True)
        resumed.path.write_bytes(sessions[i].path.read_bytes() + b"".join(
            json.dumps(e).encode() + b"\n" for e in resumed.entries))
    ingest_json(capsys, projects)
    conn = db(vault)
    assert conn.execute("SELECT count(*) FROM messages WHERE block_id IS NULL").fetchone()[0] == 0
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    stored = {uuid: bytes(line) for uuid, line in conn.execute(f"SELECT uuid, {lcm.vault.store.LINE} FROM messages")}
    expected = {}
    for path in sorted(projects.rglob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            expected.setdefault(json.loads(line)["uuid"], line)
    assert stored == expected
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")  # raises if they disagree


def test_bulk_import_externalises_a_large_block_once_even_when_a_copy_repeats_it(capsys, tmp_path, vault,
                                                                                 monkeypatch):
    """In a bulk import (parser process, stage files) a huge tool result becomes a `file_...`
    reference in the searchable text, once, although a resumed copy of the session in the same
    group repeats the line; the stored original line still holds every byte."""
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "1000")
    projects = tmp_path / "projects"
    for i in range(lcm.capture.bulk.PARSE_PROCESS_MIN_FILES):   # enough files for the parser process
        coding_session(projects, turns=2, cwd=f"/home/u/p{i}").write()
    t = Transcript(projects, session_id="big")
    call = t.tool_use("Read", {"file_path": "/home/user/proj/table.csv"})
    huge = "id,name\n" + "".join(f"{i},name{i}\n" for i in range(3000))
    result = t.tool_result(call, huge)
    t.user("thanks")
    t.write()
    copy = projects / "zz-copy" / "resumed.jsonl"         # sorts after the original: same group
    copy.parent.mkdir(parents=True)
    copy.write_bytes(t.path.read_bytes())
    ingest_json(capsys, projects)
    conn = db(vault)
    content, raw = conn.execute("SELECT lcm_text(content) AS content, lcm_line(raw, block_id, block_pos) AS raw FROM messages WHERE uuid = ?", (result["uuid"],)).fetchone()
    assert "file_" in content and "name2999" not in content
    assert "name2999" in raw.decode()
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 1


def test_bulk_import_leaves_no_stage_files_and_clears_those_of_killed_imports(capsys, tmp_path, vault):
    """Stage files hold transcript lines (in RAM, under /dev/shm, where it has room): every import
    removes its own, and the next import removes those of an import that was killed."""
    import tempfile
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm on this system: stage files go to the temp directory")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = os.path.join("/dev/shm", f"lcm-ingest-{dead}-test")
    os.makedirs(stale, exist_ok=True)
    open(os.path.join(stale, "group-0.db"), "wb").close()
    alive = os.path.join("/dev/shm", f"lcm-ingest-{os.getppid()}-test")  # a running process
    os.makedirs(alive, exist_ok=True)
    try:
        coding_session(tmp_path / "projects", turns=2).write()
        ingest_json(capsys, tmp_path / "projects")
        assert not os.path.exists(stale) and os.path.exists(alive)
        ours = f"lcm-ingest-{os.getpid()}-"
        for parent in ("/dev/shm", tempfile.gettempdir()):
            assert not [n for n in os.listdir(parent) if n.startswith(ours)]
    finally:
        for path in (stale, alive):
            if os.path.isdir(path):
                os.rmdir(path)


def test_an_unwritable_stage_is_an_error_with_a_hint_and_stores_nothing(capsys, tmp_path, vault, monkeypatch):
    """If the import's scratch space cannot be written (a full /dev/shm), it says so and how to
    go on, exits 1, and the vault keeps what it had."""
    stage_dir = tmp_path / "stage"
    (stage_dir / "group-0.db").mkdir(parents=True)  # SQLite cannot open a directory as its file
    monkeypatch.setattr(lcm.capture.bulk, "_stage_dir", lambda sizes: str(stage_dir))
    coding_session(tmp_path / "projects", turns=2).write()
    code, out, err = run(capsys, lcm_ingest, tmp_path / "projects")
    assert code == 1 and err.startswith("Error: cannot write the import's stage file") and "\nHint: " in err
    assert db(vault).execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    assert not stage_dir.exists()  # cleaned up all the same


def test_bulk_import_copies_each_group_into_the_vault_file_as_it_goes(tmp_path, vault, monkeypatch):
    """A big import checkpoints in the background: when it returns, its pages are in the vault
    file itself (not only in the WAL, which readers would have to search), the WAL was reused
    instead of growing as large as the import, and SQLite's own checkpoint setting is back."""
    monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 100_000)
    # as if every group were huge: each one waits for its checkpoint, so the WAL restarts after
    # every group however late the checkpoint thread runs (with 0, a thread that had not yet
    # reported the WAL's length let groups pass unwaited, and the WAL grew: flaky under load)
    monkeypatch.setattr(lcm.capture.bulk, "WAL_LIMIT", -1)
    projects = tmp_path / "projects"
    for i in range(30):
        t = Transcript(projects, session_id=f"bulk-{i}")
        for j in range(40):
            t.user(f"note {i}.{j} " + "lorem ipsum dolor " * 150)
        t.write()
    conn = lcm.vault.db.connect(str(vault))  # kept open: closing the last connection checkpoints anyway
    result = lcm.capture.bulk.ingest_paths(conn, [projects])
    assert result["messages_added"] == 1200
    raw_bytes = conn.execute("SELECT sum(length(raw)) FROM messages").fetchone()[0]
    assert os.path.getsize(vault) > raw_bytes
    assert os.path.getsize(str(vault) + "-wal") < os.path.getsize(vault) / 3
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_thinking_can_be_left_out_of_the_index(capsys, tmp_path, vault, monkeypatch):
    monkeypatch.setenv("LCM_INDEX_THINKING", "0")
    t = Transcript(tmp_path / "projects")
    thought = t.thinking("secret zanzibar musing")
    t.write()
    ingest_json(capsys, t.path)
    assert fts_hits(vault, "zanzibar") == set()
    raw = db(vault).execute("SELECT lcm_line(raw, block_id, block_pos) AS raw FROM messages WHERE uuid = ?", (thought["uuid"],)).fetchone()[0]
    assert b"zanzibar" in raw  # still stored verbatim


def test_session_row_fields(capsys, tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=2, cwd="/home/u/shop", model="claude-opus-4-1")
    t.title("Fix the parser")
    t.write()
    ingest_json(capsys, t.path)
    row = db(vault).execute("SELECT * FROM sessions").fetchone()
    assert row["session_id"] == t.session_id and row["project"] == "/home/u/shop"
    assert row["title"] == "Fix the parser" and row["model"] == "claude-opus-4-1"
    assert row["transcript_path"] == str(t.path)
    assert row["first_at"] == t.entries[0]["timestamp"] and row["last_at"] == t.entries[-1]["timestamp"]
    conn = lcm.vault.db.connect(str(vault))
    msg = conn.execute(f"SELECT *, {lcm.vault.store.LINE} AS line FROM messages WHERE type = 'assistant' LIMIT 1").fetchone()
    assert msg["model"] == "claude-opus-4-1" and msg["token_count"] > 0
    # what no reader asks of the row stays in the stored line alone (a smaller vault: issue 32)
    line = json.loads(msg["line"])
    assert line["message"]["id"].startswith("msg_") and line["gitBranch"] == "main" and line["cwd"] == "/home/u/shop"
    assert msg["api_message_id"] is None and msg["git_branch"] is None and msg["cwd"] is None


@pytest.mark.parametrize("layout", ["subagents", "beside"])
def test_subagent_transcripts_join_the_parent_session(capsys, tmp_path, vault, layout):
    parent = coding_session(tmp_path / "projects", turns=1)
    parent.write()
    child = Transcript(tmp_path / "projects", agent_id="ab12cd", layout=layout, parent=parent)
    child.user("SUBTASK count the files")
    child.assistant_text("42 files")
    child.write()
    ingest_json(capsys, tmp_path / "projects")
    conn = db(vault)
    assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
    row = conn.execute("SELECT session_id, agent_id FROM transcripts WHERE path = ?", (str(child.path),)).fetchone()
    assert tuple(row) == (parent.session_id, "ab12cd")
    # a packed row's file is its block's
    msgs = conn.execute("SELECT session_id, is_sidechain, agent_id FROM messages WHERE coalesce(transcript_path,"
                        " (SELECT b.transcript_path FROM blocks b WHERE b.id = block_id)) = ?",
                        (str(child.path),)).fetchall()
    assert [tuple(m) for m in msgs] == [(parent.session_id, 1, "ab12cd")] * 2
    assert conn.execute("SELECT transcript_path FROM sessions").fetchone()[0] == str(parent.path)


def test_compaction_boundary_and_summary_are_recorded(capsys, tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=1)
    boundary = t.compact_boundary(trigger="manual", pre_tokens=123456)
    summary = t.user("This session is being continued from a previous conversation.", isCompactSummary=True)
    t.write()
    ingest_json(capsys, t.path)
    ingest_json(capsys, t.path)
    conn = db(vault)
    rows = conn.execute("SELECT session_id, source, uuid, trigger, pre_tokens FROM compactions").fetchall()
    assert [tuple(r) for r in rows] == [(t.session_id, "transcript", boundary["uuid"], "manual", 123456)]
    assert conn.execute("SELECT subtype FROM messages WHERE uuid = ?", (summary["uuid"],)).fetchone()[0] == "compact_summary"
    assert conn.execute("SELECT subtype FROM messages WHERE uuid = ?", (boundary["uuid"],)).fetchone()[0] == "compact_boundary"


def test_huge_block_is_externalised_but_raw_kept(capsys, tmp_path, vault, monkeypatch):
    pytest.importorskip("lcm.capture.files", reason="lcm_files.py (large-file storage) is not in this checkout yet")
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "100")
    t = Transcript(tmp_path / "projects")
    call = t.tool_use("Read", {"file_path": "/big.csv"})
    body = "id,name\n" + "".join(f"{i},row{i}\n" for i in range(300))
    result = t.tool_result(call, body)
    t.write()
    ingest_json(capsys, t.path)
    ingest_json(capsys, t.path)
    conn = db(vault)
    content, raw = conn.execute("SELECT lcm_text(content) AS content, lcm_line(raw, block_id, block_pos) AS raw FROM messages WHERE uuid = ?", (result["uuid"],)).fetchone()
    assert "[file_" in content and len(content) < len(body)
    assert raw == transcript_line(t.path, 2)
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 1


def test_all_reads_claude_config_dir(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    assert lcm.capture.ingest.projects_root() == tmp_path / "cfg" / "projects"
    coding_session(tmp_path / "cfg" / "projects", turns=1).write()
    assert ingest_json(capsys, "--all")["messages_added"] == 7


def test_all_without_transcripts_is_fine(capsys, vault):
    code, out, err = run(capsys, lcm_ingest, "--all")
    assert code == 0 and out.startswith("0 new messages")
    assert "No transcripts yet" in err


def test_ingest_file_api_counts(tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=1)
    t.write()
    conn = lcm.vault.db.connect()
    one = lcm.capture.ingest.ingest_file(conn, t.path)
    assert (one["messages_added"], one["session_id"]) == (7, t.session_id)
    assert lcm.capture.ingest.ingest_file(conn, t.path)["messages_added"] == 0


# -- refusals -----------------------------------------------------------------------------------

def snapshot(vault):
    return hashlib.sha256(vault.read_bytes()).hexdigest() if vault.exists() else None


@pytest.fixture
def populated(capsys, tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=1)
    t.write()
    ingest_json(capsys, t.path)
    gc.collect()  # close the connections main() left to the collector: a late close would checkpoint
    conn = lcm.vault.db.connect()  # into the vault file in the middle of a test that compares its bytes
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return t


def assert_refused(capsys, vault, argv, words):
    before = snapshot(vault)
    code, out, err = run(capsys, lcm_ingest, *argv)
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and "\nHint: " in err
    assert all(w in err for w in words), err
    assert snapshot(vault) == before


def test_missing_path_changes_nothing(capsys, tmp_path, vault, populated):
    assert_refused(capsys, vault, [populated.path, tmp_path / "nope.jsonl"], ["nope.jsonl"])


def test_missing_path_creates_no_vault(capsys, tmp_path, vault):
    assert_refused(capsys, vault, [tmp_path / "nope.jsonl"], ["no such transcript"])
    assert not vault.exists()


def test_unreadable_file_changes_nothing(capsys, tmp_path, vault, populated):
    if os.geteuid() != 0:
        bad = tmp_path / "locked.jsonl"
        bad.write_text("{}\n")
        bad.chmod(0)
    else:
        # root reads any mode; a FIFO is a path no transcript reader can consume
        bad = tmp_path / "fifo.jsonl"
        os.mkfifo(bad)
    assert_refused(capsys, vault, [populated.path, bad], [bad.name])
    if os.geteuid() == 0:
        print("running as root: chmod 000 does not stop reads, so a FIFO stood in for the unreadable file")


def test_path_under_a_file_changes_nothing(capsys, tmp_path, vault, populated):
    assert_refused(capsys, vault, [populated.path / "child.jsonl"], ["child.jsonl"])


def test_invalid_setting_changes_nothing(capsys, vault, populated, monkeypatch):
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "lots")
    assert_refused(capsys, vault, [populated.path], ["LCM_LARGE_FILE_THRESHOLD"])


def test_newer_vault_schema_is_refused(capsys, vault, populated):
    conn = sqlite3.connect(vault)
    conn.execute(f"PRAGMA user_version = {lcm.vault.schema.SCHEMA_VERSION + 5}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # into the file snapshot() hashes, now, not at some later close
    conn.close()
    assert_refused(capsys, vault, [populated.path], ["schema version", "newer"])


def test_no_paths_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        lcm_ingest.main([])
    assert exc.value.code == 2


# -- properties and process-level checks -------------------------------------------------------

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
BLOCK = st.one_of(
    st.builds(lambda s: {"type": "text", "text": s}, TEXT),
    st.builds(lambda s: {"type": "thinking", "thinking": s, "signature": "x"}, TEXT),
    st.builds(lambda s, v: {"type": "tool_use", "id": "toolu_1", "name": s or "Bash", "input": {"k": v}}, TEXT, TEXT),
    st.builds(lambda s, e: {"type": "tool_result", "tool_use_id": "toolu_1", "content": s, "is_error": e},
              TEXT, st.booleans()),
    st.just({"type": "image", "source": {"type": "base64", "data": "AA"}}),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.lists(BLOCK, min_size=1, max_size=3)),
                      min_size=1, max_size=8),
       split=st.integers(min_value=0, max_value=8))
def test_ingesting_twice_adds_nothing(tmp_path_factory, turns, split):
    projects = tmp_path_factory.mktemp("p")
    vault = projects / "v.db"
    t = Transcript(projects)
    for i, (kind, blocks) in enumerate(turns):
        if kind == "user":
            t.entry("user", {"role": "user", "content": blocks})
        else:
            t.assistant(blocks)
        if i == split:
            t.write()  # part now, the rest later: increments must add up
            lcm.capture.bulk.ingest_paths(lcm.vault.db.connect(str(vault)), [t.path])
    t.write()
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == len(turns)
    again = lcm.capture.bulk.ingest_paths(conn, [t.path])
    assert again["messages_added"] == 0
    for row in conn.execute("SELECT lcm_line(raw, block_id, block_pos) AS raw, line_no FROM messages"):
        assert row["raw"] == transcript_line(t.path, row["line_no"])


def test_script_runs_as_a_subprocess(tmp_path):
    t = coding_session(tmp_path / "projects", turns=1)
    t.write()
    env = {**os.environ, "LCM_HOME": str(tmp_path / "lcm")}
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_ingest.py"), str(t.path), "--json"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["messages_added"] == 7


def test_import_is_cheap_for_hooks():
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import lcm.capture.ingest"],
                          capture_output=True, text=True, cwd=SCRIPTS)
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()}
    assert not imported & {"tqdm", "anthropic", "jsonschema", "lcm.capture.files"}


def test_a_slower_concurrent_reader_never_moves_the_offset_back(tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=1)
    t.write()
    conn = lcm.vault.db.connect()
    stale_row = lcm.capture.ingest.transcript_row(conn, str(t.path))  # None: nothing read yet
    slow = lcm.capture.transcript.read_new_lines(str(t.path), stale_row, *lcm.capture.ingest.settings())
    t.user("written after the slow reader looked")
    t.write()
    assert lcm.capture.ingest.ingest_file(conn, t.path)["messages_added"] == 8  # a hook got there first
    assert lcm.capture.ingest.write_batch(conn, slow)["messages_added"] == 0
    offset = conn.execute("SELECT byte_offset FROM transcripts").fetchone()[0]
    assert offset == t.path.stat().st_size
    assert lcm.capture.ingest.ingest_file(conn, t.path)["messages_added"] == 0


def test_many_files_through_the_parser_process_match_inline(tmp_path):
    projects = tmp_path / "projects"
    for i in range(lcm.capture.bulk.PARSE_PROCESS_MIN_FILES + 2):
        coding_session(projects, turns=2 + i % 3).write()
    conn = lcm.vault.db.connect(str(tmp_path / "a.db"))
    result = lcm.capture.bulk.ingest_paths(conn, [projects])
    expected = expected_messages(projects)
    assert result["messages_added"] == len(expected) and result["files"] == lcm.capture.bulk.PARSE_PROCESS_MIN_FILES + 2
    assert {r[0] for r in conn.execute("SELECT uuid FROM messages")} == expected
    ordered = [r[0] for r in conn.execute("SELECT line_no FROM messages WHERE transcript_path = ? ORDER BY id",
                                          (lcm.capture.bulk.transcript_files([projects])[0],))]
    assert ordered == sorted(ordered)


def test_ingest_session_catches_late_subagent_lines(tmp_path, vault):
    parent = coding_session(tmp_path / "projects", turns=1)
    parent.write()
    child = Transcript(tmp_path / "projects", agent_id="late1", parent=parent)
    child.user("SUBTASK say hi")
    child.write()
    conn = lcm.vault.db.connect()
    lcm.capture.ingest.ingest_file(conn, child.path)  # the sub-agent's own hook ran before its reply landed
    child.assistant_text("hi from the subagent")
    child.write()
    result = lcm.capture.ingest.ingest_session(conn, parent.path)
    assert result["files"] == 2 and result["messages_added"] == 7 + 1
    rows = conn.execute("SELECT lcm_text(content) AS content FROM messages WHERE agent_id = 'late1' ORDER BY id").fetchall()
    assert [r[0] for r in rows] == ["SUBTASK say hi", "hi from the subagent"]


@pytest.mark.parametrize("empty", ["", " "])
def test_ingest_of_an_empty_path_is_an_error_not_the_working_directory(capsys, tmp_path, monkeypatch, vault, empty):
    """`lcm_ingest.py "$DIR"` with DIR unset read the empty path as the working directory and
    imported every .jsonl under it, however large the tree (a home directory, /tmp)."""
    from transcripts import coding_session
    coding_session(tmp_path / "elsewhere", turns=2).write()
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "lcm_ingest", empty)
    assert code == 1 and "Error: PATH is empty" in err and "Hint:" in err
    assert not vault.exists()
