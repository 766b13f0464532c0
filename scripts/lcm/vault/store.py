"""Stored transcript lines: the one module that knows how `messages.raw` is kept.

A line is stored in one of two ways, told apart by the first byte of `messages.raw`:

- plain: `raw` is the line itself, byte for byte (what ingest and the hooks write: cheap). A
  transcript line is JSON, so it never starts with a byte below 0x09.
- packed (tag BLOCK): the line sits in `blocks.data`, compressed with many other lines of the
  same transcript file; `messages.block_id` and `block_pos` say where. `raw` keeps only the tag
  (and the word `tool_use_id` when the line holds it: TALK_WHERE and search's `is_tool` test it
  with instr(), and must answer as they did for the plain line).

A block's `data` starts with its own codec byte (ZLIB: zlib, which every Python 3.9+ has), then
the payload: the count of lines, each line's length, the lines (all little-endian uint32).
Lines of one file sit together because that is where they repeat each other (an Edit result
quotes the whole file again): one block compresses to ~0.27 of its lines, one line alone ~0.40.

Readers never look at `raw` themselves: SQL selects `LINE` (the function lcm_line, which
connect() installs on every connection), Python calls `line()` or `lines_of()`. Blocks are never
changed in place: a purge writes a new block without the purged lines (ids are AUTOINCREMENT,
never reused), so a decoded block may be cached for the connection's life.
"""
from __future__ import annotations

import sqlite3

from lcm.base.errors import LcmError

BLOCK = 2  # messages.raw tag: the line is in a block
ZLIB = 1  # blocks.data codec: zlib of the framed lines
TOOL_MARK = b"tool_use_id"
LINE = "lcm_line(raw, block_id, block_pos)"  # a message's original line, in SQL
CACHE_BLOCKS = 8  # decoded blocks each connection keeps (a page of expand or export stays in 1-2)

def _add_columns(conn: sqlite3.Connection) -> None:
    """messages.block_id and block_pos, unless there already: a vault taken back to an earlier
    schema version (its newer tables dropped, user_version lowered) keeps the columns it had."""
    have = {r[1] for r in conn.execute("PRAGMA main.table_info(messages)")}
    # the block holding this message's original line (NULL: raw holds the line itself)
    if "block_id" not in have:
        conn.execute("ALTER TABLE messages ADD COLUMN block_id INTEGER")
    if "block_pos" not in have:
        conn.execute("ALTER TABLE messages ADD COLUMN block_pos INTEGER")  # its place in that block, from 0


MIGRATION = [
    """CREATE TABLE IF NOT EXISTS blocks (
        id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a decoded block may be cached
        session_id TEXT NOT NULL,
        transcript_path TEXT,               -- the file its lines came from (once here, not on every row)
        first_id INTEGER NOT NULL,          -- messages.id of its first and last line
        last_id INTEGER NOT NULL,
        line_count INTEGER NOT NULL,
        line_bytes INTEGER NOT NULL,        -- the lines' total length before compression
        data BLOB NOT NULL                  -- codec byte (ZLIB) + compressed framed lines
    )""",
    "CREATE INDEX IF NOT EXISTS blocks_session ON blocks(session_id)",
    _add_columns,
    lambda conn: conn.execute(PLAIN_INDEX) if conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone() is None
    else None,  # an old vault's gets built by its first packing run (see PLAIN_INDEX)
]

# Lines still plain: what packing and the Stop hook's due check look for (~6 bytes a line, empty
# once packed). On a vault from before blocks, building it reads every row (9 s at 1M messages on
# a loaded machine): the first packing run does that, detached, rather than the migration, which
# a hook may run.
PLAIN_INDEX = "CREATE INDEX IF NOT EXISTS messages_plain ON messages(block_id) WHERE block_id IS NULL"


LEVEL = 5  # zlib level: lines pack to 0.276 of their bytes at ~57 MB/s at 4; 0.266 at ~38 at 5, 0.256 at ~22 at 6
#            (bench corpus, one core): the first import compresses ~1 GB of lines per 300,000 messages in
#            its parser processes; 6 made it 1.25x slower. A restored block is packed at the level that
#            gives back the damaged block's size (older vaults packed at 6, then 4), so it comes back as
#            the very bytes it was


def encode_block(lines: list[bytes], level: int = LEVEL) -> bytes:
    import struct
    import zlib
    head = struct.pack(f"<I{len(lines)}I", len(lines), *map(len, lines))
    return bytes([ZLIB]) + zlib.compress(head + b"".join(lines), level)


