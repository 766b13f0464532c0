"""A bundle: sessions that travel between vaults (lcm export --bundle FILE, lcm ingest FILE).

Format, version 1. One line of JSON, uncompressed, says what the file is:

    {"lcm_bundle": 1, "compression": "gzip", "masked": true, "created_at": "...",
     "sessions": 3, "messages": 1234, "purged": 5}

then a gzip stream of JSON lines, in this order:

    {"lcm": "purged", "uuids": [[uuid, purged_at, session_id], ...]}      the purge lists
    {"lcm": "session", "id": ..., "project": ..., "title": ...}          one per session
    {"lcm": "lines", "path": ..., "session": ..., "count": N, "uuids": [...]}   then N transcript lines

A run of lines is the stored original lines (masked with lcm.base.mask.mask_line unless the bundle
is unmasked) of one transcript file of the source machine, in vault order; the path is that
file's, so a line is read there as it was read from its file (its session, its sub-agent).
A bundle never holds a purged message: it is made from what the vault holds, which never
includes one.

Merging one is an ingest: lines are stored by uuid (a line already here is left as it is: the
merge is idempotent), byte for byte as the bundle holds them. Its purge lists are recorded
first and every message here they name is purged (lcm.care.purge, the one delete path), so a
purge made on either side holds on both, and a transcript or a later bundle never brings the
message back. Stdlib only (gzip, zlib).
"""
from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib

import lcm.base.config
import lcm.base.mask
import lcm.base.progress
import lcm.capture.bulk
import lcm.care.purge
import lcm.vault.db
import lcm.vault.purgelist
import lcm.vault.schema
import lcm.vault.store
from lcm.base.errors import LcmError

VERSION = 1
MAGIC = b'{"lcm_bundle": '  # how the header line starts: lcm_ingest.py tells a bundle from a transcript by it
HEADER_BYTES = 65536  # most bytes of the header line
RUN_LINES = 1000  # most lines of one run: a merge reads and stores a run at a time
PURGED_CHUNK = 1000  # uuids of one purged record


