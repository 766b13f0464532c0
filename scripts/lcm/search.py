"""Ranking and filtering behind lcm_grep.py: `search()` returns the --json document.

auto: the query's rarer words are ranked with FTS5 BM25 (bounded, so 1M-message vaults stay
fast), then common words, role and an all-words bonus adjust the score; CJK and emoji are
also found as substrings. full_text: the user's FTS5 expression. regex: Python `re` over the
stored text, newest first, within a time limit. Library only.
"""
from __future__ import annotations

import math
import os
import re
import sqlite3
import time
from datetime import datetime, timedelta, timezone

import lcm.cli
import lcm.config
import lcm.db
import lcm.schema
import lcm.mask
import lcm.query
from lcm.errors import LcmError

CANDIDATES = 50           # BM25 candidates reranked per query (and per page beyond them)
DF_CAP = 8001             # document frequencies are counted up to here, estimated beyond
RANK_BUDGET = 8000        # most FTS matches BM25 scores in one query (keeps 1M-row vaults fast)
RANK_WINDOW = 500         # newest matches ranked when even the rarest query word is that common
SCAN_SECONDS = 3.0        # wall-time bound of a regex scan
AUTO_SCAN_SECONDS = 1.0   # ... and of auto mode's substring scan (CJK inside a run, emoji)
SCAN_BATCH = 5000         # ids per scan step, newest first
COVERAGE_CHARS = 5000     # how much of a long message is checked for the query's words
ALL_TERMS_BONUS = 1.0     # a message holding every term scores x2 (strict tiers measured worse)
ROLE_WEIGHT = {"user": 1.0, "assistant": 0.9, "tool": 0.8}  # people state facts; assistants
# restate them at length; tool output (file dumps, logs) matches every word and answers least
SESSION_WEIGHT = 0.0      # share of the session's best score added to its other turns: measured +1/40
# on one set and it crowds out the 2nd session of a multi-session question, so off
DEDUPE = True             # one result per distinct text, the best-scored copy
NEAR_PAIRS = False        # NEAR(a b) pairs in the BM25 query: better MRR (0.65 -> 0.70) but worse
# recall@10 (0.93 -> 0.88) on bench/recall.py, and recall@10 is what a page of 10-20 results needs
PREFIXES = False          # score long words' 5-letter prefixes (allergy ~ allergic)
COMPOUNDS = True          # adjacent words also as one word ("web workers" ~ WebWorkers)
# A question's words are often in the turn next to the answer (the prompt before a reply, the
# assistant's question before the user's answer): the best hits lend this share of their score
# to their 1st and 2nd conversational neighbours (max, not sum: one strong hit is enough;
# lcm.conversation decides what a neighbour is).
# bench/recall.py: 0.5/0.25 over the 10 best hits; sum instead of max, or every hit lending,
# crowded known-item answers out of the top 10 (0.92 -> 0.84).
NEIGHBOUR_WEIGHTS = (0.5, 0.25)
NEIGHBOUR_SOURCES = 10    # the best hits that lend their score
SNIPPET_CHARS = 200


# ---------------------------------------------------------------------------
# Filters
# ---------------------------------------------------------------------------

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
        raise LcmError(f"{flag} {_short(value)} is neither an ISO date nor an age",
                       f"use e.g. {flag} 2026-11-20, {flag} 2026-11-20T09:30 or {flag} 2d (m h d w)") from None
    except OverflowError:  # an age reaching past year 1, a date at the calendar's edge
        raise LcmError(f"{flag} {_short(value)} is out of range",
                       f"give a date between years 1 and 9999, or an age such as {flag} 2d") from None


def resolve_scope(conn, session, project, all_sessions):
    """(session, project) to filter on; the default is the current session's project."""
    if all_sessions or session or project:
        return session, (os.path.abspath(os.path.expanduser(project)) if project else None)
    current = lcm.config.current_session_id()
    if not current:
        return None, None
    row = conn.execute("SELECT project FROM sessions WHERE session_id = ?", (current,)).fetchone()
    if row and row["project"]:
        return None, row["project"]
    # a session not ingested yet: its project is Claude Code's project dir, else where we run
    return None, os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


