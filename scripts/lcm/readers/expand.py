"""Expansion: from a summary id back to its children and its original messages.

The command is scripts/lcm_expand.py; hooks and other commands import this module.
"""
from __future__ import annotations

import os
import re

import lcm.vault.grants
import lcm.base.mask
import lcm.vault.store
from lcm.base.errors import LcmError

SUMMARY_ID = re.compile(r"sum_[0-9a-f]{16}")
FIND_HINT = "find ids with lcm_grep.py QUERY, or list a session's summaries with lcm_describe.py --session ID"
MESSAGE_COLUMNS = ("m.id, m.uuid, m.session_id, m.role, m.created_at, lcm_text(m.content) AS content, m.token_count,"
                   " lcm_line(m.raw, m.block_id, m.block_pos) AS raw")  # lcm.vault.store.LINE of `m`


def resolve_node(conn, node_id: str) -> tuple[str, object]:
    """("summary", row) or ("message", row) for an id; LcmError naming what is wrong."""
    node_id = node_id.strip()
    if node_id.startswith("sum_"):
        if not SUMMARY_ID.fullmatch(node_id):
            raise LcmError(f"malformed summary id {node_id!r}", "summary ids are sum_ + 16 hex digits; " + FIND_HINT)
        row = conn.execute("SELECT * FROM summaries WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            raise LcmError(f"no summary {node_id} in this vault", FIND_HINT)
        return "summary", row
    if node_id.startswith("file_"):
        raise LcmError(f"{node_id} is a stored file, not a summary or message",
                       f"read it with lcm_describe.py {node_id} --content")
    if not node_id or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,100}", node_id):
        raise LcmError(f"malformed id {node_id[:80]!r}", "pass a summary id (sum_...) or a message uuid; " + FIND_HINT)
    row = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.uuid = ?", (node_id,)).fetchone()
    if row is None:
        raise LcmError(f"no summary or message {node_id!r} in this vault", FIND_HINT)
    return "message", row


def _summary_item(row) -> dict:
    return {"type": "summary", "id": row["id"], "kind": row["kind"], "depth": row["depth"],
            "earliest_at": row["earliest_at"], "latest_at": row["latest_at"],
            "token_count": row["token_count"], "content": lcm.base.mask.mask(row["content"])}


def _message_item(row) -> dict:
    return {"type": "message", "id": row["uuid"], "uuid": row["uuid"], "role": row["role"],
            "created_at": row["created_at"], "token_count": row["token_count"], "content": lcm.base.mask.mask(row["content"])}


def expand_to_messages(conn, summary_id: str) -> list:
    """Every message under a summary, in conversation order (one query over the id span)."""
    leaves, frontier = [], [summary_id]
    while frontier:  # collect the leaves below, depth by depth
        marks = ",".join("?" * len(frontier))
        rows = conn.execute(f"SELECT id, kind FROM summaries WHERE id IN ({marks})", frontier).fetchall()
        leaves += [r["id"] for r in rows if r["kind"] == "leaf"]
        parents = [r["id"] for r in rows if r["kind"] != "leaf"]
        frontier = [r[0] for r in conn.execute(
            f"SELECT child_id FROM summary_sources WHERE summary_id IN ({','.join('?' * len(parents))})"
            " AND child_id IS NOT NULL", parents)] if parents else []
    messages = []
    for i in range(0, len(leaves), 500):
        chunk = leaves[i:i + 500]
        messages += conn.execute(
            f"SELECT {MESSAGE_COLUMNS}, m.seq AS seq FROM summary_sources s JOIN messages m ON m.id = s.message_id"
            f" WHERE s.summary_id IN ({','.join('?' * len(chunk))})", chunk).fetchall()
    messages.sort(key=lambda r: r["seq"])  # conversation order (lcm/vault/order.py)
    return messages


def children(conn, row, full: bool) -> list:
    if full or row["kind"] == "leaf":
        return expand_to_messages(conn, row["id"])
    return conn.execute("SELECT c.* FROM summary_sources s JOIN summaries c ON c.id = s.child_id"
                        " WHERE s.summary_id = ? ORDER BY s.ord", (row["id"],)).fetchall()


def expand(conn, node_id, *, full=False, max_tokens=4000, offset=0, raw=False) -> dict:
    """One page of a node's expansion (the --json document); raw rows ride along under `_rows`."""
    if max_tokens < 1 or offset < 0:
        raise LcmError("--max-tokens must be >= 1 and --offset >= 0", "e.g. --max-tokens 4000 --offset 0")
    kind, row = resolve_node(conn, node_id)
    grant = os.environ.get("LCM_GRANT")
    budget = max_tokens
    if grant:  # never print more than the grant has left
        budget = min(max_tokens, lcm.vault.grants.remaining_tokens(conn, grant, node_id))
    items = [row] if kind == "message" else children(conn, row, full or raw)
    if items and offset >= len(items):
        raise LcmError(f"--offset {offset} is past the end of {node_id} ({len(items)} items)",
                       f"pages start at 0: lcm_expand.py {node_id}{' --full' if full and not raw else ''}"
                       f"{' --raw' if raw else ''} --offset 0")

    def size(item):
        return len(item["raw"]) // 4 + 1 if raw and "raw" in item.keys() else item["token_count"]

    page, tokens = [], 0
    for item in items[offset:]:
        if page and tokens + size(item) > budget:
            break
        page.append(item)
        tokens += size(item)
    cut = len(page) == 1 and tokens > budget  # one item larger than the page
    if cut and raw and grant:
        raise LcmError(f"the next original line is {tokens} tokens, more than grant {grant} has left ({budget})",
                       "expand without --raw (content is cut to fit), or " + lcm.vault.grants.NEW_GRANT_HINT)
    if cut and not raw:
        tokens = budget
    if grant:
        lcm.vault.grants.check_and_charge(conn, grant, node_id, tokens)
    end = offset + len(page)
    doc = {"id": node_id, "type": kind, "kind": row["kind"] if kind == "summary" else "message",
           "full": bool(full or raw), "offset": offset, "count": len(page), "total": len(items),
           "tokens": tokens, "has_more": end < len(items), "next_offset": end if end < len(items) else None,
           "items": [(_message_item if "uuid" in r.keys() else _summary_item)(r) for r in page]}
    if cut and not raw:
        item = doc["items"][0]
        item["content"] = item["content"][: budget * 4] + (
            f"\n[... cut at {budget} tokens of {item['token_count']}; the whole item:"
            f" lcm_expand.py {node_id} --raw{'' if kind == 'message' else f' --offset {offset}'}]")
        item["truncated"] = True
    doc["_rows"] = page
    return doc
