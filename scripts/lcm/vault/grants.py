"""Expansion grants: a bounded, expiring permission to expand part of the vault, and the one
check every command that reads the vault goes through (`scope`).

lcm_expand_query.py creates a grant for the sub-agent it starts (scope = sessions and node ids,
a token cap, a time to live) and passes its id as LCM_GRANT; lcm_expand.py then expands only ids
inside the scope and charges the tokens it prints to the grant. Library only.

A node is in scope when its session is one of the grant's sessions and, if the grant names node
ids, the node is one of them or lies below one of them in the DAG (a summary's children and
messages, a message of a listed leaf, a listed message uuid).

A process started with LCM_GRANT (lcm_expand_query.py's sub-agent) reads only that: `scope(conn)`
is what every reading command asks. Sessions are listed only when granted; a session's whole
content (export, sessions ID, checkpoint, resume) only when the grant names no narrower ids;
search looks only inside the scope, in its query (so pages are counted after scoping); nothing
leaves unmasked; and commands that change the vault are refused.
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone

import lcm.base.config
import lcm.vault.db
from lcm.base.errors import LcmError

NEW_GRANT_HINT = "ask lcm_expand_query.py again: it creates a fresh grant for the ids it needs"


def _ids(text: str) -> list[str]:
    """A grant's stored list of ids. json is imported here, not at the top: grep imports this
    module on every run, and without a grant it never needs json (~1 ms of a grep process)."""
    import json
    return json.loads(text)


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
    return lcm.vault.db.transaction(conn)


def create_grant(conn, session_ids, node_ids, token_cap, ttl_seconds=300) -> str:
    """A new grant over `session_ids` (and, if given, only `node_ids` and what lies below them)."""
    session_ids, node_ids = list(session_ids or []), list(node_ids or [])
    if not session_ids:
        raise LcmError("a grant needs at least one session", "pass the session ids the expansion may read")
    if int(token_cap) <= 0 or ttl_seconds <= 0:
        raise LcmError("a grant needs a positive token cap and time to live",
                       f"e.g. token_cap={lcm.base.config.get('LCM_MAX_EXPAND_TOKENS')}, ttl_seconds=300")
    grant_id = lcm.base.config.new_id("grant")
    import json
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
                     (lcm.base.config.now_iso(), grant_id))


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
    if row["expires_at"] <= lcm.base.config.now_iso():
        raise LcmError(f"grant {grant_id} expired at {row['expires_at']}", NEW_GRANT_HINT)
    return row


def load_grant(conn, grant_id: str):
    """The grant row; LcmError when it is unknown, revoked or expired."""
    return _load(conn, grant_id)


def check_scope(conn, grant_id: str, node_id: str):
    """The grant row if `node_id` may be read under it; LcmError otherwise."""
    grant = _load(conn, grant_id)
    session, chain = node_lineage(conn, node_id)
    sessions, nodes = _ids(grant["session_ids"]), _ids(grant["node_ids"])
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
    if session_id not in _ids(grant["session_ids"]):
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


# ---------------------------------------------------------------------------
# The one check of every reading command
# ---------------------------------------------------------------------------

class Scope:
    """What this process may read: the whole vault (no LCM_GRANT) or what one grant covers."""

    def __init__(self, conn, grant_id: str | None):
        self.conn, self.grant_id = conn, grant_id
        self.limited = grant_id is not None
        self.sessions: list[str] | None = None  # None: every session
        self.nodes: list[str] = []  # the grant's node ids; empty: its sessions whole
        if grant_id:
            grant = _load(conn, grant_id)
            self.sessions, self.nodes = _ids(grant["session_ids"]), _ids(grant["node_ids"])

    def allows_session(self, session_id: str) -> bool:
        return self.sessions is None or session_id in self.sessions

    def check_session(self, session_id: str, whole: bool = False) -> None:
        """LcmError unless `session_id` may be read (with whole=True: all of its content)."""
        if not self.limited:
            return
        check_scope_session(self.conn, self.grant_id, session_id)
        if whole and self.nodes:
            raise LcmError(f"grant {self.grant_id} covers only some ids of session {session_id}, not all of it",
                           "read those ids with lcm_expand.py or lcm_describe.py; " + NEW_GRANT_HINT)

    def check_node(self, node_id: str) -> None:
        """LcmError unless the summary or message `node_id` may be read."""
        if self.limited:
            check_scope(self.conn, self.grant_id, node_id)

    def refuse(self, what: str, hint: str = "") -> None:
        """LcmError under a grant: for what a sub-agent may not do at all (write, print unmasked)."""
        refuse(what, hint)

    def newest_session(self) -> str:
        """The grant's most recently active session (the default session under a grant)."""
        row = self.conn.execute(
            f"SELECT session_id FROM sessions WHERE session_id IN ({','.join('?' * len(self.sessions))})"
            " ORDER BY last_at DESC LIMIT 1", self.sessions).fetchone()
        if row is None:
            raise LcmError(f"grant {self.grant_id} names no stored session", NEW_GRANT_HINT)
        return row[0]

    def sql(self, below: str | None, alias: str = "t") -> tuple[str, list]:
        """(WHERE clause, params) that keeps the rows of a table with `id` and `session_id`
        columns, aliased `alias`, in scope, for a query to apply before it ranks or pages
        (lcm.search.engine takes it as `within`). below: "messages" or "summaries" when the rows
        are of that kind, so a grant of nodes keeps those below its nodes; None for any other
        kind of row, which lies below no summary."""
        if not self.limited:
            return "1", []
        marks = ",".join("?" * len(self.sessions))
        clause, params = (f"{alias}.session_id IN ({marks})" if self.sessions else "0"), list(self.sessions)
        if not self.nodes:
            return clause, params
        if below not in ("messages", "summaries"):
            return "0", []  # a note (title, checkpoint ...) lies below no summary: outside such a grant
        self._fill_below()
        table = f"grant_{below}"
        return f"{clause} AND {alias}.id IN (SELECT id FROM temp.{table})", params

    def _fill_below(self) -> None:
        """temp.grant_summaries and temp.grant_messages: the granted nodes and all below them."""
        conn = self.conn
        if conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = 'grant_messages'").fetchone():
            return
        conn.execute("CREATE TEMP TABLE grant_summaries (id TEXT PRIMARY KEY)")
        conn.execute("CREATE TEMP TABLE grant_messages (id INTEGER PRIMARY KEY)")
        summaries = [n for n in self.nodes if n.startswith("sum_")]
        conn.executemany("INSERT OR IGNORE INTO temp.grant_summaries VALUES (?)", ((n,) for n in summaries))
        while conn.execute("INSERT OR IGNORE INTO temp.grant_summaries SELECT id FROM summaries"
                           " WHERE parent_id IN (SELECT id FROM temp.grant_summaries)").rowcount:
            pass
        conn.execute("INSERT OR IGNORE INTO temp.grant_messages SELECT message_id FROM summary_sources"
                     " WHERE message_id IS NOT NULL AND summary_id IN (SELECT id FROM temp.grant_summaries)")
        conn.executemany("INSERT OR IGNORE INTO temp.grant_messages SELECT id FROM messages WHERE uuid = ?",
                         ((n,) for n in self.nodes if not n.startswith("sum_")))


def refuse(what: str, hint: str = "") -> None:
    """LcmError when LCM_GRANT is set: for what a sub-agent may not do at all (write to the
    vault, print unmasked, serve the whole vault)."""
    grant_id = os.environ.get("LCM_GRANT")
    if grant_id:
        raise LcmError(f"{what} is refused under an expansion grant (LCM_GRANT {grant_id})",
                       hint or "a sub-agent of lcm_expand_query.py only reads what its grant covers")


def scope(conn) -> Scope:
    """The one grant check: what the command running now may read of the vault (see Scope).
    An unknown, revoked or expired LCM_GRANT is an LcmError, so nothing is read under it."""
    return Scope(conn, os.environ.get("LCM_GRANT") or None)
