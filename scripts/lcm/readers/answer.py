"""Answering a question from the exact messages behind summaries (lcm_expand_query.py).

One grant bounds what is read: its cap (--max-tokens) governs the whole answer. The messages
under the candidate summaries are ranked by the question with grep's own ranking
(lcm.search.rank.rank_messages), and each one shows windows around its matching lines, the key
lines of a failure first (FAILED, the exception line that ends a traceback, an assert, a
compiler error). Without a model those excerpts are the answer, labelled as excerpts; with a
model they are its first sources and it may read further with lcm_expand under the same grant.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import lcm.base.errors
import lcm.base.llm
import lcm.base.config
import lcm.vault.grants
import lcm.base.mask
import lcm.search.query
import lcm.search.rank
import lcm.search.engine
import lcm.base.text
from lcm.base.errors import LcmError

GRANT_TTL_SECONDS = 300
ANSWER_SECONDS = 50       # for the model's whole answer (one retry per call: twice this at worst), then
                          # excerpts: Claude Code's Bash tool stops a command after 120 s by default
MAX_TURNS = 6             # model calls one question may make (anthropic backend)
ANSWER_MAX_TOKENS = 1500  # the model's own answer when --max-tokens is not given (the grant caps what it reads)
PREFETCH_SHARE = 0.75     # of the cap read up front when a model can drill down with tools
MAX_EXCERPTS = 50         # excerpts shown; the cap usually ends the list first
MAX_EXAMINED = 400        # messages read, best first, while looking for distinct excerpts
SCAN_CHARS = 200_000      # of a message searched for its answering lines (a pytest summary is at the end)
EXCERPT_SHARE = 4         # an excerpt takes at most this fraction of the cap (several messages show)
HEAD_CHARS = 400          # shown of a message that matches no word of the question
LINE_CHARS = 300          # of one long line (minified JSON, a one-line log), around its match
ANCHORS = 8               # matching lines a message's excerpt is built around
SECTION_LINES = 40        # lines above a failure line searched for the question's words
CONTEXT_LINES = 3         # lines kept on each side of an anchor, as the cap allows
SIMILAR = 0.8             # word-set overlap (Jaccard) above which two excerpts count as one
CITATION = re.compile(r"\b(sum_[0-9a-f]{16}|file_[0-9a-f]{16}|"
                      r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
# A line that states a failure: what a person reading a failed run looks at first. Test runners
# (pytest FAILED/E lines, jest FAIL/●), the exception line that ends a traceback in Python, Java
# or JS, assert, compilers (file:line:col: error, error[E0308], error TS2345), Go panics, package
# managers (npm ERR!), shells (command not found, exit code N).
KEY_LINE = re.compile(
    r"^\s*(FAILED|FAIL|ERROR|E\s{2,}\S|●|panic:|fatal:|npm ERR!|error(\[\w+\]|\s+TS\d+)?:)"
    r"|^\s*(\w+\.)*\w*(Error|Exception|Failure)\b(:|$)|\bAssertionError\b|^\s*>?\s*assert\b"
    r"|:\d+(:\d+)?:\s*(fatal )?error\b|\bcommand not found\b|\bexit (code|status) [1-9]|Traceback \(most recent")
FAILURE_WORDS = re.compile(r"(?i)\b(fail\w*|error\w*|broke\w*|crash\w*|exception\w*|traceback|wrong|bug\w*)\b")
SYSTEM = (
    "You answer one question about earlier Claude Code sessions, using only the sources given and what "
    "the tools return. Cite the id of every source a claim rests on in square brackets, e.g. "
    "[sum_0123456789abcdef] or [<message uuid>]. If the sources do not answer the question, say so "
    "plainly; never guess. Be brief: your answer goes back into another agent's context.")


# ---------------------------------------------------------------------------
# Candidates and the walk down the DAG
# ---------------------------------------------------------------------------

def node_info(conn, node_id: str) -> dict | None:
    """A summary (sum_ id), stored file (file_ id) or message (uuid), without its full content."""
    row = conn.execute("SELECT id, session_id, kind, depth, earliest_at AS at, substr(content, 1, 300) AS head"
                       " FROM summaries WHERE id = ?", (node_id,)).fetchone()
    if row is None and node_id.startswith("file_"):
        row = conn.execute("SELECT id, session_id, 'file' AS kind, NULL AS depth, created_at AS at, name,"
                           " token_count, substr(exploration, 1, 300) AS head FROM files WHERE id = ?",
                           (node_id,)).fetchone()
    if row is None:
        row = conn.execute("SELECT uuid AS id, session_id, 'message' AS kind, NULL AS depth, created_at AS at,"
                           " role, token_count FROM messages WHERE uuid = ?", (node_id,)).fetchone()
    info = dict(row) if row else None
    if info and info.get("head"):
        info["head"] = lcm.base.mask.mask(info["head"])
    return info


def find_candidates(conn, *, query: str | None, ids: list[str] | None, session=None,
                    all_sessions: bool = False) -> list[dict]:
    """The nodes to expand, best first: the given ids, or lcm_grep's hits for `query`."""
    if ids:
        found = []
        for node_id in ids:
            info = node_info(conn, node_id)
            if info is None:
                raise LcmError(f"no summary or message {node_id} in the vault",
                               "find ids with lcm_grep.py or lcm_describe.py, or use --query TEXT")
            found.append(info)
        return found
    doc = lcm.search.engine.search(conn, lcm.search.query.Query(query, session=session, all_sessions=all_sessions))
    found, seen = [], set()
    for item in doc.get("results", []):
        node_id = item.get("id") or item.get("uuid")
        info = node_info(conn, str(node_id)) if node_id and node_id not in seen else None
        if info:
            seen.add(node_id)
            found.append(info)
    if not found:
        raise LcmError(f"nothing in the vault matches {query!r}",
                       "try other words or --all-sessions; lcm_grep.py shows what the vault holds")
    return found


