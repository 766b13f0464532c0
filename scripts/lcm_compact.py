"""Compact a session: summarise old messages into a DAG of summaries (nothing is deleted).

Leaf pass: the oldest run of raw messages outside the fresh tail (LCM_FRESH_TAIL_COUNT), at most
LCM_LEAF_CHUNK_TOKENS, never splitting a tool call from its result, becomes one leaf summary.
Condensed pass: LCM_CONDENSED_MIN_FANOUT or more adjacent summaries of the shallowest depth
without a parent become one summary a level up. Every node escalates until it is shorter than its
source: 1 = details kept at the target size, 2 = bullets at half the target, 3 = the source cut
to 512 tokens; with LCM_LLM=none the first level is a deterministic extractive summary.

Usage:
  python3 scripts/lcm_compact.py [--session ID | --all] [--full | --until-under TOKENS] [--dry-run] [--json]

Modes: incremental (default: one leaf pass when the raw tokens outside the fresh tail exceed
LCM_LEAF_CHUNK_TOKENS, then condensation), --full (until nothing is eligible), --until-under
(until the active context is under TOKENS), --dry-run (say what would happen, write nothing).

Examples:
  python3 "$LCM_SCRIPTS/lcm_compact.py" --json
  python3 "$LCM_SCRIPTS/lcm_compact.py" --session 7acd37a8-2745-4b58-a8a9-46164b22ad9e --full
  LCM_LLM=none python3 "$LCM_SCRIPTS/lcm_compact.py" --all --full --json
  python3 "$LCM_SCRIPTS/lcm_compact.py" --until-under 40000 --dry-run
"""
from __future__ import annotations

import bisect
import contextlib
import fcntl
import hashlib
import json
import os
import re
import sys
import time
from xml.sax.saxutils import escape, quoteattr

import lcm_db
import lcm_extract
import lcm_llm
import lcm_prompts
from lcm_db import LcmError, estimate_tokens

TRUNCATE_TOKENS = 512
# a leaf smaller than this has little to compress; take more messages when there are some
MIN_LEAF_SOURCE_TOKENS = 32
LEVELS = ("normal", "aggressive", "truncated", "extractive")
FILE_ID = re.compile(r"\bfile_[0-9a-f]{16}\b")


# ---------------------------------------------------------------------------
# Lock and reading the DAG
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def session_lock(session_id: str, blocking: bool = True):
    """An exclusive file lock per session under $LCM_HOME/locks; the OS drops it if we die."""
    locks = lcm_db.lcm_home() / "locks"
    locks.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = hashlib.sha256(session_id.encode()).hexdigest()[:24]
    fd = os.open(locks / f"compact-{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            raise LcmError(f"another compaction of session {session_id} is running",
                           "wait for it to finish; it holds " + str(locks)) from None
        yield
    finally:
        os.close(fd)


def _uncovered(conn, session_id: str) -> list:
    return conn.execute(
        "SELECT m.id, m.uuid, m.role, m.token_count, m.created_at FROM messages m WHERE m.session_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id) ORDER BY m.id",
        (session_id,)).fetchall()


def _top_summaries(conn, session_id: str) -> list:
    return conn.execute(
        "SELECT id, kind, depth, content, token_count, source_token_count, level, first_message_id,"
        " last_message_id, earliest_at, latest_at, descendant_count, file_ids FROM summaries"
        " WHERE session_id = ? AND parent_id IS NULL ORDER BY first_message_id", (session_id,)).fetchall()


def active_context(conn, session_id: str) -> list[dict]:
    """The session as the agent should see it: parentless summaries and uncovered messages, in order."""
    items = [{"type": "summary", "id": r["id"], "kind": r["kind"], "depth": r["depth"],
              "token_count": r["token_count"], "first_message_id": r["first_message_id"],
              "last_message_id": r["last_message_id"], "earliest_at": r["earliest_at"],
              "latest_at": r["latest_at"], "descendant_count": r["descendant_count"], "level": r["level"],
              "content": r["content"]} for r in _top_summaries(conn, session_id)]
    items += [{"type": "message", "id": r["uuid"], "message_id": r["id"], "role": r["role"],
               "token_count": r["token_count"], "first_message_id": r["id"], "created_at": r["created_at"]}
              for r in _uncovered(conn, session_id)]
    items.sort(key=lambda item: item["first_message_id"])
    return items


