"""The summary DAG of a session: what is in its active context, and what to summarise next.

Read-only helpers shared by lcm_compact.py (which writes nodes) and the hooks (which render the
active context). A session's sequence is its conversation (messages.seq, lcm/vault/order.py): the main
thread in transcript order, each sub-agent's run right after the call that started it. A leaf
covers a contiguous run of one thread (the main thread's leaves may fold in a small sub-agent
run whose call they hold); a condensed node covers a contiguous run of nodes one depth below;
the active context is every parentless summary plus every uncovered message. Stdlib only.
"""
from __future__ import annotations

import contextlib
import math
import os
import re

import lcm.base.config
import lcm.base.mask
import lcm.vault.order
import lcm.vault.store
import lcm.base.text
from lcm.base.errors import LcmError

# how far past a chunk to look for the results of its tool calls
LOOKAHEAD_MESSAGES = 64


# ---------------------------------------------------------------------------
# The active context
# ---------------------------------------------------------------------------

def uncovered(conn, session_id: str) -> list:
    return conn.execute(
        "SELECT m.id, m.uuid, m.role, m.token_count, m.created_at, m.seq, m.thread FROM messages m"
        " WHERE m.session_id = ? AND NOT EXISTS (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id)"
        " ORDER BY m.seq",
        (session_id,)).fetchall()


def top_summaries(conn, session_id: str) -> list:
    return conn.execute(
        "SELECT s.id, s.kind, s.depth, s.content, s.token_count, s.source_token_count, s.level,"
        " s.first_message_id, s.last_message_id, s.earliest_at, s.latest_at, s.descendant_count, s.file_ids,"
        " f.seq AS first_seq, l.seq AS last_seq FROM summaries s JOIN messages f ON f.id = s.first_message_id"
        " JOIN messages l ON l.id = s.last_message_id"
        " WHERE s.session_id = ? AND s.parent_id IS NULL ORDER BY f.seq", (session_id,)).fetchall()


def active_context(conn, session_id: str) -> list[dict]:
    """The session as the agent should see it: parentless summaries and uncovered messages, in order."""
    items = [{"type": "summary", "id": r["id"], "kind": r["kind"], "depth": r["depth"],
              "token_count": r["token_count"], "first_message_id": r["first_message_id"],
              "last_message_id": r["last_message_id"], "earliest_at": r["earliest_at"],
              "latest_at": r["latest_at"], "descendant_count": r["descendant_count"], "level": r["level"],
              "content": r["content"], "seq": r["first_seq"]} for r in top_summaries(conn, session_id)]
    items += [{"type": "message", "id": r["uuid"], "message_id": r["id"], "role": r["role"],
               "token_count": r["token_count"], "first_message_id": r["id"], "created_at": r["created_at"],
               "thread": r["thread"], "seq": r["seq"]}
              for r in uncovered(conn, session_id)]
    items.sort(key=lambda item: (item["seq"] is None, item["seq"] or 0))
    return items


def active_context_tokens(conn, session_id: str) -> int:
    """Tokens of lcm's active context: the parentless summaries plus the messages no summary covers
    (what compaction lowers; not Claude Code's own context, see lcm.readers.status.claude_context_tokens)."""
    row = conn.execute(
        "SELECT (SELECT COALESCE(SUM(token_count), 0) FROM summaries WHERE session_id = :s AND parent_id IS NULL)"
        " + (SELECT COALESCE(SUM(m.token_count), 0) FROM messages m WHERE m.session_id = :s AND NOT EXISTS"
        " (SELECT 1 FROM summary_sources x WHERE x.message_id = m.id))", {"s": session_id}).fetchone()
    return row[0]


def quoteattr(value: str) -> str:
    """An attribute value in double quotes, as text (no entities): ids and times never hold a quote."""
    return '"' + str(value).replace('"', "'") + '"'


