"""What lcm_grep finds: one record per result type (ResultType, in TYPES), a search's scope
filters over it (Source), and the time-bounded scan.

A ResultType holds every fact about one kind of result: its table, indexes, columns, time
columns, the keys its results carry, its head line and `Next:` commands, how a grant limits it and
whether the prompt hook's recall searches it. A Source is one type under one search's scope
(session, project, grant, dates, role).
lcm.search.rank orders what a Source holds; lcm.search.engine puts the types together. Library only.
"""
from __future__ import annotations

import os
import re
import sqlite3
import time
from datetime import datetime, timedelta, timezone

import lcm.base.config
from lcm.base.shell import Positional
from lcm.base.errors import LcmError

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


class ResultType:
    """Everything lcm knows about one kind of search result, in one record: adding a type is one
    record in TYPES (and the migration that makes its table and indexes).

    The table's rows are read as `t`; `columns` is the SELECT list, with the searched text selected
    as `content` and the time shown as `created_at`. (A plain class: importing dataclasses costs
    ~7 ms of every grep.)

      name           what --type calls it and results say in "type"
      table, key     where its rows live; the integer key its indexes point at (rowid or id)
      text           the searched text, as a column of t
      since_column   --since keeps rows whose this is at or after it ...
      before_column  ... and --before those whose this is before it
      fts            its word index (FTS5, porter + unicode61), or None: scanned
      substring      its trigram index, where a migration made one, or None: scanned
      spans          its rows lie inside their session's span (sessions.first_at .. last_at):
                     --since/--before also keep only the sessions that reach it, which narrows a
                     scan (the time itself has no index: it would weigh 0.011 of the transcripts)
      always         a condition every row must meet
      extra          the keys its results carry beside the common ones
      head           a result -> the rest of its head line after the id
      next           a result -> [(script, *args)]: its Next: commands
      grant          under a grant of nodes: "messages"/"summaries", the rows below the granted
                     nodes; None: a type that lies below no summary, outside such a grant
      recall         whether the prompt hook's recall searches it (lcm.search.recall)
    """

    __slots__ = ("name", "table", "key", "columns", "text", "since_column", "before_column", "fts",
                 "substring", "spans", "always", "extra", "head", "next", "grant", "recall")

    def __init__(self, name: str, table: str, key: str, columns: str, text: str, since_column: str,
                 before_column: str, *, fts: str | None = None, substring: str | None = None,
                 spans: bool = False, always: str = "", extra: tuple = (), head=None, next=None, grant: str | None = None,
                 recall: bool = True):
        self.name, self.table, self.key, self.columns, self.text = name, table, key, columns, text
        self.since_column, self.before_column = since_column, before_column
        self.fts, self.substring, self.spans, self.always, self.extra = fts, substring, spans, always, extra
        self.head, self.next, self.grant, self.recall = head, next, grant, recall

    def __repr__(self) -> str:
        return f"ResultType({self.name}: {self.table})"


def _session_of(r: dict) -> str:
    return f"session {(r['session_id'] or '')[:8]}"


def _describe_then_expand(r: dict) -> list:
    return [("lcm_describe.py", Positional(r["id"])),
            ("lcm_expand.py", Positional(r["covering_summary_id"] or r["id"]))]


def _open_session(r: dict) -> list:
    return [("lcm_sessions.py", Positional(r["session_id"]))] if r["session_id"] else []


# Every type is dated by its conversation, never by when lcm wrote the row: a digest written
# today of a session from last year is last year's, and so is a file kept aside at its import.
# These expressions are its time shown and the column --since/--before compare (the row's own
# created_at only where the conversation is gone).
# a session's digest: the session's span (--since: it ran after; --before: it started before)
DIGEST_LAST_AT = "coalesce((SELECT s.last_at FROM sessions s WHERE s.session_id = t.session_id), t.created_at)"
DIGEST_FIRST_AT = "coalesce((SELECT s.first_at FROM sessions s WHERE s.session_id = t.session_id), t.created_at)"
# a checkpoint: the time of the last message it saw
CHECKPOINT_AT = "coalesce((SELECT m.created_at FROM messages m WHERE m.id = t.last_message_id), t.created_at)"
# a large block kept aside: the time of the message it came from
FILE_AT = "coalesce((SELECT m.created_at FROM messages m WHERE m.uuid = t.message_uuid), t.created_at)"