class DamagedBlock(LcmError):
    """A stored block whose lines cannot be read back (bit rot, a bad sector: the SQLite file
    itself may be sound). Every reader stops on it with this error, never a traceback."""


DAMAGE_HINT = ("run lcm_doctor.py: it names what is damaged, and lcm_doctor.py --fix restores it from the"
               " transcript or a backup; other sessions are unaffected")


def decode_block(data: bytes, newer_schema: bool = False) -> list[bytes]:
    """The lines of a block's data; ValueError (or zlib.error) when they cannot be read whole.
    A codec byte this lcm does not know is damage, unless the vault's schema is newer than
    this lcm (newer_schema): only a newer lcm could have written another codec."""
    import struct
    import zlib
    if not data or data[0] != ZLIB:
        if newer_schema:
            raise ValueError(f"unknown block codec {data[:1]!r}: this vault was written by a newer lcm")
        raise ValueError(f"codec byte {data[:1]!r} is not one lcm writes")
    payload = zlib.decompress(data[1:])  # zlib's own checksum (adler32) covers every byte
    if len(payload) < 4:
        raise ValueError("block payload is cut short")
    count = struct.unpack_from("<I", payload)[0]
    if 4 + 4 * count > len(payload):
        raise ValueError("block line count does not fit its payload")
    sizes = struct.unpack_from(f"<{count}I", payload, 4)
    at = 4 + 4 * count
    if at + sum(sizes) != len(payload):
        raise ValueError("block line lengths do not add up to its payload")
    out = []
    for size in sizes:
        out.append(payload[at:at + size])
        at += size
    return out


def verify_block(row) -> str | None:
    """Why the block row (id, line_count, line_bytes, data) cannot be read whole, or None."""
    import zlib
    try:
        lines = decode_block(bytes(row[3]))
    except (ValueError, zlib.error) as exc:
        return str(exc)
    if len(lines) != row[1] or sum(map(len, lines)) != row[2]:
        return f"holds {len(lines)} lines of {sum(map(len, lines))} bytes where {row[1]} of {row[2]} were stored"
    return None


def damage_error(conn: sqlite3.Connection, block_id: int, why: str) -> DamagedBlock:
    """The error a reader stops on: which session, how many messages, from when to when."""
    try:
        row = conn.execute("SELECT session_id, count(*), min(created_at), max(created_at) FROM messages"
                           " WHERE block_id = ?", (block_id,)).fetchone()
    except sqlite3.Error:
        row = None
    if row is None or row[0] is None:
        return DamagedBlock(f"stored block {block_id} is damaged ({why})", DAMAGE_HINT)
    span = f", {row[2]} to {row[3]}" if row[2] else ""
    return DamagedBlock(f"stored block {block_id} of session {row[0]} is damaged ({why}): the original lines of"
                        f" its {row[1]} messages{span} cannot be read", DAMAGE_HINT)


def damaged_block_ids(conn: sqlite3.Connection) -> list[int]:
    """Every block whose lines cannot be read whole, and every block a message points at that is
    missing (reads each block once: a full pass over the stored lines)."""
    bad = [r[0] for r in conn.execute("SELECT id, line_count, line_bytes, data FROM blocks") if verify_block(r)]
    bad += [r[0] for r in conn.execute("SELECT DISTINCT block_id FROM messages WHERE block_id IS NOT NULL"
                                       " AND block_id NOT IN (SELECT id FROM blocks)")]
    return sorted(set(bad))


def function_error(exc: BaseException) -> DamagedBlock | None:
    """The DamagedBlock behind an SQL error, when lcm_line() raised it: sqlite3 reports only
    "user-defined function raised exception", so the reader keeps the error it raised."""
    if isinstance(exc, sqlite3.OperationalError) and "user-defined function raised exception" in str(exc):
        return last_error[0] if last_error else DamagedBlock("a stored block is damaged", DAMAGE_HINT)
    return None


last_error: list = []  # the last DamagedBlock lcm_line() raised in this process


def stub(line: bytes) -> bytes:
    """What `raw` keeps of a packed line (see the module docstring)."""
    return bytes([BLOCK]) + (TOOL_MARK if TOOL_MARK in line else b"")