def is_bundle(path) -> bool:
    """Whether the file at `path` starts like a bundle (a transcript starts otherwise)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _progress(total: int, what: str):
    """A bar (in messages) on stderr when it is a terminal and the bundle is large enough to wait for, else None."""
    return lcm.base.progress.bar(total, what, "msg") if total >= 1000 else None


def choose_sessions(conn, session: str | None = None, everything: bool = False, since: str | None = None) -> list[str]:
    """The sessions a bundle holds: one (an id already resolved), all, or those active since `since`
    (a UTC ISO time)."""
    if session is not None:
        return [session]
    if since is not None:
        return [r[0] for r in conn.execute("SELECT session_id FROM sessions WHERE last_at >= ? ORDER BY first_at",
                                           (since,))]
    if everything:
        return [r[0] for r in conn.execute("SELECT session_id FROM sessions ORDER BY first_at")]
    raise LcmError("a bundle needs its sessions", "add --session ID, --all or --since WHEN")


def _purges(conn, sessions: list[str], everything: bool, since: str | None) -> list[tuple]:
    """The purge lists a bundle carries: the uuids purged from its sessions, those purged before
    lcm kept a purge's session (NULL), and with --all every purge, with --since those made since."""
    if everything:
        return conn.execute("SELECT uuid, purged_at, session_id FROM purged ORDER BY purged_at, uuid").fetchall()
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS bundle_sessions (id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.bundle_sessions")
    conn.executemany("INSERT OR IGNORE INTO temp.bundle_sessions VALUES (?)", ((s,) for s in sessions))
    return conn.execute("SELECT uuid, purged_at, session_id FROM purged WHERE session_id IS NULL"
                        " OR session_id IN (SELECT id FROM temp.bundle_sessions) OR purged_at >= ?"
                        " ORDER BY purged_at, uuid", (since or "\uffff",)).fetchall()


def _record(doc: dict) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


def write(conn, path: str, sessions: list[str], masked: bool = True, everything: bool = False,
          since: str | None = None, progress: bool = False) -> dict:
    """Write the bundle of `sessions` to `path` (beside it first, then renamed into place: the file
    is whole or absent; 0600, it holds conversations). Returns what it holds."""
    own = not conn.in_transaction
    if own:  # one snapshot: a purge made while the bundle is written is in it whole or not at all
        conn.execute("BEGIN")
    try:
        return _write(conn, path, sessions, masked, everything, since, progress)
    finally:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")  # it only read


def _write(conn, path: str, sessions: list[str], masked: bool, everything: bool, since: str | None,
           progress: bool) -> dict:
    purged = _purges(conn, sessions, everything, since)
    counts = {}
    for i in range(0, len(sessions), 500):
        chunk = sessions[i:i + 500]
        counts.update(conn.execute(f"SELECT session_id, count(*) FROM messages WHERE session_id IN"
                                   f" ({','.join('?' * len(chunk))}) GROUP BY session_id", chunk).fetchall())
    total = sum(counts.values())
    header = {"lcm_bundle": VERSION, "compression": "gzip", "masked": masked, "created_at": lcm.base.config.now_iso(),
              "sessions": len(sessions), "messages": total, "purged": len(purged)}
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path) and not os.path.isfile(path):
        raise LcmError(f"--bundle {path} is not a regular file", "pass the path of a file to write")
    if not os.path.isdir(directory):
        raise LcmError(f"cannot write {path}: {directory} is not a directory", "pass --bundle FILE in an existing directory")
    fd, tmp = tempfile.mkstemp(prefix=".lcm-bundle.", dir=directory)
    bar = _progress(total, "bundle") if progress else None
    mask = lcm.base.mask.mask_line if masked else None
    try:
        with os.fdopen(fd, "wb") as raw:
            raw.write(json.dumps(header).encode() + b"\n")
            # level 1: transcripts compress to about 0.25 of their size at 6 and 0.3 at 1, which
            # writes them several times faster
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as out:
                for i in range(0, len(purged), PURGED_CHUNK):
                    out.write(_record({"lcm": "purged", "uuids": [list(r) for r in purged[i:i + PURGED_CHUNK]]}))
                for sid in sessions:
                    row = conn.execute("SELECT project, title FROM sessions WHERE session_id = ?", (sid,)).fetchone()
                    title = row["title"] if row else None
                    out.write(_record({"lcm": "session", "id": sid, "project": row["project"] if row else None,
                                       "title": lcm.base.mask.mask(title) if masked and title else title}))
                    _write_lines(conn, out, sid, mask, bar)
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        if bar is not None:
            bar.close()
    os.replace(tmp, path)
    return {**header, "bundle": os.path.abspath(path), "bytes": os.path.getsize(path)}


def _write_lines(conn, out, sid: str, mask, bar) -> None:
    """A session's stored lines in vault order, in runs of one source file each; a run's record
    lists its lines' uuids, so a merge skips those it holds without parsing them."""
    # a packed line's file is named once, on its block
    block_paths = dict(conn.execute("SELECT id, transcript_path FROM blocks WHERE session_id = ?", (sid,)).fetchall())
    rows = conn.execute(f"SELECT transcript_path, block_id, uuid, {lcm.vault.store.LINE} FROM messages WHERE session_id = ?"
                        " AND uuid NOT IN (SELECT uuid FROM purged) ORDER BY id", (sid,))
    run_path, run, uuids = None, [], []

    def flush():
        out.write(_record({"lcm": "lines", "path": run_path, "session": sid, "count": len(run), "uuids": uuids}))
        out.write(b"".join(run))
        if bar is not None:
            bar.update(len(run))

    for path, block, uuid, line in rows:
        path = path or block_paths.get(block) or f"{sid}.jsonl"
        if run and (path != run_path or len(run) >= RUN_LINES):
            flush()
            run, uuids = [], []
        run_path = path
        line = lcm.vault.store.as_bytes(line)
        run.append((mask(line) if mask else line) + b"\n")
        uuids.append(uuid)
    if run:
        flush()


