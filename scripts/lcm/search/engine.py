"""lcm_grep.py's search: puts the result types together and returns the --json document.

auto mode is ranked by lcm.search.rank (BM25 over the rarer words, coverage, conversational neighbours);
full_text runs the user's FTS5 expression; regex runs Python `re` over the stored text, newest
first, within a time limit. Where each type lives and how a scope filters it: lcm.search.result_types.
Library only.
"""
from __future__ import annotations

import re
import sqlite3
import time

import lcm.vault.db
import lcm.base.mask
import lcm.search.query
import lcm.search.rank
import lcm.vault.resolve
from lcm.base.errors import LcmError
from lcm.search.query import Query
from lcm.search.rank import df, newest_window, rank_sql
from lcm.search.result_types import TYPES, Source, doc_count, fetch, parse_when, resolve_scope, scan, short

SNIPPET_CHARS = 200
DEDUPE = True             # one result per distinct text, the best-scored copy
FILE_CANDIDATES = 20      # stored files ranked per query (50 cost ~10 ms on the 1M bench vault)


# ---------------------------------------------------------------------------
# Other modes
# ---------------------------------------------------------------------------

def _rank_full_text(conn, src: Source, query, want):
    """The user's own FTS5 expression, BM25-ranked; over RANK_BUDGET matches, its newest ones."""
    if not src.has_fts:
        if src.kind != "message":
            return [], False  # a type with no index of its own (titles ...), or a vault made without FTS5
        raise LcmError("this vault has no FTS5 index (SQLite built without FTS5)",
                       "use --mode auto (substring fallback) or --mode regex")
    try:
        n_docs = doc_count(conn, src)
        window = ("", [])
        if src.id_range:
            window = ("AND f.rowid BETWEEN ? AND ?", src.id_range)
        elif df(conn, src, query, n_docs) > lcm.search.rank.RANK_BUDGET:
            window = newest_window(conn, src, query)
        ranked = rank_sql(conn, src, query, want, *window)
    except sqlite3.OperationalError as exc:
        raise LcmError(f"invalid FTS5 expression {short(query)}: {exc}",
                       'quote special characters ("foo-bar"), balance parentheses and quotes, '
                       "or use --mode auto for plain words") from None
    rows = {r["rowid_"]: r for r in fetch(conn, src, list(ranked))}
    return [(rel, rows[rowid]) for rowid, rel in ranked.items() if rowid in rows], False


class _Alarm:
    """Interrupt one runaway regex match (catastrophic backtracking) at the deadline."""

    def __init__(self, deadline):
        import signal  # only regex mode needs these
        import threading
        self.deadline = deadline
        self.armed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")

    def __enter__(self):
        import signal
        if self.armed:
            self.previous = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, max(self.deadline - time.monotonic(), 0.01))
        return self

    def _fire(self, *_):
        raise TimeoutError

    def __exit__(self, *exc):
        import signal
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)



def _compile_regex(query):
    if not query:
        raise LcmError("the regular expression is empty, and would match every message",
                       "give a pattern to search for, e.g. 'def \\w+_pass'")
    try:
        return re.compile(query)
    except re.error as exc:
        raise LcmError(f"invalid regular expression {short(query)}: {exc}",
                       r"escape special characters (\( \[ \* \.), or use --mode auto for plain text") from None


def _rank_regex(conn, src: Source, pattern, want, deadline):
    try:
        with _Alarm(deadline):
            rows, stopped = scan(conn, src, lambda c: pattern.search(c) is not None, want, deadline)
    except TimeoutError:
        rows, stopped = [], True
    return [(0.0, r) for r in rows], stopped


# ---------------------------------------------------------------------------
# search()
# ---------------------------------------------------------------------------

