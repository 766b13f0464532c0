"""Shared helper for every lcm script: vault location, connection, migrations,
configuration, ids, token estimates and the one error type.

Stdlib only, and only modules a bare interpreter has mostly loaded already: hooks and lcm_grep
import this on every call, so argparse and pathlib are imported where they are used.
"""
from __future__ import annotations

import math
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for annotations only
    import argparse
    from pathlib import Path


class LcmError(Exception):
    """An expected failure: printed as `Error: message` + `Hint: hint`, exit 1."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------

MAX_INT_ARG = 2**31 - 1  # bound of integer settings and arguments: far above any real use, and SQLite-safe

def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected 1 or 0")


def _positive_int(raw: str) -> int:
    value = int(raw)
    if not 0 < value <= MAX_INT_ARG:
        raise ValueError(f"expected an integer from 1 to {MAX_INT_ARG}")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= MAX_INT_ARG:
        raise ValueError(f"expected an integer from 0 to {MAX_INT_ARG}")
    return value


def _fraction(raw: str) -> float:
    value = float(raw)
    if not 0 < value <= 1:
        raise ValueError("expected a number in (0, 1]")
    return value


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError("expected one of " + ", ".join(options))
        return value
    return parse


def _text(raw: str) -> str:
    return raw.strip()


def _path_globs(raw: str) -> tuple[str, ...]:
    globs = tuple(os.path.expanduser(g.strip()).rstrip("/") or "/" for g in raw.split(":") if g.strip())
    for glob in globs:
        if not (os.path.isabs(glob) or glob.startswith("*")):
            raise ValueError(f"{glob!r} is not an absolute path glob (e.g. ~/clients/*:/srv/secret)")
    return globs


# name -> (parser, default, meaning). The README's configuration table mirrors this.
SETTINGS: dict[str, tuple[Callable[[str], object], object, str]] = {
    "LCM_CONTEXT_THRESHOLD": (_fraction, 0.75, "fraction of Claude Code's context window above which lcm_status.py suggests /compact"),
    "LCM_CONTEXT_WINDOW": (_non_negative_int, 0, "Claude Code's context window in tokens, for lcm_status.py; 0 = from the model id and the usage seen"),
    "LCM_FRESH_TAIL_COUNT": (_non_negative_int, 32, "newest messages never compacted"),
    "LCM_LEAF_CHUNK_TOKENS": (_positive_int, 20000, "most source tokens in one leaf summary"),
    "LCM_LEAF_MIN_TOKENS": (_positive_int, 2000, "fewest source tokens in a leaf summary (at most LCM_LEAF_CHUNK_TOKENS); a smaller remainder waits"),
    "LCM_LEAF_TARGET_TOKENS": (_positive_int, 1200, "target size of a leaf summary"),
    "LCM_CONDENSED_TARGET_TOKENS": (_positive_int, 2000, "target size of a condensed summary"),
    "LCM_CONDENSED_MIN_FANOUT": (_positive_int, 4, "summaries of one depth needed to condense them"),
    "LCM_LARGE_FILE_THRESHOLD": (_positive_int, 25000, "content blocks above this many tokens go to $LCM_HOME/files"),
    "LCM_SUMMARY_MODEL": (_text, "", "model for summaries; empty = the session's own model"),
    "LCM_LLM": (_choice("auto", "anthropic", "claude", "none"), "auto", "model backend"),
    "LCM_MAX_SUMMARY_CALLS": (_positive_int, 50, "most model calls one compaction run may make"),
    "LCM_MAX_EXPAND_TOKENS": (_positive_int, 4000, "token cap of an expansion grant"),
    "LCM_INDEX_THINKING": (_bool, True, "index thinking blocks for search"),
    "LCM_INJECT": (_bool, True, "hooks may add context to the session"),
    "LCM_RECALL": (_bool, False, "UserPromptSubmit injects a few recall hits"),
    "LCM_DISABLE": (_bool, False, "every hook is a no-op"),
    "LCM_SUBAGENT": (_bool, False, "set inside lcm's own sub-agents"),
    "LCM_EXCLUDE": (_path_globs, (), "colon-separated path globs: projects never captured, injected or compacted"),
}


def config(name: str, environ: dict | None = None):
    """The validated value of an LCM_* setting; an invalid value is an LcmError naming it."""
    parse, default, _meaning = SETTINGS[name]
    env = os.environ if environ is None else environ
    raw = env.get(name)
    if raw is None or (raw.strip() == "" and parse is not _text):
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise LcmError(
            f"invalid {name}={raw!r}: {exc}",
            f"fix or unset {name} (default {default!r})",
        ) from None


def excluded(path: str | None, environ: dict | None = None) -> bool:
    """Whether the project directory `path`, or a directory above it, matches LCM_EXCLUDE.

    Cheap enough for every hook: without LCM_EXCLUDE nothing is imported or parsed.
    """
    env = os.environ if environ is None else environ
    if not path or not (env.get("LCM_EXCLUDE") or "").strip():
        return False
    globs = config("LCM_EXCLUDE", environ)
    from fnmatch import fnmatchcase  # here: only a user who set LCM_EXCLUDE pays for it
    path = os.path.abspath(os.path.expanduser(path))
    while True:
        if any(fnmatchcase(path, glob) for glob in globs):
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def validate_config(environ: dict | None = None) -> None:
    """Check every LCM_* setting at once so a typo fails before any work starts."""
    for name in SETTINGS:
        config(name, environ)


# ---------------------------------------------------------------------------
# Locations, ids, time, tokens
# ---------------------------------------------------------------------------

def _home_str() -> str:
    home = os.environ.get("LCM_HOME")
    return os.path.expanduser(home) if home else os.path.join(os.path.expanduser("~"), ".claude-lcm")


def _db_path_str(explicit: str | None = None) -> str:
    if explicit:
        return os.path.expanduser(explicit)
    if os.environ.get("LCM_DB"):
        return os.path.expanduser(os.environ["LCM_DB"])
    return os.path.join(_home_str(), "lcm.db")


def lcm_home() -> Path:
    from pathlib import Path
    return Path(_home_str())


def db_path(explicit: str | None = None) -> Path:
    """--db, else $LCM_DB, else $LCM_HOME/lcm.db, else ~/.claude-lcm/lcm.db."""
    from pathlib import Path
    return Path(_db_path_str(explicit))


def files_dir() -> Path:
    return lcm_home() / "files"


def current_session_id() -> str | None:
    for name in ("LCM_SESSION_ID", "CLAUDE_CODE_SESSION_ID"):
        value = os.environ.get(name)
        if value:
            try:
                value.encode("utf-8")  # the environment may hold any bytes; SQLite takes UTF-8 only
            except UnicodeEncodeError:
                raise LcmError(f"{name} is not valid UTF-8", f"unset {name}, or set it to a session id") from None
            return value
    return None


def new_id(prefix: str) -> str:
    """`sum_` / `file_` / `grant_` ... + 16 hex characters."""
    return f"{prefix}_{os.urandom(8).hex()}"


def now_iso() -> str:
    """UTC now as 2026-11-23T09:01:39.123Z, the shape transcripts use."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def estimate_tokens(text: str | None) -> int:
    """About four characters a token: cheap, deterministic, close enough for budgets."""
    return math.ceil(len(text) / 4) if text else 0