MESSAGE_ROW = "SELECT id, uuid, parent_uuid, session_id, role, created_at, token_count FROM messages"


def _walk(conn, summary_id: str, chain: tuple = ()):
    """(summary chain, message row) for every source message under a summary, in order. No content."""
    chain = chain + (summary_id,)
    for src in conn.execute("SELECT message_id, child_id FROM summary_sources WHERE summary_id = ? ORDER BY ord",
                            (summary_id,)).fetchall():
        if src["child_id"]:
            yield from _walk(conn, src["child_id"], chain)
        else:
            row = conn.execute(MESSAGE_ROW + " WHERE id = ?", (src["message_id"],)).fetchone()
            if row:
                yield chain, row


def _under(conn, node_id: str) -> list[tuple]:
    """(chain, message row) pairs under a summary id or for one message uuid."""
    if node_id.startswith("sum_"):
        return list(_walk(conn, node_id))
    row = conn.execute(MESSAGE_ROW + " WHERE uuid = ?", (node_id,)).fetchone()
    return [((), row)] if row else []


class Expansion:
    """Reads source messages under one grant; text past the cap is never fetched from the vault."""

    def __init__(self, conn, grant_id: str, cap: int):
        self.conn, self.grant_id, self.cap = conn, grant_id, cap
        self.limit = cap          # lowered while prefetching, to leave the model room for its own drill-down
        self.used = 0
        self.truncated = False
        self.read: set[int] = set()
        self.summaries: set[str] = set()

    def charge(self, uuid: str, tokens: int) -> int:
        allowed = lcm.vault.grants.check_and_charge(self.conn, self.grant_id, uuid, tokens)
        self.used += allowed
        return allowed

    def expand(self, node_id: str) -> list[dict]:
        """The source messages under node_id (a summary or a message) that fit the remaining cap."""
        out = []
        for chain, msg in _under(self.conn, node_id):
            if msg["id"] in self.read or msg["token_count"] == 0:
                continue  # an empty message (a tool result with no output) costs nothing: walk on
            want = min(msg["token_count"], self.limit - self.used)
            if want <= 0:
                self.truncated = True
                break
            allowed = self.charge(msg["uuid"], want)
            if allowed <= 0:
                self.truncated = True
                break
            # substr: only the allowed characters leave the vault (estimate_tokens = chars / 4)
            text = self.conn.execute("SELECT substr(lcm_text(content), 1, ?) FROM messages WHERE id = ?",
                                     (allowed * 4, msg["id"])).fetchone()[0]
            text = lcm.base.mask.mask(text)
            if allowed < msg["token_count"]:
                self.truncated = True
                text += " [... cut at the grant's token cap]"
            self.read.add(msg["id"])
            self.summaries.update(chain)
            out.append({"id": msg["uuid"], "session_id": msg["session_id"], "role": msg["role"],
                        "at": msg["created_at"], "via": chain[0] if chain else None,
                        "tokens": allowed, "text": text})
        return out


