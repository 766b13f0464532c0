"""Packing: plain stored lines into compressed blocks (lcm/vault/store.py has the format).

Ingest and the hooks store each new line as it is (cheap). Packing runs later, detached or by
hand (`lcm_compact.py --pack`), and is the same step that converts a vault from before blocks:
its lines are all plain. It works online, in small batches: lines are read and compressed
outside any transaction, and each batch is written in one short transaction that first checks
its lines are still plain, taking turns with hooks (lcm.vault.db). Killed at any
point, it leaves every line either plain or in a committed block; the next run goes on.
"""
from __future__ import annotations

import os
import sys
import time

import lcm.base.progress
import lcm.vault.squeeze
import lcm.vault.store
import lcm.vault.db

BLOCK_BYTES = 256 << 10  # lines per block: 128 KB packs the bench corpus to 0.259 of the lines, 256 KB
#                          0.253 (-0.007 of the vault/transcripts ratio), 512 KB 0.249; 256 KB decodes
#                          in ~0.6 ms (expand reads one; a connection caches the last few)
BATCH_BYTES = 1 << 20  # lines per write transaction: ~20 ms idle, ~0.2 s on a machine loaded 8x over;
#                       between two, waiting hooks go first (lcm.vault.db.Turns)
IDLE_SECONDS = 1800  # a file unchanged this long gets its last, partial block packed too
DUE_LINES = 1024  # plain lines in the vault before a Stop hook starts packing (~4 MB)
CONVERT_LINES = 4 * DUE_LINES  # more plain lines than this: lcm_doctor.py says to run --pack --all


def cut_blocks(items) -> list[list]:
    """Items (key, size, value), in order, cut into blocks: lists of the values of one key (a
    file's session), in order, each of at most BLOCK_BYTES or one larger item; the blocks in the
    order of their first items. (What a bulk import packs at once: `_blocks` below streams.)"""
    open_: dict = {}
    done: list = []
    for n, (key, size, value) in enumerate(items):
        block = open_.get(key)
        if block is not None and block[1] + size > BLOCK_BYTES:
            done.append(open_.pop(key))
            block = None
        if block is None:
            block = open_[key] = [n, 0, []]  # its first item's place, its bytes, its values
        block[1] += size
        block[2].append(value)
    done += open_.values()
    return [block[2] for block in sorted(done, key=lambda block: block[0])]


def due(conn) -> bool:
    """Whether enough lines are plain, or rows of text uncompressed, to start a packing run (an
    index count and two lookups, microseconds)."""
    if conn.execute("SELECT count(*) FROM (SELECT 1 FROM messages WHERE block_id IS NULL LIMIT ?)",
                    (DUE_LINES,)).fetchone()[0] >= DUE_LINES:
        return True
    return unsqueezed(conn) >= DUE_LINES


def unsqueezed(conn) -> int:
    """Packed rows whose text packing has not looked at yet (an older vault's, before it
    compressed text): lcm.vault.squeeze's conversion walks them by id, from its mark."""
    try:
        mark = conn.execute("SELECT value FROM vault_meta WHERE key = 'squeezed_through'").fetchone()
    except Exception:  # a vault from before vault_meta, opened read-only
        return 0
    top = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    return max(top - (int(mark[0]) if mark else 0), 0)


def pending(conn) -> int:
    """Lines still stored plain."""
    return conn.execute("SELECT count(*) FROM messages WHERE block_id IS NULL").fetchone()[0]


def running(conn) -> bool:
    """Whether a packing run holds the lock now."""
    fd = _lock(conn)
    if fd is None:
        return True
    if fd != -1:
        os.close(fd)
    return False


def _lock(conn, wait: bool = False):
    """An exclusive flock on `<vault>-pack.lock`, or None when another packing run holds it
    (wait=True: wait for it; a run the hooks started ends within its time budget)."""
    try:
        import fcntl
    except ImportError:
        return -1  # no flock (Windows): runs rely on their in-transaction checks alone
    path = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    if not path:
        return -1
    fd = os.open(path + "-pack.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if not wait:
            os.close(fd)
            return None
        sys.stderr.write("waiting for the packing run the hooks started (at most a minute)...\n")
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _idle_files(conn) -> set:
    cutoff = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - IDLE_SECONDS))
    return {r[0] for r in conn.execute("SELECT path FROM transcripts WHERE updated_at < ?", (cutoff,))}