# ---------------------------------------------------------------------------
# Schema: an append-only list. Never edit a released migration; add one.
# ---------------------------------------------------------------------------

# A conversational message: a typed prompt or an assistant's text, not a tool call (flat text
# `Name {input}`), tool result, harness-injected or empty line. The WHERE of the partial index
# messages_talk: a query must repeat it verbatim to use the index, and it never changes.
TALK_WHERE = ("is_meta = 0 AND token_count > 0 AND (role = 'user' AND instr(raw, 'tool_use_id') = 0"
              " OR role = 'assistant' AND NOT (substr(content, instr(content, ' '), 2) = ' {'"
              " AND instr(substr(content, 1, 80), ' ') > 0))")


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


def _place_sidechains(conn: sqlite3.Connection) -> None:
    """Give the sub-agent messages of an existing vault their place in the conversation order
    (their calls are read from the stored lines; lcm/order.py has the rules)."""
    import lcm.order  # imports only this module
    lcm.order.place_existing(conn)


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
            cwd TEXT,
            git_branch TEXT,
            model TEXT,                         -- assistant model
            api_message_id TEXT,                -- message.id: one API response spans several lines
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
    # 4: a session's conversation order (lcm/order.py): ORDER BY seq is the main thread in
    # transcript order with each sub-agent's run right after the tool call that started it
    [
        lambda conn: _require_sqlite((3, 31), "generated columns"),
        # sub-agent (sidechain) message: its seq, set by lcm.order.place_threads at ingest
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
        f"CREATE INDEX IF NOT EXISTS messages_talk ON messages(session_id, id, agent_id, role) WHERE {TALK_WHERE}",
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
        ) WITHOUT ROWID""",                     # was masked when stored (lcm/mask.py); older rows are masked on output
        "INSERT INTO vault_meta VALUES ('masked_from_message', (SELECT coalesce(max(id), 0) + 1 FROM messages))",
    ],
    # 8: session digests (lcm/digest.py), written when a session ends: its decisions, bugs found,
    # failed approaches and what was done; one per session, rewritten when the session goes on
    [
        """CREATE TABLE IF NOT EXISTS digests (
            session_id TEXT PRIMARY KEY,        -- sessions.session_id
            text TEXT NOT NULL,                 -- markdown, masked
            level TEXT NOT NULL,                -- 'model' | 'extractive'
            created_at TEXT NOT NULL            -- ISO-8601 UTC of the last write
        )""",
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
PAGE_SIZE = 16384  # of new vaults (an existing vault keeps its own)


def has_fts5(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._lcm_probe USING fts5(x)")
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


def connect(explicit: str | None = None, *, create: bool = True, readonly: bool = False) -> sqlite3.Connection:
    """Open (and if needed create and migrate) the vault.

    create=False refuses a missing vault with a hint instead of making an empty one.
    """
    path = _db_path_str(explicit)
    remove_stale_stages("/dev/shm")
    new = not os.path.exists(path)
    if new:
        if not create or readonly:
            raise LcmError(f"no vault at {path}", "run lcm_init.py or lcm_ingest.py --all first, or pass --db")
        try:
            os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
            # create the file 0600 before SQLite opens it with the umask's mode
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise (storage_error(exc, path, "cannot create vault") or LcmError(
                f"cannot create vault {path}: {exc.strerror}", "check that its directory can be made, or set LCM_DB")) from None
    global _vault
    _vault = path
    try:
        uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
        # isolation_level=None: we issue BEGIN ourselves, so nothing commits behind our back
        conn = sqlite3.connect(uri, uri=True, timeout=10.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        # wait for a concurrent writer (a hook, a background compaction) instead of failing
        conn.execute("PRAGMA busy_timeout = 10000")
        # summary_sources and friends rely on references being real
        conn.execute("PRAGMA foreign_keys = ON")
        if new:
            # before anything is written: 16 KB pages hold a typical transcript line (3-4 KB)
            # plus its text without an overflow chain; measured -15% bulk ingest time, grep alike
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        if not readonly:
            # readers never block the writer; hooks write while Claude greps
            conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL is durable across application crashes and much faster
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn, path)
        elif _schema_version(conn) > SCHEMA_VERSION:
            migrate(conn, path)  # raises the "newer schema" error
    except sqlite3.Error as exc:
        raise (storage_error(exc, path, "cannot open vault") or LcmError(
            f"cannot open vault {path}: {exc}", "lcm_doctor.py checks the vault and says what is wrong")) from None
    return conn


STAGE_PREFIX = "lcm-ingest-"  # + pid + "-": a bulk import's stage directory (see lcm.ingest)


def stale_stages(parent: str) -> list[str]:
    """The stage directories in `parent` of imports whose process is gone (killed mid-way)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(STAGE_PREFIX)]
    except OSError:
        return []  # no such directory (macOS, Windows)
    stale = []
    for name in names:
        pid = name[len(STAGE_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            stale.append(os.path.join(parent, name))
        except OSError:
            pass  # alive, another user's
    return stale


def remove_stale_stages(parent: str) -> None:
    """Delete the stage directories that imports killed mid-way left in `parent`: in /dev/shm
    they hold memory until the next reboot. connect() looks there each time (one listdir)."""
    for path in stale_stages(parent):
        import shutil
        shutil.rmtree(path, ignore_errors=True)


_vault: str | None = None  # the vault connect() opened last: run() names it in storage errors

# SQLite's primary result codes (sqlite3.h) that have a cause a user can act on
_SQLITE_CAUSES = {3: "permission", 5: "busy", 6: "busy", 8: "readonly", 10: "io", 11: "corrupt", 13: "full",
                  14: "cantopen", 23: "permission", 26: "corrupt"}
_SQLITE_TEXTS = (("disk is full", "full"), ("readonly", "readonly"), ("unable to open", "cantopen"),
                 ("not a database", "corrupt"), ("malformed", "corrupt"), ("disk i/o", "io"),
                 ("database is locked", "busy"))
_ERRNO_CAUSES = {"ENOSPC": "full", "EDQUOT": "full", "EFBIG": "full", "EROFS": "readonly", "EACCES": "permission",
                 "EPERM": "permission"}


def _path_cause(path: str, where: str) -> str | None:
    """Why the vault at `path` cannot be opened or written, looked up on disk (SQLite often just
    says "unable to open database file")."""
    if not os.path.isdir(where):
        return "nodir"
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return "readonly"
    except (OSError, AttributeError):
        pass
    for name in (path, path + "-wal", path + "-shm", where):
        if os.path.exists(name) and not os.access(name, os.W_OK):
            return "permission"
    return None


def storage_error(exc: BaseException, path: str | None = None, doing: str = "") -> LcmError | None:
    """An LcmError that names the real cause of a failed read or write of the vault or lcm's
    files (disk full, read-only, permissions, a busy or damaged vault); None when `exc` is none
    of those. Only real damage points to lcm_doctor.py, and no hint suggests discarding a vault."""
    import errno
    cause = None
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
        cause = _SQLITE_CAUSES.get(code & 0xFF) if code is not None else None
        text = str(exc).lower()
        cause = cause or next((c for t, c in _SQLITE_TEXTS if t in text), None)
    elif isinstance(exc, OSError) and exc.errno is not None:
        cause = _ERRNO_CAUSES.get(errno.errorcode.get(exc.errno, ""))
        path = path or (exc.filename if isinstance(exc.filename, str) else None)
    if cause is None:
        return None
    path = path or _vault or _db_path_str()
    where = os.path.dirname(path) or "."
    vault = path.startswith((_vault or _db_path_str(), _db_path_str()))  # the vault, its -wal or -shm
    if cause in ("cantopen", "readonly", "permission"):
        found = _path_cause(path, where)
        if found and (cause == "cantopen" or found != "nodir"):
            cause = found
    head = f"{doing} {path}: " if doing else ""
    what, hint = {
        "full": (f"the disk holding {where} is full (or a file size limit was reached)",
                 f"free some space there (df -h {where}) and run the command again"
                 + ("; the vault is not damaged" if vault else "")),
        "readonly": (f"{path} cannot be written: the file, its directory or its filesystem is read-only",
                     f"make the vault, its -wal and -shm files and {where} writable by you (ls -l {where}), or "
                     "remount the filesystem read-write; the vault is not damaged" if vault else
                     f"make {where} writable by you (ls -ld {where}), or write somewhere else"),
        "permission": (f"permission denied on {path}",
                       f"check the owner and mode of the vault, its -wal and -shm files and {where} (ls -l {where}); "
                       "lcm makes them for the user who runs it, 0600 and 0700" if vault else
                       f"check the owner and mode of {path} and {where} (ls -ld {where})"),
        "nodir": (f"the directory {where} does not exist", "create it, or point --db / LCM_DB at the vault"),
        "cantopen": (f"{path} cannot be opened",
                     f"check that {where} exists and that you may read and write it and the vault (ls -ld {where} {path})"),
        "busy": (f"{path} is busy: another lcm process kept it locked too long",
                 "wait for the import or compaction that is running to finish, then run the command again"),
        "io": (f"disk I/O error on {path}",
               f"check the free space (df -h {where}) and the system log; then lcm_doctor.py checks the vault"),
        "corrupt": (f"{path} is damaged",
                    "run lcm_doctor.py: it checks the vault, and with --fix backs it up before repairing anything"),
    }[cause]
    error = LcmError(f"{head}{what} ({exc})" if cause in ("corrupt", "io") else f"{head}{what}", hint)
    error.cause = cause  # lcm_doctor tells a damaged vault from one it may not write
    return error


class transaction:
    """`with transaction(conn):` = BEGIN IMMEDIATE ... COMMIT, ROLLBACK on error."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if not exc_type:
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:  # SQLite has already rolled back after some errors (disk full)
            self.conn.execute("ROLLBACK")


# ---------------------------------------------------------------------------
# Command-line skeleton shared by every script
# ---------------------------------------------------------------------------

def _help_width() -> int:
    """The terminal's width for --help, as shutil.get_terminal_size would find it, less 2."""
    try:
        return int(os.environ["COLUMNS"]) - 2
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns - 2
    except (AttributeError, ValueError, OSError):
        return 78


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An ArgumentParser whose --help is the script's docstring, with --db and --json."""
    import argparse
    summary, _, details = (doc or "").strip().partition("\n")
    width = _help_width()
    p = argparse.ArgumentParser(
        description=summary,
        epilog=details.strip() or None,
        # the width given up front: argparse would import shutil (several ms) to find it
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=width),
    )
    p.add_argument("--db", metavar="PATH", help="vault file (default: $LCM_DB, $LCM_HOME/lcm.db, ~/.claude-lcm/lcm.db)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    return p


def add_session_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", metavar="ID", help="session id or a unique prefix of it (default: $LCM_SESSION_ID)")


def masked_from_message(conn: sqlite3.Connection) -> int:
    """The first messages.id whose content was masked when it was stored: every row from there on
    was written by a version that masks at ingest (or lcm_doctor.py --remask ran). Rows before it
    must be masked whenever they are shown. A vault too old to say: no row is taken as masked."""
    try:
        row = conn.execute("SELECT value FROM vault_meta WHERE key = 'masked_from_message'").fetchone()
    except sqlite3.OperationalError:  # opened read-only before its migration
        return 1 << 62
    return int(row[0]) if row else 1 << 62


def resolve_session(conn: sqlite3.Connection, text: str) -> str:
    """The stored session id that `text` names: the id itself or a unique prefix of it (8 printed
    characters are enough). LcmError when no session or several sessions match."""
    text = text.strip()
    if not text:
        raise LcmError("--session is empty", SESSIONS_HINT)
    if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (text,)).fetchone():
        return text
    # a range on the primary key, not LIKE: ids may hold _ and %, and the index does the work
    found = [r[0] for r in conn.execute(
        "SELECT session_id FROM sessions WHERE session_id > ? AND session_id < ? ORDER BY session_id LIMIT 4",
        (text, text + "\U0010ffff"))]
    if len(found) == 1:
        return found[0]
    if not found:
        raise LcmError(f"no session {text!r} in the vault", SESSIONS_HINT)
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    raise LcmError(f"session prefix {text!r} is ambiguous: it starts {shown}",
                   "give more characters of the id; " + SESSIONS_HINT)


SESSIONS_HINT = 'python3 "$LCM_SCRIPTS/lcm_sessions.py" lists the stored sessions and their ids'
LIMIT_MAX = 200  # the most results one page may hold: every output must fit an agent's context


def _limit(raw: str) -> int:
    import argparse
    value = int(raw) if raw.strip().lstrip("-").isdigit() else None
    if value is None or not 1 <= value <= LIMIT_MAX:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {LIMIT_MAX} (page with --offset)")
    return value


def int_arg(low: int = 0, high: int = MAX_INT_ARG) -> Callable[[str], int]:
    """An argparse type: an integer from low to high (a bad value is a usage error, exit 2)."""
    def parse(raw: str) -> int:
        import argparse
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{raw[:40]} is not between {low} and {high}")
        return value
    return parse


def seconds_arg(raw: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    import argparse
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not a number") from None
    if not 0 < value <= 10**7:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{raw[:40]} is not a number of seconds above 0")
    return value


def add_limit_arg(p: argparse.ArgumentParser, default: int = 20) -> None:
    p.add_argument("--limit", type=_limit, default=default, metavar="N",
                   help=f"at most N results, 1-{LIMIT_MAX} (default {default})")


def shell_quote(text: str) -> str:
    """`text` as one shell word (shlex.quote, without importing shlex)."""
    if text and all(ch.isalnum() or ch in "@%+=:,./-_" for ch in text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def command_line(script: str, *args: str) -> str:
    """A command a user or agent can paste and run as is: python3 "$LCM_SCRIPTS/<script>" ARGS.
    Arguments are quoted; one that starts with '-' but is not an option goes after `--`."""
    positional = [shell_quote(a) for a in args if isinstance(a, Positional)]
    options = [shell_quote(str(a)) for a in args if not isinstance(a, Positional)]
    if any(a.startswith("-") for a in args if isinstance(a, Positional)):
        words = options + ["--"] + positional
    else:
        words = positional + options
    return " ".join([f'python3 "$LCM_SCRIPTS/{script}"'] + words)


class Positional(str):
    """An argument of command_line that is a positional value (an id, a query), not an option."""


def print_json(data) -> None:
    import json  # here: a text-mode lcm_grep never needs it
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=None) + "\n")


def freeze_imports() -> None:
    """Call once in a script's `__main__` block, before main().

    Everything allocated so far (modules, and site's imports) lives until exit, yet Python's
    collector would walk it in every full collection and once more at shutdown. gc.freeze() sets
    it aside: about 5 ms of a 60 ms grep process here. Objects made later are collected as usual.
    """
    import gc
    gc.freeze()


def _check_text(argv: list[str]) -> None:
    """Refuse arguments that are not UTF-8 (Python hands them over with surrogate escapes, which
    SQLite, JSON and the terminal all reject later, far from the cause)."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")[:60]
            raise LcmError(f"argument {shown!r} is not valid UTF-8 text",
                           "pass ids, text and paths as UTF-8 (rename a file whose name is not)") from None


def _report(exc: LcmError) -> int:
    sys.stderr.write(f"Error: {exc.message}\n")
    if exc.hint:
        sys.stderr.write(f"Hint: {exc.hint}\n")
    return 1


def run(main: Callable[[list[str] | None], int], argv: Iterable[str] | None = None) -> int:
    """Call main, turning an LcmError, and a storage failure with a known cause (disk full,
    read-only, permissions, damage), into `Error: ... / Hint: ...` on stderr and exit 1.

    A closed stdout (`| head`) ends the command quietly with 141, as SIGPIPE would.
    """
    try:
        args = None if argv is None else list(argv)
        _check_text(sys.argv[1:] if args is None else args)
        code = main(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader left (`| head`): stop quietly, as Unix tools do; stdout goes to /dev/null so
        # the interpreter's own flush at exit does not complain either
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141  # 128 + SIGPIPE, what `grep | head` reports
    except LcmError as exc:
        return _report(exc)
    except (sqlite3.Error, OSError) as exc:
        error = storage_error(exc)
        if error is None and isinstance(exc, OSError) and isinstance(exc.filename, str):
            # a path the user gave that cannot be used: too long, missing, a directory, ...
            name = exc.filename if len(exc.filename) <= 200 else exc.filename[:200] + "..."
            error = LcmError(f"{name}: {exc.strerror}", "check the path")
        if error is None:
            raise
        return _report(error)
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        return 130
