"""Answer a question from the exact messages behind summaries, read under a bounded expansion grant.

Finds candidates (lcm_grep for --query, or the given ids), opens a grant scoped to them
(cap --max-tokens, default $LCM_MAX_EXPAND_TOKENS = 4000; expires in 5 minutes), walks the
summary DAG down to the source messages until the cap is spent (text past the cap is never
read; with a model, a quarter of the cap is kept for its own lcm_expand calls), and has the
model answer citing ids. The grant is revoked when the command ends.
Backends (LCM_LLM): anthropic = a bounded tool loop (describe/expand/grep under the grant);
claude = a headless `claude -p` allowed only lcm_expand/describe/grep; none = the gathered
excerpts, ranked and labelled as excerpts (never an invented answer).
For the main agent; inside a sub-agent use lcm_expand.py directly (the delegation guard).

Usage:
  python3 scripts/lcm_expand_query.py --prompt QUESTION (--query TEXT | --summary-ids ID...)
      [--max-tokens N] [--session ID | --all-sessions] [--json]
      [--delegated-scope TEXT --kept-work TEXT]

Examples:
  python3 "$LCM_SCRIPTS/lcm_expand_query.py" --prompt "Which retry delay did we settle on?" --query "retry delay"
  python3 "$LCM_SCRIPTS/lcm_expand_query.py" --prompt "What failed in the migration?" --summary-ids sum_0123456789abcdef
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import lcm.cli
import lcm.config
import lcm.db
import lcm.grants
import lcm.guard
import lcm.llm
import lcm.mask
import lcm.search
from lcm.errors import LcmError

GRANT_TTL_SECONDS = 300
MAX_TURNS = 6             # model calls one question may make (anthropic backend)
ANSWER_MAX_TOKENS = 1500
EXCERPT_CHARS = 400
EXCERPT_SCAN_CHARS = 20000  # of a message searched for the window that best fits the question
MAX_EXCERPTS = 12         # excerpts shown without a model
SIMILAR = 0.8             # word-set overlap (Jaccard) above which two excerpts count as one
MAX_EXAMINED = 400        # messages read, best first, while looking for distinct excerpts
PREFETCH_SHARE = 0.75     # of the cap read up front when a model can drill down with tools
CITATION = re.compile(r"\b(sum_[0-9a-f]{16}|file_[0-9a-f]{16}|"
                      r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
SYSTEM = (
    "You answer one question about earlier Claude Code sessions, using only the sources given and what "
    "the tools return. Cite the id of every source a claim rests on in square brackets, e.g. "
    "[sum_0123456789abcdef] or [<message uuid>]. If the sources do not answer the question, say so "
    "plainly; never guess. Be brief: your answer goes back into another agent's context.")


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
        info["head"] = lcm.mask.mask(info["head"])
    return info


def find_candidates(conn, args) -> list[dict]:
    """The nodes to expand, best first: the given ids, or lcm_grep's hits for --query."""
    if args.summary_ids:
        found = []
        for node_id in args.summary_ids:
            info = node_info(conn, node_id)
            if info is None:
                raise LcmError(f"no summary or message {node_id} in the vault",
                               "find ids with lcm_grep.py or lcm_describe.py, or use --query TEXT")
            found.append(info)
        return found
    doc = lcm.search.search(conn, args.query, scope="both", session=args.session,
                          all_sessions=args.all_sessions, limit=20)
    found, seen = [], set()
    for item in doc.get("results", []):
        node_id = item.get("id") or item.get("uuid")
        info = node_info(conn, str(node_id)) if node_id and node_id not in seen else None
        if info:
            seen.add(node_id)
            found.append(info)
    if not found:
        raise LcmError(f"nothing in the vault matches {args.query!r}",
                       "try other words or --all-sessions; lcm_grep.py shows what the vault holds")
    return found


def _walk(conn, summary_id: str, chain: tuple = ()):
    """(summary chain, message row) for every source message under a summary, in order. No content."""
    chain = chain + (summary_id,)
    for src in conn.execute("SELECT message_id, child_id FROM summary_sources WHERE summary_id = ? ORDER BY ord",
                            (summary_id,)).fetchall():
        if src["child_id"]:
            yield from _walk(conn, src["child_id"], chain)
        else:
            row = conn.execute("SELECT id, uuid, session_id, role, created_at, token_count FROM messages"
                               " WHERE id = ?", (src["message_id"],)).fetchone()
            if row:
                yield chain, row


