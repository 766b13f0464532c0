"""Who talks next to whom: the conversational neighbours of a message, for ranking.

A question's words are often in the turn next to its answer: the prompt before a reply, the
assistant's question before the user's answer, the prompt that opened a long coding turn before
the reply that closes it. lcm.search.engine lends a share of a hit's score to these neighbours. Order
is message id order within a session and thread (the transcript's order); this module is the
one place to change when a conversation-order column exists. Library only.
"""
from __future__ import annotations

import lcm.base.mask
import lcm.base.text
import lcm.vault.schema

NEIGHBOUR_WINDOW = 16     # messages looked at on either side of a hit to find its neighbours
# A coding turn's answer comes after many tool calls: the prompt that opened a turn and the last
# assistant text of that turn are neighbours too (bench/recall.py: neighbour set 0.54 -> 0.81,
# half-remembered 0.949 -> 0.959, nothing else moved). Searched this many ids either side.
TURN_SCAN = 200


def _talk_source(conn) -> str:
    """FROM ... for conversational messages: the partial index messages_talk when the vault has
    it (a few index pages), else the same condition evaluated on the rows (a vault opened
    read-only before its migration, or whose index has an older WHERE: SQLite uses it only for
    a query that repeats its WHERE)."""
    has = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'messages_talk'"
                       " AND instr(sql, ?) > 0", (lcm.vault.schema.TALK_WHERE,)).fetchone()
    return "messages INDEXED BY messages_talk" if has else "messages"


def neighbours(conn, rowids, k: int = 2) -> dict[int, list[tuple[int, int]]]:
    """{message id: [(neighbour id, distance)]}: the k nearest conversational messages before and
    after each of `rowids`.

    Conversational (lcm.vault.schema.TALK_WHERE): a typed prompt or an assistant's text; tool calls, tool
    results, meta and empty lines are skipped. Same session and thread (main or one sub-agent),
    message id order (a session's transcript order), within NEIGHBOUR_WINDOW ids. A prompt or
    reply also has its turn's ends as neighbours: the prompt that opened the turn and the last
    assistant text before the next prompt. The one place that decides what "next to" means, so
    a conversation-order column can replace id order here alone.
    """
    source = _talk_source(conn)
    talk = (f"SELECT id, agent_id, role FROM {source} WHERE session_id = ? AND id BETWEEN ? AND ?"
            f" AND {lcm.vault.schema.TALK_WHERE}")
    out = {}
    for rowid in rowids:
        own = conn.execute("SELECT session_id, agent_id FROM messages WHERE id = ?", (rowid,)).fetchone()
        if own is None:
            out[rowid] = []
            continue
        sid, agent = own
        near = [(i, role) for i, a, role in conn.execute(
            talk + " ORDER BY id", (sid, rowid - NEIGHBOUR_WINDOW, rowid + NEIGHBOUR_WINDOW)) if a == agent]
        before = [i for i, _ in near if i < rowid][::-1][:k]
        after = [i for i, _ in near if i > rowid][:k]
        found = [(i, d) for d, i in enumerate(before, 1)] + [(i, d) for d, i in enumerate(after, 1)]
        if TURN_SCAN and any(i == rowid for i, _ in near):  # a prompt's or a reply's turn
            seen = {i for i, _ in found}
            found += [(i, d) for i, d in _turn_ends(conn, talk, rowid, sid, agent) if i != rowid and i not in seen]
        out[rowid] = found
    return out


def _turn_ends(conn, talk: str, rowid: int, sid: str, agent) -> list[tuple[int, int]]:
    """[(id, distance)] of the typed prompt that opened this message's turn and the assistant
    text that closed it (distance 1 between the two ends, 2 from the middle of the turn)."""
    def one(lo, hi, role, order):
        row = conn.execute(talk + f" AND role = ? AND agent_id IS ? ORDER BY id {order} LIMIT 1",
                           (sid, lo, hi, role, agent)).fetchone()
        return row[0] if row else None
    prompt = one(rowid - TURN_SCAN, rowid, "user", "DESC")
    if prompt is None:
        return []
    nxt = one(rowid + 1, rowid + TURN_SCAN, "user", "ASC")
    last = one(max(rowid, prompt), nxt - 1 if nxt else rowid + TURN_SCAN, "assistant", "DESC")
    ends = [(prompt, 1 if last == rowid else 2)]
    return ends + ([(last, 1 if prompt == rowid else 2)] if last else [])


