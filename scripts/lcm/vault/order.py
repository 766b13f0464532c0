"""A session's conversation order: `messages.seq`.

The main thread in transcript order, and each sub-agent's messages as one run placed right after
the main-thread message that holds the Task/Agent tool call which started it:

  messages.thread  '' on the main thread, else the sub-agent's id ('sidechain' for sidechain
                   lines of early CLIs that carry none). A virtual column.
  messages.seq     main thread: id << 32 (ids grow in transcript order within a file);
                   sub-agent: messages.placed_at = the run's base + the line's number in its
                   transcript, where base = anchor's seq + slot << 22 (slot: 1, 2, ... for runs
                   that share an anchor). A virtual column; ORDER BY seq is the conversation.

A run learns its call from the main thread's tool result that reports the agent's id
(toolUseResult.agentId) or from the agent's meta.json (toolUseId): both land in agent_calls.
Until one is known (a sub-agent still running, or the warm-up agents of early CLIs that no call
started) the run follows the last main-thread message written before its first line
(threads.exact = 0), and moves to its call once the call is known. Placing writes only
`placed_at` of sidechain rows, never their `raw`. Stdlib only.
"""
from __future__ import annotations

import json

import lcm.base.config
from lcm.base.text import content_blocks

ANCHOR_SHIFT = 32
SLOT_SHIFT = 22
MAX_SLOT = (1 << (ANCHOR_SHIFT - SLOT_SHIFT)) - 1
MAX_LINE = (1 << SLOT_SHIFT) - 1
AGENT_TOOLS = ("Task", "Agent")


def calls_of_entry(entry: dict, sid: str, uuid: str) -> list[tuple]:
    """(tool_use_id, session, call uuid, agent id) rows a main-thread entry adds to agent_calls:
    a Task/Agent tool_use gives the call's message; a tool result whose toolUseResult names an
    agentId gives the agent that call started."""
    out = []
    result = entry.get("toolUseResult")
    agent = result.get("agentId") if type(result) is dict else None
    for block in content_blocks(entry):
        kind = block.get("type")
        if kind == "tool_use" and block.get("name") in AGENT_TOOLS and isinstance(block.get("id"), str):
            out.append((block["id"], sid, uuid, None))
        elif kind == "tool_result" and agent and isinstance(agent, str) \
                and isinstance(block.get("tool_use_id"), str):
            out.append((block["tool_use_id"], sid, None, agent))
    return out


def calls_of_meta(path: str, sid: str | None, agent_id: str | None) -> list[tuple]:
    """The agent_calls row of a sub-agent transcript's agent-<id>.meta.json (newer CLIs)."""
    if not path.endswith(".jsonl") or not agent_id or not sid:
        return []
    try:
        with open(path[:-6] + ".meta.json", "rb") as f:
            meta = json.loads(f.read(65536))
    except (OSError, ValueError):
        return []
    tool_use = meta.get("toolUseId") if isinstance(meta, dict) else None
    return [(tool_use, sid, None, agent_id)] if isinstance(tool_use, str) and tool_use else []


def store_calls(conn, rows: list[tuple]) -> None:
    conn.executemany(
        "INSERT INTO agent_calls (tool_use_id, session_id, call_uuid, agent_id) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(tool_use_id) DO UPDATE SET call_uuid = coalesce(excluded.call_uuid, call_uuid),"
        " agent_id = coalesce(excluded.agent_id, agent_id)", rows)


def place_threads(conn, session_ids, recheck: bool = True) -> int:
    """Place the session's sidechain messages that have no place yet; with recheck, also move
    runs placed by time to their call once it is known. Returns how many messages were placed.
    Run inside the transaction that stored the messages, so no reader sees one without a place."""
    placed = 0
    for sid in session_ids:
        waiting = [r[0] for r in conn.execute(
            "SELECT DISTINCT thread FROM messages WHERE session_id = ? AND is_sidechain = 1 AND placed_at IS NULL",
            (sid,))]
        waiting += [r[0] for r in conn.execute(  # runs that had no main-thread message to follow
            "SELECT thread FROM threads WHERE session_id = ? AND (anchor_id = 0 OR (exact = 0 AND ?))",
            (sid, recheck))]
        for thread in dict.fromkeys(waiting):
            placed += _place(conn, sid, thread)
    return placed


def _call_anchor(conn, sid: str, thread: str) -> int | None:
    row = conn.execute(
        "SELECT m.id FROM agent_calls c JOIN messages m ON m.uuid = c.call_uuid"
        " WHERE c.session_id = ? AND c.agent_id = ? AND m.is_sidechain = 0 LIMIT 1", (sid, thread)).fetchone()
    return row[0] if row else None


def _time_anchor(conn, sid: str, thread: str) -> int:
    first = conn.execute("SELECT min(created_at) FROM messages WHERE session_id = ? AND thread = ?",
                         (sid, thread)).fetchone()[0]
    row = conn.execute(
        "SELECT id FROM messages WHERE session_id = ? AND thread = '' AND created_at <= ?"
        " ORDER BY seq DESC LIMIT 1", (sid, first)).fetchone() if first else None
    if row is None:  # no main-thread message before it (yet): the last one stored, if any
        row = conn.execute("SELECT id FROM messages WHERE session_id = ? AND thread = '' AND created_at IS NULL"
                           " ORDER BY seq DESC LIMIT 1", (sid,)).fetchone()
    return row[0] if row else 0