TYPES = {t.name: t for t in (
    ResultType(
        "message", "messages", "id",
        "t.id AS rowid_, t.uuid, t.session_id, t.role, t.created_at, lcm_text(t.content) AS content,"
        # CASE: only a user row's stored line is read (a plain line is kilobytes)
        " CASE WHEN t.role = 'user' THEN instr(t.raw, 'tool_use_id') > 0 ELSE 0 END AS is_tool",
        "lcm_text(t.content)", "t.created_at", "t.created_at", fts="messages_fts", spans=True, grant="messages",
        head=lambda r: (f"{r['role']}  {r['when']}  {_session_of(r)}"
                        + (f"  in {r['covering_summary_id']}" if r["covering_summary_id"] else "")
                        + (f"  (next to {r['next_to'][:8]})" if r["next_to"] else "")),
        next=_describe_then_expand),
    ResultType(
        "summary", "summaries", "rowid",
        "t.rowid AS rowid_, t.id, t.session_id, t.kind, t.depth, t.parent_id,"
        " t.earliest_at AS created_at, t.content", "t.content", "t.latest_at", "t.earliest_at",
        fts="summaries_fts", grant="summaries",
        head=lambda r: f"{r['kind']} summary (depth {r['depth']})  {r['when']}  {_session_of(r)}",
        next=_describe_then_expand),
    ResultType(
        "note", "notes", "rowid",
        "t.rowid AS rowid_, t.id, t.session_id, t.project, t.created_at, t.content", "t.content",
        "t.created_at", "t.created_at", fts="notes_fts", extra=("project",),
        head=lambda r: f"note  {r['when']}  {r.get('project') or 'all projects'}",
        next=lambda r: [("lcm_remember.py", "--list", "--all")]),
    # small tables (one row per session or per checkpoint): no word index of their own; their
    # substrings are found through a trigram index or a scan
    ResultType(
        "title", "sessions", "rowid",
        "t.rowid AS rowid_, t.session_id AS id, t.session_id, t.project, t.last_at AS created_at,"
        " t.title AS content", "t.title", "t.last_at", "t.first_at", substring="sessions_tri",
        always="t.title IS NOT NULL", extra=("project",), recall=False,  # a title names, it answers nothing
        head=lambda r: f"title  {r['when']}  {_session_of(r)}  {r.get('project') or ''}",
        next=_open_session),
    ResultType(
        "checkpoint", "checkpoints", "id",
        f"t.id AS rowid_, t.id, t.session_id, t.project, {CHECKPOINT_AT} AS created_at, t.path, t.content",
        "t.content", CHECKPOINT_AT, CHECKPOINT_AT, substring="checkpoints_tri", extra=("project", "path"),
        head=lambda r: f"checkpoint  {r['when']}  {r.get('path') or _session_of(r)}",
        next=_open_session),
    ResultType(
        "digest", "digests", "rowid",
        f"t.rowid AS rowid_, t.session_id AS id, t.session_id, t.level, {DIGEST_LAST_AT} AS created_at,"
        " t.text AS content", "t.text", DIGEST_LAST_AT, DIGEST_FIRST_AT, substring="digests_tri", extra=("level",),
        head=lambda r: f"digest  {r['when']}  {_session_of(r)} ({r.get('level')})",
        next=_open_session),
    # externalised large blocks: their text is on disk, indexed by files_fts (lcm.capture.indexes);
    # `content` is the outline, the text itself is read for the snippet. Not for recall: a past
    # tool's output is long and seldom what a new prompt asks for
    ResultType(
        "file", "files", "rowid",
        f"t.rowid AS rowid_, t.id, t.session_id, {FILE_AT} AS created_at, t.name, t.kind, t.path, t.message_uuid,"
        " t.exploration AS content", "t.exploration", FILE_AT, FILE_AT, fts="files_fts",
        extra=("name", "message_uuid"), recall=False,
        head=lambda r: f"file  {r['when']}  {r.get('name') or ''}",
        next=lambda r: [("lcm_describe.py", Positional(r["id"]))]),
)}


def available(conn) -> set[str]:
    """The result types this vault can search (a vault may predate a table, or lack FTS5)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {name for name, rtype in TYPES.items() if rtype.table in tables}


def _exists(conn, table: str | None) -> bool:
    return bool(table) and conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


class Source:
    """One result type as one search sees it: where to look (its record) and how to filter."""

    def __init__(self, conn, kind, session, project, since, before, role, typed=False, sessions=None,
                 within=None):
        self.kind = kind
        rtype = self.type = TYPES[kind]
        self.table, self.key, self.columns, self.text = rtype.table, rtype.key, rtype.columns, rtype.text
        self.fts = rtype.fts
        self.has_fts = _exists(conn, rtype.fts)
        # the indexes derived from the messages (lcm.capture.indexes), where the vault has them
        derived = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN"
                                              " ('messages_cjk', 'exchange_fts')")} \
            if kind == "message" and self.has_fts else set()
        self.cjk = "messages_cjk" if "messages_cjk" in derived else None
        self.exchange = "exchange_fts" if "exchange_fts" in derived else None
        self.tri = rtype.substring if _exists(conn, rtype.substring) else None
        self.next_to: dict = {}  # rowid -> uuid of the hit a neighbour-only result sits next to
        self.coverage: dict = {}  # rowid -> share of the query's weight (IDF) its text holds
        where, params = [rtype.always] if rtype.always else [], []
        if sessions is not None:  # a grant's sessions
            where.append(f"t.session_id IN ({','.join('?' * len(sessions))})" if sessions else "0")
            params += sessions
        if within is not None:  # lcm.vault.grants.Scope: in the query, so a page counts only what it may show
            clause, more = within.sql(rtype.grant)
            where.append(clause)
            params += more
        if session:
            where.append("t.session_id = ?")
            params.append(session)
        elif project and kind == "note":
            # notes that apply there: global ones, those pinned for it or above it, or below it
            from lcm.search.notes import project_chain  # only for a notes search in a project
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
            where.append(f"{rtype.since_column} >= ?")
            params.append(since)
            if rtype.spans:
                where.append("t.session_id IN (SELECT session_id FROM sessions WHERE last_at >= ?)")
                params.append(since)
        if before:
            where.append(f"{rtype.before_column} < ?")
            params.append(before)
            if rtype.spans:
                where.append("t.session_id IN (SELECT session_id FROM sessions WHERE first_at < ?)")
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


ALARM_SLACK = 0.05  # seconds: an interval timer and time.monotonic() may disagree by this much


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
                # interrupted at the deadline: by the progress handler, or by regex mode's alarm
                # landing inside lcm_text() (SQLite then only says a function raised)
                if "interrupted" in str(exc) or time.monotonic() >= deadline - ALARM_SLACK:
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