OPEN_FILES = 256  # files whose partial block packing holds in memory at once (bounds its memory)


def _blocks(conn, everything: bool, idle: set):
    """The plain rows, in id order, cut into blocks: lists of (id, session_id, path, raw, role,
    is_meta, token_count, content) of one
    file and session, at most BLOCK_BYTES (or one larger line). A file's last, partial block
    waits for more lines while under half that, unless `everything` or the file is idle."""
    open_: dict[tuple, list] = {}  # (path, session) -> [rows, bytes]
    last = 0

    def ready(key, size) -> bool:
        return everything or size >= BLOCK_BYTES // 2 or key[0] is None or key[0] in idle

    while True:
        rows = conn.execute("SELECT id, session_id, transcript_path, raw, role, is_meta, token_count, content"
                            " FROM messages WHERE block_id IS NULL AND id > ? ORDER BY id LIMIT 512", (last,)).fetchall()
        if not rows:
            break
        for row in rows:
            key = (row[2], row[1])
            block = open_.get(key)
            # a block never grows past BLOCK_BYTES (one decodes in ~0.3 ms); a larger line (an
            # image, a huge tool result) is a block of its own
            if block and block[1] + len(row[3]) > BLOCK_BYTES:
                del open_[key]  # out of the dict before it is yielded: never yielded twice
                yield block[0]
                block = None
            if block is None:
                if len(open_) >= OPEN_FILES:  # the least recently fed file: packed now or next run
                    oldest = next(iter(open_))
                    rows_, size = open_.pop(oldest)
                    if ready(oldest, size):
                        yield rows_
                block = open_[key] = [[], 0]
            else:
                open_[key] = open_.pop(key)  # most recently fed last
            block[0].append(tuple(row))
            block[1] += len(row[3])
        last = rows[-1][0]
    for key, (rows_, size) in open_.items():
        if ready(key, size):
            yield rows_


def _encode(rows, squeeze=None) -> tuple[bytes, list]:
    """A block's data, and the (text, id, its stored value) of its rows whose text compresses."""
    texts = []
    if squeeze is not None:
        for r in rows:
            stored = squeeze.row(r[4], r[5], r[6], r[7])
            if stored is not r[7]:
                texts.append((stored, r[0], r[7]))
    return lcm.vault.store.encode_block([lcm.vault.store.as_bytes(r[3]) for r in rows]), texts


def _write(conn, batch: list, turns, pool=None, squeeze=None) -> tuple[int, int]:
    """One transaction: the blocks of `batch` whose lines are all still plain, and their rows'
    text compressed (unless it changed meanwhile: a remask). (lines, bytes)."""
    # compressed before the write lock is taken: the transaction only stores the result
    work = lambda rows: _encode(rows, squeeze)  # noqa: E731
    encoded = list(pool.map(work, batch)) if pool is not None else [work(rows) for rows in batch]
    lines = size = 0
    with lcm.vault.db.write_lock(conn, turns=turns):
        for rows, (data, texts) in zip(batch, encoded):
            ids = [r[0] for r in rows]
            still = conn.execute(f"SELECT count(*) FROM messages WHERE block_id IS NULL AND id IN"
                                 f" ({','.join('?' * len(ids))})", ids).fetchone()[0]
            if still != len(ids):
                continue  # another run packed them, or a purge removed some: read again next time
            size += lcm.vault.store.pack_rows(conn, rows, data)
            conn.executemany("UPDATE messages SET content = ? WHERE id = ? AND content = ?", texts)
            lines += len(rows)
    return lines, size


