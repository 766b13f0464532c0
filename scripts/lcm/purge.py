"""Forgetting: the one path that deletes messages from the vault.

A purge removes the chosen messages (their rows, raw lines and full-text entries), every summary
built on them and that summary's ancestors (their other children become parentless again and
their other messages uncovered, so the next lcm_compact.py summarises what remains), their
externalised files, the checkpoints that may quote them, and the compaction records of their
boundary lines. Each purged uuid is remembered in `purged`, and a trigger on `messages` refuses
it, so a transcript still on disk never brings the line back. The delete runs with
secure_delete on, the full-text indexes are merged (old segments hold the deleted terms), and
the WAL is checkpointed and truncated: no copy stays in the vault's free pages or its -wal.
"""
from __future__ import annotations

import os
import re

import lcm.cli
import lcm.config
import lcm.db
import lcm.schema
from lcm.errors import LcmError

# the externalised files of the messages in temp.purge_messages
FILES_OF_PURGE = "message_uuid IN (SELECT uuid FROM messages WHERE id IN (SELECT id FROM temp.purge_messages))"
EXAMPLES = 5  # messages shown by a dry run
PREVIEW_CHARS = 80


class Selection:
    """What one purge would remove; filled by select(), carried out by purge()."""

    def __init__(self, what: str):
        self.what = what                   # human description of the criterion
        self.message_ids: list[int] = []
        self.sessions: set[str] = set()    # sessions with a purged message
        self.whole_sessions: set[str] = set()  # sessions purged entirely (--session)
        self.pattern: re.Pattern | None = None
        self.literal: str | None = None


def _matches(conn, literal: str | None, pattern: re.Pattern | None) -> list[int]:
    if literal is not None:
        # substring of the searchable text or of the original line (which may hold more: fields
        # that are not indexed, thinking when LCM_INDEX_THINKING=0)
        return [r[0] for r in conn.execute(
            "SELECT id FROM messages WHERE instr(content, ?) > 0 OR instr(raw, ?) > 0 ORDER BY id",
            (literal, literal.encode("utf-8", "surrogatepass")))]
    ids = []
    for row in conn.execute("SELECT id, content, raw FROM messages ORDER BY id"):
        if pattern.search(row[1]) or pattern.search(bytes(row[2]).decode("utf-8", "surrogateescape")):
            ids.append(row[0])
    return ids


