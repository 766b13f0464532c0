"""Auto-mode ranking behind lcm_grep: BM25 over the query's rarer words, then coverage, role,
and the scores conversational neighbours lend each other. Library only.
"""
from __future__ import annotations

import math
import time

import lcm.search.query
import lcm.vault.schema
from lcm.search.result_types import Source, doc_count, fetch, scan, like_escape

CANDIDATES = 50           # BM25 candidates reranked per query (and per page beyond them)
DF_CAP = 2001             # document frequencies are counted up to here, estimated beyond (a
# common word costs ~0.5 ms to count to 8,000 on the 1M vault, ~0.15 ms to 2,000)
RANK_BUDGET = 8000        # most FTS matches BM25 scores in one query (keeps 1M-row vaults fast)
RANK_WINDOW = 500         # newest matches ranked when even the rarest query word is that common
AUTO_SCAN_SECONDS = 1.0   # ... and of auto mode's substring scan (CJK inside a run, emoji)
COVERAGE_CHARS = 5000     # how much of a long message is checked for the query's words
ALL_TERMS_BONUS = 1.0     # a message holding every term scores x2 (strict tiers measured worse)
ROLE_WEIGHT = {"user": 1.0, "assistant": 0.9, "tool": 0.8}  # people state facts; assistants
# restate them at length; tool output (file dumps, logs) matches every word and answers least
SESSION_WEIGHT = 0.0      # share of the session's best score added to its other turns: measured +1/40
# on one set and it crowds out the 2nd session of a multi-session question, so off
NEAR_PAIRS = False        # NEAR(a b) pairs in the BM25 query: better MRR (0.65 -> 0.70) but worse
# recall@10 (0.93 -> 0.88) on bench/recall.py, and recall@10 is what a page of 10-20 results needs
PREFIXES = False          # score long words' 5-letter prefixes (allergy ~ allergic)
COMPOUNDS = True          # adjacent words also as one word ("web workers" ~ WebWorkers)
# A question's words are often in the turn next to the answer (the prompt before a reply, the
# assistant's question before the user's answer): the best hits lend this share of their score
# to their 1st and 2nd conversational neighbours (max, not sum: one strong hit is enough;
# lcm.search.conversation decides what a neighbour is).
# bench/recall.py: 0.5/0.25 over the 10 best hits; sum instead of max, or every hit lending,
# crowded known-item answers out of the top 10 (0.92 -> 0.84).
NEIGHBOUR_WEIGHTS = (0.5, 0.25)
NEIGHBOUR_SOURCES = 10    # the best hits that lend their score
# Word coverage weighted by rarity: the bonus is ALL_TERMS_BONUS times the share of the query's
# IDF that a hit holds, so missing a common word costs little and missing the rare one a lot
# (False: the bonus only for a hit holding every term). bench/recall.py: coding 0.921 -> 0.947,
# persona 0.826 -> 0.868 with it (all three principles, and each left out, in its docstring).
COVERAGE_BY_RARITY = True
COVERAGE_POWER = 3        # the share cubed: linear, partial hits crowded out neighbours (-0.05)
# A hit that asks something hands its full score (this share) to the next turn of the other
# speaker: its answer, which rarely repeats the question's words (persona 0.826 -> 0.868).
QUESTION_HANDOFF = 1.0
# The exchange index (lcm.capture.indexes): windows of a few prompts and replies; each message of one of
# the EXCHANGE_WINDOWS best windows scores at least EXCHANGE_WEIGHT x the window's score (scaled
# so the best window scores like the best single hit). neighbour 0.764 -> 0.836, paraphrase
# 0.188 -> 0.438, persona 0.924 -> 0.868 (0.7, share squared: coding 0.895, holdout 0.95).
EXCHANGE_WEIGHT = 0.5
EXCHANGE_WINDOWS = 20
# Only when the chosen words match at most this many messages: every prompt and reply sits in
# EXCHANGE_TURNS (4) windows, so the window query scores up to ~4x as many rows as the message
# query; at RANK_BUDGET / 4 it costs no more than the message query at its own bound (about
# 8 ms on the 1M-message vault), and a query of common words only gains nothing from windows.
EXCHANGE_BUDGET = RANK_BUDGET // 4


