"""Packed storage (lcm/vault/store.py, lcm/vault/pack.py): every original line comes back byte for byte after
ingest, after packing, after converting a vault from before blocks, and after a SIGKILL at any
point of either; every reader answers as before; a purge leaves no copy inside any block."""
from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import zlib

import pytest

import lcm.base.config
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.vault.pack
import lcm.vault.schema
import lcm.vault.store
from conftest import SCRIPTS, run, shared_data


BEFORE_BLOCKS = lcm.vault.schema.MIGRATIONS.index(lcm.vault.store.MIGRATION)  # the schema version an old vault has


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_lines(conn) -> dict[int, str]:
    """message id -> sha256 of the line at its transcript path and line number, read from the
    transcript files themselves (a packed row's file is its block's)."""
    cache: dict[str, list[bytes]] = {}
    out = {}
    blocks = "blocks" in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    sql = ("SELECT m.id, coalesce(m.transcript_path, b.transcript_path), m.line_no FROM messages m"
           " LEFT JOIN blocks b ON b.id = m.block_id" if blocks else "SELECT id, transcript_path, line_no FROM messages")
    for mid, path, line_no in conn.execute(sql):
        if path not in cache:
            with open(path, "rb") as handle:
                cache[path] = handle.read().split(b"\n")
        out[mid] = _sha(cache[path][line_no - 1])
    return out


def _stored(path) -> dict[int, str]:
    """message id -> sha256 of its stored line, through lcm.vault.store, on a fresh connection."""
    conn = lcm.vault.db.connect(str(path), create=False)
    try:
        return {r[0]: _sha(lcm.vault.store.as_bytes(r[1]))
                for r in conn.execute(f"SELECT id, {lcm.vault.store.LINE} FROM messages")}
    finally:
        conn.close()


def _ingest(path, old: bool = False, dirs=("claude-projects", "odd-cases"), bulk: bool = False):
    """The shared transcripts in a vault at `path`, file by file as the hooks store them (every
    line plain: packing's work), or with bulk=True as lcm_ingest.py does (packed as imported);
    old=True writes it as lcm did before blocks (no blocks table, no block columns)."""
    with pytest.MonkeyPatch.context() as patch:
        if old:
            patch.setattr(lcm.vault.schema, "SCHEMA_VERSION", BEFORE_BLOCKS)
        conn = lcm.vault.db.connect(str(path))
        if bulk:
            lcm.capture.bulk.ingest_paths(conn, [shared_data(d) for d in dirs])
        else:
            with lcm.vault.db.transaction(conn):  # inside a transaction, ingest_paths goes file by file
                lcm.capture.bulk.ingest_paths(conn, [shared_data(d) for d in dirs])
        if old:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == BEFORE_BLOCKS
            assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'blocks'").fetchone() is None
    expected = _file_lines(conn)
    conn.close()
    return expected


def _one_copy(conn) -> None:
    """Every block holds exactly the lines of the messages that point to it: no line is in two
    blocks, and no block keeps a line nothing points to (a purge would never find it)."""
    pointed = dict(conn.execute("SELECT block_id, count(*) FROM messages WHERE block_id IS NOT NULL GROUP BY block_id"))
    held = dict(conn.execute("SELECT id, line_count FROM blocks"))
    assert pointed == held
    for block_id, positions in conn.execute("SELECT block_id, group_concat(block_pos) FROM messages"
                                            " WHERE block_id IS NOT NULL GROUP BY block_id"):
        assert sorted(map(int, positions.split(","))) == list(range(held[block_id]))