class Expansion:
    """Reads source messages under one grant; text past the cap is never fetched from the vault."""

    def __init__(self, conn, grant_id: str, cap: int):
        self.conn, self.grant_id, self.cap = conn, grant_id, cap
        self.limit = cap          # lowered while prefetching, to leave the model room for its own drill-down
        self.used = 0
        self.truncated = False
        self.read: set[int] = set()
        self.summaries: set[str] = set()

    def expand(self, node_id: str) -> list[dict]:
        """The source messages under node_id (a summary or a message) that fit the remaining cap."""
        if node_id.startswith("sum_"):
            pairs = list(_walk(self.conn, node_id))
        else:
            row = self.conn.execute("SELECT id, uuid, session_id, role, created_at, token_count FROM messages"
                                    " WHERE uuid = ?", (node_id,)).fetchone()
            pairs = [((), row)] if row else []
        out = []
        for chain, msg in pairs:
            if msg["id"] in self.read or msg["token_count"] == 0:
                continue  # an empty message (a tool result with no output) costs nothing: walk on
            want = min(msg["token_count"], self.limit - self.used)
            if want <= 0:
                self.truncated = True
                break
            allowed = lcm.grants.check_and_charge(self.conn, self.grant_id, msg["uuid"], want)
            if allowed <= 0:
                self.truncated = True
                break
            # substr: only the allowed characters leave the vault (estimate_tokens = chars / 4)
            text = self.conn.execute("SELECT substr(content, 1, ?) FROM messages WHERE id = ?",
                                     (allowed * 4, msg["id"])).fetchone()[0]
            text = lcm.mask.mask(text)
            if allowed < msg["token_count"]:
                self.truncated = True
                text += " [... cut at the grant's token cap]"
            self.used += allowed
            self.read.add(msg["id"])
            self.summaries.update(chain)
            out.append({"id": msg["uuid"], "session_id": msg["session_id"], "role": msg["role"],
                        "at": msg["created_at"], "via": chain[0] if chain else None,
                        "tokens": allowed, "text": text})
        return out


def format_sources(messages: list[dict]) -> str:
    return "\n".join(f'<message id="{m["id"]}" role="{m["role"]}" at="{m["at"]}"'
                     + (f' via="{m["via"]}"' if m["via"] else "") + f">\n{m['text']}\n</message>"
                     for m in messages)


def first_prompt(question: str, candidates: list[dict], sources: list[dict], exp: Expansion) -> str:
    heads = "\n".join(f'<summary id="{c["id"]}" kind="{c["kind"]}" depth="{c["depth"]}">{c.get("head", "")}</summary>'
                      for c in candidates if c["kind"] != "message")
    cut = " The cap cut the sources: more exists than shown." if exp.truncated else ""
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


def run_tool(conn, exp: Expansion, sessions: list[str], name: str, tool_input: dict) -> tuple[str, bool]:
    """(result text, is_error) of one tool call, executed in-process under the grant."""
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
                doc = lcm.search.search(conn, str(tool_input.get("query", "")), session=session_id, limit=10)
                items += [{k: r.get(k) for k in keep} for r in doc.get("results", [])]
            return json.dumps(items[:10]), False
    except LcmError as exc:
        return f"refused: {exc.message}", True
    return f"unknown tool {name}", True


def answer_with_anthropic(conn, exp: Expansion, sessions: list[str], prompt: str, model: str) -> str:
    client = lcm.llm.anthropic_client()
    import anthropic
    messages: list[dict] = [{"role": "user", "content": prompt}]
    for turn in range(MAX_TURNS):
        last = turn == MAX_TURNS - 1
        try:
            response = client.messages.create(**lcm.llm.masked_params(dict(
                model=model, max_tokens=ANSWER_MAX_TOKENS, system=SYSTEM, tools=TOOLS, messages=messages,
                tool_choice={"type": "none" if last else "auto"})))
        except anthropic.APIError as exc:
            raise lcm.llm.ModelError(f"the model call failed: {lcm.llm._api_message(exc)}",
                                     "retry, or set LCM_LLM=none to get the gathered excerpts") from None
        calls = [b for b in response.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in response.content if b.type == "text").strip()
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]})
        results = []
        for call in calls:
            text, is_error = run_tool(conn, exp, sessions, call.name, call.input or {})
            results.append({"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": is_error})
        messages.append({"role": "user", "content": results})
    return ""


