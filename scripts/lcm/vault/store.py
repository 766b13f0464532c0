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


def encode_block(lines: list[bytes], level: int = 6) -> bytes:
    import struct
    import zlib
    head = struct.pack(f"<I{len(lines)}I", len(lines), *map(len, lines))
    return bytes([ZLIB]) + zlib.compress(head + b"".join(lines), level)


def decode_block(data: bytes) -> list[bytes]:
    import struct
    import zlib
    if not data or data[0] != ZLIB:
        raise ValueError(f"unknown block codec {data[:1]!r}: this vault was written by a newer lcm")
    payload = zlib.decompress(data[1:])
    count = struct.unpack_from("<I", payload)[0]
    sizes = struct.unpack_from(f"<{count}I", payload, 4)
    out, at = [], 4 + 4 * count
    for size in sizes:
        out.append(payload[at:at + size])
        at += size
    return out


def stub(line: bytes) -> bytes:
    """What `raw` keeps of a packed line (see the module docstring)."""
    return bytes([BLOCK]) + (TOOL_MARK if TOOL_MARK in line else b"")


class Reader:
    """Original lines of one connection's vault, with the last few decoded blocks cached."""

    def __init__(self, conn: sqlite3.Connection):
        import weakref
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
            row = self.conn().execute("SELECT data FROM blocks WHERE id = ?", (block_id,)).fetchone()
            if row is None:
                raise sqlite3.DatabaseError(f"block {block_id} is missing: run lcm_doctor.py")
            lines = decode_block(bytes(row[0]))
            if len(self.cache) >= CACHE_BLOCKS:
                self.cache.pop(next(iter(self.cache)))
            self.cache[block_id] = lines
        return lines

    def line(self, raw, block_id, block_pos):
        if block_id is None:
            return raw
        return self.block(block_id)[block_pos]


def install(conn: sqlite3.Connection) -> None:
    """Make lcm_line(raw, block_id, block_pos) callable in this connection's SQL."""
    reader = Reader(conn)
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


def remove_lines(conn: sqlite3.Connection, message_ids) -> int:
    """Take these messages' lines out of their blocks, inside the caller's transaction (before
    the rows are deleted): each block holding one is rewritten without it and the old block
    deleted, so no compressed copy of a removed line survives (with secure_delete on, its pages
    are zeroed too). Returns how many blocks were rewritten."""
    ids = sorted(set(message_ids))
    found: dict[int, None] = {}
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        for (block_id,) in conn.execute(f"SELECT DISTINCT block_id FROM messages WHERE block_id IS NOT NULL"
                                        f" AND id IN ({','.join('?' * len(part))})", part):
            found[block_id] = None
    gone = set(ids)
    reader = Reader(conn)
    for block_id in found:
        lines = reader.block(block_id)
        session_id, path = conn.execute("SELECT session_id, transcript_path FROM blocks WHERE id = ?",
                                        (block_id,)).fetchone()
        members = conn.execute("SELECT id, block_pos FROM messages WHERE block_id = ? ORDER BY block_pos",
                               (block_id,)).fetchall()
        keep = [(m[0], lines[m[1]]) for m in members if m[0] not in gone]
        conn.execute("UPDATE messages SET block_id = NULL, block_pos = NULL WHERE block_id = ?", (block_id,))
        conn.execute("DELETE FROM blocks WHERE id = ?", (block_id,))
        if keep:  # the survivors in a new block (a new id: no cache can serve the old one)
            new = _new_block(conn, session_id, path, [k[0] for k in keep], [k[1] for k in keep])
            conn.executemany("UPDATE messages SET block_id = ?, block_pos = ? WHERE id = ?",
                             ((new, pos, k[0]) for pos, k in enumerate(keep)))
    return len(found)