class Source:
    """Messages, summaries or notes: where to look and how to filter."""

    def __init__(self, conn, kind, session, project, since, before, role, typed=False, sessions=None):
        self.kind = kind
        self.has_fts = lcm.schema.fts_enabled(conn)
        if kind == "note":
            self.table, self.fts, self.key = "notes", "notes_fts", "rowid"
            cols = "t.rowid AS rowid_, t.id, t.session_id, t.project, t.created_at, t.content"
            time_lo, time_hi = "t.created_at", "t.created_at"
            self.has_fts = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'notes_fts'").fetchone() is not None
        elif kind == "message":
            self.table, self.fts, self.key = "messages", "messages_fts", "id"
            cols = ("t.id AS rowid_, t.uuid, t.session_id, t.role, t.created_at, t.content,"
                    " t.role = 'user' AND instr(t.raw, 'tool_use_id') > 0 AS is_tool")
            time_lo, time_hi = "t.created_at", "t.created_at"
        else:
            self.table, self.fts, self.key = "summaries", "summaries_fts", "rowid"
            cols = ("t.rowid AS rowid_, t.id, t.session_id, t.kind, t.depth, t.parent_id,"
                    " t.earliest_at AS created_at, t.content")
            time_lo, time_hi = "t.latest_at", "t.earliest_at"
        self.columns = cols
        self.next_to: dict = {}  # rowid -> uuid of the hit a neighbour-only result sits next to
        where, params = [], []
        if sessions is not None:  # a grant's sessions
            where.append(f"t.session_id IN ({','.join('?' * len(sessions))})" if sessions else "0")
            params += sessions
        if session:
            where.append("t.session_id = ?")
            params.append(session)
        elif project and kind == "note":
            # notes that apply there: global ones, those pinned for it or above it, or below it
            from lcm.notes import project_chain  # only for a notes search in a project
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


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# ---------------------------------------------------------------------------
# Ranking (auto mode)
# ---------------------------------------------------------------------------

def _doc_count(conn, src: Source) -> int:
    row = conn.execute(f"SELECT max({src.key}) FROM {src.table}").fetchone()
    return row[0] or 0


def _df(conn, src: Source, fts_expr: str, n_docs: int) -> int:
    """Documents matching: counted up to DF_CAP, estimated beyond it from how far into the id
    range the DF_CAP-th match lies (a full count of a common word is slow on a big vault)."""
    sql = (f"SELECT count(*), max(rowid) FROM (SELECT rowid FROM {src.fts} WHERE {src.fts} MATCH ?"
           f" LIMIT {DF_CAP})")
    count, last = conn.execute(sql, (fts_expr,)).fetchone()
    return count if count < DF_CAP or not last else max(count, round(count * n_docs / last))


def _choose_terms(dfs: dict):
    """The rarest terms whose matches add up to at most RANK_BUDGET (always at least one)."""
    chosen, total = [], 0
    for term, df in sorted(dfs.items(), key=lambda p: p[1]):
        if df == 0:
            continue
        if chosen and total + df > RANK_BUDGET:
            break  # common words add little to BM25 and cost the most; they are scored afterwards
        chosen.append(term)
        total += df
    return chosen, total


def _rank_sql(conn, src: Source, expr, want, window="", params=()):
    # rank on rowid + score only: carrying the content through the sort doubles its cost
    join = f"JOIN {src.table} t ON t.{src.key} = f.rowid AND {src.where}" if src.where != "1" else ""
    sql = (f"SELECT f.rowid, bm25({src.fts}) AS bm FROM {src.fts} f {join}"
           f" WHERE {src.fts} MATCH ? {window} ORDER BY bm LIMIT {want}")
    return {r[0]: -r[1] for r in conn.execute(sql, [*src.params, expr, *params])}


def _newest_window(conn, src: Source, expr):
    """A rowid bound keeping only the newest RANK_WINDOW matches of `expr` (cheap: rowid order)."""
    row = conn.execute(f"SELECT rowid FROM {src.fts} WHERE {src.fts} MATCH ? ORDER BY rowid DESC"
                       f" LIMIT 1 OFFSET {RANK_WINDOW}", (expr,)).fetchone()
    return ("AND f.rowid > ?", [row[0]]) if row else ("", [])


