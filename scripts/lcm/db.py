"""Opening the vault and writing to it: connect(), transactions, and storage errors that name
their real cause (disk full, read-only, permissions, busy, damaged).
"""
from __future__ import annotations

import os
import sqlite3

import lcm.schema
from lcm.config import db_path_str
from lcm.errors import LcmError


def connect(explicit: str | None = None, *, create: bool = True, readonly: bool = False) -> sqlite3.Connection:
    """Open (and if needed create and migrate) the vault.

    create=False refuses a missing vault with a hint instead of making an empty one.
    """
    path = db_path_str(explicit)
    remove_stale_stages("/dev/shm")
    new = not os.path.exists(path)
    if new:
        if not create or readonly:
            raise LcmError(f"no vault at {path}", "run lcm_init.py or lcm_ingest.py --all first, or pass --db")
        try:
            os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
            # create the file 0600 before SQLite opens it with the umask's mode
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError as exc:
            raise (storage_error(exc, path, "cannot create vault") or LcmError(
                f"cannot create vault {path}: {exc.strerror}", "check that its directory can be made, or set LCM_DB")) from None
    global _vault
    _vault = path
    try:
        uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
        # isolation_level=None: we issue BEGIN ourselves, so nothing commits behind our back
        conn = sqlite3.connect(uri, uri=True, timeout=10.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        # wait for a concurrent writer (a hook, a background compaction) instead of failing
        conn.execute("PRAGMA busy_timeout = 10000")
        # summary_sources and friends rely on references being real
        conn.execute("PRAGMA foreign_keys = ON")
        if new:
            # before anything is written: 16 KB pages hold a typical transcript line (3-4 KB)
            # plus its text without an overflow chain; measured -15% bulk ingest time, grep alike
            conn.execute(f"PRAGMA page_size = {lcm.schema.PAGE_SIZE}")
        if not readonly:
            # readers never block the writer; hooks write while Claude greps
            conn.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL is durable across application crashes and much faster
            conn.execute("PRAGMA synchronous = NORMAL")
            lcm.schema.migrate(conn, path)
        elif lcm.schema._schema_version(conn) > lcm.schema.SCHEMA_VERSION:
            lcm.schema.migrate(conn, path)  # raises the "newer schema" error
    except sqlite3.Error as exc:
        raise (storage_error(exc, path, "cannot open vault") or LcmError(
            f"cannot open vault {path}: {exc}", "lcm_doctor.py checks the vault and says what is wrong")) from None
    return conn


STAGE_PREFIX = "lcm-ingest-"  # + pid + "-": a bulk import's stage directory (see lcm.ingest)


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


def storage_error(exc: BaseException, path: str | None = None, doing: str = "") -> LcmError | None:
    """An LcmError that names the real cause of a failed read or write of the vault or lcm's
    files (disk full, read-only, permissions, a busy or damaged vault); None when `exc` is none
    of those. Only real damage points to lcm_doctor.py, and no hint suggests discarding a vault."""
    import errno
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
            self.conn.execute("COMMIT")
        elif self.conn.in_transaction:  # SQLite has already rolled back after some errors (disk full)
            self.conn.execute("ROLLBACK")


def masked_from_message(conn: sqlite3.Connection) -> int:
    """The first messages.id whose content was masked when it was stored: every row from there on
    was written by a version that masks at ingest (or lcm_doctor.py --remask ran). Rows before it
    must be masked whenever they are shown. A vault too old to say: no row is taken as masked."""
    try:
        row = conn.execute("SELECT value FROM vault_meta WHERE key = 'masked_from_message'").fetchone()
    except sqlite3.OperationalError:  # opened read-only before its migration
        return 1 << 62
    return int(row[0]) if row else 1 << 62