class Reader:
    """Original lines of one connection's vault, with the last few decoded blocks cached."""

    def __init__(self, conn: sqlite3.Connection, newest: int | None = None):
        import weakref
        self.newest = newest  # the schema version this lcm writes (a codec it does not know is then damage)
        # weak when it can be (lcm.vault.db.Connection): the connection holds this reader as its SQL
        # function, and a strong reference back would keep it from ever being freed and closed
        try:
            self.conn = weakref.ref(conn)
        except TypeError:  # a plain sqlite3.Connection
            self.conn = lambda: conn
        self.cache: dict[int, list[bytes]] = {}

    def block(self, block_id: int) -> list[bytes]:
        lines = self.cache.get(block_id)
        if lines is None:
            import zlib
            conn = self.conn()
            row = conn.execute("SELECT data FROM blocks WHERE id = ?", (block_id,)).fetchone()
            if row is None:
                raise self._failed(damage_error(conn, block_id, "its row is missing"))
            try:
                lines = decode_block(bytes(row[0]), _newer_schema(conn, self.newest))
            except (ValueError, zlib.error) as exc:
                raise self._failed(damage_error(conn, block_id, str(exc))) from None
            if len(self.cache) >= CACHE_BLOCKS:
                self.cache.pop(next(iter(self.cache)))
            self.cache[block_id] = lines
        return lines

    @staticmethod
    def _failed(error: DamagedBlock) -> DamagedBlock:
        last_error[:] = [error]
        return error

    def line(self, raw, block_id, block_pos):
        if block_id is None:
            return raw
        lines = self.block(block_id)
        if not isinstance(block_pos, int) or not 0 <= block_pos < len(lines):
            raise self._failed(damage_error(self.conn(), block_id, f"it holds no line {block_pos!r}"))
        return lines[block_pos]


def _newer_schema(conn, newest: int | None) -> bool:
    """Whether the vault's schema is newer than `newest`, the one this lcm writes."""
    if newest is None:
        return False
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0] > newest
    except sqlite3.Error:
        return False


def install(conn: sqlite3.Connection, newest: int | None = None) -> None:
    """Make lcm_line(raw, block_id, block_pos) callable in this connection's SQL. newest: the
    schema version this lcm writes (lcm.vault.schema.SCHEMA_VERSION), so that a block codec it
    does not know reads as "written by a newer lcm" only in a vault whose schema is newer."""
    reader = Reader(conn, newest)
    conn.create_function("lcm_line", 3, reader.line, deterministic=True)


def before_blocks(conn: sqlite3.Connection) -> None:
    """A vault opened read-only before its migration to blocks (a read command right after an
    upgrade, before any hook ran): every line is plain, and a temp view named messages (temp
    shadows main) gives readers the two columns LINE names."""
    columns = {r[1] for r in conn.execute("PRAGMA main.table_info(messages)")}
    if columns and "block_id" not in columns:
        conn.execute("CREATE TEMP VIEW messages AS SELECT *, NULL AS block_id, NULL AS block_pos FROM main.messages")


def line(conn: sqlite3.Connection, message_id: int) -> bytes | None:
    """The original line of one message (None when there is no such message)."""
    row = conn.execute(f"SELECT {LINE} FROM messages WHERE id = ?", (message_id,)).fetchone()
    return None if row is None else as_bytes(row[0])


def as_bytes(raw) -> bytes:
    """A stored line as bytes (a vault from long ago may hold some lines as text)."""
    return raw if isinstance(raw, bytes) else str(raw).encode("utf-8", "surrogatepass")


# ---------------------------------------------------------------------------
# Writing: packing plain lines into blocks, and taking lines out of blocks (purge)
# ---------------------------------------------------------------------------

def pack_rows(conn: sqlite3.Connection, rows: list, data: bytes | None = None) -> int:
    """Pack plain rows (id, session_id, transcript_path, raw; one file, in id order) into one new
    block, inside the caller's transaction; `data`: their encode_block, when the caller made it
    before taking the write lock. Returns the bytes of lines packed."""
    lines = [as_bytes(r[3]) for r in rows]
    block_id = _new_block(conn, rows[0][1], rows[0][2], [r[0] for r in rows], lines, data)
    # the row keeps no copy of its line, and its path lives in the block
    conn.executemany("UPDATE messages SET raw = ?, block_id = ?, block_pos = ?, transcript_path = NULL WHERE id = ?",
                     ((stub(line_), block_id, pos, r[0]) for pos, (r, line_) in enumerate(zip(rows, lines))))
    return sum(map(len, lines))


