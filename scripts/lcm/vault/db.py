"""Opening the vault and writing to it: the guard every vault is opened through (connect()),
transactions, and storage errors that name their real cause (disk full, read-only, permissions,
busy, damaged).
"""
from __future__ import annotations

import os
import sqlite3
import time

from lcm.base.config import db_path_str
from lcm.base.errors import LcmError
import lcm.vault.purgelist
import lcm.vault.schema
import lcm.vault.squeeze
import lcm.vault.store

# ---------------------------------------------------------------------------
# Opening: one guard for every vault
# ---------------------------------------------------------------------------

VAULT_TABLES = {"sessions", "transcripts", "messages"}  # made by migration 1: together, they say "lcm vault"
# text of lcm's own schema, found in the first pages of a vault whose header was broken
VAULT_MARKS = (b"transcript_path TEXT", b"head_hash TEXT")
NOT_A_VAULT_HINT = ("pass --db the path of an lcm vault (by default $LCM_HOME/lcm.db); lcm makes a new vault"
                    " itself at a path where no file exists yet")
_older: tuple[str, int] | None = None  # an older vault opened read-only: (path, its schema version)


def _own_place(path: str) -> bool:
    """Whether `path` is where lcm keeps its vault when not told otherwise ($LCM_DB or
    $LCM_HOME/lcm.db): a file there is lcm's own, even a damaged or empty one."""
    try:
        return os.path.samefile(path, db_path_str())
    except OSError:
        return False


def _lcm_marks(path: str) -> bool:
    """Whether lcm's schema text is in the file's first pages (read only once SQLite refused it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 18)
    except OSError:
        return False
    return all(mark in head for mark in VAULT_MARKS)


def _damaged(path: str, what: str) -> LcmError:
    error = LcmError(f"{path} is damaged ({what})",
                     "run lcm_doctor.py: it checks the vault, and with --fix backs it up before repairing anything")
    error.cause = "corrupt"
    return error


def check_vault_file(path: str, write: bool) -> None:
    """Refuse what is not a vault file by its type, before SQLite opens it: a FIFO would hang
    the open, a device or directory is no database, and SQLite would make a vault of an empty
    file. An empty file where lcm keeps its vault is what a creation killed before SQLite's
    first write leaves (lcm older than _create): a writer takes it. Only stat(): opening and
    closing the file here would drop the POSIX locks another connection of this process holds."""
    import stat
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise LcmError(f"{path} is a directory, not a vault",
                       f"pass --db the vault file itself, e.g. {os.path.join(path, 'lcm.db')}")
    if not stat.S_ISREG(st.st_mode):
        what = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device")
        raise LcmError(f"{path} is {what}, not an lcm vault", NOT_A_VAULT_HINT)
    if st.st_size == 0 and not (write and _own_place(path)):
        raise LcmError(f"{path} is an empty file, not an lcm vault",
                       "lcm_init.py or lcm_ingest.py --all makes the vault there" if _own_place(path)
                       else NOT_A_VAULT_HINT)


def check_tables(conn: sqlite3.Connection, path: str, fresh: bool = False) -> None:
    """Refuse an SQLite database that is not an lcm vault, before anything is written to it.
    fresh: the caller may make a vault of a database without tables (one it just created)."""
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if VAULT_TABLES <= names or (fresh and not names):
        return
    if not names:
        raise LcmError(f"{path} is an empty SQLite database, not an lcm vault", NOT_A_VAULT_HINT)
    shown = ", ".join(sorted(names)[:4]) + (", ..." if len(names) > 4 else "")
    raise LcmError(f"{path} is another application's SQLite database (tables {shown}), not an lcm vault",
                   NOT_A_VAULT_HINT + "; lcm never writes into another application's database")


class Connection(sqlite3.Connection):
    """A vault connection: sqlite3's, which a weak reference can point at (lcm.vault.store's line
    reader, which the connection itself holds as an SQL function, must not keep it alive: a
    connection never freed is never closed, and SQLite then skips its checkpoint at close,
    leaving the WAL behind for the next process to read in full)."""


def file_uri(path: str, query: str = "") -> str:
    """A file: URI for `path` (with `query`, e.g. "mode=ro"): ? and # in a file name would
    otherwise start SQLite's parameters and name another file, and %XX would be decoded."""
    quoted = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}" + (f"?{query}" if query else "")


