"""The summary DAG of a session: what is in its active context, and what to summarise next.

Read-only helpers shared by lcm_compact.py (which writes nodes) and the hooks (which render the
active context). A session's sequence is all its messages, sidechains included, in messages.id
order; a leaf covers a contiguous run of it, a condensed node a contiguous run of nodes one
depth below; the active context is every parentless summary plus every uncovered message.
Stdlib only.
"""
from __future__ import annotations

import bisect
import re
from xml.sax.saxutils import escape, quoteattr

import lcm.db
from lcm.extract import raw_blocks

# a leaf smaller than this has little to compress; take more messages when there are some
MIN_LEAF_SOURCE_TOKENS = 32
# how far past a chunk to look for the results of its tool calls
LOOKAHEAD_MESSAGES = 64


# ---------------------------------------------------------------------------
# The active context
# ---------------------------------------------------------------------------

def uncovered(conn, session_id: str) -> list:
    return conn.execute(
        "SELECT m.id, m.uuid, m.role, m.token_count, m.created_at FROM messages m WHERE m.session_id = ?"
        " AND NOT EXISTS (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id) ORDER BY m.id",
        (session_id,)).fetchall()


def top_summaries(conn, session_id: str) -> list:
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
              "content": r["content"]} for r in top_summaries(conn, session_id)]
    items += [{"type": "message", "id": r["uuid"], "message_id": r["id"], "role": r["role"],
               "token_count": r["token_count"], "first_message_id": r["id"], "created_at": r["created_at"]}
              for r in uncovered(conn, session_id)]
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


# ---------------------------------------------------------------------------
# Choosing what to summarise next
# ---------------------------------------------------------------------------

def tool_ids(raw) -> tuple[list, list]:
    """(tool_use ids opened, tool_use ids answered) by one raw transcript line."""
    if b"tool_use" not in raw and b"tool_result" not in raw:
        return [], []
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


def load_messages(conn, session_id: str, ids: list[int]) -> list:
    rows = conn.execute(
        "SELECT id, uuid, type, role, subtype, is_meta, is_sidechain, content, raw, created_at, token_count"
        " FROM messages WHERE session_id = ? AND id BETWEEN ? AND ? ORDER BY id",
        (session_id, ids[0], ids[-1])).fetchall()
    wanted = set(ids)
    return [r for r in rows if r["id"] in wanted]


def leaf_chunk(conn, session_id: str, run: list, cap: int) -> list:
    """The oldest chunk of `run` (eligible messages) under `cap` tokens, tool calls kept whole.

    A chunk never ends between a call and its result when the result is eligible too: it is cut
    before the call or, if the call opens the chunk, extended to the result. A call whose result
    is not eligible (inside the fresh tail, or never written: an interrupted call) cannot be kept
    with it, so it does not hold the chunk back.
    """
    size, total = 0, 0
    for row in run:
        if size and total + row["token_count"] > cap and total >= MIN_LEAF_SOURCE_TOKENS:
            break
        size, total = size + 1, total + row["token_count"]
    cache: dict = {}
    rows = load_messages(conn, session_id, [r["id"] for r in run[:size]])
    if not open_calls(rows, cache):
        return rows  # the common case: the chunk ends on a finished exchange
    later = run[size: size + LOOKAHEAD_MESSAGES]
    window = rows + (load_messages(conn, session_id, [r["id"] for r in later]) if later else [])
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
        if first == 0:
            break
        rows = rows[:first]
    for end in range(size + 1, len(window) + 1):  # the call opens the chunk: extend to its result
        if not waiting(window[:end]):
            return window[:end]
    return window[:size]


def condense_group(tops: list, uncovered_ids: list[int], fanout: int | None = None):
    """(depth, nodes) to condense next: the oldest `fanout` adjacent parentless nodes at the
    shallowest depth that has that many in a row; None when nothing is eligible.

    Taking exactly `fanout` children keeps the tree balanced and each condensed input at about
    fanout x the child target, whether the children came one run at a time or all at once.
    """
    fanout = fanout or lcm.db.config("LCM_CONDENSED_MIN_FANOUT")
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