def _fts_candidates(conn, src: Source, chosen, total, extras, want):
    """{rowid: bm25 relevance} of the best `want` matches of the chosen terms (+ optional extras).

    Scoring costs about a microsecond per match and far more for long messages, so on a big vault
    a query made only of very common words is ranked over its newest matches (recent work is the
    likelier target of such a vague query). An AND of the words looked attractive but selects the
    longest messages, the costliest to score (measured: 30 ms for 2,000 on the 1M vault).
    """
    expr = " OR ".join(t.fts for t in chosen + extras)
    if src.id_range:  # one session's messages sit in one id range: FTS5 skips the rest cheaply
        return _rank_sql(conn, src, expr, want, "AND f.rowid BETWEEN ? AND ?", src.id_range)
    if total <= RANK_BUDGET:
        return _rank_sql(conn, src, expr, want)
    # even the rarest term is everywhere: rank its newest RANK_WINDOW matches only
    return _rank_sql(conn, src, expr, want, *_newest_window(conn, src, chosen[0].fts))


def _fetch(conn, src: Source, rowids):
    rows = []
    for i in range(0, len(rowids), 500):
        chunk = rowids[i:i + 500]
        sql = f"SELECT {src.columns} FROM {src.table} t WHERE t.{src.key} IN ({','.join('?' * len(chunk))})"
        rows += conn.execute(sql, chunk).fetchall()
    return rows


def _scan(conn, src: Source, test, want, deadline, prefilter=("", [])):
    """Rows passing `test(content)`, newest first, until `want` found or the deadline passes.

    SQLite itself is interrupted at the deadline (a progress handler), so one slow batch of
    large messages cannot overrun it. Returns (rows, stopped_early).
    """
    hi = _doc_count(conn, src)
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


def _idf(n_docs: int, df: int) -> float:
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))  # BM25's IDF, as FTS5 computes it


def _term_counts(text: str, terms) -> dict:
    """How often each term occurs: a substring count of a word's stem (fast, a little loose),
    a regex for phrases and short words."""
    lower = text.lower()
    counts = {}
    for t in terms:
        stem = lcm.query.crude_stem(t.text) if t.kind == "word" and len(t.text) > 3 else ""
        if stem and len(stem) > 3:
            counts[t] = lower.count(stem)
        else:
            counts[t] = len(t.pattern.findall(text)) if t.regex else 0
    return counts


def _neighbour_shares(conn, best: list[tuple[int, float]]) -> dict[int, tuple[float, int]]:
    """{neighbour id: (its share of a best hit's score, that hit's id)} for best [(id, score)]:
    NEIGHBOUR_WEIGHTS by distance, the largest share where several hits lend to one message."""
    from lcm.conversation import neighbours  # imported when there are hits to lend from
    around = neighbours(conn, [rowid for rowid, _ in best])
    shares: dict[int, tuple[float, int]] = {}
    for rowid, score in best:
        for other, distance in around[rowid]:
            gain = score * NEIGHBOUR_WEIGHTS[distance - 1]
            if gain > shares.get(other, (0.0, 0))[0]:
                shares[other] = (gain, rowid)
    return shares


def _lend_to_neighbours(conn, src: Source, scored: list) -> list:
    """Add to each conversational neighbour of the best hits a share of that hit's score.

    A neighbour that matched nothing itself joins the hits; src.next_to maps it to the uuid of
    the hit it sits next to (shown, so a result without the query's words is explained).
    """
    best = sorted(scored, key=lambda p: -p[0])[:NEIGHBOUR_SOURCES]
    uuids = {row["rowid_"]: row["uuid"] for _, row in best}
    shares = _neighbour_shares(conn, [(row["rowid_"], score) for score, row in best])
    if not shares:
        return scored
    gains = {rowid: gain for rowid, (gain, _) in shares.items()}
    lender = {rowid: uuids[source] for rowid, (_, source) in shares.items()}
    have = {row["rowid_"] for _, row in scored}
    missing = [i for i in gains if i not in have]
    rows = {}
    for i in range(0, len(missing), 500):  # neighbours not among the hits, if the filters allow them
        chunk = missing[i:i + 500]
        sql = (f"SELECT {src.columns} FROM messages t WHERE t.id IN ({','.join('?' * len(chunk))})"
               f" AND {src.where}")
        rows.update((r["rowid_"], r) for r in conn.execute(sql, [*chunk, *src.params]))
    out = [(score + gains.get(row["rowid_"], 0.0), row) for score, row in scored]
    for rowid, row in rows.items():
        out.append((gains[rowid] * ROLE_WEIGHT.get(row["role"], 1.0), row))
        src.next_to[rowid] = lender[rowid]
    return out


