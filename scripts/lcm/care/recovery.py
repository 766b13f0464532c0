"""The way back from a damaged vault: keep the damaged file aside, build a new vault from the
transcripts still on disk, and say what cannot come back.

The transcripts are the source of every message, so a vault rebuilt from them holds every
message of every transcript still on disk. What lived only in the vault is lost unless the
damaged file still lets it be read: messages of transcripts deleted since, summaries (the next
lcm_compact.py writes new ones), notes, checkpoints' vault copies and the list of purged
messages. The last two are carried over row by row when readable; without the purged list, a
purged message comes back from a transcript that still holds it, and the report says so.
"""
from __future__ import annotations

import os
import sqlite3
import time

import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.vault.schema

NOTE_COLUMNS = "id, content, project, session_id, created_at"


def _readable_rows(path: str, query: str) -> list[tuple] | None:
    """The rows of `query` that the damaged file still gives, up to the first unreadable page;
    None when not even that (no such table, a header SQLite refuses)."""
    try:
        conn = sqlite3.connect(lcm.vault.db.file_uri(path, "mode=ro&immutable=1"), uri=True)
    except sqlite3.Error:
        return None
    rows: list[tuple] = []
    try:
        for row in conn.execute(query):
            rows.append(tuple(row))
    except sqlite3.Error:
        if not rows:
            return None
    finally:
        conn.close()
    return rows


def projects_root() -> str:
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return os.path.join(os.path.expanduser(base) if base else os.path.join(os.path.expanduser("~"), ".claude"),
                        "projects")


def plan(path: str) -> dict:
    """What a rebuild of the damaged vault at `path` would read and what it would lose."""
    root = projects_root()
    recorded = _readable_rows(path, "SELECT path FROM transcripts")
    notes = _readable_rows(path, f"SELECT {NOTE_COLUMNS} FROM notes")
    purged = _readable_rows(path, "SELECT uuid, purged_at FROM purged")
    paths = [r[0] for r in recorded or () if isinstance(r[0], str)]
    gone = [p for p in paths if not os.path.isfile(p)]
    inside = root.rstrip(os.sep) + os.sep
    # transcripts once imported from elsewhere (lcm_ingest.py PATH): read again file by file
    elsewhere = sorted(p for p in paths if os.path.isfile(p) and not p.startswith(inside))
    lost = []
    if recorded is None:
        lost.append("messages of transcripts deleted since they were stored (the damaged file does not say which)")
    elif gone:
        lost.append(f"messages of {len(gone)} transcripts deleted since they were stored")
    lost.append("summaries (lcm_compact.py writes new ones from the messages)")
    if notes is None:
        lost.append("notes pinned with lcm_remember.py (unreadable in the damaged file)")
    lost.append("checkpoints kept in the vault (the .lcm-checkpoint.md files stay where they were written)")
    if purged is None:
        lost.append("the list of purged messages: a message purged with lcm_purge.py comes back if its transcript"
                    " still holds it (purge it again)")
    return {"damaged": path, "projects_root": root, "other_files": elsewhere,
            "transcripts_recorded": None if recorded is None else len(paths), "transcripts_gone": len(gone),
            "notes_kept": len(notes or ()), "purged_kept": len(purged or ()), "lost": lost}


def aside_path(path: str) -> str:
    return f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def rebuild(path: str, keep_damaged: bool = True) -> dict:
    """Move the damaged vault aside (with its -wal; its -shm is only an index of the -wal and is
    dropped), create a new vault at `path`, carry over the notes and purged list that can still
    be read, and ingest every transcript on disk. keep_damaged=False deletes the damaged file
    instead, for a caller that already copied it. Returns plan() with what was done."""
    done = plan(path)
    notes = _readable_rows(path, f"SELECT {NOTE_COLUMNS} FROM notes") or []
    purged = _readable_rows(path, "SELECT uuid, purged_at FROM purged") or []
    aside = aside_path(path) if keep_damaged else None
    for suffix in ("", "-wal", "-shm"):
        try:
            if aside and suffix != "-shm":
                os.rename(path + suffix, aside + suffix)
            else:
                os.remove(path + suffix)
        except FileNotFoundError:
            pass
    done["moved_to"] = aside
    conn = lcm.vault.db.connect(path)
    try:
        with lcm.vault.db.transaction(conn):
            conn.execute("INSERT OR REPLACE INTO vault_meta VALUES ('rebuild', 'running')")
            if purged:
                conn.executemany("INSERT OR IGNORE INTO purged (uuid, purged_at) VALUES (?, ?)", purged)
                conn.execute(lcm.vault.schema.PURGED_TRIGGER)  # before the ingest: a purged line stays out
            conn.executemany(f"INSERT OR IGNORE INTO notes ({NOTE_COLUMNS}) VALUES (?, ?, ?, ?, ?)", notes)
        sources = ([done["projects_root"]] if os.path.isdir(done["projects_root"]) else []) + done["other_files"]
        result = lcm.capture.bulk.ingest_paths(conn, sources) if sources else {"messages_added": 0, "files": 0,
                                                                             "sessions": 0}
        with lcm.vault.db.transaction(conn):
            conn.execute("DELETE FROM vault_meta WHERE key = 'rebuild'")
    finally:
        conn.close()
    done.update(messages=result["messages_added"], files=result["files"], sessions=result["sessions"])
    return done


def interrupted(conn) -> bool:
    """Whether a rebuild into this vault stopped before its ingest finished."""
    try:
        return conn.execute("SELECT 1 FROM vault_meta WHERE key = 'rebuild'").fetchone() is not None
    except sqlite3.Error:
        return False