def _uri(path: str, readonly: bool) -> str:
    if readonly and _frozen(path):
        # a WAL vault needs its -shm (made by the first opener) to be read; where nobody can
        # write, nobody can change the file either, and immutable=1 reads it without one
        return file_uri(path, "mode=ro&immutable=1")
    return file_uri(path, "mode=ro" if readonly else "")


def _check_wal_readable(path: str) -> None:
    """Refuse, naming the way out, a vault whose -wal holds changes on a disk where SQLite cannot
    make the -shm it needs to read them (a read-only snapshot taken while lcm was writing)."""
    where = os.path.dirname(path) or "."
    if os.access(where, os.W_OK) or os.path.exists(path + "-shm"):
        return
    try:
        if os.path.getsize(path + "-wal") == 0:
            return
    except OSError:
        return
    raise LcmError(f"{path}-wal holds changes not yet in {path}, and SQLite needs to write a -shm file beside"
                   f" them to read them, which {where} does not allow (read-only)",
                   f"copy both files to a writable directory (cp {path} {path}-wal /tmp/) and pass --db"
                   " the copy; the vault is not damaged")


def _frozen(path: str) -> bool:
    """Whether the vault sits where no one can write (a read-only mount, a snapshot, a directory
    without write access) and holds everything in its main file (no -wal with frames): then
    nothing can change it while it is read, and immutable=1 is exact. A -wal with frames but
    no -shm cannot be read read-only at all (SQLite needs the index of the WAL); storage_error
    says so and how to copy the pair elsewhere."""
    where = os.path.dirname(path) or "."
    if os.access(where, os.W_OK):
        return False
    try:
        return os.path.getsize(path + "-wal") == 0
    except OSError:
        return True  # no -wal: the file is whole


def _create(path: str) -> None:
    """Make a new vault at `path` whole or not at all: built beside it under a temporary name,
    then linked into place, so a process killed mid-way never leaves an empty or half-made file
    that the guard would have to refuse. Another process that made it first wins."""
    tmp = f"{path}.new-{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        # the file is 0600 before SQLite opens it with the umask's mode
        os.close(os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600))
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            # before anything is written: 16 KB pages hold a typical transcript line (3-4 KB)
            # plus its text without an overflow chain; measured -15% bulk ingest time, grep alike
            conn.execute(f"PRAGMA page_size = {lcm.vault.schema.PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode = WAL")  # stored in the file: the vault is born in WAL mode
            lcm.vault.schema.migrate(conn, path)
            # the WAL into the file, checked: close() would checkpoint too, but silently, and a
            # full disk would then leave a cut-off file to link into place
            busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy or log != done or conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.OperationalError("database or disk is full")
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links
            if not os.path.exists(path):
                os.replace(tmp, path)
    except OSError as exc:
        raise (storage_error(exc, path, "cannot create vault") or LcmError(
            f"cannot create vault {path}: {exc.strerror}", "check that its directory can be made, or set LCM_DB")) from None
    except sqlite3.Error as exc:
        raise (storage_error(exc, path, "cannot create vault") or LcmError(
            f"cannot create vault {path}: {exc}", "check the disk and its directory, or set LCM_DB")) from None
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.remove(tmp + suffix)
            except OSError:
                pass