def read_header(path: str) -> tuple[dict, object]:
    """(the header, the open file positioned after it), or an LcmError saying what the file is not."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise LcmError(f"cannot read {path}: {exc.strerror}", "check the path and its permissions") from None
    line = f.readline(HEADER_BYTES)
    try:
        header = json.loads(line)
        version = header["lcm_bundle"]
    except (ValueError, KeyError, TypeError):
        f.close()
        raise LcmError(f"{path} is not an lcm bundle", "make one with lcm_export.py --bundle FILE --all") from None
    if version != VERSION or header.get("compression") != "gzip":
        f.close()
        raise LcmError(f"{path} is a bundle of format {version} ({header.get('compression')}); this lcm reads format {VERSION}",
                       "upgrade lcm on this machine, or write the bundle with the same lcm version")
    return header, f


def merge(conn, path: str, progress: bool = False) -> dict:
    """Merge the bundle at `path` into the vault (see the module docstring); returns its counts.

    Its runs of lines are stored as a bulk import stores files (lcm.capture.bulk.ingest_runs:
    parsed ahead in parser processes, packed and compressed, a large group per transaction); a
    run's lines stored here already are skipped unparsed."""
    header, f = read_header(path)
    result = {"bundle": os.path.abspath(path), "masked": header.get("masked"), "sessions": 0, "messages_added": 0,
              "messages_skipped": 0, "purges_recorded": 0, "messages_purged": 0, "malformed_lines": 0}
    lines = header.get("messages") if isinstance(header.get("messages"), int) else 0
    bar = _progress(lines, "merge") if progress else None
    titles: dict[str, str] = {}
    try:
        with f:
            fresh = conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone() is None
            stored = lcm.capture.bulk.ingest_runs(conn, _runs(conn, f, path, result, titles, fresh), lines, bar=bar)
        _titles(conn, titles)
    finally:
        if bar is not None:
            bar.close()
    result["messages_added"] = stored["messages_added"]
    result["messages_skipped"] += stored["messages_skipped"]
    result["malformed_lines"] = stored["malformed_lines"]
    return result


def _runs(conn, f, path: str, result: dict, titles: dict, fresh: bool):
    """The bundle's runs of lines as lcm.capture.bulk.ingest_runs takes them (path, the lines not
    stored here yet, how many the run held), its purge lists applied and its titles collected
    on the way (into `result` and `titles`). fresh: the vault held no message when the merge
    began, so none of the bundle's (each uuid once) is stored here yet: not looked up. A damaged
    or cut file is an LcmError (the groups stored before it are kept)."""
    body = _Body(f)
    try:
        while True:
            line = body.line()
            if line is None:
                return
            record = _parse_record(line, path)
            kind = record.get("lcm")
            if kind == "purged":  # first in a bundle; anywhere, the purged uuids' inserts are refused from now on
                _apply_purges(conn, record.get("uuids") or [], result)
                fresh = False
            elif kind == "session":
                result["sessions"] += 1
                if isinstance(record.get("id"), str) and isinstance(record.get("title"), str) and record["title"]:
                    titles[record["id"]] = record["title"]
            elif kind == "lines":
                count = record.get("count")
                if not isinstance(count, int) or count < 0 or not isinstance(record.get("path"), str):
                    raise LcmError(f"{path} is damaged (a run of lines without its path or count)",
                                   "write the bundle again on the machine it came from")
                lines = body.lines(count)
                if len(lines) != count or not all(lines):
                    raise LcmError(f"{path} is cut short", "copy the whole file again, or write it again")
                known = set() if fresh else _known(conn, record.get("uuids"), count)
                if known:  # stored here already: not parsed again (a second merge reads and skips)
                    result["messages_skipped"] += len(known)
                    lines = [ln for i, ln in enumerate(lines) if i not in known]
                yield record["path"], lines, count
    except (OSError, EOFError, zlib.error) as exc:
        raise LcmError(f"{path} is damaged or cut short ({exc})",
                       "copy the whole file again; the messages merged before the damage are kept") from None