def rank_messages(conn, text: str, ids: list[int]) -> dict[int, float]:
    """Relevance to `text` of each message in `ids` that has any: BM25 over the full-text index
    (a substring count without FTS5), plus the share its conversational neighbours in `ids`
    lend it, as in auto mode. For drilling down inside known summaries (lcm_expand_query.py)."""
    terms = lcm.query.parse_query(text)
    wanted = set(ids)
    scores: dict[int, float] = {}
    fts_terms = [t for t in terms if t.fts] if lcm.schema.fts_enabled(conn) else []
    if fts_terms:
        expr = " OR ".join(t.fts for t in fts_terms)
        # FTS5 meets `rowid IN (...)` with one full MATCH per id (seconds on a big vault), but a
        # rowid range cheaply: a summary's messages are a contiguous run of ids
        runs, ordered = [], sorted(wanted)
        for rowid in ordered:
            if runs and rowid - runs[-1][1] <= 64:
                runs[-1][1] = rowid
            else:
                runs.append([rowid, rowid])
        for lo, hi in runs:
            scores.update((r[0], -r[1]) for r in conn.execute(
                "SELECT rowid, bm25(messages_fts) FROM messages_fts WHERE messages_fts MATCH ?"
                " AND rowid BETWEEN ? AND ?", (expr, lo, hi)) if r[0] in wanted)
    elif terms:
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for rowid, content in conn.execute(f"SELECT id, substr(content, 1, {COVERAGE_CHARS}) FROM messages"
                                               f" WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                score = sum(1 for n in _term_counts(content or "", terms).values() if n)
                if score:
                    scores[rowid] = float(score)
    best = sorted(scores.items(), key=lambda p: -p[1])[:NEIGHBOUR_SOURCES]
    for rowid, (gain, _) in _neighbour_shares(conn, best).items():
        if rowid in wanted:
            scores[rowid] = scores.get(rowid, 0.0) + gain
    return scores


def _rank_auto(conn, src: Source, terms, want, scan_want, deadline, query_norm):
    """BM25 candidates (the rarer terms), then common words, role and the all-terms bonus.

    CJK and emoji terms are also matched as substrings, newest first, within the deadline.
    """
    n_docs = max(_doc_count(conn, src), 1)
    use_fts = src.has_fts
    fts_terms = [t for t in terms if t.fts] if use_fts else []
    dfs = {t: _df(conn, src, t.fts, n_docs) for t in fts_terms}
    chosen, total = _choose_terms(dfs)
    relevance = {}
    # "web workers" in the question, WebWorkers in the code: adjacent words glued into one, when
    # the vault has that word (they only add score; coverage counts the words as typed)
    glued = [t for t in lcm.query.compounds(fts_terms) if COMPOUNDS and _df(conn, src, t.fts, n_docs)]
    if chosen or glued:
        words = [t for t in chosen if t.kind == "word"]
        extras = lcm.query.ranking_extras([t for t in fts_terms if t in words], NEAR_PAIRS, PREFIXES)
        relevance = _fts_candidates(conn, src, chosen or glued, total, extras + glued if chosen else extras, want)
    rows = {r["rowid_"]: r for r in _fetch(conn, src, list(relevance))}
    stopped = False
    scan_terms = [t for t in terms if not t.fts or t.kind == "cjk"] if use_fts else terms
    if scan_terms and len(rows) < scan_want:  # substrings: CJK inside a run, emoji, no FTS5 at all
        if use_fts:  # CJK and emoji have no case to fold: instr is several times faster than LIKE
            tests = ["instr(t.content, ?) > 0"] * len(scan_terms)
            pats = [t.text for t in scan_terms]
        else:
            tests = ["t.content LIKE ? ESCAPE '\\'"] * len(scan_terms)
            pats = ["%" + _like_escape(t.text) + "%" for t in scan_terms]
        deadline = min(deadline, time.monotonic() + AUTO_SCAN_SECONDS)
        # messages holding every term first, then any term, both newest first
        for joiner in ([" AND ", " OR "] if len(scan_terms) > 1 else [" OR "]):
            found, cut = _scan(conn, src, lambda c: True, scan_want, deadline,
                               (f"AND ({joiner.join(tests)})", pats))
            stopped = stopped or cut
            for row in found:
                rows.setdefault(row["rowid_"], row)
            if len(rows) >= scan_want:
                break
    # words left out of the BM25 query (too common to rank cheaply) still count, BM25-style
    left_out = [(t, _idf(n_docs, dfs[t])) for t in fts_terms if t not in chosen and t.regex]
    base = max(relevance.values(), default=1.0)
    scored = []
    for rowid, row in rows.items():
        content = row["content"]
        if query_norm and abs(len(content) - len(query_norm)) < 20 and " ".join(content.lower().split()) == query_norm:
            continue  # the question itself, just asked, is not its own answer
        head = content[:COVERAGE_CHARS]
        counts = _term_counts(head, terms)
        present = [t for t in terms if counts[t]]
        score = relevance.get(rowid) or base * 0.5 * len(present) / max(len(terms), 1)
        for term, idf in left_out:
            tf = counts[term]
            score += idf * tf * 2.2 / (tf + 1.2)  # BM25 saturation, k1 = 1.2
        if len(present) == len(terms):
            score *= 1 + ALL_TERMS_BONUS
        if src.kind == "message":
            score *= ROLE_WEIGHT.get("tool" if row["is_tool"] else row["role"], 1.0)
        scored.append((score, row))
    # quoted words ask for those exact words: no neighbour without them
    if NEIGHBOUR_SOURCES and any(NEIGHBOUR_WEIGHTS) and src.kind == "message" and '"' not in query_norm:
        scored = _lend_to_neighbours(conn, src, scored)
    if SESSION_WEIGHT and src.kind == "message":
        # a turn in the session that is most about the question gains: answers sit among related turns
        best: dict = {}
        for score, row in scored:
            best[row["session_id"]] = max(best.get(row["session_id"], 0.0), score)
        scored = [(score + SESSION_WEIGHT * best[row["session_id"]], row) for score, row in scored]
    scored.sort(key=lambda p: -p[0])
    return scored, stopped


# ---------------------------------------------------------------------------
# Other modes
# ---------------------------------------------------------------------------

def _rank_full_text(conn, src: Source, query, want):
    """The user's own FTS5 expression, BM25-ranked; over RANK_BUDGET matches, its newest ones."""
    if not src.has_fts:
        if src.kind == "note":
            return [], False  # a vault whose notes have no index (made without FTS5)
        raise LcmError("this vault has no FTS5 index (SQLite built without FTS5)",
                       "use --mode auto (substring fallback) or --mode regex")
    try:
        n_docs = _doc_count(conn, src)
        window = ("", [])
        if src.id_range:
            window = ("AND f.rowid BETWEEN ? AND ?", src.id_range)
        elif _df(conn, src, query, n_docs) > RANK_BUDGET:
            window = _newest_window(conn, src, query)
        ranked = _rank_sql(conn, src, query, want, *window)
    except sqlite3.OperationalError as exc:
        raise LcmError(f"invalid FTS5 expression {_short(query)}: {exc}",
                       'quote special characters ("foo-bar"), balance parentheses and quotes, '
                       "or use --mode auto for plain words") from None
    rows = {r["rowid_"]: r for r in _fetch(conn, src, list(ranked))}
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


def _short(text: str, width: int = 80) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")


def _compile_regex(query):
    if not query:
        raise LcmError("the regular expression is empty, and would match every message",
                       "give a pattern to search for, e.g. 'def \\w+_pass'")
    try:
        return re.compile(query)
    except re.error as exc:
        raise LcmError(f"invalid regular expression {_short(query)}: {exc}",
                       r"escape special characters (\( \[ \* \.), or use --mode auto for plain text") from None


def _rank_regex(conn, src: Source, pattern, want, deadline):
    try:
        with _Alarm(deadline):
            rows, stopped = _scan(conn, src, lambda c: pattern.search(c) is not None, want, deadline)
    except TimeoutError:
        rows, stopped = [], True
    return [(0.0, r) for r in rows], stopped


# ---------------------------------------------------------------------------
# search()
# ---------------------------------------------------------------------------

def _snippet(content: str, finders) -> str:
    """About SNIPPET_CHARS of `content` around the first of `finders` (Terms) that matches."""
    start = 0
    for finder in finders:
        m = finder.pattern.search(content)
        if m:
            start = max(0, m.start() - SNIPPET_CHARS // 3)
            break
    text = " ".join(content[start:start + SNIPPET_CHARS * 2].split())[:SNIPPET_CHARS]
    return ("..." if start else "") + text + ("..." if len(content) > start + len(text) + 1 else "")


def search(conn, query, *, mode="auto", scope="both", session=None, project=None, all_sessions=False,
           since=None, before=None, role=None, typed=False, sessions=None, limit=20, offset=0,
           time_limit=SCAN_SECONDS, look_elsewhere=True) -> dict:
    """Search messages and/or summaries; returns the --json document.

    session: an id or a unique prefix of one. sessions: a list of ids to stay within (an
    expansion grant's). typed: only what the person typed. The document's "scope" says where
    it looked: {"kind": "session" | "project" | "all", ...}; when the current project was the
    default, "stronger_elsewhere" counts other projects' hits that outrank its best one.
    """
    if mode not in ("auto", "full_text", "regex"):
        raise LcmError(f"unknown mode {mode!r}", "use --mode auto, full_text or regex")
    if limit < 1 or offset < 0:
        raise LcmError("--limit must be >= 1 and --offset >= 0", "e.g. --limit 20 --offset 40")
    if session:
        session = lcm.cli.resolve_session(conn, session)
    defaulted = not (all_sessions or session or project or sessions is not None)
    session, project = resolve_scope(conn, session, project, all_sessions or sessions is not None)
    if sessions is not None:
        where = {"kind": "session", "session_ids": list(sessions)}
    elif session:
        where = {"kind": "session", "session_id": session}
    elif project:
        where = {"kind": "project", "project": project, "default": defaulted}
    else:
        where = {"kind": "all"}
    since, before = parse_when(since, "--since"), parse_when(before, "--before")
    deadline = time.monotonic() + time_limit
    want = offset + limit + 1
    kinds = {"both": ["message", "summary", "note"], "messages": ["message"], "summaries": ["summary"],
             "notes": ["note"]}[scope]
    if role or typed:
        kinds = [k for k in kinds if k == "message"]
    terms, finders, pattern = [], [], None
    if mode == "auto":
        terms = lcm.query.parse_query(query)
        # snippets centre on the most telling word: phrases and long words before short ones
        # (Terms compile their patterns on first use: most snippets need only the first)
        finders = sorted(terms, key=lambda t: (t.kind == "word", -len(t.text)))
    elif mode == "regex":
        pattern = _compile_regex(query)
        finders = [lcm.query.Term(query, "regex", regex=query)]  # the same pattern (re caches it)
    query_norm = " ".join(query.lower().split())
    scored, stopped, next_to = [], False, {}
    for kind in kinds:
        if kind == "summary" and not conn.execute("SELECT 1 FROM summaries LIMIT 1").fetchone():
            continue  # nothing compacted yet: skip the summary index entirely
        if kind == "note" and not _has_notes(conn):
            continue
        src = Source(conn, kind, session, project, since, before, role, typed, sessions)
        if mode == "auto":
            hits, cut = (_rank_auto(conn, src, terms, max(CANDIDATES, want), want, deadline, query_norm)
                         if terms else ([], False))
        elif mode == "full_text":
            hits, cut = _rank_full_text(conn, src, query, want)
        else:
            hits, cut = _rank_regex(conn, src, pattern, want, deadline)
        scored += [(score, kind, row) for score, row in hits]
        next_to.update(((kind, rowid), uuid) for rowid, uuid in src.next_to.items())
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
        doc = search(conn, query, mode=mode, scope=scope, all_sessions=True, since=since, before=before,
                     role=role, typed=typed, limit=limit, offset=offset, time_limit=time_limit)
        if doc["results"]:
            doc["scope"] = {"kind": "all", "widened_from": project}
            return {**doc, "widened": True}
        return doc
    if defaulted and project and offset == 0 and look_elsewhere and mode != "regex":
        where["stronger_elsewhere"] = _stronger_elsewhere(
            conn, query, project, scored[0][0], mode=mode, scope=scope, since=since, before=before,
            role=role, typed=typed, time_limit=time_limit)
    page = scored[offset:offset + limit]
    # a message stored by a version that masks at ingest is shown as stored (masking it again would
    # change nothing, and compiling the masks is ~1 ms of a grep); older rows, summaries, notes and
    # any text under redact.txt patterns added since are masked here
    masked_from = 0 if lcm.mask.has_user_patterns() else lcm.db.masked_from_message(conn)
    results = [_result(conn, kind, row, score, finders, next_to.get((kind, row["rowid_"])),
                       stored_masked=kind == "message" and 0 < masked_from <= row["rowid_"])
               for score, kind, row in page]
    return {"query": query, "scope": where, "count": len(results),
            "has_more": len(scored) > offset + limit or stopped,
            "results": results, **({"stopped_early": True} if stopped else {})}


def _stronger_elsewhere(conn, query, project, best, **kw) -> int:
    """How many of the whole vault's 10 best hits lie outside `project` and outrank its best."""
    doc = search(conn, query, all_sessions=True, limit=10, look_elsewhere=False, **kw)
    inside = project.rstrip("/")
    count = 0
    for r in doc["results"]:
        if r["score"] <= best:
            break
        if r["type"] == "note":
            continue  # notes are scoped by their own project, not by a session's
        row = conn.execute("SELECT project FROM sessions WHERE session_id = ?", (r["session_id"],)).fetchone()
        where = (row[0] if row else None) or ""
        count += not (where == project or where.startswith(inside + "/"))
    return count


def _has_notes(conn) -> bool:
    """Whether any note is pinned (False on a vault older than the notes table, opened read-only)."""
    try:
        return conn.execute("SELECT 1 FROM notes LIMIT 1").fetchone() is not None
    except sqlite3.OperationalError:
        return False


def _result(conn, kind, row, score, finders, next_to=None, stored_masked=False) -> dict:
    if kind == "note":
        return {"type": "note", "id": row["id"], "session_id": row["session_id"], "uuid": None, "role": None,
                "created_at": row["created_at"], "snippet": _snippet(lcm.mask.mask(row["content"]), finders),
                "score": round(score, 4), "covering_summary_id": None, "kind": None, "depth": None,
                "next_to": None, "project": row["project"]}
    if kind == "message":
        cover = conn.execute("SELECT summary_id FROM summary_sources WHERE message_id = ?",
                             (row["rowid_"],)).fetchone()
        ident, uuid, role, covering = row["uuid"], row["uuid"], row["role"], cover[0] if cover else None
        summary_kind, depth = None, None
    else:
        ident, uuid, role, covering = row["id"], None, None, row["parent_id"]
        summary_kind, depth = row["kind"], row["depth"]
    # kind/depth: a summary's (leaf or condensed, 0 = over messages); next_to: the hit a message
    # that lacks the query's words sits next to
    return {"type": kind, "id": ident, "session_id": row["session_id"], "uuid": uuid, "role": role,
            # masked whole before the cut (a vault filled before masking may hold secrets)
            "created_at": row["created_at"],
            "snippet": _snippet(row["content"] if stored_masked else lcm.mask.mask(row["content"]), finders),
            "score": round(score, 4), "covering_summary_id": covering, "kind": summary_kind,
            "depth": depth, "next_to": next_to}