def connect(explicit: str | None = None, *, create: bool = True, readonly: bool = False,
            patience: float | None = None) -> sqlite3.Connection:
    """Open the vault through the guard: what is not an lcm vault is refused (check_vault_file,
    check_tables) before SQLite writes a byte. readonly: a command that only reads opens it with
    mode=ro and never creates, migrates or changes a file (an older vault is read as it is; a
    query that needs a newer table becomes an error naming the upgrade). Else it is created if
    missing (unless create=False) and migrated. patience: seconds to wait for another writer
    (default 10; a hook gives way sooner, also to another process's migration: a busy error)."""
    global _vault, _older
    path = db_path_str(explicit)
    remove_stale_stages("/dev/shm")
    if not os.path.exists(path):
        if not create or readonly:
            raise LcmError(f"no vault at {path}", "run lcm_init.py or lcm_ingest.py --all first, or pass --db")
        _create(path)
    check_vault_file(path, write=not readonly)
    if readonly:
        _check_wal_readable(path)
    _vault = path
    try:
        # isolation_level=None: we issue BEGIN ourselves, so nothing commits behind our back
        conn = sqlite3.connect(_uri(path, readonly), uri=True, timeout=10.0, isolation_level=None,
                               factory=Connection)
        conn.row_factory = sqlite3.Row
        lcm.vault.store.install(conn, lcm.vault.schema.SCHEMA_VERSION)  # lcm_line(): original lines, packed or not
        lcm.vault.squeeze.install(conn)  # lcm_text(): searchable text, compressed or not
        # wait for a concurrent writer (a hook, a background compaction) instead of failing
        conn.execute(f"PRAGMA busy_timeout = {10000 if patience is None else int(patience * 1000)}")
        # summary_sources and friends rely on references being real
        conn.execute("PRAGMA foreign_keys = ON")
        check_tables(conn, path, fresh=not readonly and _own_place(path))
        version = lcm.vault.schema._schema_version(conn)
        if not readonly:
            # readers never block the writer; hooks write while Claude greps
            conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL is durable across application crashes and much faster
            conn.execute("PRAGMA synchronous = NORMAL")
            lcm.vault.schema.migrate(conn, path)
            lcm.vault.purgelist.sync(conn, path)  # a rebuilt vault learns what was purged before
        elif version > lcm.vault.schema.SCHEMA_VERSION:
            lcm.vault.schema.migrate(conn, path)  # raises the "newer schema" error
        elif version < lcm.vault.schema.SCHEMA_VERSION:
            _older = (path, version)
            lcm.vault.store.before_blocks(conn)  # read-only and not migrated to blocks yet: lines are all plain
    except sqlite3.Error as exc:
        error = storage_error(exc, path, "cannot open vault")
        if error is not None and error.cause == "corrupt":
            if not (_own_place(path) or _lcm_marks(path)):
                raise LcmError(f"{path} is not an lcm vault (SQLite cannot read it: {exc})", NOT_A_VAULT_HINT) from None
            raise _damaged(path, str(exc)) from None
        raise (error or LcmError(
            f"cannot open vault {path}: {exc}", "lcm_doctor.py checks the vault and says what is wrong")) from None
    return conn


def older_vault(exc: sqlite3.Error) -> tuple[str, int] | None:
    """(path, schema version) when `exc` is a query that failed on an older vault opened
    read-only (a table or column added since): lcm.cli names the writing command that upgrades it."""
    if _older is None or not str(exc).startswith(("no such table", "no such column")):
        return None
    return _older


STAGE_PREFIX = "lcm-ingest-"  # + pid + "-": a bulk import's stage directory (see lcm.capture.ingest)