# ---------------------------------------------------------------------------
# Excerpts: the lines of each message that answer the question
# ---------------------------------------------------------------------------

def _clip(line: str, patterns) -> str:
    """A long line cut to LINE_CHARS around its first match (its head when nothing matches)."""
    if len(line) <= LINE_CHARS:
        return line
    hit = next((m.start() for p in patterns for m in [p.search(line)] if m), 0)
    # a line is read from its start (the E, the error's name) unless its match lies beyond the cut
    start = 0 if hit < LINE_CHARS * 2 // 3 else max(0, min(hit - LINE_CHARS // 3, len(line) - LINE_CHARS))
    return ("..." if start else "") + line[start:start + LINE_CHARS] + ("..." if start + LINE_CHARS < len(line) else "")


def excerpt(text: str, patterns, budget_chars: int, failure: bool, weights=None) -> tuple[str, int]:
    """(windows of `text` around the lines that answer, how many lines matched).

    A line scores 2 per distinct question term it holds, plus 3 when it states a failure
    (KEY_LINE) and the question asks about one (else 0.5, a tie-breaker). The best ANCHORS
    lines are taken first, then their neighbours ring by ring (CONTEXT_LINES at most), until
    `budget_chars`; gaps show as "...". Text that matches nothing gives its head. weights:
    each pattern's weight (default 1).
    """
    weights = weights or [1.0] * len(patterns)
    lines = lcm.base.text.strip_ansi(text).splitlines() or [""]  # terminal colours are noise to a reader
    matched = [{k for k, p in enumerate(patterns) if p.search(line)} for line in lines]
    scores, key_before = [], False
    for i, line in enumerate(lines):
        terms = sum(weights[k] for k in matched[i])
        key = 0.0
        is_key = bool(KEY_LINE.search(line))
        if is_key and not key_before:  # the first line of a run (pytest's E block) says it
            key = 3.0 if failure else 0.5
            # the failure of the block the question names: pytest prints a test's name, its
            # source, then the E line; a traceback names the call before the error
            above = set().union(*matched[max(0, i - SECTION_LINES):i]) - matched[i]
            key += 1.5 * sum(weights[k] for k in above)
        key_before = is_key
        if terms or key:
            scores.append((-(2 * terms + key), i))
    if not scores or all(s > -1 for s, _ in scores):  # only weak key lines: not what was asked
        return lcm.base.text.one_line(lcm.base.text.strip_ansi(text), HEAD_CHARS), 0
    anchors = [i for _, i in sorted(scores)[:ANCHORS]]
    chosen: dict[int, str] = {}
    spent = 0

    def take(i: int) -> bool:
        nonlocal spent
        if i in chosen or not 0 <= i < len(lines):
            return True
        clipped = _clip(lines[i].rstrip(), patterns)
        if spent + len(clipped) + 1 > budget_chars and chosen:
            return False
        chosen[i] = clipped
        spent += len(clipped) + 1
        return True

    for ring in range(CONTEXT_LINES + 1):
        for i in anchors:
            # a failure's message follows its line (pytest's E lines, a traceback's frames precede)
            for j in ((i,) if ring == 0 else (i + ring, i - ring)):
                if not take(j):
                    break
    out, last = [], -1
    for i in sorted(chosen):
        if i != last + 1:
            out.append("...")
        out.append(chosen[i])
        last = i
    if last != len(lines) - 1:
        out.append("...")
    return "\n".join(out), sum(1 for s, _ in scores if s <= -2)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{3,}", text.lower()))


def lend_to_results(pairs: dict, scores: dict) -> dict:
    """A tool call that matches the question lends its score to its result, which ranks above it.

    "What did `pytest -x` give?" names the command, and its output holds the answer. A result
    is the user-role message whose parent is the call.
    """
    rowid_of = {row["uuid"]: rowid for rowid, (_, row) in pairs.items()}
    lent = dict(scores)
    for rowid, (_, row) in pairs.items():
        parent = rowid_of.get(row["parent_uuid"])
        if row["role"] == "user" and parent is not None and scores.get(parent) \
                and pairs[parent][1]["role"] == "assistant":
            lent[rowid] = scores.get(rowid, 0.0) + scores[parent]
    return lent