def render_context(conn, session_id: str, max_chars: int = 8000) -> str:
    """The active context's summaries for injection, at most max_chars long: XML-like tags
    around plain text. A summary keeps words of the messages (a fetched page, a file): its body
    goes through lcm.base.text.untagged, so it cannot close these tags or open one of its own.

    Each summary gets an equal share of the room left; a cut body names the command that shows
    the rest (lcm_describe.py: the main agent inspects, lcm_expand.py is for sub-agents), and
    summaries that do not fit at all are counted in an <omitted> element. A condensed summary
    lists the summaries it condenses in <parents> (the seeds' name for them: the nodes it was made
    from), so one of them can be described or expanded without the whole subtree.
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
        if item["kind"] == "condensed":
            sources = [r[0] for r in conn.execute("SELECT child_id FROM summary_sources WHERE summary_id = ?"
                                                  " AND child_id IS NOT NULL ORDER BY ord", (item["id"],))]
            open_tag += "\n<parents>" + "".join(f'\n<summary_ref id="{s}"/>' for s in sources) + "\n</parents>"
        share = room // (len(summaries) - i) - len(open_tag) - len("</summary>") - 3
        body = lcm.base.mask.mask(item["content"])  # before the cut: a cut must not split a secret
        body = lcm.base.text.untagged(body)
        if len(body) > share:
            cut = f"... (cut; lcm_describe.py {item['id']})"
            if share < len(cut) + 40:
                blocks.append(omitted(len(summaries) - i))
                break
            body = body[: share - len(cut)] + cut
        block = f"{open_tag}\n{body}\n</summary>"
        blocks.append(block)
        room -= len(block) + 1
    return "\n".join([head, *blocks, foot, tail])


# ---------------------------------------------------------------------------
# Choosing what to summarise next
# ---------------------------------------------------------------------------

def tool_ids(raw) -> tuple[list, list]:
    """(tool_use ids opened, tool_use ids answered) by one raw transcript line."""
    if b"tool_use" not in raw and b"tool_result" not in raw:
        return [], []
    from lcm.summary.extract import raw_blocks# here: the hooks' due check imports this module, not the extractor
    _entry, blocks = raw_blocks(raw)
    opened = [b.get("id") for b in blocks if b.get("type") == "tool_use" and b.get("id")]
    answered = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result" and b.get("tool_use_id")]
    return opened, answered


def open_calls(rows, cache: dict) -> dict:
    """{tool_use id: row index} of the calls in rows still without their result at the end.

    `cache` (message id -> tool_ids) saves re-parsing lines across calls on overlapping runs.
    """
    opened_at, answered = {}, set()
    for i, row in enumerate(rows):
        ids = cache.get(row["id"])
        if ids is None:
            ids = cache[row["id"]] = tool_ids(row["raw"])
        for tool_id in ids[0]:
            opened_at.setdefault(tool_id, i)
        answered.update(ids[1])
    return {tool_id: i for tool_id, i in opened_at.items() if tool_id not in answered}


def body_rows(conn, session_id: str, tail: int) -> list[dict]:
    """Every message before the fresh tail (the newest `tail` main-thread messages), in
    conversation order: id, seq, thread, token_count, covered. A sub-agent run whose call is
    inside the tail is inside it too."""
    start = lcm.vault.order.main_thread_tail_start(conn, session_id, tail)
    rows = conn.execute(
        "SELECT m.id, m.seq, m.thread, m.token_count, EXISTS (SELECT 1 FROM summary_sources s"
        " WHERE s.message_id = m.id) AS covered FROM messages m WHERE m.session_id = ? AND m.seq < ?"
        " ORDER BY m.seq", (session_id, 1 << 62 if start is None else start)).fetchall()
    return [dict(r) for r in rows]


def next_run(body: list[dict], anchors: dict, minimum: int) -> list[dict]:
    """The next run of uncovered messages to summarise, oldest first; [] when none is ready.

    The main thread's run is its uncovered messages from the oldest up to the next covered one,
    with every sub-agent run under `minimum` tokens whose call (anchors: thread -> messages.id)
    it holds folded in. A larger sub-agent run is a run of its own. A run under `minimum`
    tokens waits for more messages, unless covered messages follow it.
    """
    loose = [r for r in body if not r["covered"]]
    sizes: dict[str, int] = {}
    for r in loose:
        sizes[r["thread"]] = sizes.get(r["thread"], 0) + r["token_count"]
    loose_main = {r["id"] for r in loose if r["thread"] == ""}
    fold = {t for t, n in sizes.items() if t and n < minimum and anchors.get(t) in loose_main}
    tried: set[str] = set()
    for r in loose:
        thread = "" if r["thread"] in fold else r["thread"]
        if thread in tried:
            continue
        tried.add(thread)
        run, started, closed = [], False, False
        for row in body:
            if row["thread"] != thread and not (thread == "" and row["thread"] in fold):
                continue
            if row["covered"]:
                if started and row["thread"] == thread:
                    closed = True
                    break
                continue
            started = True
            run.append(row)
        # a run with covered messages after it (a gap lcm_purge.py or lcm_doctor.py --fix left)
        # can never grow: it is ready whatever its size, or it would block the runs after it
        if run and (closed or sum(row["token_count"] for row in run) >= minimum):
            return run
    return []


def load_messages(conn, session_id: str, run: list) -> list:
    """The full rows of `run` (rows with id and seq, in conversation order)."""
    rows = conn.execute(
        f"SELECT id, uuid, type, role, subtype, is_meta, is_sidechain, thread, seq, lcm_text(content) AS content, {lcm.vault.store.LINE} AS raw,"
        " created_at,"
        " token_count FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
        (session_id, run[0]["seq"], run[-1]["seq"])).fetchall()
    wanted = {r["id"] for r in run}
    return [r for r in rows if r["id"] in wanted]


def leaf_chunk(conn, session_id: str, run: list, cap: int, minimum: int = 1, closed: bool = False) -> list:
    """The oldest chunk of `run` (eligible messages) of about `cap` tokens and at least `minimum`,
    tool calls kept whole.

    closed: nothing will be added to the run (a finished sub-agent's): its chunks are made even,
    and a remainder under `minimum` joins the last chunk instead of waiting for ever.
    A chunk never ends between a call and its result when the result is eligible too: it is cut
    before the call or, if the cut would leave less than `minimum` (or the call opens the
    chunk), extended to the result. A call whose result is not eligible (inside the fresh tail,
    or never written: an interrupted call) cannot be kept with it, so it does not hold the chunk back.
    """
    whole = sum(r["token_count"] for r in run)
    if closed and whole > cap:
        cap = math.ceil(whole / math.ceil(whole / cap))
    size, total = 0, 0
    for row in run:
        if size and total + row["token_count"] > cap and total >= minimum:
            break
        size, total = size + 1, total + row["token_count"]
    if closed and whole - total < minimum:
        size, total = len(run), whole
    cache: dict = {}
    rows = load_messages(conn, session_id, run[:size])
    if not open_calls(rows, cache):
        return rows  # the common case: the chunk ends on a finished exchange
    later = run[size: size + LOOKAHEAD_MESSAGES]
    window = rows + (load_messages(conn, session_id, later) if later else [])
    open_calls(window, cache)  # parse every line of the window once
    answers = {tool_id for row in window for tool_id in cache[row["id"]][1]}

    def waiting(rows) -> dict:
        return {t: i for t, i in open_calls(rows, cache).items() if t in answers}

    rows = window[:size]
    while True:  # cut before the earliest call whose result comes later
        pending = waiting(rows)
        if not pending:
            return rows
        first = min(pending.values())
        if first == 0 or sum(r["token_count"] for r in rows[:first]) < minimum:
            break
        rows = rows[:first]
    for end in range(len(rows) + 1, len(window) + 1):  # extend to the results
        if not waiting(window[:end]):
            return window[:end]
    return window[:size]


def gap_check(conn, session_id: str):
    """gap(a, b): whether a message no summary covers lies between conversation positions a and b.
    One index range each; between two adjacent summaries the range is empty."""
    def gap(a: int, b: int) -> bool:
        return conn.execute(
            "SELECT 1 FROM messages m WHERE m.session_id = ? AND m.seq > ? AND m.seq < ? AND NOT EXISTS"
            " (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id) LIMIT 1",
            (session_id, min(a, b), max(a, b))).fetchone() is not None
    return gap


def fanouts() -> tuple[int, int]:
    """(leaf, condensed) fanout: the adjacent parentless summaries of depth 0, and of one depth 1
    and up, needed to condense them; at least 2 (one child would only re-wrap the same summary)."""
    return (max(2, lcm.base.config.get("LCM_LEAF_MIN_FANOUT")),
            max(2, lcm.base.config.get("LCM_CONDENSED_MIN_FANOUT")))


def condense_group(tops: list, gap, fanout: tuple[int, int] | None = None, max_depth: int = -1):
    """(depth, nodes) to condense next: the oldest adjacent parentless nodes at the shallowest
    depth that has enough of them in a row (the leaf fanout at depth 0, the condensed fanout
    above, as the seeds' leafMinFanout and condensedMinFanout); None when nothing is eligible.
    max_depth (>= 0): no node deeper than that is made (an incremental pass's limit).

    gap(a, b) says whether an uncovered message lies between two positions (gap_check).
    Taking exactly the fanout's number of children keeps the tree balanced and each condensed
    input at about fanout x the child target, whether the children came one run at a time or
    all at once.
    """
    leaf_fanout, condensed_fanout = fanout or fanouts()
    runs: list[list] = []
    for node in tops:
        prev = runs[-1][-1] if runs else None
        if prev is not None and prev["depth"] == node["depth"] and not gap(prev["last_seq"], node["first_seq"]):
            runs[-1].append(node)
        else:
            runs.append([node])

    def needed(depth: int) -> int:
        return leaf_fanout if depth == 0 else condensed_fanout
    eligible = [run for run in runs if len(run) >= needed(run[0]["depth"])
                and (max_depth < 0 or run[0]["depth"] + 1 <= max_depth)]
    if not eligible:
        return None
    depth = min(run[0]["depth"] for run in eligible)
    run = next(run for run in eligible if run[0]["depth"] == depth)
    return depth + 1, run[:needed(depth)]


def compaction_due(conn, session_id: str) -> bool:
    """True when an incremental compaction would summarise something: the raw tokens after the
    newest leaf pass LCM_LEAF_CHUNK_TOKENS, or adjacent parentless summaries can be condensed.
    Index lookups only, and no model seam: the hooks ask this on every turn."""
    hint = lcm.vault.order.due_hint(conn, session_id)
    return hint == "leaf" or (hint == "condense" and can_condense(conn, session_id))


def can_condense(conn, session_id: str) -> bool:
    """Whether an incremental pass would condense a run of adjacent parentless summaries now
    (within LCM_INCREMENTAL_MAX_DEPTH)."""
    return condense_group(top_summaries(conn, session_id), gap_check(conn, session_id),
                          max_depth=lcm.base.config.get("LCM_INCREMENTAL_MAX_DEPTH")) is not None


@contextlib.contextmanager
def session_lock(session_id: str, blocking: bool = True):
    """An exclusive file lock per session under $LCM_HOME/locks; the OS drops it if we die.
    Here rather than in lcm.summary.compact so a hook can see a compaction running without loading it."""
    import zlib
    try:
        import fcntl
    except ImportError:  # no flock (Windows): compaction relies on its in-transaction checks alone
        yield
        return
    locks = lcm.base.config.lcm_home() / "locks"
    locks.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{re.sub(r'[^A-Za-z0-9_-]', '_', session_id)[:80]}-{zlib.crc32(session_id.encode()):08x}"
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
