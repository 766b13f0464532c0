"""Writers take turns: how an import, a hook and packing share the vault's one write lock.

SQLite lets one writer in at a time and is not fair about who comes next. begin_write polls
for the lock within a patience; a waiting hook knocks (a shared flock on `<vault>-turn.lock`),
and a bulk import or a packing run lets knocking hooks in between two of its transactions.
"""
from __future__ import annotations

import os
import time

from lcm.errors import LcmError

WRITE_WAIT_SECONDS = 300.0  # how long an import waits, in turn with other writers, for the vault
WRITE_POLL_SECONDS = 0.005  # ... trying again this often (and letting knocking hooks in first)
HOOK_TURN_SECONDS = 1.0  # longest a bulk import holds back for knocking hooks before each group


class VaultBusy(LcmError):
    """Another writer held the vault longer than this one could wait."""


class write_lock:
    """begin_write ... COMMIT, unless the caller already holds a transaction."""

    def __init__(self, conn, patience: float | None = None):
        self.conn, self.own, self.patience = conn, not conn.in_transaction, patience

    def __enter__(self):
        if self.own:
            begin_write(self.conn, self.patience)

    def __exit__(self, exc_type, exc, tb):
        if self.own and not exc_type:
            self.conn.execute("COMMIT")
        elif self.own and self.conn.in_transaction:  # SQLite may have rolled back already (disk full)
            self.conn.execute("ROLLBACK")


def begin_write(conn, patience: float | None = None, turns: Turns | None = None) -> None:
    """BEGIN IMMEDIATE, waiting in turn with the vault's other writers.

    patience=None: wait up to WRITE_WAIT_SECONDS (a bulk import of another tree may hold the
    vault for minutes), then VaultBusy, an Error with a hint; never a raw "database is locked".
    A number (hooks): wait at most that long, knocking (see Turns) so that bulk imports let
    it in between two of their transactions.
    """
    import sqlite3
    wait = WRITE_WAIT_SECONDS if patience is None else patience
    deadline = time.monotonic() + wait
    previous = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    # poll instead of SQLite's busy handler: its sleeps grow to 100 ms, so a waiting hook would
    # lose every race for the lock to an import that just started waiting
    conn.execute("PRAGMA busy_timeout = 0")
    knock = None
    try:
        while True:
            if turns is not None:
                turns.let_hooks_in()
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
            if time.monotonic() >= deadline:
                break
            if patience is not None and knock is None:
                knock = Turns.knock(conn)
            time.sleep(WRITE_POLL_SECONDS)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {previous}")
        if knock is not None:
            os.close(knock)  # lets go of the shared lock
    if patience is not None:
        raise VaultBusy(f"the vault was busy for {wait:g} s (another writer: a bulk import or a compaction)",
                        "nothing is lost: the next hook stores these lines")
    raise VaultBusy(f"another writer held the vault for over {wait:g} s",
                    "another lcm_ingest.py or a compaction is writing to it; run the import again when it is"
                    " done: what it stored so far is kept, and it goes on from there")


class Turns:
    """Lets a hook in between a bulk import's transactions.

    SQLite's lock is not fair: an import that commits and begins again at once, or another
    import polling beside it, would take the lock before a waiting hook. A hook that waits holds
    a shared flock on `<vault>-turn.lock`; a bulk import, before each transaction, holds back
    while anyone does (up to HOOK_TURN_SECONDS, so a stream of hooks cannot starve it).
    """

    def __init__(self, conn):
        self.fd = None
        try:
            import fcntl
            self.fcntl = fcntl
            self.fd = os.open(_turn_path(conn), os.O_RDWR | os.O_CREAT, 0o600)
        except (ImportError, OSError):
            pass  # no flock (Windows) or an in-memory vault: no turns, hooks just give way

    def knocking(self) -> bool:
        """Whether a hook waits for the vault now."""
        if self.fd is None:
            return False
        try:
            self.fcntl.flock(self.fd, self.fcntl.LOCK_EX | self.fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        self.fcntl.flock(self.fd, self.fcntl.LOCK_UN)
        return False

    def let_hooks_in(self) -> None:
        if self.fd is None:
            return
        deadline = time.monotonic() + HOOK_TURN_SECONDS
        while True:
            try:
                self.fcntl.flock(self.fd, self.fcntl.LOCK_EX | self.fcntl.LOCK_NB)
                self.fcntl.flock(self.fd, self.fcntl.LOCK_UN)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.005)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    @staticmethod
    def knock(conn) -> int | None:
        """A shared lock on the turn file (an fd to close), or None where there is none."""
        try:
            import fcntl
            fd = os.open(_turn_path(conn), os.O_RDWR | os.O_CREAT, 0o600)
        except (ImportError, OSError):
            return None
        fcntl.flock(fd, fcntl.LOCK_SH)  # an import holds it exclusively only for an instant
        return fd


def _turn_path(conn) -> str:
    path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    if not path:
        raise OSError("in-memory vault")
    return path + "-turn.lock"