def pack(conn, *, everything: bool = False, time_budget: float | None = None, progress: bool = False,
         wait: bool = False, threads: int = 1) -> dict:
    """Pack the vault's plain lines into blocks, batch by batch; returns counts.

    everything=False (the hooks' detached run): whole blocks, and the last partial block of a
    file only once it has been idle IDLE_SECONDS. everything=True: every plain line now.
    wait: wait for a packing run already at work instead of leaving the work to it. threads:
    blocks compressed at once (zlib lets go of the GIL: ~3/4 of packing is compressing).
    """
    started = time.monotonic()
    doc = {"packed_lines": 0, "packed_bytes": 0, "blocks": 0, "pending_lines": 0, "squeezed_rows": 0, "stopped": None,
           "seconds": 0.0}
    lock = _lock(conn, wait)
    if lock is None:
        doc["stopped"] = "another packing run is at work"
        return doc
    turns = lcm.vault.db.Turns(conn)
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_plain'").fetchone():
        with lcm.vault.db.write_lock(conn, turns=turns):  # an old vault's first packing run
            conn.execute(lcm.vault.store.PLAIN_INDEX)
        doc["indexed_s"] = round(time.monotonic() - started, 3)
    bar = _bar(pending(conn)) if progress else None
    pool = None
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor  # a run by hand only
        pool = ThreadPoolExecutor(max_workers=threads)
    try:
        squeeze = _dictionary(conn, turns)
        idle = set() if everything else _idle_files(conn)
        batch, size = [], 0
        for rows in _blocks(conn, everything, idle):
            batch.append(rows)
            size += sum(len(r[3]) for r in rows)
            if size >= BATCH_BYTES:
                _flush(conn, batch, turns, doc, bar, pool, squeeze)
                batch, size = [], 0
                if time_budget is not None and time.monotonic() - started > time_budget:
                    doc["stopped"] = "time_budget"
                    break
        if batch and not doc["stopped"]:
            _flush(conn, batch, turns, doc, bar, pool, squeeze)
        if squeeze is not None and not doc["stopped"]:
            _squeeze_packed(conn, squeeze, turns, doc, pool, None if time_budget is None else started + time_budget)
        elif not doc["stopped"] and unsqueezed(conn):
            # too little text for a dictionary (one session's): nothing to compress with, and the
            # Stop hook must not start a run for it every turn; rows packed later are compressed
            # by packing once a dictionary exists
            with lcm.vault.db.write_lock(conn, turns=turns):
                conn.execute("INSERT OR REPLACE INTO vault_meta VALUES ('squeezed_through', (SELECT max(id) FROM messages))")
    finally:
        if pool is not None:
            pool.shutdown()
        turns.close()
        if bar is not None:
            bar.close()
        if lock != -1:
            os.close(lock)
    if doc["packed_lines"]:
        # the WAL holds a copy of every page packing wrote: back into the vault, and the WAL
        # emptied (PASSIVE would leave it as large as it grew)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    doc["pending_lines"] = pending(conn)
    doc["seconds"] = round(time.monotonic() - started, 3)
    return doc


