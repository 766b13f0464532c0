"""One damaged block (bit rot, a bad sector: the SQLite file itself stays sound): doctor finds it
and names its session, every reader stops with Error + Hint instead of a traceback, other
sessions read as before, purge still forgets the session, and doctor --fix puts back the
original lines from the transcript, byte for byte."""
from __future__ import annotations

import json
import sqlite3

import pytest

import lcm_compact
import lcm_describe
import lcm_doctor
import lcm_expand
import lcm_export
import lcm_grep
import lcm_ingest
import lcm_purge
import lcm_sessions
import lcm.vault.db
import lcm.vault.pack
import lcm.vault.store
from conftest import run
from transcripts import coding_session


@pytest.fixture
def packed(isolated_home, vault, monkeypatch, capsys):
    """Two sessions imported from transcripts, packed; returns (damaged session, other session)."""
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")  # so that compaction reads these few messages
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "1")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "200")
    projects = isolated_home / ".claude" / "projects"
    hit = coding_session(projects, turns=8, session_id="aaaa1111-damaged")
    hit.write()
    other = coding_session(projects, turns=8, session_id="bbbb2222-intact", cwd="/home/user/other")
    other.write()
    assert lcm_ingest.main(["--all"]) == 0
    conn = lcm.vault.db.connect(str(vault))
    lcm.vault.pack.pack(conn, everything=True)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    capsys.readouterr()
    return hit, other


def _flip(vault, session_id: str, offset: int = 40, codec: bool = False) -> int:
    """Flip one byte of the session's first block, in place in the file (as a bad sector would)."""
    conn = sqlite3.connect(vault)
    block_id, data = conn.execute("SELECT id, data FROM blocks WHERE session_id = ? ORDER BY id LIMIT 1",
                                  (session_id,)).fetchone()
    conn.close()
    data = bytes(data)
    at = 0 if codec else offset
    blob = vault.read_bytes()
    where = blob.find(data)
    assert where > 0 and blob.find(data, where + 1) < 0  # the block's bytes sit once in the file
    with open(vault, "r+b") as f:
        f.seek(where + at)
        f.write(bytes([data[at] ^ 0x5A]))
    return block_id


def _raw(vault) -> dict[str, bytes]:
    conn = lcm.vault.db.connect(str(vault), readonly=True)
    try:
        return {r[0]: bytes(r[1]) for r in conn.execute(f"SELECT uuid, {lcm.vault.store.LINE} FROM messages")}
    finally:
        conn.close()


def _error_names_doctor(code: int, err: str) -> None:
    assert code == 1, err
    assert "Traceback" not in err and "Error:" in err and "Hint:" in err and "lcm_doctor.py" in err, err


