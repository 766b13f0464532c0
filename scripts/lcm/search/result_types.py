"""Where lcm_grep looks: the searchable result types, their scope filters, the time-bounded scan.

A Source names the table, full-text index and columns of one result type (message, summary,
note, ...) and the WHERE clause of a search's scope (session, project, grant, dates, role).
lcm.search.rank orders what a Source holds; lcm.search.engine puts the types together. Library only.
"""
from __future__ import annotations

import os
import re
import sqlite3
import time
from datetime import datetime, timedelta, timezone

import lcm.base.config
import lcm.vault.schema
from lcm.base.errors import LcmError

SCAN_SECONDS = 3.0        # wall-time bound of a regex scan
SCAN_BATCH = 5000         # ids per scan step, newest first

def parse_when(value: str | None, flag: str) -> str | None:
    """ISO date/time or relative age (30m, 3h, 2d, 1w) -> a comparable UTC ISO string."""
    if not value:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", value.lower())
    try:
        if m:
            unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
            when = datetime.now(timezone.utc) - timedelta(**{unit: int(m.group(1))})
        else:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
        return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except ValueError:
        raise LcmError(f"{flag} {short(value)} is neither an ISO date nor an age",
                       f"use e.g. {flag} 2026-11-20, {flag} 2026-11-20T09:30 or {flag} 2d (m h d w)") from None
    except OverflowError:  # an age reaching past year 1, a date at the calendar's edge
        raise LcmError(f"{flag} {short(value)} is out of range",
                       f"give a date between years 1 and 9999, or an age such as {flag} 2d") from None


def resolve_scope(conn, session, project, all_sessions):
    """(session, project) to filter on; the default is the current session's project."""
    if all_sessions or session or project:
        return session, (os.path.abspath(os.path.expanduser(project)) if project else None)
    current = lcm.base.config.current_session_id()
    if not current:
        return None, None
    row = conn.execute("SELECT project FROM sessions WHERE session_id = ?", (current,)).fetchone()
    if row and row["project"]:
        return None, row["project"]
    # a session not ingested yet: its project is Claude Code's project dir, else where we run
    return None, os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


# Each result type: (table, its full-text index or None, key column, columns selected, earliest
# and latest time columns, a condition every row must meet). `content` is the text searched.
TYPES = {
    "message": ("messages", "messages_fts", "id",
                "t.id AS rowid_, t.uuid, t.session_id, t.role, t.created_at, t.content,"
                # CASE: only a user row's stored line is read (a plain line is kilobytes)
                " CASE WHEN t.role = 'user' THEN instr(t.raw, 'tool_use_id') > 0 ELSE 0 END AS is_tool",
                "t.created_at", "t.created_at", ""),
    "summary": ("summaries", "summaries_fts", "rowid",
                "t.rowid AS rowid_, t.id, t.session_id, t.kind, t.depth, t.parent_id,"
                " t.earliest_at AS created_at, t.content", "t.latest_at", "t.earliest_at", ""),
    "note": ("notes", "notes_fts", "rowid", "t.rowid AS rowid_, t.id, t.session_id, t.project, t.created_at,"
             " t.content", "t.created_at", "t.created_at", ""),
    # small tables (one row per session or per checkpoint): no word index of their own; their
    # substrings are found through a trigram index (Source.tri) or a scan
    "title": ("sessions", None, "rowid", "t.rowid AS rowid_, t.session_id AS id, t.session_id, t.project,"
              " t.last_at AS created_at, t.title AS content", "t.last_at", "t.first_at", "t.title IS NOT NULL"),
    "checkpoint": ("checkpoints", None, "id", "t.id AS rowid_, t.id, t.session_id, t.project, t.created_at,"
                   " t.path, t.content", "t.created_at", "t.created_at", ""),
    # session digests (SessionEnd): session_id, text, level, created_at
    "digest": ("digests", None, "rowid", "t.rowid AS rowid_, t.session_id AS id, t.session_id, t.level,"
               " t.created_at, t.text AS content", "t.created_at", "t.created_at", ""),
    # externalised large blocks: their text is on disk, indexed by files_fts (lcm.capture.indexes);
    # `content` is the outline, the text itself is read for the snippet
    "file": ("files", "files_fts", "rowid", "t.rowid AS rowid_, t.id, t.session_id, t.created_at, t.name,"
             " t.kind, t.path, t.message_uuid, t.exploration AS content", "t.created_at", "t.created_at", ""),
}