def _dictionary(conn, turns):
    """The encoder of the vault's text dictionary; a vault without one (filled by the hooks
    alone, or by an lcm from before) gets one built from a sample of its rows, spread over
    its ids. None while it holds too little text to learn from."""
    found = lcm.vault.squeeze.encoder(conn)
    if found is not None:
        return found
    top = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    ids = sorted({1 + i * top // (3 * lcm.vault.squeeze.SAMPLE_ROWS) for i in range(3 * lcm.vault.squeeze.SAMPLE_ROWS)})
    texts = []
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        texts += [(r[0], r[1]) for r in conn.execute(f"SELECT session_id, lcm_text(content) FROM messages WHERE id IN"
                                                     f" ({','.join('?' * len(part))})", part)
                  if r[1] and len(r[1]) >= lcm.vault.squeeze.MIN_BYTES]
    data = lcm.vault.squeeze.build_dictionary(texts[:lcm.vault.squeeze.SAMPLE_ROWS])
    if len(data) < 1024:
        return None
    with lcm.vault.db.write_lock(conn, turns=turns):
        if lcm.vault.squeeze.encoder(conn) is None:  # another run made one meanwhile: theirs
            lcm.vault.squeeze.store_dictionary(conn, data, len(texts[:lcm.vault.squeeze.SAMPLE_ROWS]))
    return lcm.vault.squeeze.encoder(conn)


SQUEEZE_ROWS = 512  # rows a conversion batch reads (one short write transaction)


def _squeeze_packed(conn, squeeze, turns, doc: dict, pool=None, deadline: float | None = None) -> None:
    """Convert an older vault's text: the packed rows above the mark `squeezed_through` whose
    text is still plain get it compressed, SQUEEZE_ROWS at a time, each batch compressed
    outside any transaction and written in a short one that first checks the text is unchanged.
    The mark moves with each batch: killed at any point, the next run goes on from there.
    The full-text index is not touched: it holds the text's words, and they are the same."""
    mark = conn.execute("SELECT value FROM vault_meta WHERE key = 'squeezed_through'").fetchone()
    last = int(mark[0]) if mark else 0
    doc.setdefault("squeezed_rows", 0)
    while True:
        rows = conn.execute("SELECT id, role, is_meta, token_count, content, typeof(content) = 'text'"
                            " AND block_id IS NOT NULL FROM messages WHERE id > ? ORDER BY id LIMIT ?",
                            (last, SQUEEZE_ROWS)).fetchall()
        if not rows:
            return
        # a row whose line is still plain is packing's: its text is compressed with its line
        todo = [r for r in rows if r[5]]
        work = lambda r: squeeze.row(r[1], r[2], r[3], r[4])  # noqa: E731
        stored = list(pool.map(work, todo)) if pool is not None else [work(r) for r in todo]
        updates = [(new, r[0], r[4]) for r, new in zip(todo, stored) if new is not r[4]]
        with lcm.vault.db.write_lock(conn, turns=turns):
            conn.executemany("UPDATE messages SET content = ? WHERE id = ? AND content = ?", updates)
            last = rows[-1][0]
            conn.execute("INSERT OR REPLACE INTO vault_meta VALUES ('squeezed_through', ?)", (last,))
        doc["squeezed_rows"] += len(updates)
        if deadline is not None and time.monotonic() > deadline:
            doc["stopped"] = "time_budget"
            return


def _flush(conn, batch, turns, doc, bar, pool=None, squeeze=None) -> None:
    began = time.monotonic()
    lines, size = _write(conn, batch, turns, pool, squeeze)
    doc["longest_write_s"] = round(max(doc.get("longest_write_s", 0), time.monotonic() - began), 3)
    doc["packed_lines"] += lines
    doc["packed_bytes"] += size
    doc["blocks"] += len(batch)
    if bar is not None:
        bar.update(lines)


def _bar(total: int):
    """A bar (in lines) on stderr when it is a terminal, else None."""
    return lcm.base.progress.bar(total, "pack", "line")


def vacuum(conn) -> dict:
    """Give the free pages that packing left back to the disk (VACUUM: the vault is locked for
    writers meanwhile, and needs free disk about its own packed size). Returns bytes before and after."""
    path = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    before = _file_bytes(path)
    conn.execute("VACUUM")
    # VACUUM wrote the whole vault through the WAL: empty it, or it keeps that size on disk. A
    # hook reading at that moment makes the checkpoint report busy; hooks are short, so retry
    for _ in range(50):
        if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
            break
        time.sleep(0.1)
    return {"bytes_before": before, "bytes_after": _file_bytes(path)}


def _file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if p and os.path.exists(p))


def ratio(conn) -> dict:
    """Vault bytes against the transcript bytes it holds (cheap: sizes and counts only), and
    whether any line still waits to be packed (an old vault not yet converted, or recent turns)."""
    path = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    vault = _file_bytes(path)
    transcripts = conn.execute("SELECT coalesce(sum(byte_offset), 0) FROM transcripts").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
    plain = pending(conn)
    return {"vault_bytes": vault, "transcript_bytes": transcripts, "free_bytes": free,
            "ratio": round(vault / transcripts, 3) if transcripts else None, "plain_lines": plain}


def run(conn, *, everything: bool, time_budget: float | None, progress: bool, then_vacuum: bool) -> dict:
    """lcm_compact.py --pack: pack (a run by hand, without a budget, waits for one the hooks
    started), then VACUUM when asked; the counts with the vault's ratio."""
    # by hand (no budget): every core compresses; the hooks' detached run keeps to one, beside
    # the session it runs next to
    doc = pack(conn, everything=everything, time_budget=time_budget, progress=progress, wait=time_budget is None,
               threads=(os.cpu_count() or 1) if time_budget is None else 1)
    if then_vacuum:
        doc["vacuum"] = vacuum(conn)
    doc.update(ratio(conn))
    return doc


def report_text(doc: dict) -> str:
    """lcm_compact.py --pack's report for a person (its --json prints `doc` itself)."""
    return (f"packed {doc['packed_lines']} lines ({doc['packed_bytes']} bytes) into {doc['blocks']} blocks in"
            f" {doc['seconds']} s; {doc['plain_lines']} lines still plain" + (f" ({doc['stopped']})" if doc["stopped"] else "")
            + f"\nvault {doc['vault_bytes']} bytes for {doc['transcript_bytes']} bytes of transcripts (ratio"
            f" {doc['ratio']}; {doc['free_bytes']} bytes free inside: --vacuum gives them back)")