@pytest.mark.parametrize("codec", [False, True], ids=["payload", "codec-byte"])
def test_doctor_names_the_damaged_session_and_every_reader_says_error_and_hint(packed, vault, capsys, codec):
    hit, other = packed
    before = _raw(vault)
    _flip(vault, hit.session_id, codec=codec)
    code, out, err = run(capsys, lcm_doctor, "--json")
    assert code == 1, out
    doc = json.loads(out)
    bad = doc["blocks"]
    assert bad["status"] == "problem" and bad["sessions"] == [hit.session_id]
    assert {m["uuid"] for d in bad["damaged"] for m in d["messages"]} <= {e["uuid"] for e in hit.entries}
    assert all(m["created_at"] for d in bad["damaged"] for m in d["messages"])
    assert doc["integrity"] == "ok"  # SQLite's own checks cannot see it
    code, out, _ = run(capsys, lcm_doctor)
    assert code == 1 and "stored blocks" in out and hit.session_id in out and "PROBLEM" in out
    if codec:
        assert "newer lcm" not in out  # a changed codec byte in a vault of this schema is damage
    code, out, _ = run(capsys, lcm_doctor, "--quick")  # the frequent run checks every block too
    assert code == 1 and hit.session_id in out and "not checked (--quick)" in out

    victim = bad["damaged"][0]["messages"][0]["uuid"]
    for module, *argv in [(lcm_export, "--session", hit.session_id), (lcm_export, "--session", hit.session_id,
                                                                        "--format", "jsonl"),
                          (lcm_expand, victim, "--raw"), (lcm_expand, victim), (lcm_sessions, hit.session_id),
                          (lcm_compact, "--session", hit.session_id)]:
        code, out, err = run(capsys, module, *argv)
        assert code == 1, (module.__name__, argv, out[:300])
        _error_names_doctor(code, err)
        assert hit.session_id in err
    # the other session reads as before
    code, out, _ = run(capsys, lcm_export, "--session", other.session_id, "--format", "jsonl", "--unmasked")
    assert code == 0 and out.encode() == b"".join(before[e["uuid"]] + b"\n" for e in other.entries)
    code, out, _ = run(capsys, lcm_sessions, other.session_id)
    assert code == 0 and out
    code, out, err = run(capsys, lcm_sessions)  # the list shows every session, the damaged one untitled
    assert code == 0 and hit.session_id[:8] in out and other.session_id[:8] in out, err
    _viewer_pages(vault, hit.session_id, other.session_id)
    code, out, err = run(capsys, lcm_grep, "pytest", "--all-sessions")
    assert code == 0 and "Traceback" not in err
    _error_names_doctor(*run(capsys, lcm_describe, victim)[::2])  # a message: its line
    code, out, err = run(capsys, lcm_describe, "--session", hit.session_id)  # the session's DAG: stored text
    assert code == 0, err


def test_doctor_fix_restores_the_block_from_the_transcript_byte_for_byte(packed, vault, capsys):
    hit, _ = packed
    before = _raw(vault)
    _flip(vault, hit.session_id)
    code, out, _ = run(capsys, lcm_doctor, "--fix")
    assert code == 0, out
    assert "restored the original lines" in out and "Healthy." in out
    # the lines re-pack to the very bytes the block held: only the flipped byte differs
    assert "differing from it in 1 byte: the damage" in out
    assert _raw(vault) == before  # every message's original line, byte for byte
    code, out, _ = run(capsys, lcm_doctor)
    assert code == 0 and "Healthy." in out


def test_a_block_an_older_lcm_packed_at_another_level_is_restored_as_its_very_bytes(packed, vault, capsys):
    """Blocks of an older vault were compressed at zlib level 4: doctor --fix re-packs at the
    level that gives the damaged block's size, so again only the flipped byte differs."""
    hit, _ = packed
    conn = sqlite3.connect(vault)
    block_id, data = conn.execute("SELECT id, data FROM blocks WHERE session_id = ? ORDER BY id LIMIT 1",
                                  (hit.session_id,)).fetchone()
    older = lcm.vault.store.encode_block(lcm.vault.store.decode_block(bytes(data)), 4)
    assert len(older) != len(lcm.vault.store.encode_block(lcm.vault.store.decode_block(bytes(data))))
    conn.execute("UPDATE blocks SET data = ? WHERE id = ?", (older, block_id))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = _raw(vault)
    _flip(vault, hit.session_id)
    code, out, _ = run(capsys, lcm_doctor, "--fix")
    assert code == 0 and "differing from it in 1 byte: the damage" in out, out
    assert _raw(vault) == before


def test_expand_raw_of_each_restored_message_gives_the_original_bytes(packed, vault, capsys):
    hit, _ = packed
    before = _raw(vault)
    _flip(vault, hit.session_id)
    assert run(capsys, lcm_doctor, "--fix")[0] == 0
    for entry in hit.entries:
        code, out, err = run(capsys, lcm_expand, entry["uuid"], "--raw", "--unmasked")
        assert code == 0, err
        assert before[entry["uuid"]].decode() in out


