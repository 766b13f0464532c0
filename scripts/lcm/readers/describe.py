"""Describing one node of the vault: a summary, a stored large file, a message, or a session's DAG.

The command is scripts/lcm_describe.py; `describe` and `describe_session` are its two calls,
each checking the expansion grant (LCM_GRANT) a sub-agent works under.
"""
from __future__ import annotations

import json
import re

import lcm.readers.expand
import lcm.capture.files
import lcm.vault.grants
import lcm.base.mask
import lcm.base.shell
from lcm.base.errors import LcmError


def describe_summary(conn, row) -> dict:
    sources = conn.execute(
        "SELECT coalesce(m.uuid, s.child_id) FROM summary_sources s LEFT JOIN messages m ON m.id = s.message_id"
        " WHERE s.summary_id = ? ORDER BY s.ord", (row["id"],)).fetchall()
    return {"type": "summary", "id": row["id"], "session_id": row["session_id"], "kind": row["kind"],
            "depth": row["depth"], "earliest_at": row["earliest_at"], "latest_at": row["latest_at"],
            "token_count": row["token_count"], "source_token_count": row["source_token_count"],
            "level": row["level"], "model": row["model"], "parent_id": row["parent_id"],
            "descendant_count": row["descendant_count"], "source_ids": [r[0] for r in sources],
            "file_ids": json.loads(row["file_ids"] or "[]"), "created_at": row["created_at"],
            "content": lcm.base.mask.mask(row["content"])}


def describe_file(conn, file_id, content=False, max_tokens=4000, offset=0) -> dict:
    if not re.fullmatch(r"file_[0-9a-f]{16}", file_id):
        raise LcmError(f"malformed file id {file_id!r}", "file ids are file_ + 16 hex digits; find them with lcm_grep.py QUERY")
    row = conn.execute("SELECT * FROM files WHERE id = ?", (file_id,)).fetchone()
    if row is None:
        raise LcmError(f"no file {file_id} in this vault", "file references appear in messages: lcm_grep.py 'file_'")
    doc = {"type": "file", "id": row["id"], "name": row["name"], "kind": row["kind"],
           "byte_size": row["byte_size"], "token_count": row["token_count"], "session_id": row["session_id"],
           "message_uuid": row["message_uuid"], "created_at": row["created_at"],
           "exploration": lcm.base.mask.mask(row["exploration"])}
    if content:
        text = lcm.base.mask.mask(lcm.capture.files.read_content(row))  # whole, so a page never cuts a secret
        end = offset + max_tokens * 4
        doc.update(content=text[offset:end], offset=offset, has_more=end < len(text),
                   next_offset=end if end < len(text) else None)
    return doc


def describe_message(conn, row) -> dict:
    cover = conn.execute("SELECT summary_id FROM summary_sources WHERE message_id = ?", (row["id"],)).fetchone()
    files = [r[0] for r in conn.execute("SELECT id FROM files WHERE message_uuid = ?", (row["uuid"],))]
    return {"type": "message", "id": row["uuid"], "uuid": row["uuid"], "session_id": row["session_id"],
            "role": row["role"], "created_at": row["created_at"], "token_count": row["token_count"],
            "covering_summary_id": cover[0] if cover else None, "file_ids": files,
            "content": lcm.base.mask.mask(row["content"])}


def describe_session(conn, session_id) -> dict:
    """A session's DAG and context items (lcm.vault.resolve.session has checked the grant)."""
    if not conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (session_id,)).fetchone() and \
            not conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone():
        raise LcmError(f"no session {session_id!r} in this vault", "list sessions with lcm_sessions.py, or ingest with lcm_ingest.py")
    summaries = []
    rows = conn.execute("SELECT s.* FROM summaries s JOIN messages f ON f.id = s.first_message_id"
                        " WHERE s.session_id = ? ORDER BY s.depth DESC, f.seq",
                        (session_id,)).fetchall()
    for row in rows:
        d = describe_summary(conn, row)
        summaries.append({k: d[k] for k in ("id", "kind", "depth", "parent_id", "source_ids", "token_count",
                                            "source_token_count", "level", "earliest_at", "latest_at")})
    return {"session_id": session_id, "summaries": summaries, "context_items": context_items(conn, session_id)}


def context_items(conn, session_id) -> list[dict]:
    """Top summaries and the messages no summary covers yet, in conversation order."""
    tops = conn.execute("SELECT s.id, f.seq FROM summaries s JOIN messages f ON f.id = s.first_message_id"
                        " WHERE s.session_id = ? AND s.parent_id IS NULL", (session_id,)).fetchall()
    loose = conn.execute(
        "SELECT m.uuid, m.seq FROM messages m LEFT JOIN summary_sources s ON s.message_id = m.id"
        " WHERE m.session_id = ? AND s.summary_id IS NULL", (session_id,)).fetchall()
    items = [(r[1] or 0, "summary", r[0]) for r in tops] + [(r[1] or 0, "message", r[0]) for r in loose]
    return [{"type": t, "id": i} for _pos, t, i in sorted(items)]


def describe(conn, node_id: str, *, content: bool = False, max_tokens: int = 4000, offset: int = 0,
             scope: lcm.vault.grants.Scope | None = None) -> dict:
    """The document of a summary, file or message id, inside the grant's scope (lcm.vault.grants.scope);
    a message's content is cut at max_tokens, saying how to read it all."""
    if node_id.startswith("file_"):
        doc = describe_file(conn, node_id, content, max_tokens, offset)
        if scope is not None and scope.limited:  # a stored file is read as part of its message
            scope.check_node(doc["message_uuid"] or node_id)
        return doc
    kind, row = lcm.readers.expand.resolve_node(conn, node_id)
    if scope is not None:
        scope.check_node(node_id)
    if kind == "summary":
        return describe_summary(conn, row)
    doc = describe_message(conn, row)
    if len(doc["content"]) > max_tokens * 4:
        doc["content"] = doc["content"][: max_tokens * 4] + (
            f"\n[... cut at {max_tokens} tokens: "
            f"{lcm.base.shell.command_line('lcm_expand.py', lcm.base.shell.Positional(node_id), '--raw')} prints it all]")
    return doc