def stale_stages(parent: str) -> list[str]:
    """The stage directories in `parent` of imports whose process is gone (killed mid-way)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith(STAGE_PREFIX)]
    except OSError:
        return []  # no such directory (macOS, Windows)
    stale = []
    for name in names:
        pid = name[len(STAGE_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            stale.append(os.path.join(parent, name))
        except OSError:
            pass  # alive, another user's
    return stale


def remove_stale_stages(parent: str) -> None:
    """Delete the stage directories that imports killed mid-way left in `parent`: in /dev/shm
    they hold memory until the next reboot. connect() looks there each time (one listdir)."""
    for path in stale_stages(parent):
        import shutil
        shutil.rmtree(path, ignore_errors=True)


_vault: str | None = None  # the vault connect() opened last: run() names it in storage errors

# SQLite's primary result codes (sqlite3.h) that have a cause a user can act on
_SQLITE_CAUSES = {3: "permission", 5: "busy", 6: "busy", 8: "readonly", 10: "io", 11: "corrupt", 13: "full",
                  14: "cantopen", 23: "permission", 26: "corrupt"}
_SQLITE_TEXTS = (("disk is full", "full"), ("readonly", "readonly"), ("unable to open", "cantopen"),
                 ("not a database", "corrupt"), ("malformed", "corrupt"), ("disk i/o", "io"),
                 ("database is locked", "busy"))
_ERRNO_CAUSES = {"ENOSPC": "full", "EDQUOT": "full", "EFBIG": "full", "EROFS": "readonly", "EACCES": "permission",
                 "EPERM": "permission"}


def _path_cause(path: str, where: str) -> str | None:
    """Why the vault at `path` cannot be opened or written, looked up on disk (SQLite often just
    says "unable to open database file")."""
    if not os.path.isdir(where):
        return "nodir"
    try:
        if os.statvfs(where).f_flag & os.ST_RDONLY:
            return "readonly"
    except (OSError, AttributeError):
        pass
    for name in (path, path + "-wal", path + "-shm", where):
        if os.path.exists(name) and not os.access(name, os.W_OK):
            return "permission"
    return None


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused for a lock held elsewhere (SQLITE_BUSY, 5). Python 3.11+ gives the
    code; 3.9 and 3.10 only the message, which for this code is always "database is locked"."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF == 5 if code is not None else "database is locked" in str(exc)


def storage_error(exc: BaseException, path: str | None = None, doing: str = "") -> LcmError | None:
    """An LcmError that names the real cause of a failed read or write of the vault or lcm's
    files (disk full, read-only, permissions, a busy or damaged vault); None when `exc` is none
    of those. Only real damage points to lcm_doctor.py, and no hint suggests discarding a vault."""
    import errno
    block = lcm.vault.store.function_error(exc)  # a damaged block, met by lcm_line() in a query
    if block is not None:
        block.cause = "block"
        return block
    cause = None
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
        cause = _SQLITE_CAUSES.get(code & 0xFF) if code is not None else None
        text = str(exc).lower()
        cause = cause or next((c for t, c in _SQLITE_TEXTS if t in text), None)
    elif isinstance(exc, OSError) and exc.errno is not None:
        cause = _ERRNO_CAUSES.get(errno.errorcode.get(exc.errno, ""))
        path = path or (exc.filename if isinstance(exc.filename, str) else None)
    if cause is None:
        return None
    path = path or _vault or db_path_str()
    where = os.path.dirname(path) or "."
    vault = path.startswith((_vault or db_path_str(), db_path_str()))  # the vault, its -wal or -shm
    if cause in ("cantopen", "readonly", "permission"):
        found = _path_cause(path, where)
        if found and (cause == "cantopen" or found != "nodir"):
            cause = found
    head = f"{doing} {path}: " if doing else ""
    what, hint = {
        "full": (f"the disk holding {where} is full (or a file size limit was reached)",
                 f"free some space there (df -h {where}) and run the command again"
                 + ("; the vault is not damaged" if vault else "")),
        "readonly": (f"{path} cannot be written: the file, its directory or its filesystem is read-only",
                     f"make the vault, its -wal and -shm files and {where} writable by you (ls -l {where}), or "
                     "remount the filesystem read-write; the vault is not damaged" if vault else
                     f"make {where} writable by you (ls -ld {where}), or write somewhere else"),
        "permission": (f"permission denied on {path}",
                       f"check the owner and mode of the vault, its -wal and -shm files and {where} (ls -l {where}); "
                       "lcm makes them for the user who runs it, 0600 and 0700" if vault else
                       f"check the owner and mode of {path} and {where} (ls -ld {where})"),
        "nodir": (f"the directory {where} does not exist", "create it, or point --db / LCM_DB at the vault"),
        "cantopen": (f"{path} cannot be opened",
                     f"check that {where} exists and that you may read and write it and the vault (ls -ld {where} {path})"),
        "busy": (f"{path} is busy: another lcm process kept it locked too long",
                 "wait for the import or compaction that is running to finish, then run the command again"),
        "io": (f"disk I/O error on {path}",
               f"check the free space (df -h {where}) and the system log; then lcm_doctor.py checks the vault"),
        "corrupt": (f"{path} is damaged",
                    "run lcm_doctor.py: it checks the vault, and with --fix backs it up before repairing anything"),
    }[cause]
    error = LcmError(f"{head}{what} ({exc})" if cause in ("corrupt", "io") else f"{head}{what}", hint)
    error.cause = cause  # lcm_doctor tells a damaged vault from one it may not write
    return error


class transaction:
    """`with transaction(conn):` = BEGIN IMMEDIATE ... COMMIT, ROLLBACK on error."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if not exc_type:
            commit(self.conn)
        elif self.conn.in_transaction:  # SQLite has already rolled back after some errors (disk full)
            self.conn.execute("ROLLBACK")


ROOMY_BYTES = 64 << 20  # free space past twice a commit's growth: no reservation needed