def df(conn, src: Source, fts_expr: str, n_docs: int, fts: str | None = None) -> int:
    """Documents matching: counted up to DF_CAP, estimated beyond it from how far into the id
    range the DF_CAP-th match lies (a full count of a common word is slow on a big vault)."""
    fts = fts or src.fts
    sql = (f"SELECT count(*), max(rowid) FROM (SELECT rowid FROM {fts} WHERE {fts} MATCH ?"
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


def rank_sql(conn, src: Source, expr, want, window="", params=(), fts=None):
    # rank on rowid + score only: carrying the content through the sort doubles its cost
    fts = fts or src.fts
    join = f"JOIN {src.table} t ON t.{src.key} = f.rowid AND {src.where}" if src.where != "1" else ""
    sql = (f"SELECT f.rowid, bm25({fts}) AS bm FROM {fts} f {join}"
           f" WHERE {fts} MATCH ? {window} ORDER BY bm LIMIT {want}")
    return {r[0]: -r[1] for r in conn.execute(sql, [*src.params, expr, *params])}


def newest_window(conn, src: Source, expr, fts: str | None = None):
    """A rowid bound keeping only the newest RANK_WINDOW matches of `expr` (cheap: rowid order)."""
    fts = fts or src.fts
    row = conn.execute(f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC"
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
        return rank_sql(conn, src, expr, want, "AND f.rowid BETWEEN ? AND ?", src.id_range)
    if total <= RANK_BUDGET:
        return rank_sql(conn, src, expr, want)
    # even the rarest term is everywhere: rank its newest RANK_WINDOW matches only
    return rank_sql(conn, src, expr, want, *newest_window(conn, src, chosen[0].fts))



def _idf(n_docs: int, df: int) -> float:
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))  # BM25's IDF, as FTS5 computes it


def _term_counts(text: str, terms) -> dict:
    """How often each term occurs: a substring count of a word's stem (fast, a little loose),
    a regex for phrases and short words."""
    lower = text.lower()
    counts = {}
    for t in terms:
        stem = t.stem
        if stem and len(stem) > 3:
            counts[t] = lower.count(stem)
        elif t.regex and all(n in lower for n in t.needles):
            counts[t] = len(t.pattern.findall(text))
        else:
            counts[t] = 0
    return counts


def _neighbour_shares(conn, best: list[tuple[int, float]]) -> dict[int, tuple[float, int]]:
    """{neighbour id: (its share of a best hit's score, that hit's id)} for best [(id, score)]:
    NEIGHBOUR_WEIGHTS by distance, the largest share where several hits lend to one message."""
    from lcm.search.conversation import neighbours# imported when there are hits to lend from
    around = neighbours(conn, [rowid for rowid, _ in best])
    shares: dict[int, tuple[float, int]] = {}
    for rowid, score in best:
        for other, distance in around[rowid]:
            gain = score * NEIGHBOUR_WEIGHTS[distance - 1]
            if gain > shares.get(other, (0.0, 0))[0]:
                shares[other] = (gain, rowid)
    return shares


def _asks(text: str) -> bool:
    """Whether a message ends by asking something (its last sentence is a question)."""
    tail = text[-400:].rstrip()
    return tail.endswith(("?", "？"))


def _exchange_scores(conn, src: Source, chosen, base: float) -> tuple[dict[int, float], dict[int, int]]:
    """({message id: the best score of an exchange window it sits in}, {message id: another turn
    of that window}) over the best windows of the chosen terms, scaled so that the best window
    scores EXCHANGE_WEIGHT x the best single hit."""
    from lcm.search.conversation import window_members# only when windows are searched
    expr = " OR ".join(t.fts for t in chosen)
    window = ("AND f.rowid BETWEEN ? AND ?", src.id_range) if src.id_range else ("", ())
    ends = rank_sql(conn, src, expr, EXCHANGE_WINDOWS, *window, fts=src.exchange)
    if not ends:
        return {}, {}
    scale = EXCHANGE_WEIGHT * base / max(ends.values())
    out: dict[int, float] = {}
    beside: dict[int, int] = {}
    for end, members in window_members(conn, list(ends)).items():
        for rowid in members:
            if ends[end] * scale > out.get(rowid, 0.0):
                out[rowid] = ends[end] * scale
                beside[rowid] = end if end != rowid else members[-1]
    return out, beside