def test_packing_many_files_at_once_keeps_one_copy_of_each_line(vault, monkeypatch):
    """Tiny blocks and room for two open files: blocks are cut and files evicted constantly."""
    expected = _ingest(vault)
    monkeypatch.setattr(lcm.vault.pack, "BLOCK_BYTES", 1 << 13)
    monkeypatch.setattr(lcm.vault.pack, "OPEN_FILES", 2)
    monkeypatch.setattr(lcm.vault.pack, "BATCH_BYTES", 1 << 15)
    conn = lcm.vault.db.connect(str(vault))
    lcm.vault.pack.pack(conn)
    _one_copy(conn)
    lcm.vault.pack.pack(conn, everything=True)
    _one_copy(conn)
    assert lcm.vault.pack.pending(conn) == 0
    conn.close()
    assert _stored(vault) == expected


def test_every_line_back_after_ingest_and_after_packing(vault):
    expected = _ingest(vault)
    assert len(expected) > 2000
    assert _stored(vault) == expected
    conn = lcm.vault.db.connect(str(vault))
    doc = lcm.vault.pack.pack(conn, everything=True)
    assert doc["pending_lines"] == 0 and doc["packed_lines"] == len(expected)
    assert conn.execute("SELECT count(*) FROM messages WHERE length(raw) > 12").fetchone()[0] == 0  # no copy left
    _one_copy(conn)
    conn.close()
    assert _stored(vault) == expected
    # packing again finds nothing to do and changes nothing
    conn = lcm.vault.db.connect(str(vault))
    assert lcm.vault.pack.pack(conn, everything=True)["packed_lines"] == 0
    conn.close()
    assert _stored(vault) == expected


def test_packing_on_several_threads_stores_the_same_blocks(vault, tmp_path):
    """A run by hand compresses blocks on every core: the blocks it writes are those one thread
    writes, byte for byte, and every line comes back."""
    import shutil
    expected = _ingest(vault)
    other = tmp_path / "one-thread.db"
    shutil.copy(vault, other)
    for path, threads in ((vault, 3), (other, 1)):
        conn = lcm.vault.db.connect(str(path))
        assert lcm.vault.pack.pack(conn, everything=True, threads=threads)["pending_lines"] == 0
        conn.close()
    blocks = [lcm.vault.db.connect(str(p)).execute("SELECT id, first_id, data FROM blocks ORDER BY id").fetchall()
              for p in (vault, other)]
    assert len(blocks[0]) > 1 and [tuple(b) for b in blocks[0]] == [tuple(b) for b in blocks[1]]
    assert _stored(vault) == expected


def test_old_vault_converts_in_place(vault, capsys):
    expected = _ingest(vault, old=True)
    # a read command before anything migrated the vault (read-only: it migrates nothing)
    conn = lcm.vault.db.connect(str(vault), readonly=True)
    sid = conn.execute("SELECT session_id FROM messages GROUP BY session_id ORDER BY count(*) DESC").fetchone()[0]
    ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ? ORDER BY id", (sid,))]
    conn.close()
    code, out, err = run(capsys, "lcm_export", "--session", sid, "--format", "jsonl", "--unmasked")
    assert code == 0, err
    assert [_sha(x.encode("utf-8", "surrogateescape")) for x in out.split("\n")[:-1]] == [expected[i] for i in ids]
    assert lcm.vault.db.connect(str(vault), readonly=True).execute("PRAGMA user_version").fetchone()[0] == BEFORE_BLOCKS
    assert _stored(vault) == expected  # migrated to blocks' schema, still plain
    conn = lcm.vault.db.connect(str(vault))
    assert lcm.vault.pack.ratio(conn)["plain_lines"] == len(expected)
    lcm.vault.pack.pack(conn, everything=True)
    lcm.vault.pack.vacuum(conn)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert _stored(vault) == expected


PACKER = """
import sys
sys.path.insert(0, {scripts!r})
import lcm.vault.pack
import lcm.vault.schema
lcm.vault.pack.BLOCK_BYTES, lcm.vault.pack.BATCH_BYTES = 1 << 14, 1 << 16  # many blocks, many transactions
import lcm_compact
sys.exit(lcm_compact.main(["--pack", "--all", "--db", {db!r}, "--json"]))
"""


