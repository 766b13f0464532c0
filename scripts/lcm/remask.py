"""Masking what a vault already stores: the searchable text of a vault filled before masking
(or before decoded-string masking, or before a new redact.txt pattern). lcm_doctor.py --fix runs it.
"""
from __future__ import annotations

import lcm.config
import lcm.db
import lcm.mask


def remask_content(conn, batch: int = 2000) -> dict:
    """Mask the stored text of a vault filled before masking (or before a new redact.txt
    pattern): messages, summaries and pinned notes (their full-text indexes kept in step),
    checkpoints, stored file explorations and session titles. The original lines in messages.raw are not touched.

    Returns {table: rows changed}. Running it again changes nothing.
    """
    lcm.mask._user = None  # read redact.txt afresh: this often runs because a pattern was just added
    changed = {}
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, column, index in (("messages", "content", "messages_fts"), ("summaries", "content", "summaries_fts"),
                                 ("notes", "content", "notes_fts"), ("checkpoints", "content", None),
                                 ("files", "exploration", None), ("sessions", "title", None)):
        if table not in tables:
            continue  # a vault from before that table (notes)
        index = index if index in tables else None
        count, last = 0, -1 << 63
        while True:
            with lcm.db.transaction(conn):
                rows = conn.execute(f"SELECT rowid, {column} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                                    (last, batch)).fetchall()
                for rowid, old in rows:
                    new = lcm.mask.mask(old)
                    if new is old or new == old:
                        continue
                    if index:  # external-content FTS: the old text out, the new in
                        conn.execute(f"INSERT INTO {index}({index}, rowid, content) VALUES ('delete', ?, ?)",
                                     (rowid, old))
                    if table in ("messages", "summaries"):
                        conn.execute(f"UPDATE {table} SET {column} = ?, token_count = ? WHERE rowid = ?",
                                     (new, lcm.config.estimate_tokens(new), rowid))
                    else:
                        conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (new, rowid))
                    if index:
                        conn.execute(f"INSERT INTO {index}(rowid, content) VALUES (?, ?)", (rowid, new))
                    count += 1
            if len(rows) < batch:
                break
            last = rows[-1][0]
        changed[table] = count
    if "vault_meta" in tables:  # every message's text is masked now: output need not mask it again
        with lcm.db.transaction(conn):
            conn.execute("UPDATE vault_meta SET value = (SELECT coalesce(max(id), 0) + 1 FROM messages)"
                         " WHERE key = 'masked_from_message'")
    return changed