def _lend_to_neighbours(conn, src: Source, scored: list) -> list:
    """Add to each conversational neighbour of the best hits a share of that hit's score.

    A neighbour that matched nothing itself joins the hits; src.next_to maps it to the uuid of
    the hit it sits next to (shown, so a result without the query's words is explained).
    """
    best = sorted(scored, key=lambda p: -p[0])[:NEIGHBOUR_SOURCES]
    uuids = {row["rowid_"]: row["uuid"] for _, row in best}
    shares = _neighbour_shares(conn, [(row["rowid_"], score) for score, row in best])
    if QUESTION_HANDOFF:
        from lcm.search.conversation import answers
        asking = {row["rowid_"]: score for score, row in best if _asks(row["content"])}
        for question, answer in answers(conn, list(asking)).items():
            gain = asking[question] * QUESTION_HANDOFF
            if gain > shares.get(answer, (0.0, 0))[0]:
                shares[answer] = (gain, question)
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
    terms = lcm.search.query.parse_query(text)
    wanted = set(ids)
    scores: dict[int, float] = {}
    fts_terms = [t for t in terms if t.fts] if lcm.vault.schema.fts_enabled(conn) else []
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
            for rowid, content in conn.execute(f"SELECT id, substr(lcm_text(content), 1, {COVERAGE_CHARS}) FROM messages"
                                               f" WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                score = sum(1 for n in _term_counts(content or "", terms).values() if n)
                if score:
                    scores[rowid] = float(score)
    best = sorted(scores.items(), key=lambda p: -p[1])[:NEIGHBOUR_SOURCES]
    for rowid, (gain, _) in _neighbour_shares(conn, best).items():
        if rowid in wanted:
            scores[rowid] = scores.get(rowid, 0.0) + gain
    return scores


def _substrings(conn, src: Source, terms, use_fts: bool, want: int, deadline: float, rows: dict) -> bool:
    """Add to `rows` the rows holding `terms` as substrings, those holding every term first, then
    any, newest first, within AUTO_SCAN_SECONDS; returns whether the scan stopped early."""
    if src.tri and all(len(t.text) >= 3 for t in terms):  # a trigram phrase is a substring, any case
        for joiner in ([" AND ", " OR "] if len(terms) > 1 else [" OR "]):
            expr = joiner.join(t.quoted for t in terms)
            for row in conn.execute(f"SELECT {src.columns} FROM {src.table} t WHERE t.{src.key} IN (SELECT rowid"
                                    f" FROM {src.tri} WHERE {src.tri} MATCH ?) AND {src.where}"
                                    f" ORDER BY t.{src.key} DESC LIMIT ?", [expr, *src.params, want]):
                rows.setdefault(row["rowid_"], row)
            if len(rows) >= want:
                break
        return False
    if use_fts:  # CJK and emoji have no case to fold: instr is several times faster than LIKE
        tests = [f"instr({src.text}, ?) > 0"] * len(terms)
        pats = [t.text for t in terms]
    else:
        tests = [f"{src.text} LIKE ? ESCAPE '\\'"] * len(terms)
        pats = ["%" + like_escape(t.text) + "%" for t in terms]
    deadline = min(deadline, time.monotonic() + AUTO_SCAN_SECONDS)
    stopped = False
    for joiner in ([" AND ", " OR "] if len(terms) > 1 else [" OR "]):
        found, cut = scan(conn, src, lambda c: True, want, deadline, (f"AND ({joiner.join(tests)})", pats))
        stopped = stopped or cut
        for row in found:
            rows.setdefault(row["rowid_"], row)
        if len(rows) >= want:
            break
    return stopped


def rank_auto(conn, src: Source, terms, want, scan_want, deadline, query_norm, shared=None):
    """BM25 candidates (the rarer terms), then common words, role and the all-terms bonus.

    CJK and emoji terms are also matched as substrings, newest first, within the deadline.
    shared: a dict kept across the result types of one search: the messages' term weights
    (ranked first) score the small types that have no index of their own (titles, digests ...).
    """
    n_docs = max(doc_count(conn, src), 1)
    use_fts = src.has_fts
    # terms the trigram index finds as substrings: CJK of 3+ characters, and Latin words glued
    # into CJK text (unicode61 keeps `使用PostgreSQL作为` whole; the CJK runs are indexed apart)
    trigram = [t for t in terms if len(t.text) >= 3 and (t.kind == "cjk" or t.kind == "word")] if src.cjk else []
    fts_terms = [t for t in terms if t.fts and not (t.kind == "cjk" and t in trigram)] if use_fts else []
    dfs = {t: df(conn, src, t.fts, n_docs) for t in fts_terms}
    chosen, total = _choose_terms(dfs)
    relevance = {}
    # "web workers" in the question, WebWorkers in the code: adjacent words glued into one, when
    # the vault has that word (they only add score; coverage counts the words as typed)
    glued = [t for t in terms.compounds if use_fts and COMPOUNDS and df(conn, src, t.fts, n_docs)]
    if chosen or glued:
        words = [t for t in fts_terms if t.kind == "word" and t in chosen]
        extras = terms.extras(words, NEAR_PAIRS, PREFIXES)
        relevance = _fts_candidates(conn, src, chosen or glued, total, extras + glued if chosen else extras, want)
    if trigram:  # a substring found here adds its BM25; bounded like the words (RANK_BUDGET)
        expr = " OR ".join(t.quoted for t in trigram)
        window = ("AND f.rowid BETWEEN ? AND ?", src.id_range) if src.id_range else ("", ())
        if not src.id_range and df(conn, src, expr, n_docs, fts=src.cjk) > RANK_BUDGET:
            window = newest_window(conn, src, expr, fts=src.cjk)
        for rowid, score in rank_sql(conn, src, expr, want, *window, fts=src.cjk).items():
            relevance[rowid] = relevance.get(rowid, 0.0) + score
    rows = {r["rowid_"]: r for r in fetch(conn, src, list(relevance))}
    stopped = False
    scan_terms = [t for t in terms if (not t.fts or t.kind == "cjk") and t not in trigram] if use_fts else terms
    if scan_terms and len(rows) < scan_want:  # substrings: short CJK, emoji, no FTS5 at all
        stopped = _substrings(conn, src, scan_terms, use_fts, scan_want, deadline, rows)
    # words left out of the BM25 query (too common to rank cheaply) still count, BM25-style
    left_out = [(t, _idf(n_docs, dfs[t])) for t in fts_terms if t not in chosen and t.regex]
    base = max(relevance.values(), default=1.0)
    # a term outside the word index (CJK, emoji), or one no message holds (a typo, another
    # inflection), weighs like the rarest word the vault has: not more
    rarest = max((_idf(n_docs, d) for d in dfs.values() if d), default=1.0)
    weight = {t: _idf(n_docs, dfs[t]) if dfs.get(t) else rarest for t in terms}
    shared = {} if shared is None else shared
    if src.kind == "message" and dfs:
        shared["weight"] = {t.text: w for t, w in weight.items()}
    scanned_only = not src.fts and shared.get("weight")  # a small table: score like a short message
    if scanned_only:
        top = max(shared["weight"].values())
        weight = {t: shared["weight"].get(t.text, top) for t in terms}
    all_weight = sum(weight.values()) or 1.0
    windows = {}
    # quoted words ask for those exact words: no window or neighbour without them
    exact = '"' in query_norm
    if EXCHANGE_WEIGHT and src.exchange and chosen and total <= EXCHANGE_BUDGET and not exact:
        windows, beside = _exchange_scores(conn, src, chosen, base)
        added = fetch(conn, src, [i for i in windows if i not in rows], scoped=True)
        rows.update((r["rowid_"], r) for r in added)
        for r in added:  # found through its window: name the turn it was in the window with
            other = rows.get(beside[r["rowid_"]])
            if other is not None:
                src.next_to[r["rowid_"]] = other["uuid"]
    scored = []
    for rowid, row in rows.items():
        if rowid in src.next_to and rowid not in relevance:
            # in a matching exchange only: its window's score (its own words were not matched)
            scored.append((windows[rowid] * ROLE_WEIGHT.get(row["role"], 1.0), row))
            src.coverage[rowid] = 0.0
            continue
        content = row["content"]
        if query_norm and abs(len(content) - len(query_norm)) < 20 and " ".join(content.lower().split()) == query_norm:
            continue  # the question itself, just asked, is not its own answer
        head = content[:COVERAGE_CHARS]
        counts = _term_counts(head, terms)
        present = [t for t in terms if counts[t]]
        if scanned_only:  # BM25 of a short text holding each present term once
            score = sum(weight[t] for t in present)
        else:
            score = relevance.get(rowid) or base * 0.5 * len(present) / max(len(terms), 1)
        for term, idf in left_out:
            tf = counts[term]
            score += idf * tf * 2.2 / (tf + 1.2)  # BM25 saturation, k1 = 1.2
        coverage = sum(weight[t] for t in present) / all_weight
        src.coverage[rowid] = coverage
        if COVERAGE_BY_RARITY:
            score *= 1 + ALL_TERMS_BONUS * coverage ** COVERAGE_POWER
        elif len(present) == len(terms):
            score *= 1 + ALL_TERMS_BONUS
        score = max(score, windows.get(rowid, 0.0))
        if src.kind == "message":
            score *= ROLE_WEIGHT.get("tool" if row["is_tool"] else row["role"], 1.0)
        scored.append((score, row))
    if NEIGHBOUR_SOURCES and any(NEIGHBOUR_WEIGHTS) and src.kind == "message" and not exact:
        scored = _lend_to_neighbours(conn, src, scored)
    if SESSION_WEIGHT and src.kind == "message":
        # a turn in the session that is most about the question gains: answers sit among related turns
        best: dict = {}
        for score, row in scored:
            best[row["session_id"]] = max(best.get(row["session_id"], 0.0), score)
        scored = [(score + SESSION_WEIGHT * best[row["session_id"]], row) for score, row in scored]
    scored.sort(key=lambda p: -p[0])
    return scored, stopped