def _snippet(content: str, finders) -> str:
    """About SNIPPET_CHARS of `content` around the first of `finders` (Terms) that matches."""
    start, low = 0, None
    for finder in finders:
        if finder.needles and len(finder.needles[0]) > 2:
            # centred on the term's stem, found as a substring: compiling the term's regex costs
            # more than a whole warm search (~0.5 ms each, in every grep process)
            low = content.lower() if low is None else low
            at = low.find(finder.needles[0])
        else:
            m = finder.pattern.search(content) if finder.pattern else None
            at = m.start() if m else -1
        if at >= 0:
            start = max(0, at - SNIPPET_CHARS // 3)
            break
    text = " ".join(content[start:start + SNIPPET_CHARS * 2].split())[:SNIPPET_CHARS]
    return ("..." if start else "") + text + ("..." if len(content) > start + len(text) + 1 else "")


SCOPES = {"messages": ["message"], "summaries": ["summary"], "notes": ["note"]}


def search(conn, q: Query) -> dict:
    """Search every result type (lcm.search.result_types.TYPES) or those `q` names; returns the
    --json document. Its "scope" says where it looked: {"kind": "session" | "project" | "all",
    ...}; when the current project was the default, "stronger_elsewhere" counts other projects'
    hits that outrank its best one.
    """
    mode, limit, offset = q.mode, q.limit, q.offset
    if mode not in ("auto", "full_text", "regex"):
        raise LcmError(f"unknown mode {mode!r}", "use --mode auto, full_text or regex")
    if limit < 1 or offset < 0:
        raise LcmError("--limit must be >= 1 and --offset >= 0", "e.g. --limit 20 --offset 40")
    session = lcm.vault.resolve.by_id(conn, q.session) if q.session else None
    sessions = q.sessions
    defaulted = not (q.all_sessions or session or q.project or sessions is not None)
    session, project = resolve_scope(conn, session, q.project, q.all_sessions or sessions is not None)
    if sessions is not None:
        where = {"kind": "session", "session_ids": list(sessions)}
    elif session:
        where = {"kind": "session", "session_id": session}
    elif project:
        where = {"kind": "project", "project": project, "default": defaulted}
    else:
        where = {"kind": "all"}
    since, before = parse_when(q.since, "--since"), parse_when(q.before, "--before")
    deadline = time.monotonic() + q.time_limit
    want = offset + limit + 1
    unknown = sorted(set(q.types or ()) - set(TYPES))
    if unknown:
        raise LcmError(f"unknown result type {unknown[0]!r}", "use --type with any of " + ", ".join(TYPES))
    kinds = list(q.types) if q.types else SCOPES.get(q.scope, list(TYPES))
    if q.role or q.typed:
        kinds = [k for k in kinds if k == "message"]
    terms, finders, pattern = [], [], None
    if mode == "auto":
        terms = q.terms
        # snippets centre on the most telling word: phrases and long words before short ones
        # (Terms compile their patterns on first use: most snippets need only the first)
        finders = sorted(terms, key=lambda t: (t.kind == "word", -len(t.text)))
    elif mode == "regex":
        pattern = _compile_regex(q.text)
        finders = [lcm.search.query.Term(q.text, "regex", regex=q.text)]  # the same pattern (re caches it)
    query_norm = " ".join(q.text.lower().split())
    scored, stopped, next_to, shared, coverage = [], False, {}, {}, {}
    for kind in kinds:
        if kind != "message" and not _has_rows(conn, TYPES[kind].table):
            continue  # nothing of that type yet (nothing compacted, no note ...): skip its index
        src = Source(conn, kind, session, project, since, before, q.role, q.typed, sessions, q.within)
        if mode == "auto":
            # a stored file's candidates are scored on its outline: fewer of them (its text is long)
            candidates = FILE_CANDIDATES if kind == "file" else lcm.search.rank.CANDIDATES
            hits, cut = (lcm.search.rank.rank_auto(conn, src, terms, max(candidates, want), want, deadline,
                                                   query_norm, shared) if terms else ([], False))
        elif mode == "full_text":
            hits, cut = _rank_full_text(conn, src, q.text, want)
        else:
            hits, cut = _rank_regex(conn, src, pattern, want, deadline)
        scored += [(score, kind, row) for score, row in hits]
        next_to.update(((kind, rowid), uuid) for rowid, uuid in src.next_to.items())
        coverage.update(((kind, rowid), share) for rowid, share in src.coverage.items())
        stopped = stopped or cut
    if mode == "regex":
        scored.sort(key=lambda p: p[2]["created_at"] or "", reverse=True)  # newest first
    else:
        scored.sort(key=lambda p: -p[0])
    scored.sort(key=lambda p: p[1] != "note")  # a pinned note that matches comes first (the sort is stable)
    if DEDUPE:  # the same text stored twice (a resumed or forked session) would fill the page twice
        seen: set = set()
        scored = [p for p in scored if not (p[2]["content"] in seen or seen.add(p[2]["content"]))]
    if not scored and defaulted and project and offset == 0:
        # nothing in the current project: the past the user means may be elsewhere, say so
        doc = search(conn, q.but(all_sessions=True, look_elsewhere=True))
        if doc["results"]:
            doc["scope"] = {"kind": "all", "widened_from": project}
            return {**doc, "widened": True}
        return doc
    if defaulted and project and offset == 0 and q.look_elsewhere and mode != "regex":
        where["stronger_elsewhere"] = _stronger_elsewhere(conn, q, project, scored[0][0])
    page = scored[offset:offset + limit]
    # a message or summary stored by a version that masks when it writes is shown as stored
    # (masking it again would change nothing, and compiling the masks is ~1 ms of a grep); older
    # rows, the other types and any text under redact.txt patterns added since are masked here
    masked_from = {} if lcm.base.mask.has_user_patterns() else lcm.vault.db.masked_from(conn)
    results = [_result(conn, kind, row, score, finders, next_to.get((kind, row["rowid_"])),
                       stored_masked=0 < masked_from.get(kind, 0) <= row["rowid_"])
               for score, kind, row in page]
    for result, (_, kind, row) in zip(results, page):
        # auto mode: the share of the query's weight (rarer words weigh more) the hit's own text holds
        share = coverage.get((kind, row["rowid_"]))
        result["coverage"] = None if share is None else round(share, 3)
    return {"query": q.text, "scope": where, "count": len(results),
            "has_more": len(scored) > offset + limit or stopped,
            "results": results, **({"stopped_early": True} if stopped else {})}


def _stronger_elsewhere(conn, q: Query, project, best) -> int:
    """How many of the whole vault's 10 best hits lie outside `project` and outrank its best."""
    inside = project.rstrip("/")

    def outside(where: str) -> bool:
        return not (where == project or where.startswith(inside + "/"))

    if not any(outside(where) for (where,) in conn.execute("SELECT DISTINCT coalesce(project, '') FROM sessions")):
        return 0  # every session is of this project: no second search (it doubles a grep's cost)
    doc = search(conn, q.but(all_sessions=True, limit=10, offset=0, look_elsewhere=False))
    count = 0
    for r in doc["results"]:
        if r["score"] <= best:
            break
        if r["type"] == "note":
            continue  # notes are scoped by their own project, not by a session's
        row = conn.execute("SELECT project FROM sessions WHERE session_id = ?", (r["session_id"],)).fetchone()
        count += outside((row[0] if row else None) or "")
    return count


def _has_rows(conn, table: str) -> bool:
    """Whether `table` holds anything (False on a vault older than the table, opened read-only)."""
    try:
        return conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None
    except sqlite3.OperationalError:
        return False


def _file_text(row, finders) -> str:
    """The part of an externalised block that a snippet is cut from: a few snippets' worth around
    the first match (the outline when the file is gone). Masking a whole 100 KB file for one
    snippet cost ~2 ms a result."""
    import lcm.capture.files
    try:
        text = lcm.capture.files.read_content(row)
    except LcmError:
        return row["content"]
    for finder in finders:
        m = finder.pattern.search(text) if finder.pattern else None
        if m:
            return text[max(0, m.start() - SNIPPET_CHARS * 2):m.start() + SNIPPET_CHARS * 3]
    return text[:SNIPPET_CHARS * 3]


def _result(conn, kind, row, score, finders, next_to=None, stored_masked=False) -> dict:
    """The --json form of one hit: the keys every result has, then what its type adds (its
    record's `extra`; a message's uuid, role and covering summary; a summary's kind and depth)."""
    rtype = TYPES[kind]
    if kind == "file":
        text = _file_text(row, finders)
    else:  # masked whole before the cut (a vault filled before masking may hold secrets)
        text = row["content"] if stored_masked else lcm.base.mask.mask(row["content"])
    result = {"type": kind, "id": row["id"] if kind != "message" else row["uuid"], "session_id": row["session_id"],
              "uuid": None, "role": None, "created_at": row["created_at"],
              "snippet": _snippet(lcm.base.mask.mask(text) if kind == "file" else text, finders),
              "score": round(score, 4), "covering_summary_id": None, "kind": None, "depth": None,
              "next_to": None, **{key: row[key] for key in rtype.extra}}
    if kind == "message":
        cover = conn.execute("SELECT summary_id FROM summary_sources WHERE message_id = ?",
                             (row["rowid_"],)).fetchone()
        # next_to: the hit a message that lacks the query's words sits next to
        result.update(uuid=row["uuid"], role=row["role"], covering_summary_id=cover[0] if cover else None,
                      next_to=next_to)
    elif kind == "summary":  # kind and depth: leaf or condensed, 0 = over messages
        result.update(covering_summary_id=row["parent_id"], kind=row["kind"], depth=row["depth"])
    return result
