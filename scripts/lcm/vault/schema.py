"""The vault's schema: an append-only list of migrations keyed by PRAGMA user_version, and the
runner that applies them. Add a migration by appending to MIGRATIONS; never edit a released one.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Callable

import lcm.vault.squeeze
import lcm.vault.store
from lcm.base.errors import LcmError

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for annotations only
    from pathlib import Path


# ---------------------------------------------------------------------------
# Schema: an append-only list. Never edit a released migration; add one.
# ---------------------------------------------------------------------------

# A conversational message: a typed prompt or an assistant's text, not a tool call (flat text
# `Name {input}`), tool result, harness-injected or empty line. The WHERE of the partial index
# messages_talk: a query must repeat it verbatim to use the index. A compressed text says
# whether it is a tool call in its codec byte (lcm.vault.squeeze.ZDICT_CALL), which SQL reads
# without decoding. Migration 21 rebuilt the index with this WHERE.
TALK_WHERE = ("is_meta = 0 AND token_count > 0 AND (role = 'user' AND instr(raw, 'tool_use_id') = 0"
              " OR role = 'assistant' AND NOT CASE WHEN typeof(content) = 'blob' THEN substr(content, 1, 1) = x'02'"
              " ELSE substr(content, instr(content, ' '), 2) = ' {' AND instr(substr(content, 1, 80), ' ') > 0 END)")
# ... and the one of migration 5, before text was compressed (a released migration never changes)
TALK_WHERE_5 = ("is_meta = 0 AND token_count > 0 AND (role = 'user' AND instr(raw, 'tool_use_id') = 0"
                " OR role = 'assistant' AND NOT (substr(content, instr(content, ' '), 2) = ' {'"
                " AND instr(substr(content, 1, 80), ' ') > 0))")


def talk_where(conn: sqlite3.Connection) -> str:
    """The WHERE the vault's messages_talk was built with (a query must repeat it for SQLite to
    use the index): TALK_WHERE, or TALK_WHERE_5 in a vault before migration 21 (an older vault
    read as it is; its text is all plain, where the two agree)."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'messages_talk'").fetchone()
    return TALK_WHERE_5 if row is not None and TALK_WHERE_5 in row[0] else TALK_WHERE


def _notes_fts(conn: sqlite3.Connection) -> None:
    """Full-text index of the notes, where SQLite has FTS5 (else lcm_grep falls back to LIKE)."""
    if not has_fts5(conn):
        return
    conn.execute("""CREATE VIRTUAL TABLE notes_fts USING fts5(
        content, content='notes', content_rowid='rowid', tokenize='porter unicode61')""")
    conn.execute("""CREATE TRIGGER notes_fts_ai AFTER INSERT ON notes BEGIN
        INSERT INTO notes_fts(rowid, content) VALUES (new.rowid, new.content);
    END""")
    conn.execute("""CREATE TRIGGER notes_fts_ad AFTER DELETE ON notes BEGIN
        INSERT INTO notes_fts(notes_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    END""")


def _require_sqlite(version: tuple, feature: str) -> None:
    if sqlite3.sqlite_version_info < version:
        raise LcmError(f"this vault needs SQLite {'.'.join(map(str, version))} or newer ({feature});"
                       f" this Python has SQLite {sqlite3.sqlite_version}",
                       "run lcm with a Python built against a newer SQLite (python.org builds, Homebrew, uv)")


def has_trigram(conn: sqlite3.Connection) -> bool:
    """FTS5's trigram tokenizer: SQLite 3.34 and later, when built with FTS5."""
    return sqlite3.sqlite_version_info >= (3, 34) and _fts5_accepts(conn, "x, tokenize='trigram'")


def _search_indexes(conn: sqlite3.Connection) -> None:
    """The indexes lcm/capture/indexes.py derives from the messages and files; it fills them at the next
    ingest, from the marks set here (a vault's whole past first). Safe to run twice (a vault
    built while this had another number meets it again)."""
    if not fts_enabled(conn):
        return  # no FTS5: search falls back to substring scans
    if has_trigram(conn):
        # small and stored (not contentless) so that deleting a message can delete its runs
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS messages_cjk USING fts5(runs, tokenize='trigram')")
        conn.execute("CREATE TRIGGER IF NOT EXISTS messages_cjk_ad AFTER DELETE ON messages BEGIN"
                     " DELETE FROM messages_cjk WHERE rowid = old.id; END")
    # contentless: the windows are rebuilt from the messages, never shown
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS exchange_fts USING fts5(text, content='', tokenize='porter unicode61')")
    # contentless: the text of externalised blocks stays on disk under $LCM_HOME/files
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS files_fts USING fts5(text, content='', tokenize='porter unicode61')")
    conn.execute("INSERT OR IGNORE INTO vault_meta VALUES ('indexed_through', 0)")  # messages.id
    conn.execute("INSERT OR IGNORE INTO vault_meta VALUES ('files_indexed_through', 0)")  # files.rowid


# The small tables grep finds substrings in (lcm.search.result_types.Source.tri): (index, table, its key,
# the text column). One row per session or checkpoint, yet a heavy user's thousands of
# digests are megabytes, which grep read whole for every query.
SUBSTRING_INDEXES = (("sessions_tri", "sessions", "rowid", "title"), ("checkpoints_tri", "checkpoints", "id", "content"),
                     ("digests_tri", "digests", "rowid", "text"))


