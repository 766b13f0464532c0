"""Sessions as a person sees them: a title, when they ran, what they hold.

lcm_sessions.py lists them and shows one; lcm_export.py heads its markdown with the same title.
Read-only, stdlib only.
"""
from __future__ import annotations

import json
import os
import sqlite3

import lcm.summary.digest
import lcm.base.mask
import lcm.vault.store
import lcm.base.text
import lcm.summary.worklog
from lcm.base.text import one_line

TITLE_CHARS = 80
PROMPT_SCAN = 50    # user lines of a session searched for its first real prompt
TREE_NODES = 200    # summaries in a one-session view's tree (--json); the text shows fewer
WARMUP = "Warmup"  # the prompt Claude Code sends a sub-agent to warm its cache, not a task


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def first_prompt(conn, session_id: str) -> str | None:
    """The first thing a person typed in the session: not a tool result, a /command or a caveat.

    A session stored only as sub-agent lines (its main transcript gone) falls back to the first
    task given to a sub-agent.
    """
    for sidechain in (0, 1):
        try:
            rows = conn.execute(
                f"SELECT {lcm.vault.store.LINE} FROM messages WHERE session_id = ? AND type = 'user' AND is_meta = 0"
                " AND is_sidechain = ? ORDER BY id LIMIT ?", (session_id, sidechain, PROMPT_SCAN)).fetchall()
        except sqlite3.OperationalError as exc:
            if lcm.vault.store.function_error(exc) is None:
                raise
            return None  # its lines sit in a damaged block: a list of sessions still shows the others
        for (raw,) in rows:
            try:
                entry = json.loads(raw)
                if sidechain:
                    entry = {**entry, "isSidechain": False}  # user_request_text skips sub-agent lines
                text = lcm.summary.worklog.user_request_text(entry)
            except (ValueError, TypeError, AttributeError, RecursionError):
                continue  # an odd line is skipped, never fatal
            if text and text.strip() != WARMUP:
                return text
    return None


def title(conn, session_id: str, stored: str | None, messages: int) -> str:
    """The transcript's own title, else its first real prompt, else a placeholder: never empty."""
    text = lcm.base.mask.mask((stored or "").strip() or first_prompt(conn, session_id))  # before the cut
    return one_line(text, TITLE_CHARS) if text else f"(untitled, {plural(messages, 'message')})"


def _counts(conn, row) -> dict:
    sid = row["session_id"]
    messages = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
    summaries = conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (sid,)).fetchone()[0]
    checkpoint = conn.execute("SELECT 1 FROM checkpoints WHERE session_id = ? LIMIT 1", (sid,)).fetchone()
    return {"id": sid, "title": title(conn, sid, row["title"], messages), "project": row["project"],
            "first_at": row["first_at"], "last_at": row["last_at"], "messages": messages,
            "summaries": summaries, "has_checkpoint": checkpoint is not None,
            "only_in_vault": not _on_disk([r[0] for r in conn.execute(
                "SELECT path FROM transcripts WHERE session_id = ?", (sid,))])}


CLEANUP_NOTE = ("their transcripts are gone: Claude Code deletes them after cleanupPeriodDays, 30 days by default,"
                " and lcm's vault and its backups are now their only copy")


def _on_disk(paths: list[str]) -> bool:
    return any(os.path.exists(p) for p in paths)


def only_in_vault(conn) -> int:
    """How many sessions exist only in the vault now: no transcript file of theirs is left on
    disk (one stat per transcript file the vault knows)."""
    paths: dict[str, list[str]] = {}
    for sid, path in conn.execute("SELECT s.session_id, t.path FROM sessions s"
                                  " LEFT JOIN transcripts t ON t.session_id = s.session_id"):
        paths.setdefault(sid, [])
        if path:
            paths[sid].append(path)
    return sum(1 for found in paths.values() if not _on_disk(found))


def list_sessions(conn, *, project: str | None = None, since: str | None = None, text: str | None = None,
                  limit: int = 20, offset: int = 0, within: list[str] | None = None) -> tuple[list[dict], int]:
    """(sessions newest first, at most `limit` from `offset`, and how many match in all).

    project: that directory or any below it; since: a comparable ISO time (last activity);
    text: words the stored title contains (case-insensitive); within: only these ids (an
    expansion grant's sessions, lcm.vault.grants.Scope.sessions).
    """
    where, params = [], []
    if within is not None:
        where.append(f"session_id IN ({','.join('?' * len(within))})" if within else "0")
        params += within
    if project:
        project = os.path.abspath(os.path.expanduser(project)).rstrip("/") or "/"
        # a prefix test, not LIKE: SQLite refuses LIKE patterns over 50,000 bytes
        below = project.rstrip("/") + "/"
        where.append("(project = ? OR substr(project, 1, ?) = ?)")
        params += [project, len(below), below]
    if since:
        where.append("last_at >= ?")
        params.append(since)
    if text:
        where.append("instr(lower(title), ?) > 0")
        params.append(text.lower())
    clause = " WHERE " + " AND ".join(where) if where else ""
    total = conn.execute("SELECT count(*) FROM sessions" + clause, params).fetchone()[0]
    rows = conn.execute("SELECT * FROM sessions" + clause + " ORDER BY last_at DESC, session_id LIMIT ? OFFSET ?",
                        [*params, limit, offset]).fetchall()
    return [_counts(conn, row) for row in rows], total


def summary_tree(conn, session_id: str, max_nodes: int = TREE_NODES) -> tuple[list[dict], int]:
    """(the session's summaries as a forest, roots in conversation order, and how many exist).

    Each node: id, kind, depth, messages (covered), earliest_at, latest_at, head, children.
    At most max_nodes nodes, the higher levels first.
    """
    total = conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (session_id,)).fetchone()[0]
    rows = conn.execute(
        "SELECT id, kind, depth, parent_id, descendant_count, earliest_at, latest_at, substr(content, 1, 400) AS head"
        " FROM summaries WHERE session_id = ?"
        " ORDER BY depth DESC, (SELECT seq FROM messages WHERE id = first_message_id) LIMIT ?",  # conversation order
        (session_id, max_nodes)).fetchall()
    nodes = {r["id"]: {"id": r["id"], "kind": r["kind"], "depth": r["depth"], "messages": r["descendant_count"],
                       "earliest_at": r["earliest_at"], "latest_at": r["latest_at"], "head": lcm.base.text.summary_head(r["head"]),
                       "children": []} for r in rows}
    roots = []
    for r in rows:  # parents come first (deeper), children in conversation order
        parent = nodes.get(r["parent_id"]) if r["parent_id"] else None
        (parent["children"] if parent else roots).append(nodes[r["id"]])
    roots.sort(key=lambda n: n["earliest_at"] or "")
    return roots, total


def session_view(conn, session_id: str) -> dict:
    """Everything lcm_sessions.py ID shows: the list fields, the work done, the summary tree."""
    row = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    view = _counts(conn, row)
    log = lcm.summary.worklog.worklog(conn, session_id)
    tree, summaries = summary_tree(conn, session_id)
    view.update(model=row["model"], transcript_path=row["transcript_path"],
                files_edited=log["files_edited"], files_created=log["files_created"],
                command_count=log["command_count"], failed_command_count=log["failed_command_count"],
                commands=[{"command": c["command"], "failed": c["failed"]} for c in log["commands"]],
                summary_tree=tree, summary_tree_truncated=summaries > TREE_NODES,
                digest=lcm.summary.digest.get(conn, session_id))
    return view