def context_tokens(conn, session_id: str) -> int:
    row = conn.execute(
        "SELECT (SELECT COALESCE(SUM(token_count), 0) FROM summaries WHERE session_id = :s AND parent_id IS NULL)"
        " + (SELECT COALESCE(SUM(m.token_count), 0) FROM messages m WHERE m.session_id = :s AND NOT EXISTS"
        " (SELECT 1 FROM summary_sources x WHERE x.message_id = m.id))", {"s": session_id}).fetchone()
    return row[0]


def render_context(conn, session_id: str, max_chars: int = 8000) -> str:
    """The active context's summaries as XML for injection, at most max_chars long.

    Each summary gets an equal share of the room left; a cut body names the command that shows
    the rest, and summaries that do not fit at all are counted in an <omitted> element.
    """
    items = active_context(conn, session_id)
    summaries = [i for i in items if i["type"] == "summary"]
    raw = [i for i in items if i["type"] == "message"]
    head = f"<lcm_context session={quoteattr(session_id)} summaries=\"{len(summaries)}\">"
    foot = (f'<raw_messages count="{len(raw)}"' +
            (f' first={quoteattr(raw[0]["id"])} last={quoteattr(raw[-1]["id"])}' if raw else "") + "/>")
    tail = "</lcm_context>"
    def omitted(n: int) -> str:
        return f"<omitted summaries=\"{n}\" see={quoteattr('lcm_describe.py --session ' + session_id)}/>"

    more = omitted(len(summaries))
    room = max_chars - len(head) - len(foot) - len(tail) - 3 - (len(more) + 1)
    blocks = []
    for i, item in enumerate(summaries):
        open_tag = (f"<summary id=\"{item['id']}\" kind=\"{item['kind']}\" depth=\"{item['depth']}\""
                    f" descendant_count=\"{item['descendant_count']}\" earliest_at={quoteattr(item['earliest_at'] or '')}"
                    f" latest_at={quoteattr(item['latest_at'] or '')}>")
        share = room // (len(summaries) - i) - len(open_tag) - len("</summary>") - 3
        body = escape(item["content"])
        if len(body) > share:
            cut = f"... (cut; lcm_expand.py {item['id']})"
            if share < len(cut) + 40:
                blocks.append(omitted(len(summaries) - i))
                break
            body = re.sub(r"&[#\w]*$", "", body[: share - len(cut)]) + cut  # never split an entity
        block = f"{open_tag}\n{body}\n</summary>"
        blocks.append(block)
        room -= len(block) + 1
    return "\n".join([head, *blocks, foot, tail])


def compaction_due(conn, session_id: str) -> bool:
    """True when a leaf pass or a condensation would run in incremental mode."""
    tail = lcm_db.config("LCM_FRESH_TAIL_COUNT")
    rows = _uncovered(conn, session_id)
    body = rows[: max(len(rows) - tail, 0)]
    if sum(r["token_count"] for r in body) > lcm_db.config("LCM_LEAF_CHUNK_TOKENS"):
        return True
    return _condense_group(_top_summaries(conn, session_id), [r["id"] for r in rows]) is not None


# ---------------------------------------------------------------------------
# Choosing what to summarise
# ---------------------------------------------------------------------------

def _tool_ids(raw) -> tuple[list, list]:
    """(tool_use ids opened, tool_use ids answered) by one raw transcript line."""
    if b"tool_use" not in raw and b"tool_result" not in raw:
        return [], []
    _entry, blocks = lcm_extract._blocks(raw)
    opened = [b.get("id") for b in blocks if b.get("type") == "tool_use" and b.get("id")]
    answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result" and b.get("tool_use_id")]
    return opened, answered