def select(conn, *, session: str | None = None, message: str | None = None, match: str | None = None,
           regex: bool = False) -> Selection:
    """The messages one criterion names (exactly one of session, message, match)."""
    if session is not None:
        sid = lcm.cli.resolve_session(conn, session)
        sel = Selection(f"session {sid}")
        sel.message_ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ? ORDER BY id",
                                                      (sid,))]
        sel.whole_sessions.add(sid)
    elif message is not None:
        row = conn.execute("SELECT id FROM messages WHERE uuid = ?", (message,)).fetchone()
        if row is None:
            raise LcmError(f"no message {message!r} in the vault",
                           "a message is addressed by its transcript uuid, as lcm_grep.py prints it")
        sel = Selection(f"message {message}")
        sel.message_ids = [row[0]]
    else:
        if not match:
            raise LcmError("--match needs a non-empty pattern", "give the text to forget")
        # the pattern itself is not echoed: it is often the secret being forgotten
        sel = Selection("messages matching the given regular expression" if regex else
                        "messages containing the given text")
        if regex:
            try:
                sel.pattern = re.compile(match)
            except re.error as exc:
                raise LcmError(f"invalid regular expression {match!r}: {exc}",
                               "escape special characters, or drop --regex to match the text as given") from None
            if sel.pattern.search(""):
                raise LcmError(f"the regular expression {match!r} matches empty text, so every message",
                               "make it match the text to forget, e.g. sk-ant-[A-Za-z0-9_-]+")
        else:
            sel.literal = match
        sel.message_ids = _matches(conn, sel.literal, sel.pattern)
    for chunk in _chunks(sel.message_ids):
        sel.sessions.update(r[0] for r in conn.execute(
            f"SELECT DISTINCT session_id FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return sel


def _chunks(ids: list, size: int = 500):
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


def _load_temp(conn, sel: Selection) -> None:
    """temp.purge_messages (ids) and temp.purge_summaries (the summaries to drop)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS purge_messages (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS purge_summaries (id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.purge_messages")
    conn.execute("DELETE FROM temp.purge_summaries")
    conn.executemany("INSERT INTO temp.purge_messages VALUES (?)", ((i,) for i in sel.message_ids))
    conn.execute("INSERT OR IGNORE INTO temp.purge_summaries SELECT DISTINCT summary_id FROM summary_sources"
                 " WHERE message_id IN (SELECT id FROM temp.purge_messages)")
    if sel.whole_sessions:
        conn.executemany("INSERT OR IGNORE INTO temp.purge_summaries SELECT id FROM summaries WHERE session_id = ?",
                         ((s,) for s in sel.whole_sessions))
    if sel.literal is not None:  # a summary may quote the text even if its messages were phrased otherwise
        conn.execute("INSERT OR IGNORE INTO temp.purge_summaries SELECT id FROM summaries WHERE instr(content, ?) > 0",
                     (sel.literal,))
    elif sel.pattern is not None:
        conn.executemany("INSERT OR IGNORE INTO temp.purge_summaries VALUES (?)",
                         ((r[0],) for r in conn.execute("SELECT id, content FROM summaries") if sel.pattern.search(r[1])))
    add_ancestors(conn)


def add_ancestors(conn) -> None:
    """Grow temp.purge_summaries by the parents of its summaries, up to the roots."""
    while conn.execute("INSERT OR IGNORE INTO temp.purge_summaries SELECT parent_id FROM summaries"
                       " WHERE id IN (SELECT id FROM temp.purge_summaries) AND parent_id IS NOT NULL").rowcount:
        pass


def drop_summaries(conn) -> int:
    """Delete the summaries in temp.purge_summaries (ancestors included by the caller); their
    children that stay become parentless, their messages uncovered. Inside the caller's
    transaction. Returns how many were deleted."""
    conn.execute("UPDATE summaries SET parent_id = NULL WHERE parent_id IN (SELECT id FROM temp.purge_summaries)"
                 " AND id NOT IN (SELECT id FROM temp.purge_summaries)")
    conn.execute("DELETE FROM summary_sources WHERE summary_id IN (SELECT id FROM temp.purge_summaries)")
    return conn.execute("DELETE FROM summaries WHERE id IN (SELECT id FROM temp.purge_summaries)").rowcount


def _doomed_checkpoints(conn, sel: Selection) -> list:
    """(id, path) of the checkpoints that may quote the purged messages: those of a purged
    session, those containing the --match text, and for one message those of its session
    written after it."""
    if sel.pattern is not None:
        return [r[:2] for r in conn.execute("SELECT id, path, content FROM checkpoints") if sel.pattern.search(r[2])]
    if sel.literal is not None:
        where, args = "instr(content, ?) > 0", [sel.literal]
    elif sel.whole_sessions:
        where, args = "session_id = ?", [next(iter(sel.whole_sessions))]
    else:
        where, args = ("session_id = ? AND (last_message_id IS NULL OR last_message_id >= ?)",
                       [next(iter(sel.sessions), ""), min(sel.message_ids, default=0)])
    return conn.execute(f"SELECT id, path FROM checkpoints WHERE {where}", args).fetchall()


def _doomed_notes(conn, sel: Selection) -> list[str]:
    """Ids of pinned notes (lcm_remember.py) that contain the --match text."""
    if sel.literal is not None:
        return [r[0] for r in conn.execute("SELECT id FROM notes WHERE instr(content, ?) > 0", (sel.literal,))]
    if sel.pattern is not None:
        return [r[0] for r in conn.execute("SELECT id, content FROM notes") if sel.pattern.search(r[1])]
    return []  # notes outlive their session on purpose: lcm_remember.py --forget ID removes one


def plan(conn, sel: Selection) -> dict:
    """What a purge of `sel` removes: the dry run's document (counts and a few examples)."""
    _load_temp(conn, sel)
    examples = []
    for row in conn.execute("SELECT m.uuid, m.session_id, m.role, m.created_at, m.content FROM messages m"
                            " JOIN temp.purge_messages p ON p.id = m.id ORDER BY m.id LIMIT ?", (EXAMPLES,)):
        examples.append({"uuid": row[0], "session_id": row[1], "role": row[2], "created_at": row[3],
                         "preview": _preview(row[4], sel)})
    files = conn.execute(f"SELECT count(*) FROM files WHERE {FILES_OF_PURGE}").fetchone()[0]
    checkpoints = _doomed_checkpoints(conn, sel)
    return {
        "what": sel.what,
        "messages": len(sel.message_ids),
        "sessions": sorted(sel.sessions),
        "summaries": conn.execute("SELECT count(*) FROM temp.purge_summaries").fetchone()[0],
        "files": files,
        "checkpoints": len(checkpoints),
        "notes": len(_doomed_notes(conn, sel)),
        "checkpoint_files": sorted({r[1] for r in checkpoints if r[1] and os.path.isfile(r[1])}),
        "examples": examples,
    }


def _preview(text: str, sel: Selection) -> str:
    """A short look at a message, with the purged text itself blanked."""
    if sel.literal is not None:
        text = text.replace(sel.literal, "[purged text]")
    elif sel.pattern is not None:
        text = sel.pattern.sub("[purged text]", text)
    try:
        import lcm.mask  # the secret masking of every printed text, where present
        text = lcm.mask.mask(text)
    except ImportError:
        pass
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


def _locks(sessions: set[str]):
    """Hold every affected session's compaction lock (a running compaction would write a summary
    of messages being deleted)."""
    import contextlib
    import lcm.compact
    stack = contextlib.ExitStack()
    try:
        for sid in sorted(sessions):
            stack.enter_context(lcm.compact.session_lock(sid, blocking=False))
    except BaseException:
        stack.close()
        raise
    return stack


def purge(conn, sel: Selection) -> dict:
    """Carry out a purge (see the module docstring); returns plan()'s document plus what was done."""
    with _locks(sel.sessions):
        # overwrite deleted content with zeros instead of leaving it in free space
        conn.execute("PRAGMA secure_delete = ON")
        with lcm.db.transaction(conn):
            doc = plan(conn, sel)
            checkpoints = _doomed_checkpoints(conn, sel)
            uuids = [r[0] for r in conn.execute("SELECT uuid FROM messages WHERE id IN (SELECT id FROM temp.purge_messages)")]
            now = lcm.config.now_iso()
            conn.execute(lcm.schema.PURGED_TRIGGER)
            conn.executemany("INSERT OR IGNORE INTO purged (uuid, purged_at) VALUES (?, ?)", ((u, now) for u in uuids))
            dropped = drop_summaries(conn)
            files = conn.execute(f"SELECT id, path FROM files WHERE {FILES_OF_PURGE}").fetchall()
            conn.executemany("DELETE FROM files WHERE id = ?", ((r[0],) for r in files))
            conn.executemany("DELETE FROM checkpoints WHERE id = ?", ((r[0],) for r in checkpoints))
            notes = _doomed_notes(conn, sel)
            conn.executemany("DELETE FROM notes WHERE id = ?", ((i,) for i in notes))
            conn.executemany("DELETE FROM compactions WHERE uuid = ?", ((u,) for u in uuids))
            conn.executemany("DELETE FROM agent_calls WHERE call_uuid = ?", ((u,) for u in uuids))
            for sid in sel.whole_sessions:
                for table in ("compactions", "agent_calls", "threads"):
                    conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (sid,))
            conn.execute("DELETE FROM messages WHERE id IN (SELECT id FROM temp.purge_messages)")
            for sid in sel.sessions:  # a session with nothing left is forgotten too
                conn.execute("DELETE FROM sessions WHERE session_id = ? AND NOT EXISTS"
                             " (SELECT 1 FROM messages WHERE session_id = ?)", (sid, sid))
            # FTS5 keeps a deleted row's terms in its old segments until they are merged
            if uuids or dropped or notes:
                for table in fts_tables(conn):
                    conn.execute(f"INSERT INTO \"{table}\"(\"{table}\") VALUES ('optimize')")
        doc["files_removed"] = _remove_files(conn, [r[1] for r in files])
        doc["wal_emptied"] = _empty_wal(conn)
    doc["backups"] = backups_beside(conn)
    return doc


def fts_tables(conn) -> list[str]:
    """Every FTS5 table of the vault."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")]


def _remove_files(conn, paths: list[str]) -> int:
    """Delete externalised contents no remaining `files` row points to."""
    removed = 0
    for path in sorted(set(paths)):
        if conn.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone():
            continue  # the same content (same hash) kept for another message
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def _empty_wal(conn) -> bool:
    """Copy the WAL into the vault and truncate it to zero bytes: the WAL still holds the page
    images from before the delete. False when another connection kept it from finishing."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        return True
    busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return busy == 0


def backups_beside(conn) -> list[str]:
    """lcm_doctor.py backups next to the vault (they still hold whatever was purged)."""
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    directory, name = os.path.split(path)
    try:
        return sorted(os.path.join(directory, n) for n in os.listdir(directory or ".")
                      if n.startswith(name + ".backup-"))
    except OSError:
        return []