def answer_with_claude(conn, exp: Expansion, prompt: str, db: Path, model: str) -> str:
    scripts = Path(__file__).resolve().parent
    tools = [f"Bash(python3 {scripts}/lcm_{verb}.py:*)" for verb in ("expand", "describe", "grep")]
    guide = ("\n\nTo read more, run (the grant in LCM_GRANT limits what you can read):\n"
             + "\n".join(f"python3 {scripts}/lcm_{verb}.py {arg}" for verb, arg in
                         (("describe", "ID"), ("expand", "ID"), ("grep", "'WORDS'"))))
    env = {**os.environ, "LCM_GRANT": exp.grant_id, "LCM_DB": str(db)}
    result = lcm.llm.run_claude(prompt + guide, system=SYSTEM, model=model, max_turns=MAX_TURNS, tools="Bash",
                                allowed_tools=tools, env=env, timeout=300)
    return str(result.get("result") or "").strip()


def _window(text: str, patterns) -> tuple[int, int]:
    """(start, end) of the EXCERPT_CHARS of `text` holding the most distinct query terms."""
    hits = sorted((m.start(), i) for i, pat in enumerate(patterns) for m in pat.finditer(text))
    best, start = -1, 0
    for k, (pos, _) in enumerate(hits):
        distinct = len({i for p, i in hits[k:] if p < pos + EXCERPT_CHARS * 3 // 4})
        if distinct > best:
            best, start = distinct, max(0, pos - EXCERPT_CHARS // 4)
    return start, start + EXCERPT_CHARS


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{3,}", text.lower()))


def ranked_excerpts(conn, exp: Expansion, candidates: list[dict], question: str) -> tuple[list[dict], int]:
    """Excerpts of every message under the candidates, the most relevant to `question` first.

    Ranking uses the full-text index only; text leaves the vault as excerpts, charged to the
    grant until its cap. Empty messages are skipped, and an excerpt nearly identical to one
    already shown (successive TodoWrite snapshots, a re-run command) is folded into it.
    Returns (excerpts, messages considered).
    """
    import lcm.query
    pairs: dict[int, tuple] = {}
    for c in candidates:
        if c["kind"] == "message":
            row = conn.execute("SELECT id, uuid, session_id, role, created_at, token_count FROM messages"
                               " WHERE uuid = ?", (c["id"],)).fetchone()
            found = [((), row)] if row else []
        else:
            found = _walk(conn, c["id"])
        for chain, row in found:
            pairs.setdefault(row["id"], (chain, row))
    scores = lcm.search.rank_messages(conn, question, list(pairs))
    order = sorted(pairs, key=lambda i: (-scores.get(i, 0.0), i))
    patterns = [t.pattern for t in lcm.query.parse_query(question) if t.regex]
    shown: list[dict] = []
    for rowid in order[:MAX_EXAMINED]:
        chain, msg = pairs[rowid]
        if msg["token_count"] == 0:
            continue
        text = conn.execute("SELECT substr(content, 1, ?) FROM messages WHERE id = ?",
                            (EXCERPT_SCAN_CHARS, rowid)).fetchone()[0]
        flat = " ".join(lcm.mask.mask(text).split())  # masked before the window cuts it
        start, end = _window(flat, patterns)
        cut = ("..." if start else "") + flat[start:end] + ("..." if end < len(flat) else "")
        words = _words(cut)
        twin = next((x for x in shown if len(words & x["words"]) >= SIMILAR * len(words | x["words"])), None)
        if twin:
            twin["similar"].append(msg["uuid"])
            continue
        tokens = lcm.config.estimate_tokens(cut)
        if exp.used + tokens > exp.cap:
            exp.truncated = True
            break
        exp.used += lcm.grants.check_and_charge(conn, exp.grant_id, msg["uuid"], tokens)
        exp.summaries.update(chain)
        shown.append({"id": msg["uuid"], "role": msg["role"], "at": msg["created_at"],
                      "via": chain[0] if chain else None, "score": round(scores.get(rowid, 0.0), 3),
                      "text": cut, "words": words, "similar": []})
        if len(shown) >= MAX_EXCERPTS:
            break  # the rest rank lower; "N excerpts of M messages" says so
    return shown, len(pairs)


def excerpts(sources: list[dict], reason: str) -> str:
    """The excerpts as text: what lcm says when no model is available (never an invented answer)."""
    lines = [f"{reason}: these are excerpts of the source messages, the most relevant to the question "
             "first; not an answer."]
    for rank, m in enumerate(sources, 1):
        via = f", in {m['via']}" if m.get("via") else ""
        lines.append(f"{rank}. [{m['id']}] ({m['role']}, {(m['at'] or '')[:16]}{via}): {m['text']}")
        if m.get("similar"):
            lines.append(f"   (+{len(m['similar'])} near-identical: {', '.join(u[:8] for u in m['similar'])})")
    if not sources:
        lines.append("(no message under these ids has any text)")
    return "\n".join(lines)


def cited_ids(conn, answer: str) -> tuple[list[str], list[str]]:
    """(ids the answer cites that exist in the vault, cited ids that do not)."""
    good, bad = [], []
    for node_id in dict.fromkeys(CITATION.findall(answer)):
        exists = conn.execute("SELECT 1 FROM summaries WHERE id = ? UNION ALL SELECT 1 FROM messages WHERE uuid = ?"
                              " UNION ALL SELECT 1 FROM files WHERE id = ?", (node_id,) * 3).fetchone()
        (good if exists else bad).append(node_id)
    return good, bad


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("--prompt", required=True, metavar="QUESTION", help="the question to answer")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", metavar="TEXT", help="find candidates with lcm_grep")
    what.add_argument("--summary-ids", nargs="+", metavar="ID", help="expand these summary (or message) ids")
    p.add_argument("--max-tokens", type=lcm.cli.int_arg(1), metavar="N", help="grant cap (default $LCM_MAX_EXPAND_TOKENS, 4000)")
    lcm.cli.add_session_arg(p)
    p.add_argument("--all-sessions", action="store_true", help="search every session, not only this project's")
    lcm.guard.add_guard_args(p)
    args = p.parse_args(argv)
    lcm.guard.check_delegation("lcm_expand_query.py", args.delegated_scope, args.kept_work,
                               instead="use lcm_expand.py ID (with lcm_grep.py / lcm_describe.py to find ids)")
    cap = args.max_tokens if args.max_tokens is not None else lcm.config.get("LCM_MAX_EXPAND_TOKENS")
    if cap <= 0:
        p.error("--max-tokens must be a positive integer")
    backend = lcm.llm.resolve_backend()
    conn = lcm.db.connect(args.db, create=False)
    candidates = find_candidates(conn, args)
    sessions = list(dict.fromkeys(c["session_id"] for c in candidates if c["session_id"]))
    if not sessions:
        raise LcmError("none of the ids belongs to a stored session", "pass summary ids or message uuids")
    grant_id = lcm.grants.create_grant(conn, sessions, [c["id"] for c in candidates], cap, ttl_seconds=GRANT_TTL_SECONDS)
    try:
        exp = Expansion(conn, grant_id, cap)
        sources = []
        if backend != "none":
            exp.limit = max(1, int(cap * PREFETCH_SHARE))
            sources = [m for c in candidates for m in exp.expand(c["id"])]
        exp.limit = cap
        prompt = first_prompt(args.prompt, candidates, sources, exp)
        model = lcm.llm.resolve_model(conn, sessions[0])
        reason = None
        try:
            if backend == "anthropic":
                answer = answer_with_anthropic(conn, exp, sessions, prompt, model)
            elif backend == "claude":
                answer = answer_with_claude(conn, exp, prompt, lcm.config.db_path(args.db).resolve(), model)
        except lcm.llm.ModelError as exc:
            sys.stderr.write(f"Warning: the model call failed ({exc.message}); showing excerpts instead\n")
            backend, reason = "none", "The model call failed"
            # the prefetch was charged already; the excerpts may use what the cap has left
            exp.used = conn.execute("SELECT tokens_used FROM grants WHERE id = ?", (grant_id,)).fetchone()[0]
        if backend == "none":
            question = " ".join(filter(None, [args.prompt, args.query]))
            sources, considered = ranked_excerpts(conn, exp, candidates, question)
            answer = excerpts(sources, reason or "No model backend (LCM_LLM=none)")
        used = conn.execute("SELECT tokens_used FROM grants WHERE id = ?", (grant_id,)).fetchone()[0]
    finally:
        lcm.grants.revoke_grant(conn, grant_id)
    good, bad = cited_ids(conn, answer)
    if backend == "none":
        good, bad = [], []  # excerpts cite nothing: their ids are in excerpt_ids
    result = {"answer": lcm.mask.mask(answer) or "(the model gave no answer)", "cited_ids": good,
              "excerpt_ids": [m["id"] for m in sources] if backend == "none" else [],
              "expanded_summary_count": len(exp.summaries), "total_source_tokens": max(used, exp.used),
              "truncated": exp.truncated, "backend": backend, "grant_id": grant_id, "unknown_cited_ids": bad}
    if args.json:
        lcm.cli.print_json(result)
    else:
        print(result["answer"])
        if backend != "none":
            print(f"\nCited: {', '.join(good) or 'nothing'}" + (f" (ignored unknown ids: {', '.join(bad)})" if bad else ""))
        more = "; cut at the cap (raise --max-tokens to read more)" if exp.truncated else ""
        read = f"{len(sources)} excerpts of {considered} messages, " if backend == "none" else ""
        print(f"\nExpanded {len(exp.summaries)} summaries: {read}{result['total_source_tokens']} source tokens{more}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())