class _Body:
    """The lines of a bundle's gzip stream (its members one after another, each checked by zlib
    against its CRC), decompressed a megabyte at a time and split in one go: reading them with
    GzipFile.readline, a call per line, cost a merge's writer 2 s of its 15 at 100k messages."""

    def __init__(self, f):
        self.f, self.z = f, zlib.decompressobj(31)  # 31: a gzip header and trailer
        self.buffered, self.at, self.rest, self.ended = [], 0, b"", False

    def line(self) -> bytes | None:
        """The next line without its newline; None at the end of the stream."""
        while self.at >= len(self.buffered):
            if not self._fill():
                return None
        self.at += 1
        return self.buffered[self.at - 1]

    def lines(self, count: int) -> list[bytes]:
        """The next `count` lines (fewer at the end of the stream)."""
        out = []
        while len(out) < count:
            if self.at >= len(self.buffered) and not self._fill():
                break
            take = self.buffered[self.at:self.at + count - len(out)]
            self.at += len(take)
            out += take
        return out

    def _fill(self) -> bool:
        """Decompress the next chunk into whole lines; False at the end of the stream. EOFError
        when the file ends inside a gzip member."""
        if self.ended:
            return False
        data = self.f.read(1 << 20)
        if not data:
            if not self.z.eof:
                raise EOFError("the compressed stream ends before its end marker")
            self.ended = True
            self.buffered, self.at = [self.rest] if self.rest else [], 0  # a last line without its newline
            return bool(self.buffered)
        text = b""
        while data:
            if self.z.eof:  # the next member
                if not data.strip(b"\0"):
                    break  # padding after the last member, as gzip allows
                self.z = zlib.decompressobj(31)
            text += self.z.decompress(data)
            data = self.z.unused_data
        lines = (self.rest + text).split(b"\n")
        self.rest = lines.pop()
        self.buffered, self.at = lines, 0
        return True


def _known(conn, uuids, count: int) -> set[int]:
    """Positions in a run of the lines whose uuid (as the run's record lists them) is stored here
    or purged. The line stays the authority: one listed wrongly is parsed and deduplicated as
    any line."""
    if not isinstance(uuids, list) or len(uuids) != count or not all(isinstance(u, str) for u in uuids):
        return set()
    found: set[str] = set()
    for i in range(0, count, 400):
        chunk = uuids[i:i + 400]
        marks = ",".join("?" * len(chunk))
        found.update(r[0] for r in conn.execute(f"SELECT uuid FROM messages WHERE uuid IN ({marks})"
                                                f" UNION ALL SELECT uuid FROM purged WHERE uuid IN ({marks})", chunk + chunk))
    return {i for i, u in enumerate(uuids) if u in found}


def _parse_record(line: bytes, path: str) -> dict:
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if not isinstance(record, dict) or "lcm" not in record:
        raise LcmError(f"{path} is damaged (a line where a record was due)", "write the bundle again on the machine it came from")
    return record


def _titles(conn, titles: dict) -> None:
    """Each session's title where this vault has none (its lines brought the rest)."""
    if titles:
        with lcm.vault.db.write_lock(conn):
            conn.executemany("UPDATE sessions SET title = ? WHERE session_id = ? AND title IS NULL",
                             [(title, sid) for sid, title in titles.items()])


def _apply_purges(conn, uuids: list, result: dict) -> None:
    """Record the bundle's purged uuids (never imported from now on), then purge the messages
    here that they name."""
    rows = [(u[0], u[1] if isinstance(u[1], str) else lcm.base.config.now_iso(), u[2] if isinstance(u[2], str) else None)
            for u in uuids if isinstance(u, list) and len(u) == 3 and isinstance(u[0], str)]
    if not rows:
        return
    if conn.in_transaction:
        conn.execute("COMMIT")
    # the list beside the vault first, as a purge here does: it outlives the vault file
    lcm.vault.purgelist.append(lcm.care.purge.vault_path(conn), [r[0] for r in rows])
    with lcm.vault.db.transaction(conn):
        conn.execute(lcm.vault.schema.PURGED_TRIGGER)
        before = conn.total_changes
        conn.executemany("INSERT OR IGNORE INTO purged (uuid, purged_at, session_id) VALUES (?, ?, ?)", rows)
        result["purges_recorded"] += conn.total_changes - before
        ids = []
        for i in range(0, len(rows), 500):
            chunk = [r[0] for r in rows[i:i + 500]]
            ids += [r[0] for r in conn.execute(f"SELECT id FROM messages WHERE uuid IN ({','.join('?' * len(chunk))})", chunk)]
    if ids:
        sel = lcm.care.purge.Selection("messages a bundle says were purged")
        sel.message_ids = sorted(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            sel.sessions.update(r[0] for r in conn.execute(
                f"SELECT DISTINCT session_id FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        lcm.care.purge.purge(conn, sel)
        result["messages_purged"] += len(ids)