def test_without_transcript_or_backup_doctor_lists_exactly_what_is_lost(packed, vault, capsys):
    hit, other = packed
    _flip(vault, hit.session_id)
    hit.path.unlink()  # Claude Code's cleanup took the transcript
    code, out, _ = run(capsys, lcm_doctor, "--fix", "--json")
    doc = json.loads(out)
    assert code == 1
    lost = doc["lost"]
    assert [x["session_id"] for x in lost] == [hit.session_id]
    damaged = {m["uuid"] for d in doc["blocks"]["damaged"] for m in d["messages"]}
    assert {m["uuid"] for x in lost for m in x["messages"]} == damaged and damaged
    assert all(m["created_at"] for x in lost for m in x["messages"])
    # the rest keeps working, and the lost messages stay addressable with a clear error
    assert run(capsys, lcm_export, "--session", other.session_id)[0] == 0
    code, _, err = run(capsys, lcm_expand, next(iter(damaged)), "--raw")
    _error_names_doctor(code, err)


@pytest.mark.parametrize("how", ["session", "message"])
def test_purge_of_the_damaged_session_still_works_and_says_so(packed, vault, capsys, how):
    hit, other = packed
    block_id = _flip(vault, hit.session_id)
    conn = sqlite3.connect(vault)
    victim = conn.execute("SELECT uuid FROM messages WHERE block_id = ? ORDER BY block_pos LIMIT 1",
                          (block_id,)).fetchone()[0]
    conn.close()
    argv = ["--session", hit.session_id] if how == "session" else ["--message", victim]
    code, out, err = run(capsys, lcm_purge, *argv, "--yes")
    assert code == 0, err
    assert "damaged block" in out
    conn = sqlite3.connect(vault)
    assert conn.execute("SELECT count(*) FROM blocks WHERE id = ?", (block_id,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM messages WHERE uuid = ?", (victim,)).fetchone()[0] == 0
    conn.close()
    if how == "message":  # the block's other messages: doctor --fix restores them from the transcript
        code, out, _ = run(capsys, lcm_doctor, "--fix")
        assert code == 0, out
        kept = _raw(vault)
        assert victim not in kept
        for entry in hit.entries:
            if entry["uuid"] != victim:
                assert kept[entry["uuid"]] == json.dumps(entry, ensure_ascii=False).encode()
    assert run(capsys, lcm_export, "--session", other.session_id)[0] == 0


def _viewer_pages(vault, damaged: str, intact: str) -> None:
    """The viewer's page of the damaged session says Error with the hint; the other one shows."""
    import http.client
    from lcm.view.server import Viewer
    server = Viewer(str(vault))
    server.start()
    try:
        for path, status, words in ((f"s/{damaged}", 500, ("damaged", "lcm_doctor.py")), (f"s/{intact}", 200, ()),
                                    ("", 200, (intact[:8],))):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", server.root + path, headers={"Host": f"127.0.0.1:{server.port}"})
            response = conn.getresponse()
            body = response.read().decode("utf-8", "replace")
            conn.close()
            assert response.status == status, body[:300]
            assert all(w in body for w in words) and "Traceback" not in body, body[:600]
    finally:
        server.shutdown()
        server.server_close()


def test_purge_match_over_a_damaged_block_matches_its_searchable_text_and_says_so(packed, vault, capsys):
    hit, other = packed
    _flip(vault, hit.session_id)
    import lcm.cli, traceback
    orig = lcm.cli._report
    se = lcm.cli.storage_error
    lcm.cli.storage_error = lambda exc, *a: (traceback.print_exception(exc), se(exc, *a))[1]
    code, out, err = run(capsys, lcm_purge, "--match", "module_3.py", "--yes")
    lcm.cli.storage_error = se
    assert code == 0, err
    assert "damaged blocks" in out and "searchable text only" in out
    conn = sqlite3.connect(vault)
    left = conn.execute("SELECT count(*) FROM messages WHERE instr(content, 'module_3.py') > 0").fetchone()[0]
    conn.close()
    assert left == 0  # in both sessions, the damaged one included
