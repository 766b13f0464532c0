"""Expansion grants: a bounded, expiring permission to expand part of the vault.

lcm_expand_query.py creates a grant for the sub-agent it starts (scope = sessions and node ids,
a token cap, a time to live) and passes its id as LCM_GRANT; lcm_expand.py then expands only ids
inside the scope and charges the tokens it prints to the grant. Library only.

A node is in scope when its session is one of the grant's sessions and, if the grant names node
ids, the node is one of them or lies below one of them in the DAG (a summary's children and
messages, a message of a listed leaf, a listed message uuid).
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import lcm.config
import lcm.db
from lcm.errors import LcmError

NEW_GRANT_HINT = "ask lcm_expand_query.py again: it creates a fresh grant for the ids it needs"


def _iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _write(conn):
    """Join the caller's transaction if one is open, else run in our own."""
    if conn.in_transaction:
        class _Joined:
            def __enter__(self):
                return conn

            def __exit__(self, *exc):
                return False
        return _Joined()
    return lcm.db.transaction(conn)


def create_grant(conn, session_ids, node_ids, token_cap, ttl_seconds=300) -> str:
    """A new grant over `session_ids` (and, if given, only `node_ids` and what lies below them)."""
    session_ids, node_ids = list(session_ids or []), list(node_ids or [])
    if not session_ids:
        raise LcmError("a grant needs at least one session", "pass the session ids the expansion may read")
    if int(token_cap) <= 0 or ttl_seconds <= 0:
        raise LcmError("a grant needs a positive token cap and time to live",
                       f"e.g. token_cap={lcm.config.get('LCM_MAX_EXPAND_TOKENS')}, ttl_seconds=300")
    grant_id = lcm.config.new_id("grant")
    now = datetime.now(timezone.utc)
    with _write(conn):
        conn.execute(
            "INSERT INTO grants (id, session_ids, node_ids, token_cap, tokens_used, expires_at, created_at)"
            " VALUES (?, ?, ?, ?, 0, ?, ?)",
            (grant_id, json.dumps(session_ids), json.dumps(node_ids), int(token_cap),
             _iso(now + timedelta(seconds=ttl_seconds)), _iso(now)),
        )
    return grant_id


def revoke_grant(conn, grant_id: str) -> None:
    with _write(conn):
        conn.execute("UPDATE grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                     (lcm.config.now_iso(), grant_id))


def node_lineage(conn, node_id: str) -> tuple[str | None, list[str]]:
    """(session_id, [node_id, parent, grandparent, ...]) of a summary id or message uuid."""
    if node_id.startswith("sum_"):
        row = conn.execute("SELECT session_id FROM summaries WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            return None, []
        session, chain, current = row[0], [node_id], node_id
    else:
        row = conn.execute(
            "SELECT m.session_id, s.summary_id FROM messages m LEFT JOIN summary_sources s"
            " ON s.message_id = m.id WHERE m.uuid = ?", (node_id,)).fetchone()
        if row is None:
            return None, []
        session, chain, current = row[0], [node_id], row[1]
        if current:
            chain.append(current)
    while current:
        parent = conn.execute("SELECT parent_id FROM summaries WHERE id = ?", (current,)).fetchone()
        current = parent[0] if parent else None
        if current:
            chain.append(current)
    return session, chain


def _load(conn, grant_id: str):
    row = conn.execute("SELECT * FROM grants WHERE id = ?", (grant_id,)).fetchone()
    if row is None:
        raise LcmError(f"unknown grant {grant_id!r} (LCM_GRANT)", NEW_GRANT_HINT)
    if row["revoked_at"]:
        raise LcmError(f"grant {grant_id} was revoked at {row['revoked_at']}", NEW_GRANT_HINT)
    if row["expires_at"] <= lcm.config.now_iso():
        raise LcmError(f"grant {grant_id} expired at {row['expires_at']}", NEW_GRANT_HINT)
    return row


def load_grant(conn, grant_id: str):
    """The grant row; LcmError when it is unknown, revoked or expired."""
    return _load(conn, grant_id)


def check_scope(conn, grant_id: str, node_id: str):
    """The grant row if `node_id` may be read under it; LcmError otherwise."""
    grant = _load(conn, grant_id)
    session, chain = node_lineage(conn, node_id)
    sessions, nodes = json.loads(grant["session_ids"]), json.loads(grant["node_ids"])
    if session is None:
        raise LcmError(f"{node_id} is not in this vault", "find ids with lcm_grep.py QUERY")
    if session not in sessions or (nodes and not set(chain) & set(nodes)):
        where = f"session {session}" if session not in sessions else "a part of the DAG it does not cover"
        raise LcmError(f"{node_id} is outside grant {grant_id} ({where})",
                       "expand only the ids the grant names or their descendants; " + NEW_GRANT_HINT)
    return grant


def check_scope_session(conn, grant_id: str, session_id: str):
    """The grant row if the whole `session_id` may be listed under it; LcmError otherwise."""
    grant = _load(conn, grant_id)
    if session_id not in json.loads(grant["session_ids"]):
        raise LcmError(f"session {session_id} is outside grant {grant_id}", NEW_GRANT_HINT)
    return grant


def remaining_tokens(conn, grant_id: str, node_id: str) -> int:
    """Tokens the grant still allows for `node_id`; LcmError when none or out of scope."""
    grant = check_scope(conn, grant_id, node_id)
    remaining = grant["token_cap"] - grant["tokens_used"]
    if remaining <= 0:
        raise LcmError(f"grant {grant_id} has used its {grant['token_cap']} tokens",
                       "answer from what was already expanded, or " + NEW_GRANT_HINT)
    return remaining


def check_and_charge(conn, grant_id: str, node_id: str, tokens: int) -> int:
    """Charge up to `tokens` to the grant for reading `node_id`; returns the tokens allowed.

    LcmError when the grant is unknown, revoked, expired, exhausted or `node_id` is out of scope.
    """
    with _write(conn):
        grant = check_scope(conn, grant_id, node_id)
        remaining = grant["token_cap"] - grant["tokens_used"]
        if tokens > 0 and remaining <= 0:
            raise LcmError(f"grant {grant_id} has used its {grant['token_cap']} tokens",
                           "answer from what was already expanded, or " + NEW_GRANT_HINT)
        allowed = max(0, min(int(tokens), remaining))
        conn.execute("UPDATE grants SET tokens_used = tokens_used + ? WHERE id = ?", (allowed, grant_id))
    return allowed
