"""The purge list: the uuids of every purged message, in a file beside the vault that outlives it.

The vault's own `purged` table (with its trigger) keeps a transcript still on disk from bringing
a purged message back, but it dies with the vault file. `<vault>.purged` (0600) holds the same
uuids, one per line, appended by every purge before it deletes anything (lcm.care.purge), and
fsynced. It holds uuids only, never the purged text: a uuid is a random identifier, and without
the vault it says nothing about what the message held.

A vault that does not know every uuid of its list (one just rebuilt from the transcripts, a
vault restored by hand) learns them the next time a writer opens it (`sync`, from
lcm.vault.db.connect): the cost on every write open is one stat() of a file that usually does not
exist, and one indexed read when it does.
"""
from __future__ import annotations

import os
import sqlite3

import lcm.vault.schema
from lcm.base.config import now_iso

SUFFIX = ".purged"
UUID_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_.:-")  # of a transcript uuid
META_KEY = "purge_list_bytes"  # vault_meta: how many bytes of the list this vault has taken in


def path_for(vault_path: str) -> str:
    """Where the purge list of the vault at `vault_path` lives: beside the file itself (a vault
    reached through a symlink has one list, whichever path names it)."""
    return os.path.realpath(vault_path) + SUFFIX


def read(vault_path: str, offset: int = 0) -> list[str]:
    """The uuids on the list (from byte `offset`), in the order they were purged; [] without a list."""
    try:
        with open(path_for(vault_path), "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return []
    out = []
    for line in data.split(b"\n"):
        text = line.decode("ascii", "replace").strip()
        if 0 < len(text) <= 128 and UUID_CHARS.issuperset(text):  # a stray line is skipped; a cut-short uuid matches nothing
            out.append(text)
    return out


def append(vault_path: str, uuids: list[str]) -> None:
    """Add `uuids` to the list and fsync it: called before a purge deletes anything, so a purge
    that a crash interrupts still holds once the vault is rebuilt. An OSError (disk full)
    propagates: the caller then deletes nothing."""
    if not uuids:
        return
    path = path_for(vault_path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        # a list a crash cut mid-line must not glue the next uuid onto the broken one
        data = "".join(f"{u}\n" for u in uuids).encode("ascii", "replace")
        if os.fstat(fd).st_size and os.pread(fd, 1, os.fstat(fd).st_size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def sync(conn, vault_path: str) -> int:
    """Teach the vault the uuids its list holds and it may not (a vault rebuilt after the old
    one was lost): they go into `purged`, and the insert trigger refuses them from then on.
    Inside no transaction of the caller's; returns how many uuids were read. A vault busy with
    another writer is left for the next open (a hook must not wait)."""
    try:
        size = os.stat(path_for(vault_path)).st_size
    except OSError:
        return 0
    row = conn.execute("SELECT value FROM vault_meta WHERE key = ?", (META_KEY,)).fetchone()
    seen = int(row[0]) if row is not None else 0
    if seen == size:
        return 0
    uuids = read(vault_path, seen if seen < size else 0)  # a list that shrank was replaced: read it all
    try:
        conn.execute("BEGIN IMMEDIATE")  # within the connection's busy_timeout
    except sqlite3.OperationalError:
        return 0
    try:
        conn.execute(lcm.vault.schema.PURGED_TRIGGER)
        now = now_iso()
        conn.executemany("INSERT OR IGNORE INTO purged (uuid, purged_at) VALUES (?, ?)", ((u, now) for u in uuids))
        conn.execute("INSERT OR REPLACE INTO vault_meta (key, value) VALUES (?, ?)", (META_KEY, size))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return len(uuids)