def _place(conn, sid: str, thread: str) -> int:
    known = conn.execute("SELECT anchor_id, exact, base FROM threads WHERE session_id = ? AND thread = ?",
                         (sid, thread)).fetchone()
    anchor = _call_anchor(conn, sid, thread)
    exact = anchor is not None
    if anchor is None:
        anchor = known["anchor_id"] if known and known["anchor_id"] else _time_anchor(conn, sid, thread)
    new_rows_only = "AND placed_at IS NULL"
    if known and known["anchor_id"] == anchor:
        base = known["base"]
        if exact and not known["exact"]:
            conn.execute("UPDATE threads SET exact = 1 WHERE session_id = ? AND thread = ?", (sid, thread))
    else:
        slot = 1 + conn.execute("SELECT count(*) FROM threads WHERE session_id = ? AND anchor_id = ? AND thread != ?",
                                (sid, anchor, thread)).fetchone()[0]
        base = (anchor << ANCHOR_SHIFT) + (min(slot, MAX_SLOT) << SLOT_SHIFT)
        conn.execute("INSERT OR REPLACE INTO threads (session_id, thread, anchor_id, exact, base)"
                     " VALUES (?, ?, ?, ?, ?)", (sid, thread, anchor, int(exact), base))
        new_rows_only = ""  # the run moved: every message of it
    return conn.execute(
        f"UPDATE messages SET placed_at = ? + min(coalesce(line_no, 0), {MAX_LINE}) WHERE session_id = ?"
        f" AND is_sidechain = 1 AND thread = ? {new_rows_only}", (base, sid, thread)).rowcount


def place_existing(conn) -> None:
    """Migration step for a vault made before messages.seq: record the agent calls its stored
    lines show and place every sidechain message. Reads only sessions that have sub-agents."""
    sessions = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages WHERE is_sidechain = 1")]
    for sid in sessions:
        rows = []
        for row in conn.execute(
                "SELECT uuid, raw FROM messages WHERE session_id = ? AND is_sidechain = 0 AND"
                " (instr(raw, '\"agentId\"') OR instr(raw, '\"Task\"') OR instr(raw, '\"Agent\"'))", (sid,)):
            try:
                entry = json.loads(row["raw"])
            except ValueError:
                continue
            if isinstance(entry, dict):
                rows += calls_of_entry(entry, sid, row["uuid"])
        store_calls(conn, rows)
    place_threads(conn, sessions)


def main_thread_tail_start(conn, session_id: str, tail: int) -> int | None:
    """seq of the oldest message of the fresh tail (the newest `tail` main-thread messages), or
    None when there is no tail (LCM_FRESH_TAIL_COUNT=0, or a session of sub-agent lines only)."""
    if tail <= 0:
        return None
    row = conn.execute("SELECT seq FROM messages WHERE session_id = ? AND thread = '' ORDER BY seq DESC"
                       " LIMIT 1 OFFSET ?", (session_id, tail - 1)).fetchone()
    if row is None:  # fewer main-thread messages than the tail holds: all of them are in it
        row = conn.execute("SELECT min(seq) FROM messages WHERE session_id = ? AND thread = ''",
                           (session_id,)).fetchone()
    return row[0] if row else None


def due_hint(conn, session_id: str) -> str | None:
    """The cheap half of lcm.summary.dag.compaction_due, index lookups only: "leaf" when the raw tokens
    after the newest leaf pass LCM_LEAF_CHUNK_TOKENS, "condense" when some depth an incremental
    pass may condense (LCM_INCREMENTAL_MAX_DEPTH) holds its fanout's number of parentless summaries
    (LCM_LEAF_MIN_FANOUT at depth 0, LCM_CONDENSED_MIN_FANOUT above; whether they are adjacent is
    lcm.summary.dag's to decide), else None: nothing is due."""
    if backlog_tokens(conn, session_id) > lcm.base.config.get("LCM_LEAF_CHUNK_TOKENS"):
        return "leaf"
    max_depth = lcm.base.config.get("LCM_INCREMENTAL_MAX_DEPTH")
    crowded = conn.execute(
        "SELECT 1 FROM summaries WHERE session_id = ? AND parent_id IS NULL AND (? < 0 OR depth < ?) GROUP BY depth"
        " HAVING count(*) >= max(2, CASE depth WHEN 0 THEN ? ELSE ? END) LIMIT 1",
        (session_id, max_depth, max_depth, lcm.base.config.get("LCM_LEAF_MIN_FANOUT"),
         lcm.base.config.get("LCM_CONDENSED_MIN_FANOUT"))).fetchone()
    return None if crowded is None else "condense"


def backlog_tokens(conn, session_id: str) -> int:
    """Raw tokens between the newest leaf summary and the fresh tail, in conversation order: what
    an incremental compaction would summarise. An index range (messages_seq) over what is not
    summarised yet, so the hooks' due check costs the same at any session length."""
    start = main_thread_tail_start(conn, session_id, lcm.base.config.get("LCM_FRESH_TAIL_COUNT"))
    frontier = conn.execute("SELECT max(l.seq) FROM summaries s JOIN messages l ON l.id = s.last_message_id"
                            " WHERE s.session_id = ? AND s.depth = 0", (session_id,)).fetchone()[0]
    return conn.execute("SELECT coalesce(sum(token_count), 0) FROM messages WHERE session_id = ? AND seq > ?"
                        " AND seq < ?", (session_id, -1 if frontier is None else frontier,
                                         1 << 62 if start is None else start)).fetchone()[0]