def _blocks_now(vault) -> int:
    try:
        conn = sqlite3.connect(f"file:{vault}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM blocks").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:  # not migrated yet: no blocks table
        return 0


def _kill_until_done(vault, expected, seed):
    """Run the packer again and again, each killed (SIGKILL) at a random moment after it has
    stored a new block (so the kill lands while it packs, whatever the machine's load), checking
    every line after each kill, until one run finishes."""
    rng = random.Random(seed)
    code = PACKER.format(scripts=str(SCRIPTS), db=str(vault))
    midway = 0  # kills that left some lines packed and some not
    for attempt in range(40):
        before = _blocks_now(vault)
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if attempt < 12:
            deadline = time.monotonic() + 60
            while proc.poll() is None and _blocks_now(vault) == before and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.08))
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
        assert _stored(vault) == expected, f"seed {seed}, kill {attempt}"
        conn = lcm.vault.db.connect(str(vault))
        left = lcm.vault.pack.pending(conn)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        _one_copy(conn)
        conn.close()
        midway += 0 < left < len(expected)
        if proc.returncode == 0 and left == 0:
            return attempt, midway
    raise AssertionError(f"packing never finished (seed {seed})")


@pytest.mark.slow  # a kill loop
@pytest.mark.parametrize("old", [False, True], ids=["packing", "conversion"])
def test_sigkill_at_random_points_loses_nothing(vault, monkeypatch, old):
    expected = _ingest(vault, old=old)
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    kills, midway = _kill_until_done(vault, expected, seed)
    print(f"{kills} runs killed, {midway} of them midway")
    assert midway >= 1, f"no kill landed while packing (seed {seed}): the test proved nothing"


def _outputs(capsys, conn) -> dict:
    """What every reader prints for the vault (original lines, exports, expansions, listings)."""
    out = {}
    sessions = [r[0] for r in conn.execute("SELECT session_id FROM sessions ORDER BY session_id")]
    for sid in sessions:
        for args in (["--format", "jsonl", "--unmasked"], ["--format", "jsonl"], ["--format", "markdown"]):
            code, text, _ = run(capsys, "lcm_export", "--session", sid, *args)
            out[("export", sid, *args)] = (code, text.replace(text[text.find("Exported "):][:40], "") if
                                           "markdown" in args else text)
        out[("sessions", sid)] = run(capsys, "lcm_sessions", sid, "--json")[:2]
        out[("describe", sid)] = run(capsys, "lcm_describe", "--session", sid, "--json")[:2]
    uuids = [r[0] for r in conn.execute("SELECT uuid FROM messages ORDER BY id")]
    for uuid in uuids[::25]:
        out[("expand-raw", uuid)] = _expand_raw(uuid)
        out[("expand", uuid)] = run(capsys, "lcm_expand", uuid, "--json")[:2]
    for query in ("sqlite", "error", "tool_use_id", "def main"):
        out[("grep", query)] = run(capsys, "lcm_grep", query, "--json", "--all-sessions")[:2]
    return out


def _expand_raw(uuid) -> bytes:
    """lcm_expand.py --raw --unmasked, as a process: it writes bytes to stdout's buffer."""
    return subprocess.run([sys.executable, str(SCRIPTS / "lcm_expand.py"), uuid, "--raw", "--unmasked"],
                          capture_output=True, check=True).stdout