def _pending(rows) -> int | None:
    """Index of the earliest row whose tool call is still unanswered at the end of rows, else None."""
    opened_at, answered = {}, set()
    for i, row in enumerate(rows):
        opened, done = _tool_ids(row["raw"])
        for tool_id in opened:
            opened_at.setdefault(tool_id, i)
        answered.update(done)
    open_rows = [i for tool_id, i in opened_at.items() if tool_id not in answered]
    return min(open_rows) if open_rows else None


def _load(conn, session_id: str, ids: list[int]) -> list:
    rows = conn.execute(
        "SELECT id, uuid, type, role, subtype, is_meta, is_sidechain, content, raw, created_at, token_count"
        " FROM messages WHERE session_id = ? AND id BETWEEN ? AND ? ORDER BY id",
        (session_id, ids[0], ids[-1])).fetchall()
    wanted = set(ids)
    return [r for r in rows if r["id"] in wanted]


def leaf_chunk(conn, session_id: str, run: list, cap: int) -> list:
    """The oldest chunk of `run` (eligible messages) under `cap` tokens, tool calls kept whole."""
    size, total = 0, 0
    for row in run:
        if size and total + row["token_count"] > cap and total >= MIN_LEAF_SOURCE_TOKENS:
            break
        size, total = size + 1, total + row["token_count"]
    rows = _load(conn, session_id, [r["id"] for r in run[:size]])
    while True:  # cut before the earliest unanswered tool call
        first_open = _pending(rows)
        if first_open is None or first_open == 0:
            break
        rows = rows[:first_open]
    if _pending(rows) is None:
        return rows
    # one call (with its result) is bigger than the cap, or starts the chunk: extend to the result
    for end in range(size + 1, len(run) + 1):
        longer = _load(conn, session_id, [r["id"] for r in run[:end]])
        if _pending(longer) is None:
            return longer
        if end - size > 200:
            break
    return rows  # the result is not there (interrupted call): keep the chunk as it is


def _condense_group(tops: list, uncovered_ids: list[int], fanout: int | None = None):
    """(depth, nodes) to condense next: the oldest `fanout` adjacent parentless nodes at the
    shallowest depth that has that many in a row; None when nothing is eligible.

    Taking exactly `fanout` children keeps the tree balanced and each condensed input at about
    fanout x the child target, whether the children came one run at a time or all at once.
    """
    fanout = fanout or lcm_db.config("LCM_CONDENSED_MIN_FANOUT")
    if fanout < 2:
        fanout = 2  # one child would only re-wrap the same summary
    runs: list[list] = []
    for node in tops:
        prev = runs[-1][-1] if runs else None
        adjacent = (prev is not None and prev["depth"] == node["depth"] and
                    bisect.bisect_right(uncovered_ids, prev["last_message_id"]) ==
                    bisect.bisect_left(uncovered_ids, node["first_message_id"]))
        if adjacent:
            runs[-1].append(node)
        else:
            runs.append([node])
    eligible = [run for run in runs if len(run) >= fanout]
    if not eligible:
        return None
    depth = min(run[0]["depth"] for run in eligible)
    run = next(run for run in eligible if run[0]["depth"] == depth)
    return depth + 1, run[:fanout]


# ---------------------------------------------------------------------------
# Writing nodes
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _atomic(conn):
    """One node = one transaction (a savepoint inside a dry run's outer transaction)."""
    if conn.in_transaction:
        conn.execute("SAVEPOINT node")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO node")
            conn.execute("RELEASE node")
            raise
        conn.execute("RELEASE node")
    else:
        with lcm_db.transaction(conn):
            yield