def available(conn) -> set[str]:
    """The result types this vault can search (a vault may predate a table, or lack FTS5)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {kind for kind, spec in TYPES.items() if spec[0] in tables}


class Source:
    """One result type: where to look and how to filter."""

    def __init__(self, conn, kind, session, project, since, before, role, typed=False, sessions=None,
                 within=None):
        self.kind = kind
        self.table, self.fts, self.key, cols, time_lo, time_hi, always = TYPES[kind]
        # the searched text as a column (selected as `content`)
        self.text = {"title": "t.title", "digest": "t.text", "file": "t.exploration"}.get(kind, "t.content")
        self.has_fts = bool(self.fts) and conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self.fts,)).fetchone() is not None
        self.columns = cols
        # the indexes derived from the messages (lcm.capture.indexes), where the vault has them
        derived = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN"
                                              " ('messages_cjk', 'exchange_fts')")} \
            if kind == "message" and self.has_fts else set()
        self.cjk = "messages_cjk" if "messages_cjk" in derived else None
        self.exchange = "exchange_fts" if "exchange_fts" in derived else None
        # a scanned type's trigram index (lcm.vault.schema.SUBSTRING_INDEXES), where the vault has it
        tri = next((index for index, table, *_ in lcm.vault.schema.SUBSTRING_INDEXES if table == self.table), None)
        self.tri = tri if tri and conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                               (tri,)).fetchone() else None
        self.next_to: dict = {}  # rowid -> uuid of the hit a neighbour-only result sits next to
        self.coverage: dict = {}  # rowid -> share of the query's weight (IDF) its text holds
        where, params = [always] if always else [], []
        if sessions is not None:  # a grant's sessions
            where.append(f"t.session_id IN ({','.join('?' * len(sessions))})" if sessions else "0")
            params += sessions
        if within is not None:  # lcm.vault.grants.Scope: in the query, so a page counts only what it may show
            clause, more = within.sql(kind)
            where.append(clause)
            params += more
        if session:
            where.append("t.session_id = ?")
            params.append(session)
        elif project and kind == "note":
            # notes that apply there: global ones, those pinned for it or above it, or below it
            from lcm.search.notes import project_chain# only for a notes search in a project
            chain = project_chain(project)
            below = project.rstrip("/") + "/"
            where.append(f"(t.project IS NULL OR t.project IN ({','.join('?' * len(chain))})"
                         " OR substr(t.project, 1, ?) = ?)")  # not LIKE: see below
            params += [*chain, len(below), below]
        elif project:
            # a prefix test, not LIKE: SQLite refuses LIKE patterns over 50,000 bytes
            where.append("t.session_id IN (SELECT session_id FROM sessions WHERE project = ?"
                         " OR substr(project, 1, ?) = ?)")
            prefix = project.rstrip("/") + "/"
            params += [project, len(prefix), prefix]
        if since:
            where.append(f"{time_lo} >= ?")
            params.append(since)
        if before:
            where.append(f"{time_hi} < ?")
            params.append(before)
        if role and kind == "message":
            where.append("t.role = ?")
            params.append(role)
        if typed and kind == "message":  # what the person typed: not tool results (also user role),
            # nor harness-injected text, nor a sub-agent's task (the main agent wrote that)
            where.append("t.role = 'user' AND t.is_meta = 0 AND t.is_sidechain = 0"
                         " AND instr(t.raw, 'tool_use_id') = 0")
        self.where = " AND ".join(where) or "1"
        self.params = params
        self.id_range = None
        if session and kind == "message":
            lo, hi, n = conn.execute("SELECT min(id), max(id), count(*) FROM messages WHERE session_id = ?",
                                     (session,)).fetchone()
            if lo is None:
                self.id_range = (0, -1)
            elif hi - lo < 4 * n + 1000:  # mostly contiguous (a resumed session may not be)
                self.id_range = (lo, hi)


def like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")



def doc_count(conn, src: Source) -> int:
    row = conn.execute(f"SELECT max({src.key}) FROM {src.table}").fetchone()
    return row[0] or 0


def fetch(conn, src: Source, rowids, scoped: bool = False):
    """The rows of `rowids`; scoped=True keeps only those the search's filters allow (rows found
    through another row, such as a neighbour or an exchange window, rather than by the index)."""
    rows = []
    where, params = (f" AND {src.where}", src.params) if scoped else ("", [])
    for i in range(0, len(rowids), 500):
        chunk = rowids[i:i + 500]
        sql = f"SELECT {src.columns} FROM {src.table} t WHERE t.{src.key} IN ({','.join('?' * len(chunk))}){where}"
        rows += conn.execute(sql, [*chunk, *params]).fetchall()
    return rows


def scan(conn, src: Source, test, want, deadline, prefilter=("", [])):
    """Rows passing `test(content)`, newest first, until `want` found or the deadline passes.

    SQLite itself is interrupted at the deadline (a progress handler), so one slow batch of
    large messages cannot overrun it. Returns (rows, stopped_early).
    """
    hi = doc_count(conn, src)
    extra_sql, extra_params = prefilter
    found = []
    conn.set_progress_handler(lambda: time.monotonic() > deadline, 10000)
    try:
        while hi > 0:
            if time.monotonic() > deadline:
                return found, True
            lo = max(0, hi - SCAN_BATCH)
            sql = (f"SELECT {src.columns} FROM {src.table} t WHERE t.{src.key} > ? AND t.{src.key} <= ?"
                   f" AND {src.where} {extra_sql} ORDER BY t.{src.key} DESC")
            try:
                rows = conn.execute(sql, [lo, hi, *src.params, *extra_params]).fetchall()
            except sqlite3.OperationalError as exc:
                if "interrupted" in str(exc):
                    return found, True
                raise
            for row in rows:
                if test(row["content"]):
                    found.append(row)
                    if len(found) >= want:
                        return found, False
                if time.monotonic() > deadline:
                    return found, True
            hi = lo
        return found, False
    finally:
        conn.set_progress_handler(None, 0)



def short(text: str, width: int = 80) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")