def _substring_indexes(conn: sqlite3.Connection) -> None:
    """Trigram indexes (external content: no second copy) over session titles, checkpoints and
    digests, kept in step by triggers. A trigram phrase matches a substring, case-insensitively,
    as the LIKE scan it replaces did (terms of 3 characters or more; shorter ones still scan).
    Only matched, never ranked: no table of row sizes (columnsize=0)."""
    if not has_trigram(conn):
        return  # grep scans those tables, as before
    for index, table, key, column in SUBSTRING_INDEXES:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {index} USING fts5({column}, content='{table}',"
                     f" content_rowid='{key}', tokenize='trigram', columnsize=0)")
        delete = f"INSERT INTO {index}({index}, rowid, {column}) VALUES ('delete', old.{key}, old.{column});"
        insert = f"INSERT INTO {index}(rowid, {column}) VALUES (new.{key}, new.{column});"
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {index}_ai AFTER INSERT ON {table} BEGIN {insert} END")
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {index}_ad AFTER DELETE ON {table} BEGIN {delete} END")
        # an ingest upserts its session's row on every turn: only a changed text is indexed again
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {index}_au AFTER UPDATE OF {column} ON {table}"
                     f" WHEN old.{column} IS NOT new.{column} BEGIN {delete} {insert} END")
        conn.execute(f"INSERT INTO {index}({index}) VALUES ('rebuild')")


def _place_sidechains(conn: sqlite3.Connection) -> None:
    """Give the sub-agent messages of an existing vault their place in the conversation order
    (their calls are read from the stored lines; lcm/vault/order.py has the rules)."""
    import lcm.vault.order  # imports only this module
    lcm.vault.order.place_existing(conn)


# Title the sessions holding the leaf of a waiting older-CLI summary line (table leaf_titles), where
# they have no title yet, then forget those lines (lcm.capture.ingest.place_leaf_titles, migration 10).
PLACE_LEAF_TITLES = (
    """UPDATE sessions SET title = (SELECT p.title FROM leaf_titles p JOIN messages m ON m.uuid = p.leaf_uuid
        WHERE m.session_id = sessions.session_id ORDER BY p.rowid LIMIT 1)
       WHERE title IS NULL AND session_id IN
        (SELECT m.session_id FROM leaf_titles p JOIN messages m ON m.uuid = p.leaf_uuid)""",
    "DELETE FROM leaf_titles WHERE leaf_uuid IN (SELECT uuid FROM messages)",
)
LEAF_TITLE_HEAD_BYTES = 1 << 20  # older CLIs wrote their summary lines at the top of a session file


def _credit_leaf_titles(conn: sqlite3.Connection) -> None:
    """A vault filled before migration 10 credited an older CLI's summary line to the session whose
    file it sat in. Read the head of each stored session's transcript (where those lines sit),
    take back a title that came from a line whose leaf is another session's, and give every such
    line to the session that holds its leaf (or keep it waiting in leaf_titles). A transcript no
    longer on disk keeps its title."""
    import json

    import lcm.base.mask
    rows = conn.execute("SELECT session_id, title, transcript_path FROM sessions"
                        " WHERE transcript_path IS NOT NULL").fetchall()
    for sid, title, path in rows:
        try:
            with open(path, "rb") as f:
                head = f.read(LEAF_TITLE_HEAD_BYTES)
        except (OSError, ValueError):
            continue
        for line in head.split(b"\n"):
            if b'"summary"' not in line or b"leafUuid" not in line:
                continue
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(entry, dict) or entry.get("type") != "summary":
                continue
            text, leaf = entry.get("summary"), entry.get("leafUuid")
            if not isinstance(text, str) or not text.strip() or not isinstance(leaf, str):
                continue
            text = lcm.base.mask.mask(text.strip().encode("utf-8", "backslashreplace").decode("utf-8"))
            owner = conn.execute("SELECT session_id FROM messages WHERE uuid = ?", (leaf,)).fetchone()
            if owner is not None and owner[0] == sid:
                continue  # its own summary: rightly its title
            if title == text:
                conn.execute("UPDATE sessions SET title = NULL WHERE session_id = ?", (sid,))
                title = None
            conn.execute("INSERT OR IGNORE INTO leaf_titles (leaf_uuid, title) VALUES (?, ?)", (leaf, text))
    for sql in PLACE_LEAF_TITLES:
        conn.execute(sql)


# usage_rollup's sums (lcm.readers.usage reads them): every token, then those priced from the
# table (lines without a costUSD of their own) with their excess past 200,000 in one field of one
# response (the long-context rate's share), and the costUSD lines carry
USAGE_BUCKET_SECONDS = 900
USAGE_SUMS = ("responses", "input_tokens", "output_tokens", "cache_write_tokens", "cache_write_1h_tokens",
              "cache_read_tokens", "priced_input", "priced_output", "priced_cache_write", "priced_cache_read",
              "priced_cache_write_1h", "above_input", "above_output", "above_cache_write", "above_cache_read", "carried_cost")
USAGE_SUMS_COLUMNS = ", ".join(f"{name} {'REAL' if name == 'carried_cost' else 'INTEGER'} NOT NULL" for name in USAGE_SUMS)
USAGE_THRESHOLD = 200_000


def _usage_key(at: str, session: str, model: str) -> str:
    """The SQL of usage_rollup's key (bucket, session_id, model) from a time, a session and a model."""
    return (f"coalesce(CAST(strftime('%s', {at}) AS INTEGER) / {USAGE_BUCKET_SECONDS}, -1),"
            f" {session}, coalesce({model}, '')")