def commit(conn: sqlite3.Connection) -> None:
    """COMMIT, never leaving committed pages that only the WAL can hold.

    A commit writes its pages to the WAL; the checkpoint then copies them into the vault file,
    which grows. On a nearly full disk the commit fits and the checkpoint does not: the import
    said it succeeded while most of the vault sat in the -wal, a file people delete to free
    space. So when free space is short, the room the vault file will need is reserved first (a
    `<vault>-reserve-<pid>` file of that size, fallocated): no room, and the transaction is rolled
    back with a disk-full error; room, and the reserve is released after COMMIT for the
    checkpoint, which then runs at once (PASSIVE: it never waits for a reader). Cost when the
    disk has room: three PRAGMAs, one stat and one statvfs."""
    reserve = None
    try:
        reserve = _reserve_room(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        if reserve is not None:
            try:
                os.remove(reserve)
            except OSError:
                pass
    if reserve is not None:
        # now, before a later write's WAL frames take the room just released
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _remove_dead_reserves(path: str) -> None:
    directory, name = os.path.split(path)
    prefix = name + "-reserve-"
    try:
        names = [n for n in os.listdir(directory or ".") if n.startswith(prefix) and n[len(prefix):].isdigit()]
    except OSError:
        return
    for stale in names:
        try:
            os.kill(int(stale[len(prefix):]), 0)
        except ProcessLookupError:
            try:
                os.remove(os.path.join(directory, stale))
            except OSError:
                pass
        except OSError:
            pass  # alive, another user's


def _reserve_room(conn: sqlite3.Connection) -> str | None:
    path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    if not path or not hasattr(os, "posix_fallocate"):
        return None
    grow = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    grow -= os.path.getsize(path)
    if grow <= 0:
        return None
    st = os.statvfs(os.path.dirname(path) or ".")
    if st.f_bavail * st.f_frsize > 2 * grow + ROOMY_BYTES:
        return None
    _remove_dead_reserves(path)  # a process killed between its reserve and its COMMIT left one
    reserve = f"{path}-reserve-{os.getpid()}"
    fd = os.open(reserve, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)  # another file: the vault's locks stay
    try:
        os.posix_fallocate(fd, 0, grow)
    except OSError:
        os.close(fd)
        os.remove(reserve)
        raise
    os.close(fd)
    return reserve


def masked_from(conn: sqlite3.Connection) -> dict[str, int]:
    """{"message": the first messages.id, "summary": the first summaries.rowid} whose text was
    masked when written under the current rules: every row from there on was written by a
    version that masks as it writes (or lcm_doctor.py --remask ran). Rows before it must be
    masked whenever they are shown. A vault too old to say (1 << 62): no row is taken as masked."""
    unknown = {"message": 1 << 62, "summary": 1 << 62}
    if conn.execute("PRAGMA user_version").fetchone()[0] < lcm.vault.schema.MASK_RULES_VERSION:
        return unknown  # opened read-only before the migration that marks text stored under older rules
    try:
        rows = conn.execute("SELECT key, value FROM vault_meta WHERE key IN ('masked_from_message',"
                            " 'masked_from_summary')").fetchall()
    except sqlite3.OperationalError:  # opened read-only before its migration
        return unknown
    return {**unknown, **{key[len("masked_from_"):]: int(value) for key, value in rows}}


# Writers take turns: how an import, a hook and packing share the vault's one write lock.

WRITE_WAIT_SECONDS = 300.0  # how long an import waits, in turn with other writers, for the vault
WRITE_POLL_SECONDS = 0.005  # ... trying again this often (and letting knocking hooks in first)
HOOK_TURN_SECONDS = 1.0  # longest a bulk import holds back for knocking hooks before each group


class VaultBusy(LcmError):
    """Another writer held the vault longer than this one could wait."""


class write_lock:
    """begin_write ... COMMIT (ROLLBACK on an exception), unless the caller already holds a
    transaction. patience, turns: as begin_write's."""

    def __init__(self, conn, patience: float | None = None, turns: Turns | None = None):
        self.conn, self.own, self.patience, self.turns = conn, not conn.in_transaction, patience, turns

    def __enter__(self):
        if self.own:
            begin_write(self.conn, self.patience, self.turns)

    def __exit__(self, exc_type, exc, tb):
        if self.own and not exc_type:
            commit(self.conn)
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
                if not _busy(exc):
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
