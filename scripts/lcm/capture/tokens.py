"""The token counts each response reports (the `usage` field of its transcript lines), kept in the
table `usage` so that `lcm usage` sums a year of work from one small table instead of parsing
every stored line.

Filled at ingest from the entries the parser has already decoded (lcm.capture.transcript puts
one tuple per line in Batch.usage); a vault filled before the table existed is read once from
its stored lines (`backfill`). A hook's lines are read later (`later`): the rows, their index
and the rollup's triggers cost a Stop hook ~1 ms and three more pages to write and checkpoint on
a 1M-message vault (bench/hooks.py); the detached packing run reads them (`read_later`), and
until then `lcm usage` reads them as it reports (`waiting`: about DUE_LINES lines at most). The stored line stays the source of truth: the table is derived,
deleted with its message, just before it (trigger usage_bd), and can be rebuilt from the lines at
any time.

What a row keeps follows ccusage (the tool people use for this), so the two agree on the same
transcripts: every line with message.usage whose input_tokens and output_tokens are numbers; the
response key message.id:requestId (lines of one response share it and count once, the first
stored), kept as a 64-bit hash (lcm.vault.schema.response_key); the model as ccusage names it
('-fast' appended for usage.speed "fast"), NULL when it is the messages row's model; a costUSD
the line carries. The line's time and session are its messages row's (migration 23: a row and its
index entry take ~56 bytes of pages, not ~250, on the 300k-message bench corpus). Stdlib only: the
hooks import it.
"""
from __future__ import annotations

import json

import lcm.base.text
import lcm.vault.schema

# (message_id from messages.uuid, model, response, input, output, cache write, of it 1h, cache
# read, cost_usd); the time, session and model are the messages row's (migration 23): the model is
# kept only where it differs (a '-fast' response)
# counted: the response's first stored line (no line of it with a lower id), or a line without a
# response key; the triggers of migration 23 add what counts to usage_rollup
INSERT = ("INSERT OR IGNORE INTO usage (message_id, model, response, input_tokens, output_tokens,"
          " cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, cost_usd, counted)"
          " SELECT id, nullif(?1, model), ?2, ?3, ?4, ?5, ?6, ?7, ?8, NOT EXISTS (SELECT 1 FROM usage d WHERE d.response = ?2"
          " AND d.message_id < messages.id) FROM messages WHERE uuid = ?9")
# a line stored before another of its response, read later (backfill): that other no longer counts
DEMOTE = "UPDATE usage SET counted = 0 WHERE response = ? AND message_id > (SELECT id FROM messages WHERE uuid = ?) AND counted = 1"
BACKFILL_ROWS = 2000  # stored lines one backfill statement reads


def _count(value) -> int | None:
    """A token count as ccusage reads it (any JSON number), as an integer SQLite holds."""
    if type(value) is int:
        return value if -(1 << 63) <= value < (1 << 63) else None
    if type(value) is float and value == value and abs(value) < 1e18:
        return int(value)
    return None


def of_entry(entry: dict) -> tuple | None:
    """(model, response, input, output, cache write, of it 1h, cache read, cost_usd) of a
    transcript entry that carries message.usage with numeric input and output counts, else None.
    response: "message.id:requestId", stored as its key (lcm.vault.schema.response_key: made where
    the row is stored, so a hook, which leaves its lines' usage for later, never hashes)."""
    message = entry.get("message")
    if type(message) is not dict:
        return None
    usage = message.get("usage")
    if type(usage) is not dict:
        return None
    given, made = _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))
    if given is None or made is None:
        return None
    model = message.get("model")
    model = model if isinstance(model, str) and model else None
    if model is not None and usage.get("speed") == "fast":
        model += "-fast"
    msg_id, request = message.get("id"), entry.get("requestId")
    response = f"{msg_id}:{request}" if isinstance(msg_id, str) and msg_id and isinstance(request, str) and request else None
    # text SQLite can store (a lone surrogate from a line that was not UTF-8 cannot be bound)
    model = model if model is None or model.isascii() else lcm.base.text.safe_text(model)
    response = response if response is None or response.isascii() else lcm.base.text.safe_text(response)
    split = usage.get("cache_creation")
    hour = _count(split.get("ephemeral_1h_input_tokens")) if type(split) is dict else None
    cost = entry.get("costUSD")
    cost = float(cost) if type(cost) in (int, float) and cost == cost else None
    return (model, response, given, made, _count(usage.get("cache_creation_input_tokens")) or 0, hour or 0,
            _count(usage.get("cache_read_input_tokens")) or 0, cost)



def store(conn, rows: list[tuple], older: bool = False) -> None:
    """Insert the usage of lines just stored: rows of (uuid, *of_entry). A uuid not stored
    (purged, or refused) inserts nothing; one stored before keeps its row. older: lines stored
    before others already read (backfill), which may take over their response's count. A vault at
    a schema before this table's shape (lcm.vault.schema.USAGE_TABLE_VERSION: written as an older
    lcm wrote it, by tests of conversions) gets nothing."""
    if rows and conn.execute("PRAGMA user_version").fetchone()[0] >= lcm.vault.schema.USAGE_TABLE_VERSION:
        key = lcm.vault.schema.response_key
        conn.executemany(INSERT, [(row[1], key(row[2]), *row[3:], row[0]) for row in rows])
        if older:
            conn.executemany(DEMOTE, [(key(row[2]), row[0]) for row in rows if row[2] is not None])