class Compactor:
    def __init__(self, conn, session_id: str, backend: str, model: str | None, max_calls: int):
        self.conn, self.session_id, self.backend, self.model = conn, session_id, backend, model
        self.max_calls = max_calls
        self.calls = 0
        self.levels = dict.fromkeys(LEVELS, 0)
        self.created: list[str] = []
        self.leaf_created = self.condensed_created = 0
        self.stopped: str | None = None
        self.tail = lcm_db.config("LCM_FRESH_TAIL_COUNT")
        self.chunk_cap = lcm_db.config("LCM_LEAF_CHUNK_TOKENS")
        self.leaf_target = lcm_db.config("LCM_LEAF_TARGET_TOKENS")
        self.condensed_target = lcm_db.config("LCM_CONDENSED_TARGET_TOKENS")
        self.run: list = []

    # -- eligibility --------------------------------------------------------------
    def eligible_run(self) -> list:
        """Uncovered messages outside the fresh tail, from the oldest, while contiguous."""
        if not self.run:
            rows = self.conn.execute(
                "SELECT m.id, m.token_count, EXISTS (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id)"
                " AS covered FROM messages m WHERE m.session_id = ? ORDER BY m.id", (self.session_id,)).fetchall()
            body = rows[: max(len(rows) - self.tail, 0)]
            start = next((i for i, r in enumerate(body) if not r["covered"]), len(body))
            end = next((i for i in range(start, len(body)) if body[i]["covered"]), len(body))
            self.run = body[start:end]
        return self.run

    def raw_tokens(self) -> int:
        return sum(r["token_count"] for r in self.eligible_run())

    # -- summarising with escalation ----------------------------------------------
    def summarise(self, depth: int, source: str, source_tokens: int, span: str, previous: str,
                  extractive) -> tuple[str, str, str | None]:
        """(text, level, model): the first level whose text is shorter than source_tokens."""
        target = self.leaf_target if depth == 0 else self.condensed_target
        if self.backend == "none":
            text = extractive(min(target, source_tokens - 1))
            if 0 < estimate_tokens(text) < source_tokens:
                return text, "extractive", None
        else:
            system = lcm_prompts.prompt("system")
            for level, goal in ((1, target), (2, max(target // 2, 1))):
                if self.calls >= self.max_calls:
                    self.stopped = "call_limit"
                    break
                body = lcm_prompts.fill(lcm_prompts.prompt(lcm_prompts.prompt_name(depth, level)),
                                        target_tokens=goal, span=span, previous=previous or "none", source=source)
                self.calls += 1
                done = lcm_llm.complete(system, body, max_tokens=2 * goal, model=self.model, backend=self.backend)
                text = done.text.strip()
                if text and estimate_tokens(text) < source_tokens:
                    return text, ("normal" if level == 1 else "aggressive"), done.model
        return lcm_extract.truncate(source, span, min(TRUNCATE_TOKENS, source_tokens - 1)), "truncated", None

    def _previous(self, depth: int, before_message_id: int) -> str:
        row = self.conn.execute(
            "SELECT content FROM summaries WHERE session_id = ? AND depth = ? AND last_message_id < ?"
            " ORDER BY last_message_id DESC LIMIT 1", (self.session_id, depth, before_message_id)).fetchone()
        return row["content"] if row else ""

    # -- passes -------------------------------------------------------------------
    def leaf_pass(self) -> str | None:
        run = self.eligible_run()
        if not run:
            return None
        rows = leaf_chunk(self.conn, self.session_id, run, self.chunk_cap)
        times = [r["created_at"] for r in rows if r["created_at"]]
        span = (f"messages #{rows[0]['id']}-#{rows[-1]['id']} ({len(rows)} messages"
                + (f", {times[0]} to {times[-1]})" if times else ")"))
        source = "\n\n".join(
            f"[#{r['id']} {r['role']}{' sidechain' if r['is_sidechain'] else ''} {r['created_at'] or ''}]\n{r['content']}"
            for r in rows)
        # the input's size as the active context counts it (at least 1, for runs of empty results)
        source_tokens = max(sum(r["token_count"] for r in rows), 1)
        content, level, model = self.summarise(
            0, source, source_tokens, span, self._previous(0, rows[0]["id"]),
            lambda budget: lcm_extract.summarize_messages(rows, span, budget))
        file_ids = sorted(set(FILE_ID.findall(source)))
        node_id = lcm_db.new_id("sum")
        with _atomic(self.conn):
            self._insert(node_id, "leaf", 0, content, source_tokens, level, model,
                         rows[0]["id"], rows[-1]["id"], times[0] if times else None, times[-1] if times else None,
                         len(rows), file_ids)
            self.conn.executemany("INSERT INTO summary_sources (summary_id, ord, message_id) VALUES (?, ?, ?)",
                                  [(node_id, i, r["id"]) for i, r in enumerate(rows)])
        del self.run[: len(rows)]
        self.leaf_created += 1
        self._count(node_id, level)
        return node_id

    def condense_pass(self) -> str | None:
        uncovered = [r["id"] for r in _uncovered(self.conn, self.session_id)]
        group = _condense_group(_top_summaries(self.conn, self.session_id), uncovered)
        if group is None:
            return None
        depth, children = group
        times = [t for c in children for t in (c["earliest_at"], c["latest_at"]) if t]
        descendants = sum(c["descendant_count"] for c in children)
        span = (f"{len(children)} depth-{depth - 1} summaries {children[0]['id']}..{children[-1]['id']}, "
                f"{descendants} messages" + (f", {min(times)} to {max(times)}" if times else ""))
        source = "\n\n".join(
            f"<summary id=\"{c['id']}\" depth=\"{c['depth']}\" earliest_at=\"{c['earliest_at'] or ''}\""
            f" latest_at=\"{c['latest_at'] or ''}\">\n{c['content']}\n</summary>" for c in children)
        source_tokens = max(sum(c["token_count"] for c in children), 1)
        content, level, model = self.summarise(
            depth, source, source_tokens, span, self._previous(depth, children[0]["first_message_id"]),
            lambda budget: lcm_extract.summarize_summaries([c["content"] for c in children], span, budget))
        file_ids = sorted({f for c in children for f in json.loads(c["file_ids"] or "[]")})
        node_id = lcm_db.new_id("sum")
        with _atomic(self.conn):
            self._insert(node_id, "condensed", depth, content, source_tokens, level, model,
                         children[0]["first_message_id"], children[-1]["last_message_id"],
                         min(times) if times else None, max(times) if times else None, descendants, file_ids)
            self.conn.executemany("INSERT INTO summary_sources (summary_id, ord, child_id) VALUES (?, ?, ?)",
                                  [(node_id, i, c["id"]) for i, c in enumerate(children)])
            ids = [c["id"] for c in children]
            updated = self.conn.execute(
                f"UPDATE summaries SET parent_id = ? WHERE parent_id IS NULL AND id IN ({','.join('?' * len(ids))})",
                [node_id, *ids]).rowcount
            if updated != len(ids):
                raise LcmError(f"summaries under {node_id} changed during compaction", "run lcm_compact.py again")
        self.condensed_created += 1
        self._count(node_id, level)
        return node_id

    def _insert(self, node_id, kind, depth, content, source_tokens, level, model, first, last,
                earliest, latest, descendants, file_ids) -> None:
        self.conn.execute(
            "INSERT INTO summaries (id, session_id, kind, depth, content, token_count, source_token_count, level,"
            " model, first_message_id, last_message_id, earliest_at, latest_at, descendant_count, file_ids,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (node_id, self.session_id, kind, depth, content, estimate_tokens(content), source_tokens, level, model,
             first, last, earliest, latest, descendants, json.dumps(file_ids), lcm_db.now_iso()))

    def _count(self, node_id: str, level: str) -> None:
        self.created.append(node_id)
        self.levels[level] += 1


# ---------------------------------------------------------------------------
# The verb
# ---------------------------------------------------------------------------

def compact(conn, session_id: str, *, mode: str = "incremental", until_under: int | None = None,
            dry_run: bool = False, time_budget: float | None = None) -> dict:
    """Run one compaction of a session under its lock; returns the --json document."""
    if conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (session_id,)).fetchone() is None:
        raise LcmError(f"no messages for session {session_id}", "list sessions with lcm_status.py --all, or ingest first")
    backend = lcm_llm.resolve_backend()
    model = None if backend == "none" else lcm_llm.resolve_model(conn, session_id)
    started = time.monotonic()
    with session_lock(session_id):
        work = Compactor(conn, session_id, "none" if dry_run else backend, model,
                         lcm_db.config("LCM_MAX_SUMMARY_CALLS"))
        before = context_tokens(conn, session_id)
        if dry_run:
            conn.execute("BEGIN IMMEDIATE")
        try:
            _passes(work, mode, until_under, started, time_budget)
            after = context_tokens(conn, session_id)
        finally:
            if dry_run:
                conn.execute("ROLLBACK")
    result = {"session_id": session_id, "leaf_created": work.leaf_created,
              "condensed_created": work.condensed_created, "levels": work.levels, "model_calls": work.calls,
              "tokens_before": before, "tokens_after": after, "mode": mode if until_under is None else "until_under",
              "backend": backend, "model": model, "max_model_calls": work.max_calls, "stopped": work.stopped,
              "dry_run": dry_run, "created": [] if dry_run else work.created,
              "seconds": round(time.monotonic() - started, 3)}
    if dry_run:
        nodes = work.leaf_created + work.condensed_created
        result.update(model_calls=0, levels=dict.fromkeys(LEVELS, 0),
                      would_create={"leaf": work.leaf_created, "condensed": work.condensed_created},
                      model_calls_needed=0 if backend == "none" else f"{nodes}-{2 * nodes}")
    return result


def _passes(work: Compactor, mode: str, until_under: int | None, started: float, budget: float | None) -> None:
    def out_of_time() -> bool:
        if budget is not None and time.monotonic() - started > budget:
            work.stopped = "time_budget"
        if work.backend != "none" and work.calls >= work.max_calls:
            work.stopped = "call_limit"
        return work.stopped is not None

    if until_under is not None:
        while context_tokens(work.conn, work.session_id) > until_under and not out_of_time():
            if work.leaf_pass() is None and work.condense_pass() is None:
                work.stopped = "nothing_left"
                break
        return
    if mode == "full":
        while not out_of_time() and work.leaf_pass():
            pass
    elif work.raw_tokens() > work.chunk_cap:
        work.leaf_pass()
    while not out_of_time() and work.condense_pass():
        pass


def _main(argv):
    p = lcm_db.parser(__doc__)
    lcm_db.add_session_arg(p)
    p.add_argument("--all", action="store_true", help="compact every session in the vault")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--full", action="store_true", help="sweep until nothing is eligible")
    how.add_argument("--until-under", type=int, metavar="TOKENS", help="stop once the active context is under TOKENS")
    p.add_argument("--dry-run", action="store_true", help="report what would be summarised; write nothing")
    p.add_argument("--time-budget", type=float, metavar="SECONDS", help="start no new summary after this long")
    args = p.parse_args(argv)
    lcm_db.validate_config()
    conn = lcm_db.connect(args.db)
    if args.all:
        sessions = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages ORDER BY session_id")]
    else:
        session = args.session or lcm_db.current_session_id()
        if not session:
            raise LcmError("no session given", "pass --session ID (lcm_status.py lists them) or --all")
        sessions = [session]
    mode = "full" if args.full else "incremental"
    results = [compact(conn, s, mode=mode, until_under=args.until_under, dry_run=args.dry_run,
                       time_budget=args.time_budget) for s in sessions]
    if args.json:
        if args.all:
            total = {k: sum(r[k] for r in results) for k in
                     ("leaf_created", "condensed_created", "model_calls", "tokens_before", "tokens_after")}
            total["levels"] = {k: sum(r["levels"][k] for r in results) for k in LEVELS}
            lcm_db.print_json({**total, "sessions": results, "count": len(results)})
        else:
            lcm_db.print_json(results[0])
        return 0
    for r in results:
        verb = "would create" if r["dry_run"] else "created"
        made = r["would_create"] if r["dry_run"] else {"leaf": r["leaf_created"], "condensed": r["condensed_created"]}
        levels = ", ".join(f"{k} {v}" for k, v in r["levels"].items() if v)
        print(f"{r['session_id']}: {verb} {made['leaf']} leaf + {made['condensed']} condensed summaries"
              f"{' (' + levels + ')' if levels else ''}; context {r['tokens_before']} -> {r['tokens_after']} tokens;"
              f" {r['model_calls']}/{r['max_model_calls']} model calls ({r['backend']})"
              + (f"; stopped: {r['stopped']}" if r["stopped"] else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm_db.run(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