def usage_key(row: str, message: str = "m") -> str:
    """usage_rollup's key of usage row `row` (a table of the same shape too) joined to its
    `message` row: the time, session and model are the message's (migration 23), the model the
    row's own where it keeps one (a '-fast' response)."""
    return _usage_key(f"{message}.created_at", f"{message}.session_id", f"coalesce({row}.model, {message}.model)")


def _usage_values(row: str) -> list[str]:
    """One usage row's share of each of USAGE_SUMS, in SQL."""
    own = f"{row}.cost_usd IS NULL"
    fields = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")
    return (["1"] + [f"{row}.{f}" for f in (*fields[:3], "cache_write_1h_tokens", fields[3])]
            + [f"CASE WHEN {own} THEN {row}.{f} ELSE 0 END" for f in (*fields, "cache_write_1h_tokens")]
            + [f"CASE WHEN {own} THEN max({row}.{f} - {USAGE_THRESHOLD}, 0) ELSE 0 END" for f in fields]
            + [f"coalesce({row}.cost_usd, 0.0)"])


def _rollup_add(key: str, row: str, sign: str, source: str = "") -> str:
    """The statement adding `sign` times usage row `row`'s share to usage_rollup under `key`
    (`source`: the FROM ... WHERE it is read through, if any)."""
    values = ", ".join(f"({sign}) * ({v})" for v in _usage_values(row))
    return (f"INSERT INTO usage_rollup {f'SELECT {key}, {values} {source}' if source else f'VALUES ({key}, {values})'}"
            " ON CONFLICT (bucket, session_id, model) DO UPDATE SET "
            + ", ".join(f"{name} = {name} + excluded.{name}" for name in USAGE_SUMS) + ";")


def _usage_rollup_sums(conn: sqlite3.Connection) -> None:
    """Fill an empty usage_rollup with the sums of the counted usage rows: of the table as
    migration 17 made it, or as migration 23 left it (a vault set back to an earlier version
    meets migration 18 again)."""
    if "at" in [r[1] for r in conn.execute("PRAGMA table_info(usage)")]:
        key, source = _usage_key("u.at", "u.session_id", "u.model"), "usage u"
    else:
        key, source = usage_key("u"), "usage u JOIN messages m ON m.id = u.message_id"
    conn.execute(f"INSERT INTO usage_rollup SELECT {key}, {', '.join(f'sum({e})' for e in _usage_values('u'))}"
                 f" FROM {source} WHERE u.counted = 1 GROUP BY 1, 2, 3")


def _usage_rollup_triggers(conn: sqlite3.Connection) -> None:
    """Migration 18's triggers, over the table as migration 17 made it (its own at and session_id):
    keep usage_rollup equal to the sums of the counted usage rows: a row counted, deleted or
    its `counted` changed adds or takes its share; a deleted counted line hands the count to the
    next line of its response (a purge of one line leaves the response counted). Migration 23
    replaces them (_usage_slim)."""
    def add(row: str, sign: str) -> str:
        return _rollup_add(_usage_key(f"{row}.at", f"{row}.session_id", f"{row}.model"), row, sign)
    _rollup_triggers(conn, add)


def _rollup_triggers(conn: sqlite3.Connection, add) -> None:
    """usage_rollup's three triggers on `usage`; add(row, sign): the SQL that adds (sign 1) or
    takes (-1) the share of the row named `row` (new or old)."""
    conn.execute(f"CREATE TRIGGER IF NOT EXISTS usage_rollup_ai AFTER INSERT ON usage WHEN new.counted = 1 BEGIN {add('new', '1')} END")
    conn.execute(f"CREATE TRIGGER IF NOT EXISTS usage_rollup_ad AFTER DELETE ON usage WHEN old.counted = 1 BEGIN {add('old', '-1')}"
                 " UPDATE usage SET counted = 1 WHERE message_id = (SELECT min(message_id) FROM usage"
                 " WHERE response = old.response) AND old.response IS NOT NULL; END")
    conn.execute("CREATE TRIGGER IF NOT EXISTS usage_rollup_au AFTER UPDATE OF counted ON usage WHEN new.counted != old.counted"
                 f" BEGIN {add('new', '2 * new.counted - 1')} END")


def _usage_counted(conn: sqlite3.Connection) -> None:
    """usage.counted: 1 for the line that counts for its response (its first stored line) or a
    line without a response key. Safe to run twice."""
    if "counted" not in [r[1] for r in conn.execute("PRAGMA table_info(usage)")]:
        conn.execute("ALTER TABLE usage ADD COLUMN counted INTEGER NOT NULL DEFAULT 1")