def _new_block(conn, session_id, path, ids: list[int], lines: list[bytes], data: bytes | None = None) -> int:
    return conn.execute(
        "INSERT INTO blocks (session_id, transcript_path, first_id, last_id, line_count, line_bytes, data)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session_id, path, ids[0], ids[-1], len(lines), sum(map(len, lines)), data or encode_block(lines))).lastrowid


def remove_lines(conn: sqlite3.Connection, message_ids) -> dict:
    """Take these messages' lines out of their blocks, inside the caller's transaction (before
    the rows are deleted): each block holding one is rewritten without it and the old block
    deleted, so no compressed copy of a removed line survives (with secure_delete on, its pages
    are zeroed too). A damaged block cannot be rewritten: it is deleted whole, since it still
    holds the removed lines' bytes; its other messages, unreadable already, keep their rows
    (lcm_doctor.py --fix restores their lines from a transcript or backup).
    Returns {"rewritten": blocks, "unreadable": removed messages whose block was damaged,
    "others": ids of kept messages whose damaged block went with them}."""
    ids = sorted(set(message_ids))
    found: dict[int, None] = {}
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        for (block_id,) in conn.execute(f"SELECT DISTINCT block_id FROM messages WHERE block_id IS NOT NULL"
                                        f" AND id IN ({','.join('?' * len(part))})", part):
            found[block_id] = None
    gone = set(ids)
    reader = Reader(conn)
    doc = {"rewritten": 0, "unreadable": 0, "others": []}
    for block_id in found:
        members = conn.execute("SELECT id, block_pos FROM messages WHERE block_id = ? ORDER BY block_pos",
                               (block_id,)).fetchall()
        try:
            lines = reader.block(block_id)
            keep = [(m[0], lines[m[1]]) for m in members if m[0] not in gone]
        except (DamagedBlock, IndexError):
            conn.execute("DELETE FROM blocks WHERE id = ?", (block_id,))
            doc["unreadable"] += sum(m[0] in gone for m in members)
            doc["others"] += [m[0] for m in members if m[0] not in gone]
            continue
        row = conn.execute("SELECT session_id, transcript_path FROM blocks WHERE id = ?", (block_id,)).fetchone()
        conn.execute("UPDATE messages SET block_id = NULL, block_pos = NULL WHERE block_id = ?", (block_id,))
        conn.execute("DELETE FROM blocks WHERE id = ?", (block_id,))
        if keep:  # the survivors in a new block (a new id: no cache can serve the old one)
            new = _new_block(conn, row[0], row[1], [k[0] for k in keep], [k[1] for k in keep])
            conn.executemany("UPDATE messages SET block_id = ?, block_pos = ? WHERE id = ?",
                             ((new, pos, k[0]) for pos, k in enumerate(keep)))
        doc["rewritten"] += 1
    return doc


def restore_block(conn: sqlite3.Connection, block_id: int, members: list[tuple[int, bytes]]) -> dict:
    """Put lines read again from elsewhere (a transcript, a backup) in place of a damaged block,
    inside the caller's transaction: `members` are (message id, original line) of messages
    whose block_id is `block_id`, in block order. When they are the whole block, their count
    and total size must be what the block recorded, else nothing changes (ValueError). They go
    into a new block, checked to read back as given; the damaged block is deleted once no
    message points at it. Returns {"block_id": new id, "same_size": whether the re-packed data
    has the damaged data's length, "bytes_differing": how many of its bytes differ (the damage
    itself when the lines are the originals) or None}."""
    row = conn.execute("SELECT session_id, transcript_path, line_count, line_bytes, data FROM blocks WHERE id = ?",
                       (block_id,)).fetchone()
    total = conn.execute("SELECT count(*) FROM messages WHERE block_id = ?", (block_id,)).fetchone()[0]
    lines = [line for _, line in members]
    if row is not None and len(members) == total == row[2] and sum(map(len, lines)) != row[3]:
        raise ValueError(f"the lines found add up to {sum(map(len, lines))} bytes where block {block_id} held {row[3]}")
    data = encode_block(lines)
    old = bytes(row[4]) if row is not None else b""
    if old and len(old) != len(data):  # packed at another level (an older lcm's)
        data = next((d for d in (encode_block(lines, level) for level in range(1, 10)) if len(d) == len(old)), data)
    if decode_block(data) != lines:
        raise ValueError("the re-packed block does not read back as the lines given")
    same = len(old) == len(data)
    session_id = row[0] if row is not None else conn.execute(
        "SELECT session_id FROM messages WHERE id = ?", (members[0][0],)).fetchone()[0]
    new = _new_block(conn, session_id, row[1] if row is not None else None, [m[0] for m in members], lines, data)
    conn.executemany("UPDATE messages SET block_id = ?, block_pos = ? WHERE id = ?",
                     ((new, pos, m[0]) for pos, m in enumerate(members)))
    if total == len(members):
        conn.execute("DELETE FROM blocks WHERE id = ?", (block_id,))
    return {"block_id": new, "same_size": same,
            "bytes_differing": sum(a != b for a, b in zip(old, data)) if same else None}
