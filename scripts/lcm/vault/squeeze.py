"""The searchable text column, compressed row by row: the one module that knows how
`messages.content` is kept.

A row's text is stored in one of two ways, told apart by SQLite's type of the value:

- TEXT: the text itself (short rows, rows written before a dictionary existed, the hooks' new
  rows until packing reaches them).
- BLOB: a codec byte (ZDICT, or ZDICT_CALL for a tool call's text, so that SQL can tell a tool
  call from the assistant's words without decoding), the dictionary's id (uint16, little-endian), then the text's UTF-8
  compressed as a raw deflate stream with that preset dictionary (zlib's `zdict`). The
  dictionary is ~32 KB of the vault's most frequent lines (`build_dictionary`), kept in the
  table `zdicts` and never changed: a better one gets a new id, and rows keep naming theirs.

Rows over MIN_BYTES are compressed: with the dictionary a 1 KB row packs to about 0.4 of its
bytes where zlib alone reaches 0.5, and decoding one costs 2-40 us (search reads ~150 rows'
text per query). The column stays in the row (not in the blocks of lcm.vault.store) because
ranking reads candidates' text one row at a time.

Readers never look at `content` themselves: SQL selects `lcm_text(content)` (TEXT: the
function that connect() installs on every connection), Python calls `text()`. The full-text
index messages_fts is external content over the view messages_text, which decodes.
"""
from __future__ import annotations

import sqlite3

ZDICT = 1  # codec byte: raw deflate with the preset dictionary named next
ZDICT_CALL = 2  # the same, for a text shaped as a tool call (`Name {input}`: lcm.vault.schema.TALK_WHERE reads this)
MIN_BYTES = 128  # shorter rows stay text: the codec's 3 bytes and deflate's overhead eat the gain (rows of
#                 128-256 bytes are 0.009 of the bench corpus' bytes and pack to about half)
DICT_BYTES = 32 << 10  # deflate's window: a longer dictionary is never looked at
LEVEL = 3  # zlib level: rows pack to 0.341 of their bytes at ~28 MB/s, 6 to 0.319 at ~12.5 (bench corpus,
#            rows of 128 bytes and more, one core)

MIGRATION = [
    """CREATE TABLE IF NOT EXISTS zdicts (
        id INTEGER PRIMARY KEY,             -- named by every row compressed with it
        data BLOB NOT NULL,                 -- the preset dictionary (at most DICT_BYTES)
        sample_rows INTEGER NOT NULL,       -- rows it was built from
        created_at TEXT NOT NULL
    )""",
    "CREATE VIEW IF NOT EXISTS messages_text AS SELECT id, lcm_text(content) AS content FROM messages",
    lambda conn: point_index_at_view(conn),
]


def point_index_at_view(conn: sqlite3.Connection) -> None:
    """messages_fts reads its rows' text (highlight, rebuild, integrity-check) from the view that
    decodes, and its triggers index and forget the decoded text. The index itself holds the
    same terms as before (the text is the same): only the table's declared content changes, so
    a vault of any size converts in an instant (no rebuild)."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'").fetchone()
    if row is None:
        return  # no FTS5 in this build: search scans
    if "messages_text" not in row[0]:
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        conn.execute("PRAGMA writable_schema = ON")
        try:
            conn.execute("UPDATE sqlite_master SET sql = replace(sql, \"content='messages'\", \"content='messages_text'\")"
                         " WHERE name = 'messages_fts'")
        finally:
            conn.execute("PRAGMA writable_schema = OFF")
        conn.execute(f"PRAGMA schema_version = {version + 1}")  # every connection reads the schema again
    conn.execute("DROP TRIGGER IF EXISTS messages_fts_ai")
    conn.execute("DROP TRIGGER IF EXISTS messages_fts_ad")
    for sql in TRIGGERS:
        conn.execute(sql)


TRIGGERS = (
    """CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, lcm_text(new.content));
    END""",
    """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, lcm_text(old.content));
    END""",
)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

class Decoder:
    """Decodes stored values for one connection, with its dictionaries loaded once each."""

    def __init__(self, conn: sqlite3.Connection):
        import weakref
        try:
            self.conn = weakref.ref(conn)  # see lcm.vault.store.Reader: the connection holds this
        except TypeError:
            self.conn = lambda: conn
        self.dicts: dict[int, object] = {}

    def decompressor(self, dict_id: int):
        base = self.dicts.get(dict_id)
        if base is None:
            import zlib
            row = self.conn().execute("SELECT data FROM zdicts WHERE id = ?", (dict_id,)).fetchone()
            if row is None:
                raise sqlite3.DatabaseError(f"text dictionary {dict_id} is missing: run lcm_doctor.py")
            base = self.dicts[dict_id] = zlib.decompressobj(-15, zdict=bytes(row[0]))
        return base.copy()

    def text(self, value):
        if not isinstance(value, bytes):
            return value  # TEXT as stored (or NULL)
        if not value or value[0] not in (ZDICT, ZDICT_CALL):
            raise ValueError(f"unknown text codec {value[:1]!r}: this vault was written by a newer lcm")
        d = self.decompressor(int.from_bytes(value[1:3], "little"))
        return (d.decompress(value[3:]) + d.flush()).decode("utf-8")


def install(conn: sqlite3.Connection) -> None:
    """Make lcm_text(content) callable in this connection's SQL."""
    conn.create_function("lcm_text", 1, Decoder(conn).text, deterministic=True)