def response_key(text: str | None) -> int | None:
    """usage.response from migration 23: "message.id:requestId" as a signed 64-bit integer (the
    first 8 bytes of its BLAKE2b), an 8-byte key in the table and its index instead of ~57
    characters in each. Two different responses share a key with odds about n²/2⁶⁵ over n
    responses (about 3e-8 at a million); the one stored later would then not count. None for None."""
    if text is None:
        return None
    try:
        from _blake2 import blake2b  # CPython's built-in BLAKE2: hashlib would load OpenSSL (~15 ms)
    except ImportError:
        from hashlib import blake2b
    return int.from_bytes(blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big", signed=True)


# usage as migration 23 leaves it: the line's time, session and model are its messages row's
USAGE_TABLE = """CREATE TABLE {name} (
    message_id INTEGER PRIMARY KEY,     -- messages.id of a line carrying message.usage: its time
                                        -- (created_at), session and model are that row's
    model TEXT,                         -- NULL: messages.model; else the model as ccusage names it
                                        -- ('-fast' appended when usage.speed is fast)
    response INTEGER,                   -- response_key of message.id:requestId, shared by the lines of
                                        -- one response (NULL: either is missing, the line counts alone)
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,    -- cache_creation_input_tokens (5-minute and 1-hour)
    cache_write_1h_tokens INTEGER NOT NULL, -- of which written for an hour
    cache_read_tokens INTEGER NOT NULL,
    cost_usd REAL,                      -- the costUSD an early Claude Code wrote on the line, else NULL
    counted INTEGER NOT NULL DEFAULT 1  -- 1: the first stored line of its response, or a line without one
)"""
USAGE_TOKENS = ("input_tokens, output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens,"
                " cost_usd, counted")


def _usage_slim(conn: sqlite3.Connection) -> None:
    """Migration 23: usage rows without the time and session their messages row has, the model
    only where it differs from the messages row's, the response key an integer (response_key) in
    the table and its index: ~56 bytes of pages a row with its index entry, ~250 before. Rebuilt in
    place when it still has `at`; its triggers and usage_rollup are made anew either way (safe to
    run twice). Since the rollup reads a line's time and session from messages, a message's usage
    row goes BEFORE the message (usage_bd; purge is the one path that deletes messages)."""
    for trigger in ("usage_ad", "usage_rollup_ai", "usage_rollup_ad", "usage_rollup_au"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    if "at" in [r[1] for r in conn.execute("PRAGMA table_info(usage)")]:
        conn.create_function("lcm_response_key", 1, response_key, deterministic=True)
        conn.execute("DROP INDEX IF EXISTS usage_response")
        conn.execute("DROP TABLE IF EXISTS usage_slim")
        conn.execute(USAGE_TABLE.format(name="usage_slim"))
        # a row whose message is gone (none: usage_ad deleted them together) has no time or session left
        conn.execute(f"INSERT INTO usage_slim SELECT u.message_id, nullif(u.model, m.model), lcm_response_key(u.response),"
                     f" {', '.join('u.' + c for c in USAGE_TOKENS.split(', '))} FROM usage u JOIN messages m ON m.id = u.message_id"
                     " ORDER BY u.message_id")
        conn.execute("DROP TABLE usage")
        conn.execute("ALTER TABLE usage_slim RENAME TO usage")
    conn.execute("CREATE INDEX IF NOT EXISTS usage_response ON usage(response, message_id) WHERE response IS NOT NULL")
    conn.execute("CREATE TRIGGER IF NOT EXISTS usage_bd BEFORE DELETE ON messages BEGIN"
                 " DELETE FROM usage WHERE message_id = old.id; END")

    def add(row: str, sign: str) -> str:
        return _rollup_add(usage_key(row), row, sign, f"FROM messages m WHERE m.id = {row}.message_id")
    _rollup_triggers(conn, add)
    conn.execute("DELETE FROM usage_rollup")
    _usage_rollup_sums(conn)


def _purged_session(conn: sqlite3.Connection) -> None:
    """purged.session_id: the session a purged uuid belonged to (NULL: purged before lcm kept it).
    Safe to run twice (a vault set back to an earlier version meets this migration again)."""
    if "session_id" not in [r[1] for r in conn.execute("PRAGMA table_info(purged)")]:
        conn.execute("ALTER TABLE purged ADD COLUMN session_id TEXT")


# Text stored before the migration that runs this is masked again whenever it is shown (masking
# learnt something): every message and summary so far counts as stored under older rules, until
# lcm_doctor.py --remask masks it in place (lcm.vault.db.masked_from). A key the vault does not have
# yet (masked_from_summary before migration 15) is left alone.
MASK_AGAIN = ("UPDATE vault_meta SET value = CASE key"
              " WHEN 'masked_from_message' THEN (SELECT coalesce(max(id), 0) + 1 FROM messages)"
              " ELSE (SELECT coalesce(max(rowid), 0) + 1 FROM summaries) END"
              " WHERE key IN ('masked_from_message', 'masked_from_summary')")

# A migration is a list of SQL statements; a function in it runs SQL that depends on the build
# (FTS5). Each migration runs in one transaction.
MIGRATIONS: list[list[str | Callable[[sqlite3.Connection], None]]] = [
    # 1: the vault
    [
        """CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,        -- Claude Code's sessionId
            project TEXT,                       -- cwd of the session
            title TEXT,                         -- from ai-title / summary / custom-title lines
            transcript_path TEXT,               -- the main <session>.jsonl
            model TEXT,                         -- model of the latest assistant message
            first_at TEXT,                      -- earliest message timestamp
            last_at TEXT                        -- latest message timestamp
        )""",
        """CREATE TABLE transcripts (
            path TEXT PRIMARY KEY,              -- absolute path of a .jsonl file
            session_id TEXT,                    -- session its lines belong to
            agent_id TEXT,                      -- set for subagent transcripts
            byte_offset INTEGER NOT NULL DEFAULT 0,  -- bytes consumed (whole lines only)
            size INTEGER NOT NULL DEFAULT 0,    -- file size at last read
            head_hash TEXT,                     -- hash of the first line: detects a replaced file
            malformed_lines INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT
        )""",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY,             -- ingest order; defines a session's sequence
            uuid TEXT NOT NULL UNIQUE,          -- transcript uuid: the dedup key and public address
            session_id TEXT NOT NULL,
            parent_uuid TEXT,
            type TEXT NOT NULL,                 -- user | assistant | system
            role TEXT NOT NULL,                 -- message.role, else the type
            subtype TEXT,                       -- system subtype (compact_boundary, ...)
            created_at TEXT,                    -- transcript timestamp
            cwd TEXT,                           -- NULL since migration 22: the line keeps it
            git_branch TEXT,                    -- NULL since migration 22: the line keeps it
            model TEXT,                         -- assistant model
            api_message_id TEXT,                -- message.id; NULL since migration 22: the line keeps it
            is_sidechain INTEGER NOT NULL DEFAULT 0,
            agent_id TEXT,                      -- subagent id for sidechain lines
            is_meta INTEGER NOT NULL DEFAULT 0, -- harness-injected user text
            content TEXT NOT NULL,              -- flat searchable text of every block
            token_count INTEGER NOT NULL,       -- estimate_tokens(content)
            raw BLOB NOT NULL,                  -- the original transcript line, byte for byte, no newline
            transcript_path TEXT,
            line_no INTEGER                     -- 1-based line in transcript_path
        )""",
        "CREATE INDEX messages_session ON messages(session_id, id)",
        "CREATE INDEX messages_created ON messages(created_at)",
        """CREATE TABLE compactions (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            source TEXT NOT NULL,               -- transcript (compact_boundary line) | hook (PostCompact)
            uuid TEXT UNIQUE,                   -- boundary line uuid, when from a transcript
            trigger TEXT,                       -- manual | auto
            pre_tokens INTEGER,
            post_tokens INTEGER,
            created_at TEXT
        )""",
        """CREATE TABLE summaries (
            id TEXT PRIMARY KEY,                -- sum_ + 16 hex
            session_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
            depth INTEGER NOT NULL,             -- 0 for leaves
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            source_token_count INTEGER NOT NULL,
            level TEXT NOT NULL,                -- normal | aggressive | truncated | extractive
            model TEXT,                         -- model that wrote it, NULL when extractive
            parent_id TEXT REFERENCES summaries(id),  -- at most one parent
            first_message_id INTEGER NOT NULL,  -- span covered, in messages.id order
            last_message_id INTEGER NOT NULL,
            earliest_at TEXT,
            latest_at TEXT,
            descendant_count INTEGER NOT NULL DEFAULT 0,  -- messages covered
            file_ids TEXT NOT NULL DEFAULT '[]',          -- JSON list of file_ ids mentioned
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX summaries_session ON summaries(session_id, depth, first_message_id)",
        "CREATE INDEX summaries_parent ON summaries(parent_id)",
        """CREATE TABLE summary_sources (
            summary_id TEXT NOT NULL REFERENCES summaries(id),
            ord INTEGER NOT NULL,               -- position inside the summary
            message_id INTEGER REFERENCES messages(id),  -- set for a leaf
            child_id TEXT REFERENCES summaries(id),      -- set for a condensed node
            PRIMARY KEY (summary_id, ord)
        )""",
        # a message belongs to at most one leaf
        "CREATE UNIQUE INDEX summary_sources_message ON summary_sources(message_id) WHERE message_id IS NOT NULL",
        "CREATE UNIQUE INDEX summary_sources_child ON summary_sources(child_id) WHERE child_id IS NOT NULL",
        """CREATE TABLE files (
            id TEXT PRIMARY KEY,                -- file_ + 16 hex
            session_id TEXT,
            message_uuid TEXT,                  -- message whose block was externalised
            name TEXT,                          -- file path or a label for pasted/tool output
            kind TEXT,                          -- json | csv | code | text ...
            byte_size INTEGER NOT NULL,
            token_count INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            path TEXT NOT NULL,                 -- where the content lives under $LCM_HOME/files
            exploration TEXT NOT NULL,          -- type-aware summary of the content
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX files_message ON files(message_uuid)",
        """CREATE TABLE grants (
            id TEXT PRIMARY KEY,                -- grant_ + 16 hex
            session_ids TEXT NOT NULL,          -- JSON list: sessions in scope
            node_ids TEXT NOT NULL,             -- JSON list: summary ids / uuids in scope (empty = whole sessions)
            token_cap INTEGER NOT NULL,
            tokens_used INTEGER NOT NULL DEFAULT 0,
            expires_at TEXT NOT NULL,
            revoked_at TEXT,
            created_at TEXT NOT NULL
        )""",
        """CREATE TABLE checkpoints (
            id INTEGER PRIMARY KEY,
            session_id TEXT,
            project TEXT,
            path TEXT,                          -- file it was written to
            content TEXT NOT NULL,              -- the whole markdown, kept even when the file is overwritten
            last_message_id INTEGER,            -- newest message it saw
            created_at TEXT NOT NULL
        )""",
        """CREATE TABLE map_runs (
            id TEXT PRIMARY KEY,                -- map_ + 16 hex
            kind TEXT NOT NULL,                 -- llm | agentic
            input_path TEXT NOT NULL,
            input_sha256 TEXT NOT NULL,
            output_path TEXT NOT NULL,
            prompt TEXT NOT NULL,
            schema TEXT,                        -- JSON schema text, if any
            model TEXT,
            options TEXT NOT NULL DEFAULT '{}', -- JSON of the remaining options
            status TEXT NOT NULL,               -- running | done | failed
            total INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        """CREATE TABLE map_items (
            run_id TEXT NOT NULL REFERENCES map_runs(id),
            item_index INTEGER NOT NULL,
            status TEXT NOT NULL,               -- pending | ok | error
            attempts INTEGER NOT NULL DEFAULT 0,
            result TEXT,                        -- JSON of the validated result
            error TEXT,
            input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT,
            PRIMARY KEY (run_id, item_index)
        )""",
    ],
    # 2: lines consumed per transcript, so an incremental read knows the line number at byte_offset
    [
        "ALTER TABLE transcripts ADD COLUMN line_count INTEGER NOT NULL DEFAULT 0",
    ],
    # 3: notes pinned with lcm_remember.py
    [
        """CREATE TABLE notes (
            id TEXT PRIMARY KEY,                -- note_ + 16 hex
            content TEXT NOT NULL,              -- the note as pinned
            project TEXT,                       -- directory it applies in (and below); NULL = every project
            session_id TEXT,                    -- session it was pinned in, if known
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX notes_project ON notes(project, created_at)",
        _notes_fts,
    ],
    # 4: a session's conversation order (lcm/vault/order.py): ORDER BY seq is the main thread in
    # transcript order with each sub-agent's run right after the tool call that started it
    [
        lambda conn: _require_sqlite((3, 31), "generated columns"),
        # sub-agent (sidechain) message: its seq, set by lcm.vault.order.place_threads at ingest
        "ALTER TABLE messages ADD COLUMN placed_at INTEGER",
        # '' = the session's main thread, else the id of the sub-agent whose run this is
        "ALTER TABLE messages ADD COLUMN thread TEXT GENERATED ALWAYS AS"
        " (CASE WHEN is_sidechain THEN coalesce(agent_id, 'sidechain') ELSE '' END) VIRTUAL",
        # conversation order: within a session, ORDER BY seq is the conversation (main thread:
        # id << 32; a sub-agent's message: placed_at, inside the gap after its call's message).
        # Neighbours in one thread: same session_id and thread, adjacent seq (index messages_seq)
        "ALTER TABLE messages ADD COLUMN seq INTEGER GENERATED ALWAYS AS"
        " (CASE WHEN is_sidechain THEN placed_at ELSE id * 4294967296 END) VIRTUAL",
        # a session in conversation order: its main-thread tail, raw tokens after the newest leaf
        "CREATE INDEX messages_seq ON messages(session_id, seq)",
        # sidechain rows still waiting for their place: ingest's check is one index probe
        "CREATE INDEX messages_unplaced ON messages(session_id) WHERE is_sidechain = 1 AND placed_at IS NULL",
        """CREATE TABLE agent_calls (
            tool_use_id TEXT PRIMARY KEY,       -- a Task/Agent tool call
            session_id TEXT,
            call_uuid TEXT,                     -- message holding its tool_use block
            agent_id TEXT                       -- sub-agent it started (toolUseResult.agentId, or the agent's meta.json)
        )""",
        "CREATE INDEX agent_calls_agent ON agent_calls(session_id, agent_id)",
        """CREATE TABLE threads (
            session_id TEXT NOT NULL,
            thread TEXT NOT NULL,               -- messages.thread of a sub-agent run
            anchor_id INTEGER NOT NULL,         -- messages.id of the main-thread message it follows (0: none yet)
            exact INTEGER NOT NULL,             -- 1: the anchor holds the call that started it; 0: placed by time
            base INTEGER NOT NULL,              -- placed_at of its messages = base + line number
            PRIMARY KEY (session_id, thread)
        )""",
        # 'ingest': made when a session's order was ingest order; the next compaction rebuilds it
        "ALTER TABLE summaries ADD COLUMN built_on TEXT NOT NULL DEFAULT 'conversation'",
        "UPDATE summaries SET built_on = 'ingest' WHERE session_id IN (SELECT DISTINCT m.session_id FROM"
        " summary_sources s JOIN messages m ON m.id = s.message_id WHERE m.is_sidechain = 1)",
        _place_sidechains,
    ],
    # 5: the conversational messages (typed prompts, assistant text) of each session in order, so
    # search finds a hit's neighbours from this small index without reading whole rows
    [
        f"CREATE INDEX IF NOT EXISTS messages_talk ON messages(session_id, id, agent_id, role) WHERE {TALK_WHERE_5}",
    ],
    # 6: messages lcm_purge.py removed, refused if a transcript offers them again (PURGED_TRIGGER)
    [
        """CREATE TABLE IF NOT EXISTS purged (
            uuid TEXT PRIMARY KEY,              -- transcript uuid of a purged message
            purged_at TEXT NOT NULL
        ) WITHOUT ROWID""",
    ],
    # 7: facts about the vault as a whole
    [
        """CREATE TABLE vault_meta (
            key TEXT PRIMARY KEY,
            value                               -- masked_from_message: messages.id from which content
        ) WITHOUT ROWID""",                     # was masked when stored (lcm/base/mask.py); older rows are masked on output
        "INSERT INTO vault_meta VALUES ('masked_from_message', (SELECT coalesce(max(id), 0) + 1 FROM messages))",
    ],
    # 8: the earlier texts of summaries that an upgrade rewrote (extractive or fallback -> model):
    # the node keeps its id and place in the DAG, and the text it replaced stays here
    [
        """CREATE TABLE summary_versions (
            summary_id TEXT NOT NULL,           -- summaries.id (no FK: deleting a summary drops these by trigger)
            content TEXT NOT NULL,              -- the text the summary had before the upgrade
            level TEXT NOT NULL,                -- its level then (extractive | fallback)
            model TEXT,                         -- its model then (NULL: written without one)
            token_count INTEGER NOT NULL,
            written_at TEXT NOT NULL,           -- when that text was written
            replaced_at TEXT NOT NULL           -- when the upgrade replaced it
        )""",
        "CREATE INDEX summary_versions_summary ON summary_versions(summary_id)",
        # a purge (or a rebuild) that deletes a summary takes its earlier texts with it
        """CREATE TRIGGER summary_versions_ad AFTER DELETE ON summaries BEGIN
            DELETE FROM summary_versions WHERE summary_id = old.id;
        END""",
    ],
    # 9: text stored before masking read decoded strings (a tool input's key after a JSON `\n`
    # stayed in clear) is masked again on output, until lcm_doctor.py --remask masks it in place
    [
        MASK_AGAIN,
    ],
    # 10: search indexes derived from the messages (lcm/capture/indexes.py): trigram over CJK runs,
    # sliding windows of a conversation's prompts and replies, externalised file text
    [
        _search_indexes,
    ],
    # 11: titles of older CLIs' summary lines whose leaf message is not stored yet (lcm.capture.ingest)
    [
        """CREATE TABLE leaf_titles (
            leaf_uuid TEXT PRIMARY KEY,         -- the summary line's leafUuid: its session owns the title
            title TEXT NOT NULL                 -- masked
        )""",
        _credit_leaf_titles,
    ],
    # 12: session digests (lcm/summary/digest.py), written when a session ends: its decisions, bugs found,
    # failed approaches and what was done; one per session, rewritten when the session goes on
    [
        """CREATE TABLE IF NOT EXISTS digests (
            session_id TEXT PRIMARY KEY,        -- sessions.session_id
            text TEXT NOT NULL,                 -- markdown, masked
            level TEXT NOT NULL,                -- 'model' | 'extractive'
            created_at TEXT NOT NULL            -- ISO-8601 UTC of the last write
        )""",
    ],
    # 13: original lines packed into compressed blocks (lcm/vault/store.py has the format, lcm/vault/pack.py packs)
    lcm.vault.store.MIGRATION,
    # 14: masking learnt more (a secret under the name `pass`, the strings of a list under a
    # secret's name, a key inside a --flag's text, a JWT after a private key cut short): text
    # stored before is masked again on output, until lcm_doctor.py --remask
    [
        MASK_AGAIN,
    ],
    # 15: summaries are masked when written too (lcm.summary.compact): those written from here on are
    # shown as stored, older ones masked again on output, until lcm_doctor.py --remask
    [
        "INSERT OR IGNORE INTO vault_meta VALUES ('masked_from_summary', (SELECT coalesce(max(rowid), 0) + 1 FROM summaries))",
    ],
    # 16: substring indexes over session titles, checkpoints and digests (grep scanned them whole)
    [
        _substring_indexes,
    ],
    # 17: the token counts of every response (lcm/capture/tokens.py fills it at ingest; lcm usage
    # reads it), and the session of each purged uuid (a bundle carries its sessions' purges);
    # migration 23 reshapes the table (USAGE_TABLE)
    [
        """CREATE TABLE IF NOT EXISTS usage (
            message_id INTEGER PRIMARY KEY,     -- messages.id of a line carrying message.usage
            at TEXT,                            -- its timestamp (UTC, ISO-8601)
            session_id TEXT NOT NULL,
            model TEXT,                         -- message.model; '-fast' appended when usage.speed is fast
            response TEXT,                      -- message.id:requestId, shared by the lines of one response
                                                -- (NULL: either is missing, the line counts alone)
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cache_write_tokens INTEGER NOT NULL,    -- cache_creation_input_tokens (5-minute and 1-hour)
            cache_write_1h_tokens INTEGER NOT NULL, -- of which written for an hour
            cache_read_tokens INTEGER NOT NULL,
            cost_usd REAL                       -- the costUSD an early Claude Code wrote on the line, else NULL
        )""",
        # a response counts once: its first line (the lowest message_id of its response)
        "CREATE INDEX IF NOT EXISTS usage_response ON usage(response, message_id) WHERE response IS NOT NULL",
        """CREATE TRIGGER IF NOT EXISTS usage_ad AFTER DELETE ON messages BEGIN
            DELETE FROM usage WHERE message_id = old.id;
        END""",
        # messages stored before this migration: read for usage later (lcm.capture.tokens.backfill)
        "INSERT OR IGNORE INTO vault_meta VALUES ('usage_backfill_below', (SELECT coalesce(max(id), 0) + 1 FROM messages))",
        _purged_session,
    ],
    # 18: usage summed by quarter hour, session and model, kept in step by triggers, so that
    # lcm usage reads a few thousand rows instead of every response (~5 s at 1M messages)
    [
        _usage_counted,
        "UPDATE usage SET counted = 0 WHERE response IS NOT NULL AND message_id !="
        " (SELECT min(d.message_id) FROM usage d WHERE d.response = usage.response)",
        f"""CREATE TABLE IF NOT EXISTS usage_rollup (
            bucket INTEGER NOT NULL,            -- {USAGE_BUCKET_SECONDS}-second slot of the UTC time (-1: no time);
                                                -- every time zone's offset is a whole number of them
            session_id TEXT NOT NULL,
            model TEXT NOT NULL,                -- usage.model, '' when none
            {USAGE_SUMS_COLUMNS},
            PRIMARY KEY (bucket, session_id, model)
        ) WITHOUT ROWID""",
        "DELETE FROM usage_rollup",  # met again (a vault set back to an earlier version): summed anew
        _usage_rollup_sums,
        _usage_rollup_triggers,
    ],
    # 19: masking learnt the field's forms (issue 31: a key after any script's letter, URL passwords
    # with `/` and `@`, quoted passwords, sshpass/redis-cli/openssl/htpasswd, .netrc, .pgpass, .npmrc,
    # YAML block scalars, vendor-prefixed keys): text stored before is masked again on output,
    # until lcm_doctor.py --remask
    [
        MASK_AGAIN,
    ],
    # 20: masking learnt gitleaks' remaining forms (a name quoted in JSON inside JSON, curl's -u and
    # credential headers however quoted and over several lines, any JWT, a Kubernetes Secret's data,
    # Facebook app secrets): masked again on output, until lcm_doctor.py --remask
    [
        MASK_AGAIN,
    ],
    # 21: the searchable text compressed row by row with a preset dictionary (lcm/vault/squeeze.py
    # has the format): the dictionaries, a view that decodes, the full-text index reading it
    [*lcm.vault.squeeze.MIGRATION,
     # the same rows, told apart in compressed text too (reads every row once: ~10 s at 1M messages)
     "DROP INDEX IF EXISTS messages_talk",
     f"CREATE INDEX messages_talk ON messages(session_id, id, agent_id, role) WHERE {TALK_WHERE}"],
    # 22: a smaller vault (issue 32): no index on the messages' time (grep's --since/--before go
    # through the sessions' spans, lcm.search.result_types); new rows leave cwd, git_branch and
    # api_message_id NULL (nothing read them; the stored line has them)
    [
        "DROP INDEX IF EXISTS messages_created",
    ],
    # 23: usage rows take their time, session and model from messages, and keep the response key as
    # a 64-bit integer: with its index entry ~250 bytes of pages a row to ~56 (the 300k bench corpus:
    # 0.0415 of the transcripts' bytes to 0.0093; issue 32); converts ~570k rows in ~9 s
    [
        _usage_slim,
    ],
]

# Every insert path (hook, bulk import, a re-read from byte 0) goes through this trigger. The
# first purge creates it rather than a migration: on every row it costs bulk ingest ~15%
# (measured at 100k messages), a price only a vault that has purged something needs to pay.
PURGED_TRIGGER = """CREATE TRIGGER IF NOT EXISTS messages_purged BEFORE INSERT ON messages
    WHEN EXISTS (SELECT 1 FROM purged WHERE uuid = new.uuid)
BEGIN SELECT RAISE(IGNORE); END"""

# FTS5 is optional in some SQLite builds; these run only where it exists.
FTS_MIGRATION: list[str] = [
    # porter stemming over unicode61 for natural-language recall
    """CREATE VIRTUAL TABLE messages_fts USING fts5(
        content, content='messages', content_rowid='id', tokenize='porter unicode61')""",
    """CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END""",
    """CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END""",
    """CREATE VIRTUAL TABLE summaries_fts USING fts5(
        content, content='summaries', content_rowid='rowid', tokenize='porter unicode61')""",
    """CREATE TRIGGER summaries_fts_ai AFTER INSERT ON summaries BEGIN
        INSERT INTO summaries_fts(rowid, content) VALUES (new.rowid, new.content);
    END""",
    """CREATE TRIGGER summaries_fts_ad AFTER DELETE ON summaries BEGIN
        INSERT INTO summaries_fts(summaries_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    END""",
]

SCHEMA_VERSION = len(MIGRATIONS)
# the version after the last migration that runs MASK_AGAIN: a vault below it was filled under older rules
MASK_RULES_VERSION = max(i + 1 for i, migration in enumerate(MIGRATIONS) if MASK_AGAIN in migration)
# the version after the migration that gave `usage` its shape (USAGE_TABLE)
USAGE_TABLE_VERSION = next(i + 1 for i, migration in enumerate(MIGRATIONS) if _usage_slim in migration)
PAGE_SIZE = 16384  # of new vaults (an existing vault keeps its own)


def has_fts5(conn: sqlite3.Connection) -> bool:
    return _fts5_accepts(conn, "x")


def _fts5_accepts(conn: sqlite3.Connection, columns: str) -> bool:
    """Whether this SQLite builds an FTS5 table of `columns` (a scratch table in temp, dropped)."""
    try:
        conn.execute(f"CREATE VIRTUAL TABLE temp._lcm_probe USING fts5({columns})")
        conn.execute("DROP TABLE temp._lcm_probe")
        return True
    except sqlite3.OperationalError:
        return False


def fts_enabled(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='messages_fts'"
    ).fetchone()
    return row is not None


def _schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: sqlite3.Connection, path: Path | str = "vault") -> int:
    """Bring the vault to SCHEMA_VERSION, one transaction per migration.

    Returns the number of migrations applied. A vault newer than this code is refused.
    """
    version = _schema_version(conn)
    if version > SCHEMA_VERSION:
        raise LcmError(
            f"{path} has schema version {version}, newer than this lcm ({SCHEMA_VERSION})",
            "upgrade lcm, or point --db / LCM_DB at another vault",
        )
    if version == SCHEMA_VERSION:
        return 0
    applied = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # another process may have migrated while we waited for the write lock
            version = _schema_version(conn)
            if version >= SCHEMA_VERSION:
                conn.execute("COMMIT")
                return applied
            for statement in MIGRATIONS[version]:
                if callable(statement):
                    statement(conn)
                else:
                    conn.execute(statement)
            if version == 0 and has_fts5(conn):
                for statement in FTS_MIGRATION:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
            conn.execute("COMMIT")
            applied += 1
        except BaseException:
            if conn.in_transaction:  # SQLite has already rolled back after some errors (disk full)
                conn.execute("ROLLBACK")
            raise
