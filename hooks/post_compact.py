"""PostCompact: record Claude Code's compaction (trigger, tokens before and after) in the vault.

The compact_boundary line of the transcript carries preTokens/postTokens; when it is missing, the
context size lcm last saw and an estimate of the compact summary stand in.
"""
from __future__ import annotations

import json

import hooklib

EVENT = "PostCompact"


def boundary_tokens(conn, sid: str) -> tuple[int | None, int | None]:
    import lcm.vault.store  # loaded already by the connection (lcm.vault.db)
    row = conn.execute(
        f"SELECT {lcm.vault.store.LINE} FROM messages WHERE session_id = ? AND subtype = 'compact_boundary' "
        "ORDER BY id DESC LIMIT 1", (sid,)).fetchone()
    if row is None:
        return None, None
    try:
        meta = json.loads(row[0]).get("compactMetadata") or {}
    except (ValueError, AttributeError):
        return None, None
    return meta.get("preTokens"), meta.get("postTokens")


def handle(payload: dict):
    sid = hooklib.session_id(payload)
    conn = hooklib.connect()
    import lcm.base.config
    import lcm.vault.db
    before = None
    try:
        import lcm.readers.status
        before = lcm.readers.status.claude_context_tokens(conn, sid)  # last usage seen, before the new lines
    except ImportError:
        pass
    hooklib.try_ingest(conn, payload.get("transcript_path"))
    if hooklib.flag("LCM_SUBAGENT"):
        return None
    pre, post = boundary_tokens(conn, sid)
    pre = pre if pre is not None else before
    if post is None and isinstance(payload.get("compact_summary"), str):
        post = lcm.base.config.estimate_tokens(payload["compact_summary"])
    trigger = payload.get("trigger") if payload.get("trigger") in ("manual", "auto") else None
    with lcm.vault.db.transaction(conn):
        conn.execute(
            "INSERT INTO compactions (session_id, source, trigger, pre_tokens, post_tokens, created_at) "
            "VALUES (?, 'hook', ?, ?, ?, ?)", (sid, trigger, pre, post, lcm.base.config.now_iso()))
    return None


if __name__ == "__main__":
    hooklib.exit_now(hooklib.run_hook(EVENT, handle))