def answers(conn, rowids) -> dict[int, int]:
    """{message id: the next turn of the other speaker} for each of `rowids` that has one within
    NEIGHBOUR_WINDOW ids: the reply a question gets (a prompt's first reply, or the person's
    answer to the assistant's question)."""
    source = _talk_source(conn)
    out = {}
    for rowid in rowids:
        own = conn.execute("SELECT session_id, agent_id, role FROM messages WHERE id = ?", (rowid,)).fetchone()
        if own is None:
            continue
        row = conn.execute(f"SELECT id FROM {source} WHERE session_id = ? AND id > ? AND id <= ?"
                           f" AND {lcm.vault.schema.TALK_WHERE} AND agent_id IS ? AND role != ? ORDER BY id LIMIT 1",
                           (own[0], rowid, rowid + NEIGHBOUR_WINDOW, own[1], own[2])).fetchone()
        if row:
            out[rowid] = row[0]
    return out


def window_members(conn, ends) -> dict[int, list[int]]:
    """{id of an exchange window's last turn: the ids of the turns in that window} (lcm.capture.indexes
    builds the windows the same way: that turn and the prompts and replies before it)."""
    from lcm.capture.indexes import EXCHANGE_TURNS
    source = _talk_source(conn)
    out = {}
    for end in ends:
        own = conn.execute("SELECT session_id, agent_id FROM messages WHERE id = ?", (end,)).fetchone()
        if own is None:
            continue
        out[end] = [r[0] for r in conn.execute(
            f"SELECT id FROM {source} WHERE session_id = ? AND id <= ? AND {lcm.vault.schema.TALK_WHERE}"
            f" AND agent_id IS ? ORDER BY id DESC LIMIT ?", (own[0], end, own[1], EXCHANGE_TURNS))]
    return out


CONTEXT_MAX = 10          # --context N: at most this many turns on either side of a hit
CONTEXT_CHARS = 300       # each turn of the context as one line of at most this many characters


def turns_around(conn, uuid: str, n: int) -> dict:
    """The n conversational turns (typed prompts and assistant text, as TALK_WHERE says) before
    and after message `uuid`, in its own session and thread, in conversation order (seq):
    {"before": [...], "after": [...]}, each turn {uuid, role, created_at, text}, its text masked
    and cut to one line of CONTEXT_CHARS. Never another session's turns: the evidence of an
    answer sits beside the other turns of its own session."""
    own = conn.execute("SELECT session_id, thread, seq FROM messages WHERE uuid = ?", (uuid,)).fetchone()
    if own is None or n <= 0 or own["seq"] is None:
        return {"before": [], "after": []}
    n = min(n, CONTEXT_MAX)
    def sql(compare: str, order: str) -> str:
        return ("SELECT uuid, role, created_at, lcm_text(content) AS content FROM messages WHERE session_id = ? AND thread = ?"
                f" AND seq {compare} ? AND " + lcm.vault.schema.TALK_WHERE + f" ORDER BY seq {order} LIMIT ?")

    def turn(row) -> dict:
        text = lcm.base.text.one_line(lcm.base.mask.mask(row["content"]), CONTEXT_CHARS)
        return {"uuid": row["uuid"], "role": row["role"], "created_at": row["created_at"], "text": text}
    before = conn.execute(sql("<", "DESC"), (own["session_id"], own["thread"], own["seq"], n)).fetchall()
    after = conn.execute(sql(">", "ASC"), (own["session_id"], own["thread"], own["seq"], n)).fetchall()
    return {"before": [turn(r) for r in reversed(before)], "after": [turn(r) for r in after]}


def add_context(conn, doc: dict, n: int) -> dict:
    """A search document (lcm.search.engine) with `context` (turns_around) on each message hit."""
    for result in doc["results"]:
        if result["type"] == "message" and result.get("uuid"):
            result["context"] = turns_around(conn, result["uuid"], n)
    return doc