def text(conn: sqlite3.Connection, value) -> str:
    """A stored `content` value as text (through the connection's lcm_text: one decode path)."""
    if not isinstance(value, bytes):
        return value
    return conn.execute("SELECT lcm_text(?)", (value,)).fetchone()[0]


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def tool_call(text_: str) -> bool:
    """Whether a text is shaped as a tool call's (`Name {input}`), as TALK_WHERE reads plain text."""
    space = text_.find(" ", 0, 80)
    return space >= 0 and text_.startswith("{", space + 1)


class Encoder:
    """Compresses texts with one dictionary (the vault's current one)."""

    def __init__(self, dict_id: int, data: bytes, level: int = LEVEL):
        import zlib
        self.dict_id, self.data, self.level = dict_id, data, level
        self.heads = (bytes([ZDICT]) + dict_id.to_bytes(2, "little"), bytes([ZDICT_CALL]) + dict_id.to_bytes(2, "little"))
        # primed once: each row copies it (setting a 32 KB dictionary afresh for every row cost
        # more than compressing the row; the output is the same)
        self.primed = zlib.compressobj(level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY, data)

    def encode(self, text_):
        """The value to store for `text_`: the text, or a smaller BLOB."""
        if not isinstance(text_, str) or len(text_) < MIN_BYTES // 4:
            return text_
        try:
            raw = text_.encode("utf-8")
        except UnicodeEncodeError:
            return text_  # a lone surrogate: ingest makes the row safe and stores it as text
        if len(raw) < MIN_BYTES:
            return text_
        c = self.primed.copy()
        packed = self.heads[tool_call(text_)] + c.compress(raw) + c.flush()
        return packed if len(packed) < len(raw) else text_

    def row(self, role, is_meta, token_count, text_):
        """The value to store for a message row's text (compressed already: as it is)."""
        return self.encode(text_) if isinstance(text_, str) else text_


def build_dictionary(samples, size: int = DICT_BYTES) -> bytes:
    """A preset dictionary from sample texts, each a text or (session id, text): their lines
    (cut to 160 characters) found in at least two texts and, where sessions are given, two
    sessions (a purge of one session then leaves the lines it had in another; a purge of a
    matched text replaces the dictionary, lcm.care.purge), the ones saving the most bytes last
    (deflate reaches the end of its window most cheaply)."""
    from collections import Counter
    counts: Counter = Counter()
    owners: dict = {}
    for sample in samples:
        owner, text_ = sample if isinstance(sample, tuple) else (None, sample)
        seen = set()
        for line in text_.split("\n"):
            line = line.strip()
            if len(line) < 6:
                continue
            piece = line[:160]
            if piece not in seen:  # once a text: a line repeated inside one row compresses anyway
                seen.add(piece)
                counts[piece] += 1
                if owner is not None:
                    owners.setdefault(piece, set()).add(owner)
    scored = sorted(((n * len(s), s) for s, n in counts.items()
                     if n >= 2 and (not owners or len(owners.get(s, ())) >= 2)), reverse=True)
    out, total = [], 0
    for _, s in scored:
        b = s.encode("utf-8", "surrogatepass") + b"\n"
        if total + len(b) > size:
            continue
        out.append(b)
        total += len(b)
    out.reverse()
    return b"".join(out)


SAMPLE_ROWS = 4000  # texts a dictionary is built from (~4 MB of the bench corpus; ~0.1 s)


def store_dictionary(conn: sqlite3.Connection, data: bytes, sample_rows: int) -> int:
    """Add a dictionary and make it the one new rows are written with, inside the caller's
    transaction; returns its id."""
    import time
    new = conn.execute("INSERT INTO zdicts (data, sample_rows, created_at) VALUES (?, ?, ?)",
                       (data, sample_rows, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))).lastrowid
    conn.execute("INSERT OR REPLACE INTO vault_meta VALUES ('zdict', ?)", (new,))
    return new


def encoder(conn: sqlite3.Connection) -> Encoder | None:
    """The encoder of the vault's current dictionary, or None before it has one."""
    try:
        row = conn.execute("SELECT z.id, z.data FROM vault_meta m JOIN zdicts z ON z.id = m.value"
                           " WHERE m.key = 'zdict'").fetchone()
    except sqlite3.OperationalError:
        return None  # a vault from before (opened read-only)
    return None if row is None else Encoder(row[0], bytes(row[1]))


def replace_dictionary(conn: sqlite3.Connection, old_id: int, keep) -> int:
    """Replace a dictionary with one holding only its lines for which keep(line) is true (a purge
    whose text is in it: no copy may survive), inside the caller's transaction: every row
    compressed with the old one is compressed again with the new, and the old is deleted.
    Reads every row of text once. Returns the new dictionary's id."""
    row = conn.execute("SELECT data, sample_rows FROM zdicts WHERE id = ?", (old_id,)).fetchone()
    current = conn.execute("SELECT value FROM vault_meta WHERE key = 'zdict'").fetchone()
    lines = bytes(row[0]).split(b"\n")
    data = b"\n".join(line for line in lines if keep(line.decode("utf-8", "surrogatepass")))
    new_id = store_dictionary(conn, data or b"\n", row[1])
    if current is not None and int(current[0]) != old_id:
        conn.execute("INSERT OR REPLACE INTO vault_meta VALUES ('zdict', ?)", (current[0],))
    encoder_ = Encoder(new_id, data or b"\n")
    name = old_id.to_bytes(2, "little")
    for mid, text_ in conn.execute("SELECT id, lcm_text(content) FROM messages WHERE typeof(content) = 'blob'"
                                   " AND substr(content, 2, 2) = ?", (name,)).fetchall():
        conn.execute("UPDATE messages SET content = ? WHERE id = ?", (encoder_.encode(text_), mid))
    conn.execute("DELETE FROM zdicts WHERE id = ?", (old_id,))
    return new_id
