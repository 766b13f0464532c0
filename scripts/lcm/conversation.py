"""Who talks next to whom: the conversational neighbours of a message, for ranking.

A question's words are often in the turn next to its answer: the prompt before a reply, the
assistant's question before the user's answer, the prompt that opened a long coding turn before
the reply that closes it. lcm.search lends a share of a hit's score to these neighbours. Order
is message id order within a session and thread (the transcript's order); this module is the
one place to change when a conversation-order column exists. Library only.
"""
from __future__ import annotations

NEIGHBOUR_WINDOW = 16     # messages looked at on either side of a hit to find its neighbours
NEAR_FIRST = 2            # ... of which these are read first (further ones only when needed)
# A coding turn's answer comes after many tool calls: the prompt that opened a turn and the last
# assistant text of that turn are neighbours too (bench/recall.py: neighbour set 0.54 -> 0.81,
# half-remembered 0.949 -> 0.959, nothing else moved). Searched this many ids either side.
TURN_SCAN = 200
TYPED_SQL = "role = 'user' AND is_meta = 0 AND token_count > 0 AND instr(raw, 'tool_use_id') = 0"
# an assistant tool call's flat text is `Name {json input}`: its first space comes right before "{"
TOOL_CALL_SQL = "substr(content, instr(content, ' '), 2) = ' {' AND instr(substr(content, 1, 80), ' ') > 0"


def neighbours(conn, rowids, k: int = 2) -> dict[int, list[tuple[int, int]]]:
    """{message id: [(neighbour id, distance)]}: the k nearest conversational messages before and
    after each of `rowids`.

    Conversational: a typed prompt or an assistant's text (tool calls, tool results, meta and
    system lines are skipped), in the same session and the same thread (main or one sub-agent),
    in message id order (a session's transcript order), within NEIGHBOUR_WINDOW ids. A prompt or
    reply also has its turn's ends as neighbours: the prompt that opened the turn and the last
    assistant text before the next prompt. The one place that decides what "next to" means, so
    a conversation-order column can replace id order here alone.
    """
    rows: dict = {}

    def read(ids):  # talk = conversational; the raw line is read only for user rows
        ids = sorted(i for i in ids if i not in rows)
        for n in range(0, len(ids), 900):
            chunk = ids[n:n + 900]
            rows.update((r[0], r) for r in conn.execute(
                "SELECT id, session_id, agent_id, role = 'user', CASE WHEN is_meta OR token_count = 0 THEN 0"
                " WHEN role = 'user' THEN instr(raw, 'tool_use_id') = 0"
                f" WHEN role = 'assistant' THEN NOT ({TOOL_CALL_SQL}) ELSE 0 END"
                f" FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk))

    def side(rowid, thread, step):  # the talk ids on one side, nearest first, and whether it is settled
        found = []
        for i in range(rowid + step, rowid + step * (NEIGHBOUR_WINDOW + 1), step):
            row = rows.get(i)
            if row is None:
                return found, i not in wanted  # not read yet: settled only if out of reach
            if row[1] != thread[0]:
                return found, True  # another session: nothing further belongs to this one
            if row[4] and row[2] == thread[1]:
                found.append(i)
                if len(found) == k:
                    return found, True
        return found, True

    # most neighbours sit within a few messages (chat turns): read those first, then further
    # out only where a side is still short (a coding turn's tool calls in between)
    wanted = {i for r in rowids for i in range(r - NEIGHBOUR_WINDOW, r + NEIGHBOUR_WINDOW + 1)}
    read(i for r in rowids for i in range(r - NEAR_FIRST, r + NEAR_FIRST + 1))
    short = []
    for rowid in rowids:
        own = rows.get(rowid)
        if own is not None:
            for step in (-1, 1):
                if not side(rowid, own[1:3], step)[1]:
                    short.append((rowid, step))
    read(rowid + step * j for rowid, step in short for j in range(NEAR_FIRST + 1, NEIGHBOUR_WINDOW + 1))
    wanted = set()
    out = {}
    for rowid in rowids:
        own = rows.get(rowid)
        if own is None:
            out[rowid] = []
            continue
        thread = (own[1], own[2])
        before, after = side(rowid, thread, -1)[0], side(rowid, thread, 1)[0]
        out[rowid] = [(i, d) for d, i in enumerate(before, 1)] + [(i, d) for d, i in enumerate(after, 1)]
        if TURN_SCAN and own[4]:  # a prompt's or a reply's turn
            near_ids = {i for i, _ in out[rowid]}
            for i, d in _turn_ends(conn, rows, rowid, thread):
                if i != rowid and i not in near_ids:
                    out[rowid].append((i, d))
    return out


def _turn_ends(conn, rows, rowid, thread):
    """[(id, distance)] of the typed prompt that opened this message's turn and the assistant text
    that closed it: from the rows already read when they reach that far (a chat's short turns),
    else from the vault."""
    ends = _turn_ends_in(rows, rowid, thread) or _turn_ends_sql(conn, rowid, thread)
    if not ends:
        return []
    prompt, last = ends
    d_prompt = 1 if last == rowid else 2
    d_last = 1 if prompt == rowid else 2
    return [(prompt, d_prompt)] + ([(last, d_last)] if last else [])


def _turn_ends_in(rows, rowid, thread):
    """(prompt, last reply) found in `rows` (id -> id, session, agent, is_user, talk), or None."""
    def mine(r):
        return r[1] == thread[0] and r[2] == thread[1]
    i = rowid
    while not (rows.get(i) and mine(rows[i]) and rows[i][4] and rows[i][3]):
        if i not in rows or i <= rowid - TURN_SCAN:
            return None
        i -= 1
    prompt, last, i = i, None, max(rowid, i)
    while True:
        r = rows.get(i)
        if r is None:
            return None
        if r[1] != thread[0]:
            return prompt, last  # the session ended: so did the turn
        if mine(r) and r[4]:
            if r[3] and i > prompt:
                return prompt, last  # the next prompt
            if not r[3]:
                last = i
        i += 1


def _turn_ends_sql(conn, rowid, thread):
    sid, agent = thread
    prompt = conn.execute(f"SELECT id FROM messages WHERE session_id = ? AND id BETWEEN ? AND ? AND agent_id IS ?"
                          f" AND {TYPED_SQL} ORDER BY id DESC LIMIT 1", (sid, rowid - TURN_SCAN, rowid, agent)).fetchone()
    nxt = conn.execute(f"SELECT id FROM messages WHERE session_id = ? AND id BETWEEN ? AND ? AND agent_id IS ?"
                       f" AND {TYPED_SQL} ORDER BY id LIMIT 1", (sid, rowid + 1, rowid + TURN_SCAN, agent)).fetchone()
    if prompt is None:
        return None
    hi = nxt[0] - 1 if nxt else rowid + TURN_SCAN
    last = conn.execute(f"SELECT id FROM messages WHERE session_id = ? AND id BETWEEN ? AND ? AND agent_id IS ?"
                        f" AND role = 'assistant' AND token_count > 0 AND NOT ({TOOL_CALL_SQL})"
                        " ORDER BY id DESC LIMIT 1", (sid, max(rowid, prompt[0]), hi, agent)).fetchone()
    return prompt[0], last[0] if last else None