def backfill(conn, budget: int | None = None) -> None:
    """Read the usage of messages stored before the table existed (ids below the mark
    usage_backfill_below), newest first, at most `budget` assistant lines of them; inside the
    caller's write. Cheap when nothing waits: one lookup (every hook's write calls it)."""
    import lcm.vault.store
    below = _mark(conn)
    done = 0
    while below > 1 and (budget is None or done < budget):
        take = BACKFILL_ROWS if budget is None else min(BACKFILL_ROWS, budget - done)
        rows = conn.execute(f"SELECT id, uuid, {lcm.vault.store.LINE} FROM messages"
                            " WHERE id < ? AND type = 'assistant' ORDER BY id DESC LIMIT ?", (below, take)).fetchall()
        store(conn, [(uuid, *usage) for _, uuid, raw in rows for usage in (line_usage(raw),) if usage is not None],
              older=True)
        below = rows[-1][0] if len(rows) == take else 1
        done += len(rows)
        conn.execute("UPDATE vault_meta SET value = ? WHERE key = 'usage_backfill_below'", (below,))


def _mark(conn) -> int:
    row = conn.execute("SELECT value FROM vault_meta WHERE key = 'usage_backfill_below'").fetchone()
    return row[0] if row is not None else 1


def backfill_in_turns(conn, batch: int = 5000, deadline: float | None = None) -> int:
    """backfill() every waiting line in short write transactions of `batch` lines, so hooks take
    their turns between them (the detached `lcm_compact.py --pack` run's second job); until
    `deadline` (time.monotonic()). Returns how many stored lines still wait."""
    import time
    import lcm.vault.db
    while pending(conn) and (deadline is None or time.monotonic() < deadline):
        lcm.vault.db.begin_write(conn)
        try:
            backfill(conn, budget=batch)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return pending(conn)


def pending(conn) -> int:
    """Messages stored before the usage table whose lines are not read for usage yet (all
    kinds: counting the assistant lines among them would read them)."""
    return max(_mark(conn) - 1, 0)


LATER_KEY = "usage_later_above"  # vault_meta: the assistant lines above this messages.id without a usage row wait to be read


def later(conn) -> None:
    """Leave the usage of the lines about to be stored (a hook's turn) for read_later: inside the
    caller's write, before they are inserted. One lookup once the mark is set; the first sets it
    below them (every line stored before was read as it was stored)."""
    conn.execute("INSERT OR IGNORE INTO vault_meta (key, value) SELECT ?, coalesce(max(id), 0) FROM messages",
                 (LATER_KEY,))


def waiting(conn, limit: int | None = None) -> tuple[list[tuple], int | None]:
    """([(message id, uuid, *of_entry)] of the assistant lines that wait to be read
    (above the mark, no usage row), oldest first, of at most `limit` lines; the id of the last line
    looked at when that limit was reached, else None). ([], None) on a vault without the mark."""
    import lcm.vault.store
    row = conn.execute("SELECT value FROM vault_meta WHERE key = ?", (LATER_KEY,)).fetchone()
    if row is None:
        return [], None
    lines = conn.execute(f"SELECT id, uuid, {lcm.vault.store.LINE} FROM messages m"
                         " WHERE id > ? AND type = 'assistant' AND NOT EXISTS (SELECT 1 FROM usage u"
                         " WHERE u.message_id = m.id) ORDER BY id" + (" LIMIT ?" if limit else ""),
                         (row[0], limit) if limit else (row[0],)).fetchall()
    rows = [(mid, uuid, *usage) for mid, uuid, raw in lines for usage in (line_usage(raw),) if usage is not None]
    return rows, (lines[-1][0] if limit and len(lines) == limit else None)


def read_later(conn, batch: int = 5000, deadline: float | None = None) -> None:
    """Store the usage of the lines hooks left (later), in write transactions of `batch` lines
    that hooks take turns between (the detached `lcm_compact.py --pack` run's third job), and move
    the mark past them; until `deadline` (time.monotonic())."""
    import time
    import lcm.vault.db
    while deadline is None or time.monotonic() < deadline:
        lcm.vault.db.begin_write(conn)
        try:
            rows, last = waiting(conn, batch)
            # older: a line of the same response stored after these (a bulk import) counted meanwhile
            store(conn, [row[1:] for row in rows], older=True)
            top = last if last is not None else conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
            conn.execute("UPDATE vault_meta SET value = max(value, ?) WHERE key = ?", (top, LATER_KEY))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if last is None:
            return


def line_usage(raw) -> tuple | None:
    """of_entry of a stored line (bytes or text)."""
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return of_entry(entry) if type(entry) is dict else None