@pytest.mark.slow  # every reader over the shared data, twice
def test_every_reader_answers_the_same_after_packing(vault, capsys, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    _ingest(vault, dirs=("claude-projects",))
    conn = lcm.vault.db.connect(str(vault))
    code, _, err = run(capsys, "lcm_compact", "--all", "--full")  # summaries, so describe/expand walk a DAG
    assert code == 0, err
    before = _outputs(capsys, conn)
    lcm.vault.pack.pack(conn, everything=True)
    after = _outputs(capsys, conn)
    assert before.keys() == after.keys()
    for key in before:
        assert after[key] == before[key], key


def _main_readers(capsys, conn) -> dict:
    """What the readers main gained while packing was built print for the vault: the viewer's
    session and summary pages, a purge's dry run (it reads lines through line_text), and again
    export jsonl, expand --raw --unmasked, describe and grep."""
    import lcm.view.pages as pages
    out = {}
    for (sid,) in conn.execute("SELECT session_id FROM sessions ORDER BY session_id").fetchall():
        count = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
        for page in range(0, count // pages.MESSAGES_PAGE + 1):
            out[("view", sid, page)] = pages.session_page(conn, sid, {"page": str(page)})
        out[("export", sid)] = run(capsys, "lcm_export", "--session", sid, "--format", "jsonl", "--unmasked")[:2]
        out[("describe", sid)] = run(capsys, "lcm_describe", "--session", sid, "--json")[:2]
    for (node,) in conn.execute("SELECT id FROM summaries WHERE kind = 'leaf' ORDER BY id LIMIT 20").fetchall():
        out[("view-node", node)] = pages.node_page(conn, node, {})
    for (uuid,) in conn.execute("SELECT uuid FROM messages ORDER BY id").fetchall()[::97]:
        out[("expand-raw", uuid)] = _expand_raw(uuid)
    for text in ("sqlite", "tool_use_id", "Traceback"):
        out[("grep", text)] = run(capsys, "lcm_grep", text, "--json", "--all-sessions")[:2]
        out[("purge-dry-run", text)] = run(capsys, "lcm_purge", "--match", text, "--json")[:2]
    # a --regex runs in a process of its own, on its own connection
    out["purge-regex"] = run(capsys, "lcm_purge", "--match", "Trace[b]ack|sql[i]te", "--regex", "--json")[:2]
    return out


@pytest.mark.slow  # every reader as a process, twice
def test_viewer_export_expand_describe_grep_and_purge_read_packed_lines_like_plain_ones(vault, capsys, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    _ingest(vault, dirs=("claude-projects",))
    conn = lcm.vault.db.connect(str(vault))
    code, _, err = run(capsys, "lcm_compact", "--all", "--full")
    assert code == 0, err
    before = _main_readers(capsys, conn)
    hits = json.loads(before["purge-regex"][1])
    assert before["purge-regex"][0] == 0 and hits["messages"] > 0, hits  # the scan found lines to compare
    assert lcm.vault.pack.pack(conn, everything=True)["pending_lines"] == 0
    assert conn.execute("SELECT count(*) FROM messages WHERE block_id IS NULL").fetchone()[0] == 0
    after = _main_readers(capsys, conn)
    assert before.keys() == after.keys()
    for key in before:
        assert after[key] == before[key], key


def _every_stream(data: bytes):
    """Whatever zlib can inflate from any zlib header in `data` (a block's codec byte is followed
    by one): the test does not trust the blocks table to list every copy."""
    for header in (b"\x78\x9c", b"\x78\xda", b"\x78\x01", b"\x78\x5e"):
        at = data.find(header)
        while at >= 0:
            try:
                yield zlib.decompressobj().decompress(data[at:at + (1 << 20)])
            except zlib.error:
                pass
            at = data.find(header, at + 1)


def test_purge_leaves_no_trace_in_any_block(vault, capsys, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    _ingest(vault)
    conn = lcm.vault.db.connect(str(vault))
    # a line from the middle of a block, and a text found in it alone
    mid, line = conn.execute(f"SELECT id, {lcm.vault.store.LINE} FROM messages WHERE length(raw) > 2000"
                             " ORDER BY id LIMIT 1 OFFSET 40").fetchone()
    text = next(w for w in (line[i:i + 24] for i in range(200, len(line) - 24, 17))
                if conn.execute("SELECT count(*) FROM messages WHERE instr(raw, ?)", (w,)).fetchone()[0] == 1
                and b"\\" not in w and w.strip() == w)
    lcm.vault.pack.pack(conn, everything=True)
    block = conn.execute("SELECT block_id FROM messages WHERE id = ?", (mid,)).fetchone()[0]
    neighbours = {r[0]: r[1] for r in conn.execute(f"SELECT id, {lcm.vault.store.LINE} FROM messages WHERE block_id = ?",
                                                   (block,))}
    assert len(neighbours) > 1
    conn.close()
    code, _, err = run(capsys, "lcm_purge", "--match", text.decode(), "--yes", "--json")
    assert code == 0, err
    conn = lcm.vault.db.connect(str(vault))
    assert conn.execute("SELECT 1 FROM messages WHERE id = ?", (mid,)).fetchone() is None
    for (data,) in conn.execute("SELECT data FROM blocks"):
        assert not any(text in line_ for line_ in lcm.vault.store.decode_block(bytes(data)))
    for other, original in neighbours.items():  # the rest of its block is intact
        if other != mid:
            assert lcm.vault.store.line(conn, other) == original
    conn.close()
    for name in (vault, str(vault) + "-wal"):
        if os.path.exists(name):
            data = open(name, "rb").read()
            assert text not in data
            assert not any(text in stream for stream in _every_stream(data))


def test_reader_cache_never_serves_a_rewritten_block(vault):
    """A purge gives the survivors a new block id; a reader that cached the old block stays right."""
    _ingest(vault)
    conn = lcm.vault.db.connect(str(vault))
    lcm.vault.pack.pack(conn, everything=True)
    a, b = conn.execute("SELECT id FROM messages WHERE block_id = (SELECT min(id) FROM blocks)"
                        " ORDER BY id LIMIT 2").fetchall()
    line_b = lcm.vault.store.line(conn, b[0])
    with lcm.vault.db.transaction(conn):
        lcm.vault.store.remove_lines(conn, [a[0]])
        conn.execute("DELETE FROM messages WHERE id = ?", (a[0],))
    assert lcm.vault.store.line(conn, b[0]) == line_b
    assert conn.execute("SELECT max(id) FROM blocks").fetchone()[0] > conn.execute(
        "SELECT block_id FROM messages WHERE id = ?", (b[0],)).fetchone()[0] - 1


def test_unknown_codec_is_refused_clearly():
    with pytest.raises(ValueError, match="newer lcm"):  # only when the vault's schema is newer
        lcm.vault.store.decode_block(b"\x07" + zlib.compress(b"x"), newer_schema=True)
    with pytest.raises(ValueError, match="not one lcm writes"):  # else it is damage
        lcm.vault.store.decode_block(b"\x07" + zlib.compress(b"x"))
    lines = [b'{"a":1}', b"", "caf\u00e9".encode(), b"x" * 100000]
    assert lcm.vault.store.decode_block(lcm.vault.store.encode_block(lines)) == lines


def test_hooks_store_lines_plain_and_packing_waits_for_a_file_to_go_idle(vault, tmp_path):
    """A live transcript's last partial block stays plain until the file is idle, or --all."""
    _ingest(vault, dirs=("claude-projects",))  # as the hooks store lines: plain
    conn = lcm.vault.db.connect(str(vault))
    big = conn.execute("SELECT transcript_path FROM messages GROUP BY transcript_path"
                       " ORDER BY sum(length(raw)) DESC LIMIT 1").fetchone()[0]
    now = lcm.base.config.now_iso()
    conn.execute("UPDATE transcripts SET updated_at = ?", (now,))  # every file just written
    doc = lcm.vault.pack.pack(conn)
    assert doc["packed_lines"] > 0 and doc["pending_lines"] > 0  # whole blocks only
    assert conn.execute("SELECT max(line_bytes) FROM blocks WHERE line_count > 1").fetchone()[0] <= lcm.vault.pack.BLOCK_BYTES
    assert conn.execute("SELECT count(*) FROM messages WHERE block_id IS NULL AND transcript_path = ?",
                        (big,)).fetchone()[0] > 0
    conn.execute("UPDATE transcripts SET updated_at = '2020-01-01T00:00:00.000Z'")  # idle for years
    assert lcm.vault.pack.pack(conn)["pending_lines"] == 0


def test_stop_hook_leaves_packing_to_a_detached_run(vault):
    """The hook stores its turn plain and returns; a detached `lcm_compact.py --pack` packs."""
    from test_hooks import log_lines, run_hook, wait_for
    _ingest(vault, dirs=("claude-projects",))  # as the hooks store lines: plain
    conn = lcm.vault.db.connect(str(vault))
    conn.execute("UPDATE transcripts SET updated_at = '2020-01-01T00:00:00.000Z'")  # idle for years
    path, sid = conn.execute("SELECT path, session_id FROM transcripts WHERE agent_id IS NULL"
                             " AND session_id IS NOT NULL LIMIT 1").fetchone()
    assert lcm.vault.pack.due(conn)
    conn.close()
    proc = run_hook("stop", {"session_id": sid, "transcript_path": path, "hook_event_name": "Stop"},
                    {"LCM_LEAF_CHUNK_TOKENS": str(10**9)})
    assert proc.returncode == 0, proc.stderr

    def packed() -> bool:
        c = lcm.vault.db.connect(str(vault), readonly=True)
        try:
            return lcm.vault.pack.pending(c) == 0
        finally:
            c.close()
    assert wait_for(packed), log_lines()


def test_doctor_reports_the_ratio_and_a_pending_conversion(vault, capsys, monkeypatch):
    expected = _ingest(vault, old=True)
    assert len(expected) > lcm.vault.pack.CONVERT_LINES // 2
    monkeypatch.setattr(lcm.vault.pack, "CONVERT_LINES", 1000)
    code, out, err = run(capsys, "lcm_doctor", "--json")
    assert out, err
    storage = json.loads(out)["storage"]
    assert storage["pending"] and storage["status"] == "warn" and storage["ratio"] > 1
    before = storage["ratio"]
    code, out, _ = run(capsys, "lcm_doctor")
    assert "lcm_compact.py --pack --all" in out
    assert run(capsys, "lcm_compact", "--pack", "--all", "--vacuum")[0] == 0
    code, out, _ = run(capsys, "lcm_doctor", "--json")
    storage = json.loads(out)["storage"]
    # the lines in blocks: well under the plain vault (the usage table, read by the same run, stays)
    assert not storage["pending"] and storage["status"] == "ok" and storage["ratio"] < 0.7 * before


def test_commands_that_write_leave_no_wal_behind(tmp_path, vault):
    """A command closes its vault as it ends (the line reader it installs holds its connection
    only weakly), so SQLite moves the WAL's pages into the vault and removes it: a WAL left
    behind grows, and the next process to open the vault reads all of it again."""
    from transcripts import Transcript
    t = Transcript(tmp_path / "projects", session_id="s-wal")
    for i in range(30):
        t.user(f"turn {i}: the walrus gateway listens on port {8000 + i}")
        t.assistant_text(f"noted, port {8000 + i}")
    t.write()
    env = {**os.environ, "LCM_LLM": "none"}
    for argv in (["lcm_ingest.py", str(tmp_path / "projects")], ["lcm_remember.py", "staging is on 8443"],
                 ["lcm_compact.py", "--session", "s-wal", "--full"], ["lcm_compact.py", "--pack", "--all"],
                 ["lcm_checkpoint.py", "--session", "s-wal"]):
        done = subprocess.run([sys.executable, str(SCRIPTS / argv[0]), *argv[1:]], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, (argv, done.stderr)
        wal = f"{vault}-wal"
        assert not os.path.exists(wal) or os.path.getsize(wal) == 0, argv[0]