def ranked_excerpts(exp: Expansion, candidates: list[dict], question: str, *,
                    matched_only: bool = False) -> tuple[list[dict], int]:
    """Excerpts of the messages under the candidates, the most relevant to `question` first.

    Ranking is grep's (lcm.search.rank.rank_messages); text leaves the vault only as excerpts,
    charged to the grant until exp.limit. Empty messages are skipped, and an excerpt nearly
    identical to one already shown (successive TodoWrite snapshots, a re-run command) is folded
    into it. matched_only: leave out messages that match no word of the question (a model can
    expand them itself). Returns (excerpts, messages considered).
    """
    conn = exp.conn
    pairs: dict[int, tuple] = {}
    for c in candidates:
        for chain, row in _under(conn, c["id"]):
            pairs.setdefault(row["id"], (chain, row))
    scores = lend_to_results(pairs, lcm.search.rank.rank_messages(conn, question, list(pairs)))
    order = sorted(pairs, key=lambda i: (-scores.get(i, 0.0), i))
    terms = [t for t in lcm.search.query.parse_query(question) if t.regex]
    failure = bool(FAILURE_WORDS.search(question))
    # "fail", "error" in a question ask for failure lines (KEY_LINE), not lines holding the word;
    # a name (test_x, net/retry.py, RETRY_DELAY) says more than a plain word
    if failure:
        terms = [t for t in terms if not FAILURE_WORDS.fullmatch(t.text)] or terms
    patterns = [t.pattern for t in terms]
    weights = [2.0 if t.kind != "word" or "_" in t.text else 1.0 for t in terms]
    # one excerpt may take 1/EXCERPT_SHARE of what the cap allows, so several messages are shown
    budget = max(HEAD_CHARS, (exp.limit - exp.used) * 4 // EXCERPT_SHARE)
    shown: list[dict] = []
    for rowid in order[:MAX_EXAMINED]:
        chain, msg = pairs[rowid]
        if msg["token_count"] == 0:
            continue
        if matched_only and not scores.get(rowid):
            exp.truncated = True  # more exists than the model is shown: it may expand it
            continue
        text = conn.execute("SELECT substr(lcm_text(content), 1, ?) FROM messages WHERE id = ?",
                            (SCAN_CHARS, rowid)).fetchone()[0]
        left = (exp.limit - exp.used) * 4
        cut, hits = excerpt(lcm.base.mask.mask(text), patterns, min(budget, left), failure, weights)  # masked first
        if matched_only and not hits:  # ranked by its neighbours only: none of its own lines answers
            exp.truncated = True
            continue
        words = _words(cut)
        twin = next((x for x in shown if len(words & x["words"]) >= SIMILAR * len(words | x["words"])), None)
        if twin:
            twin["similar"].append(msg["uuid"])
            continue
        tokens = lcm.base.config.estimate_tokens(cut)
        if exp.used + tokens > exp.limit:
            exp.truncated = True
            break
        exp.charge(msg["uuid"], tokens)
        exp.summaries.update(chain)
        shown.append({"id": msg["uuid"], "role": msg["role"], "at": msg["created_at"],
                      "via": chain[0] if chain else None, "score": round(scores.get(rowid, 0.0), 3),
                      "text": cut, "words": words, "similar": []})
        if len(shown) >= MAX_EXCERPTS:
            break  # the rest rank lower; "N excerpts of M messages" says so
    return shown, len(pairs)


def excerpts_text(sources: list[dict], reason: str) -> str:
    """The excerpts as text: what lcm says when no model is available (never an invented answer)."""
    lines = [f"{reason}: these are excerpts of the source messages, the most relevant to the question "
             "first; not an answer."]
    for rank, m in enumerate(sources, 1):
        via = f", in {m['via']}" if m.get("via") else ""
        body = m["text"].replace("\n", "\n   ")
        lines.append(f"{rank}. [{m['id']}] ({m['role']}, {(m['at'] or '')[:16]}{via}):\n   {body}")
        if m.get("similar"):
            lines.append(f"   (+{len(m['similar'])} near-identical: {', '.join(u[:8] for u in m['similar'])})")
    if not sources:
        lines.append("(no message under these ids has any text)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# With a model
# ---------------------------------------------------------------------------

def format_sources(messages: list[dict]) -> str:
    return "\n".join(f'<message id="{m["id"]}" role="{m["role"]}" at="{m["at"]}"'
                     + (f' via="{m["via"]}"' if m["via"] else "")
                     + (' excerpt="true"' if "words" in m else "") + f">\n{m['text']}\n</message>"
                     for m in messages)


def first_prompt(question: str, candidates: list[dict], sources: list[dict], exp: Expansion) -> str:
    heads = "\n".join(f'<summary id="{c["id"]}" kind="{c["kind"]}" depth="{c["depth"]}">{c.get("head", "")}</summary>'
                      for c in candidates if c["kind"] != "message")
    cut = (" The sources are excerpts of the most relevant messages; more exists than shown: lcm_expand an id"
           " to read a message or summary in full." if exp.truncated else "")
    return (f"Question: {question}\n\nExpansion grant {exp.grant_id}: cap {exp.cap} tokens of source text, "
            f"{exp.used} used by the sources below, {exp.cap - exp.used} left for lcm_expand.{cut}"
            f"\n\n<sources>\n{heads}\n{format_sources(sources)}\n</sources>")


TOOLS = [
    {"name": "lcm_describe", "description": "Metadata of a summary, message or file id (kind, depth, time, a short head). Free.",
     "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    {"name": "lcm_expand", "description": "The source messages under a summary id, or one message's text. "
     "Charged against the grant's token cap; refused when the cap is spent or the grant expired.",
     "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
    {"name": "lcm_grep", "description": "Search the sessions in scope; returns ids and snippets.",
     "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]


def run_tool(exp: Expansion, sessions: list[str], name: str, tool_input: dict) -> tuple[str, bool]:
    """(result text, is_error) of one tool call, executed in-process under the grant."""
    conn = exp.conn
    try:
        if name == "lcm_describe":
            info = node_info(conn, str(tool_input.get("id", "")))
            return (json.dumps(info), False) if info else (f"unknown id {tool_input.get('id')}", True)
        if name == "lcm_expand":
            got = exp.expand(str(tool_input.get("id", "")))
            if not got and exp.used >= exp.cap:
                return (f"refused: grant {exp.grant_id} has used its {exp.cap} tokens; "
                        "answer from what was already expanded"), True
            return (format_sources(got) or "nothing new under this id (already shown above)"), False
        if name == "lcm_grep":
            keep = ("id", "type", "session_id", "created_at", "snippet", "covering_summary_id")
            items = []
            for session_id in sessions:
                ask = lcm.search.query.Query(str(tool_input.get("query", "")), session=session_id, limit=10)
                doc = lcm.search.engine.search(conn, ask)
                items += [{k: r.get(k) for k in keep} for r in doc.get("results", [])]
            return json.dumps(items[:10]), False
    except LcmError as exc:
        return f"refused: {exc.message}", True
    return f"unknown tool {name}", True


def answer_with_anthropic(exp: Expansion, sessions: list[str], prompt: str, model: str,
                         max_tokens: int = ANSWER_MAX_TOKENS) -> str:
    done = lcm.base.llm.tool_loop(SYSTEM, prompt, TOOLS, lambda name, args: run_tool(exp, sessions, name, args),
                             max_turns=MAX_TURNS, max_tokens=max_tokens, model=model,
                             deadline=time.monotonic() + ANSWER_SECONDS, max_retries=1)
    return done.text


def answer_with_claude(exp: Expansion, prompt: str, db: Path, model: str) -> str:
    scripts = Path(__file__).resolve().parent.parent.parent
    tools = [f"Bash(python3 {scripts}/lcm_{verb}.py:*)" for verb in ("expand", "describe", "grep")]
    guide = ("\n\nTo read more, run (the grant in LCM_GRANT limits what you can read):\n"
             + "\n".join(f"python3 {scripts}/lcm_{verb}.py {arg}" for verb, arg in
                         (("describe", "ID"), ("expand", "ID"), ("grep", "'WORDS'"))))
    env = {**os.environ, "LCM_GRANT": exp.grant_id, "LCM_DB": str(db)}
    result = lcm.base.llm.run_claude(prompt + guide, system=SYSTEM, model=model, max_turns=MAX_TURNS, tools="Bash",
                                allowed_tools=tools, env=env, timeout=2 * ANSWER_SECONDS)
    return str(result.get("result") or "").strip()


def fit_answer(text: str, max_tokens: int) -> tuple[str, bool]:
    """(the answer within max_tokens, whether it was cut). The SDK's max_tokens bounds one call,
    but `claude -p` takes no such bound, and a tool loop's answer may span calls."""
    if lcm.base.config.estimate_tokens(text) <= max_tokens:
        return text, False
    mark = f"\n... (answer cut at {max_tokens} tokens: raise --max-tokens for more)"
    return text[:max(0, max_tokens * 4 - len(mark))].rstrip() + mark, True


def cited_ids(conn, answer: str) -> tuple[list[str], list[str]]:
    """(ids the answer cites that exist in the vault, cited ids that do not)."""
    good, bad = [], []
    for node_id in dict.fromkeys(CITATION.findall(answer)):
        exists = conn.execute("SELECT 1 FROM summaries WHERE id = ? UNION ALL SELECT 1 FROM messages WHERE uuid = ?"
                              " UNION ALL SELECT 1 FROM files WHERE id = ?", (node_id,) * 3).fetchone()
        (good if exists else bad).append(node_id)
    return good, bad


# ---------------------------------------------------------------------------
# The verb
# ---------------------------------------------------------------------------

def answer(conn, question: str, *, query: str | None = None, ids: list[str] | None = None, session=None,
           all_sessions: bool = False, cap: int, db_path: Path, warn=None, answer_tokens: int | None = None) -> dict:
    """Answer `question` from the messages under the candidates, reading at most `cap` tokens;
    a model's answer is at most `answer_tokens` long (ANSWER_MAX_TOKENS when None). Without a
    model the excerpts are the answer, within `cap`.

    Returns the --json document of lcm_expand_query.py. `warn(text)` is told when the model
    call fails and the answer falls back to excerpts.
    """
    backend = lcm.base.llm.resolve_backend()
    candidates = find_candidates(conn, query=query, ids=ids, session=session, all_sessions=all_sessions)
    sessions = list(dict.fromkeys(c["session_id"] for c in candidates if c["session_id"]))
    if not sessions:
        raise LcmError("none of the ids belongs to a stored session", "pass summary ids or message uuids")
    grant_id = lcm.vault.grants.create_grant(conn, sessions, [c["id"] for c in candidates], cap,
                                       ttl_seconds=GRANT_TTL_SECONDS)
    ranking_text = " ".join(filter(None, [question, query]))
    considered = 0
    answer_cap, answer_cut = answer_tokens or ANSWER_MAX_TOKENS, False
    try:
        exp = Expansion(conn, grant_id, cap)
        sources, reason = [], None
        if backend != "none":
            exp.limit = max(1, int(cap * PREFETCH_SHARE))
            sources, considered = ranked_excerpts(exp, candidates, ranking_text, matched_only=True)
            if not sources:  # nothing matches the question's words: the first messages, in order
                sources = [m for c in candidates for m in exp.expand(c["id"])]
            exp.limit = cap
            prompt = first_prompt(question, candidates, sources, exp)
            model = lcm.base.llm.resolve_model(conn, sessions[0])  # the main thread's model
            try:
                if backend == "anthropic":
                    text = answer_with_anthropic(exp, sessions, prompt, model, max_tokens=answer_cap)
                else:
                    text = answer_with_claude(exp, prompt, db_path, model)
                text, answer_cut = fit_answer(text, answer_cap)
            except lcm.base.errors.ModelError as exc:
                if warn:
                    warn(f"the model call failed ({exc.message}); showing excerpts instead")
                backend, reason = "none", "The model call failed"
                # the prefetch was charged already; the excerpts may use what the cap has left
                exp.used = conn.execute("SELECT tokens_used FROM grants WHERE id = ?", (grant_id,)).fetchone()[0]
        if backend == "none":
            exp.truncated = False
            sources, considered = ranked_excerpts(exp, candidates, ranking_text)
            text = excerpts_text(sources, reason or "No model backend (LCM_LLM=none)")
        used = conn.execute("SELECT tokens_used FROM grants WHERE id = ?", (grant_id,)).fetchone()[0]
    finally:
        lcm.vault.grants.revoke_grant(conn, grant_id)
    good, bad = cited_ids(conn, text) if backend != "none" else ([], [])  # excerpts cite nothing
    return {"answer": lcm.base.mask.mask(text) or "(the model gave no answer)", "cited_ids": good,
            "excerpt_ids": [m["id"] for m in sources] if backend == "none" else [],
            "expanded_summary_count": len(exp.summaries), "total_source_tokens": max(used, exp.used),
            "truncated": exp.truncated, "backend": backend, "grant_id": grant_id, "unknown_cited_ids": bad,
            "messages_considered": considered, "answer_truncated": answer_cut}
