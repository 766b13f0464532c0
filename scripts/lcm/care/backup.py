"""Backups of the vault that nobody has to plan: taken, verified, bounded, scrubbed and restored.

From day 31 the vault is the only copy of a session (Claude Code deletes its transcripts after
`cleanupPeriodDays`, 30 by default), so lcm keeps copies of it without being asked:

- When: the Stop hook starts `lcm_backup.py --auto` detached once LCM_BACKUP_INTERVAL_HOURS
  (24) have passed since the last start (one stat() decides; the hook never waits for it).
  LCM_BACKUP=0 turns that off; `lcm_backup.py` makes one now, `--to DIR` on another disk.
- How: SQLite's online backup API in one step, inside a read transaction of the source. WAL
  readers never block the writer, so hooks go on writing while it runs, and the copy is the
  vault exactly as of one commit. Counts taken in that same transaction are the expectation
  the copy is verified against. Measured (bench/backup.py, 2 shared cores at load ~16): on the
  shared data (20 MB) backup API 0.10 s, VACUUM INTO 0.09 s; at 300k messages (1.86 GB) the
  backup API 30.2 s with its checks (quick_check alone 6.6 s), VACUUM INTO 44.7 s for a file
  0.5% smaller: VACUUM INTO rebuilds every b-tree and index where the backup API copies pages,
  so it is the backup API. By extrapolation a 1M-message vault (~6 GB) takes ~100 s and 6 GB per
  backup, off the hooks' path. An incremental scheme over the immutable blocks would copy less
  per day, but the plain lines, summaries and indexes change too, and a restore would then need
  a chain of files that must all be intact: a whole copy restores from one file.
- Verified: written as `.<name>.tmp-PID` (0600, in a 0700 directory), switched to rollback
  journal mode (one self-contained file, readable on a read-only disk), fsynced, reopened:
  `PRAGMA quick_check` says ok and the messages, summaries and blocks counted in the source's
  snapshot are all there; only then renamed to `<vault name>-<UTC time>.db`.
- Bounded: the newest LCM_BACKUP_KEEP (3) of a directory are kept, fewer while they exceed
  LCM_BACKUP_MAX_MB (0 = no size cap); the newest verified one is never removed. A backup is
  refused when its disk would keep less than FREE_RESERVE free, so it never fills the disk the
  hooks write to. Default bound: 3 copies, about 3x the vault.
- Purges reach every backup: after a purge, each backup (here and every `--to` directory
  used, recorded in `$LCM_HOME/backup-places`) is rewritten without what was purged: copied
  beside itself, purged with the same criterion and the whole purge list, verified and renamed
  over the old one. Rewriting costs a copy, a purge and a check per backup (53 s for the 300k
  vault's backup under the same load); the alternative, backups that keep only what can be
  scrubbed, would leave the thing a backup is for (the stored lines) outside them. A restore
  of that backup took 20.6 s.
- Restore: `restore(backup, vault)` builds the vault beside the old one from the backup,
  drops every uuid of the purge list (a purge after the backup stays purged), verifies it,
  then renames it into place; the file replaced is kept as `<vault>.replaced-<time>`.
"""
from __future__ import annotations

import os
import sqlite3
import time

import lcm.base.config
from lcm.base.errors import LcmError

FREE_RESERVE = 256 << 20  # bytes a backup must leave free on its disk (hooks and imports need room)
COUNTED = ("messages", "summaries", "blocks")  # tables whose row counts a backup must match
PLACES_FILE = "backup-places"  # in $LCM_HOME: the --to directories used, so purges reach them
STARTED_FILE = ".started"  # in the backup directory: its mtime is when the last automatic run began
LOCK_FILE = ".lock"  # in the backup directory: one backup at a time
IOPRIO_SET = {"x86_64": 251, "aarch64": 30}  # Linux's ioprio_set syscall number by machine


class BackupRunning(LcmError):
    """Another backup is being written to the same directory."""


# ---------------------------------------------------------------------------
# Where, and when
# ---------------------------------------------------------------------------

def backup_dir() -> str:
    """LCM_BACKUP_DIR, else $LCM_HOME/backups."""
    return os.path.expanduser(lcm.base.config.get("LCM_BACKUP_DIR") or os.path.join(lcm.base.config.home_str(), "backups"))


def due(now: float | None = None) -> bool:
    """Whether the Stop hook should start an automatic backup now: LCM_BACKUP is on and the last
    start was LCM_BACKUP_INTERVAL_HOURS ago or more (one stat(); no vault access)."""
    if not lcm.base.config.get("LCM_BACKUP"):
        return False
    try:
        last = os.stat(os.path.join(backup_dir(), STARTED_FILE)).st_mtime
    except OSError:
        return True
    hours = lcm.base.config.get("LCM_BACKUP_INTERVAL_HOURS")
    return (time.time() if now is None else now) - last >= hours * 3600


def mark_started() -> None:
    """Record an automatic start (before detaching: two hooks a second apart start one run)."""
    directory = backup_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, STARTED_FILE)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.utime(path)


def _name_pattern(vault_path: str):
    import re  # not at the top: the Stop hook imports this module for due() alone
    stem = re.escape(_stem(vault_path))
    return re.compile(rf"^{stem}-(\d{{8}}T\d{{6}}Z)(?:-(\d+))?\.db$")


def _stem(vault_path: str) -> str:
    name = os.path.basename(vault_path)
    return name[:-3] if name.endswith(".db") else name


def places(vault_path: str | None = None) -> list[str]:
    """Every directory that may hold backups: the backup directory and each --to used."""
    out = [backup_dir()]
    try:
        with open(os.path.join(lcm.base.config.home_str(), PLACES_FILE), encoding="utf-8") as f:
            out += [line.rstrip("\n") for line in f if line.strip()]
    except OSError:
        pass
    return list(dict.fromkeys(os.path.abspath(p) for p in out))


def _remember_place(directory: str) -> None:
    directory = os.path.abspath(directory)
    if directory in places():
        return
    home = lcm.base.config.home_str()
    os.makedirs(home, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(home, PLACES_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (directory + "\n").encode("utf-8", "surrogateescape"))
    finally:
        os.close(fd)


def list_backups(vault_path: str, directories: list[str] | None = None) -> list[dict]:
    """The backups of the vault at `vault_path`, newest first: {path, taken, bytes}."""
    pattern = _name_pattern(vault_path)
    found = []
    for directory in directories if directories is not None else places(vault_path):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            m = pattern.match(name)
            if not m:
                continue
            path = os.path.join(directory, name)
            try:
                size = os.path.getsize(path)
            except OSError:
                continue
            stamp = m.group(1)
            found.append({"path": path, "bytes": size, "key": (stamp, int(m.group(2) or 0)),
                          "taken": f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}Z"})
    found.sort(key=lambda b: b["key"], reverse=True)
    for b in found:
        del b["key"]
    return found


def newest_backup(vault_path: str) -> str | None:
    """The path of the newest backup of the vault at `vault_path` that opens as an lcm vault (each
    was verified in full when written: quick_check and counts), or None."""
    for b in list_backups(vault_path):
        if _opens(b["path"]):
            return b["path"]
    return None


def _opens(path: str) -> bool:
    try:
        conn = sqlite3.connect(_ro_uri(path), uri=True)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return {"sessions", "transcripts", "messages"} <= names
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def _ro_uri(path: str) -> str:
    import lcm.vault.db
    return lcm.vault.db.file_uri(path, "mode=ro&immutable=1")  # backups are never written in place


def purged_uuids(vault_path: str) -> set[str]:
    """Every message uuid ever purged from the vault at `vault_path`: its purge list (which
    survives the vault file), plus its `purged` table when the vault still opens."""
    import lcm.vault.purgelist
    out = set(lcm.vault.purgelist.read(vault_path))
    try:
        conn = sqlite3.connect(_ro_uri(vault_path), uri=True)
        try:
            out.update(r[0] for r in conn.execute("SELECT uuid FROM purged"))
        finally:
            conn.close()
    except sqlite3.Error:
        pass  # no vault, a damaged one, or one from before the table
    return out


# ---------------------------------------------------------------------------
# Taking one
# ---------------------------------------------------------------------------

def fsync_file(path: str) -> None:
    """The file's bytes on the disk before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str) -> None:
    """A rename in `directory` on the disk (best effort: some file systems refuse a directory's
    fsync). Used by every atomic replace here and in lcm.care.recovery."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


SCRATCH_SUFFIXES = ("", "-journal", "-wal", "-shm", "-turn.lock", ".purged")  # a scratch vault's files


def remove_scratch(path: str) -> None:
    """Remove a scratch vault at `path` and every file SQLite or lcm made beside it."""
    for suffix in SCRATCH_SUFFIXES:
        try:
            os.remove(path + suffix)
        except OSError:
            pass


def _counts(conn) -> dict:
    out = {}
    for table in COUNTED:
        try:
            out[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        except sqlite3.OperationalError:  # a vault from before the table
            out[table] = None
    return out


def verify(path: str, expect: dict | None = None) -> dict:
    """Check a backup file: it opens, `PRAGMA quick_check` is ok and (with `expect`) its counts
    are those of the source. Returns its counts; raises LcmError naming what is wrong."""
    try:
        conn = sqlite3.connect(_ro_uri(path), uri=True)
        try:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            counts = _counts(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise LcmError(f"the backup {path} does not open as a vault ({exc})",
                       "take a new one: lcm_backup.py") from None
    if check != "ok":
        raise LcmError(f"the backup {path} failed SQLite's quick_check ({check})", "take a new one: lcm_backup.py")
    if expect is not None and counts != expect:
        raise LcmError(f"the backup {path} holds {counts} rows where the vault held {expect}",
                       "take a new one: lcm_backup.py")
    return counts


def _copy(src, target: str) -> dict:
    """Copy the open vault `src` into a new file `target` (0600) as of one commit; returns the
    counts of that commit. The file is self-contained (rollback journal) and fsynced."""
    os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))  # 0600 before SQLite writes
    src.execute("BEGIN")  # one read transaction: the counts and the copy see the same commit
    try:
        expect = _counts(src)
        dest = sqlite3.connect(target, isolation_level=None)
        try:
            src.backup(dest)  # one step (pages=-1): a write by a hook meanwhile never restarts it
            dest.execute("PRAGMA journal_mode = DELETE")  # one file, readable on a read-only disk
        finally:
            dest.close()
    finally:
        src.execute("COMMIT")
    fsync_file(target)
    return expect


def _space_check(vault_path: str, directory: str) -> None:
    need = os.path.getsize(vault_path)
    try:
        need += os.path.getsize(vault_path + "-wal")
    except OSError:
        pass
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    if free - need < FREE_RESERVE:
        raise LcmError(f"not enough free space in {directory} for a backup ({need >> 20} MB needed, {free >> 20} MB"
                       f" free, {FREE_RESERVE >> 20} MB kept free)",
                       f"free some space there (df -h {directory}), or write it to another disk: lcm_backup.py --to DIR")


class _Lock:
    """One backup run at a time per directory (flock on its .lock); `held` is False when another runs."""

    def __init__(self, directory: str):
        self.fd, self.held = None, True
        try:
            import fcntl
        except ImportError:
            return
        self.fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.held = False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def make_directory(directory: str) -> str:
    directory = os.path.abspath(os.path.expanduser(directory))
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise LcmError(f"cannot make the backup directory {directory}: {exc.strerror}",
                       "pass --to a directory you can write, or set LCM_BACKUP_DIR") from None
    if directory == os.path.abspath(backup_dir()) or not os.listdir(directory):
        os.chmod(directory, 0o700)  # lcm's own directory; another disk's existing one is the user's
    return directory


def yield_cpu() -> None:
    """Run this process at nice 10 and, on Linux, the idle I/O class: an automatic backup takes
    the time the session leaves over (the Stop hooks it runs beside keep theirs)."""
    try:
        os.nice(10)
    except (AttributeError, OSError):
        pass
    number = IOPRIO_SET.get(os.uname().machine) if hasattr(os, "uname") and os.uname().sysname == "Linux" else None
    if number is None:
        return
    try:
        import ctypes
        # ioprio_set(IOPRIO_WHO_PROCESS, this process, IOPRIO_CLASS_IDLE << 13): no stdlib wrapper
        ctypes.CDLL(None, use_errno=True).syscall(number, 1, 0, 3 << 13)
    except (OSError, AttributeError, TypeError):
        pass


def backup(vault_path: str, to: str | None = None) -> dict:
    """Take one verified backup of the vault at `vault_path` into `to` (default backup_dir()),
    then keep that directory within its bound. Returns {path, bytes, seconds, counts, removed}."""
    import lcm.vault.db
    started = time.monotonic()
    directory = make_directory(to or backup_dir())
    if to:
        _remember_place(directory)
    lock = _Lock(directory)
    try:
        if not lock.held:
            raise BackupRunning(f"another backup is being written to {directory}", "wait for it, then run lcm_backup.py again")
        _space_check(vault_path, directory)
        src = lcm.vault.db.connect(vault_path, create=False, readonly=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        # a second backup within the same second sorts after every earlier one (-2, -3, ...)
        taken = [b["path"] for b in list_backups(vault_path, [directory]) if stamp in os.path.basename(b["path"])]
        n = max((int(m.group(2) or 1) for m in (_name_pattern(vault_path).match(os.path.basename(p)) for p in taken)
                 if m), default=0) + 1
        name = f"{_stem(vault_path)}-{stamp}.db" if n == 1 else f"{_stem(vault_path)}-{stamp}-{n}.db"
        final = os.path.join(directory, name)
        tmp = os.path.join(directory, f".{name}.tmp-{os.getpid()}")
        try:
            expect = _copy(src, tmp)
            verify(tmp, expect)
            os.replace(tmp, final)
            fsync_dir(directory)
        except sqlite3.Error as exc:
            raise (lcm.vault.db.storage_error(exc, tmp, "cannot write the backup") or LcmError(
                f"cannot write the backup {tmp}: {exc}", "lcm_doctor.py checks the vault")) from None
        finally:
            src.close()
            remove_scratch(tmp)
        removed = prune(vault_path, directory, keep_path=final)
    finally:
        lock.close()
    return {"path": final, "bytes": os.path.getsize(final), "seconds": round(time.monotonic() - started, 3),
            "counts": expect, "removed": removed}


def prune(vault_path: str, directory: str, keep_path: str | None = None) -> list[str]:
    """Remove the oldest backups of `directory` past LCM_BACKUP_KEEP, then while the rest exceed
    LCM_BACKUP_MAX_MB; never the newest (`keep_path`). Also leftovers of killed runs. Returns what went."""
    keep = lcm.base.config.get("LCM_BACKUP_KEEP")
    cap = lcm.base.config.get("LCM_BACKUP_MAX_MB") << 20
    found = list_backups(vault_path, [directory])
    doomed = found[keep:]
    kept = found[:keep]
    while cap and len(kept) > 1 and sum(b["bytes"] for b in kept) > cap:
        doomed.append(kept.pop())
    removed = []
    for b in doomed:
        if b["path"] == keep_path:
            continue
        try:
            os.remove(b["path"])
            removed.append(b["path"])
        except OSError:
            pass
    stem = "." + _stem(vault_path) + "-"
    for name in os.listdir(directory):
        pid = name.rsplit(".tmp-", 1)[-1] if name.startswith(stem) and ".tmp-" in name else ""
        if pid.isdigit() and not _alive(int(pid)):
            try:
                os.remove(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
            except OSError:
                pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


# ---------------------------------------------------------------------------
# Purges reach the backups; restore
# ---------------------------------------------------------------------------

def _purge_copy(path: str, criterion: dict, uuids: set[str]) -> int:
    """Purge the vault file `path` (a copy being rewritten) by `criterion` ({"match", "regex",
    "hidden"} or {}) and of every uuid in `uuids`; returns how many messages went."""
    import lcm.care.purge
    import lcm.vault.db
    conn = lcm.vault.db.connect(path, create=False)
    removed = 0
    try:
        if criterion.get("match"):
            sel = lcm.care.purge.select(conn, match=criterion["match"], regex=criterion.get("regex", False),
                                        hidden=criterion.get("hidden", False))
            removed += len(sel.message_ids)
            if sel.message_ids or sel.summaries or sel.notes or sel.titles or sel.map_runs or sel.map_items:
                lcm.care.purge.purge(conn, sel)
        by_session: dict[str, list[int]] = {}
        wanted = sorted(uuids)
        for i in range(0, len(wanted), 500):
            chunk = wanted[i:i + 500]
            for mid, sid in conn.execute(f"SELECT id, session_id FROM messages WHERE uuid IN ({','.join('?' * len(chunk))})",
                                         chunk):
                by_session.setdefault(sid, []).append(mid)
        for sid, ids in sorted(by_session.items()):
            total = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
            if total == len(ids):
                sel = lcm.care.purge.select(conn, session=sid)  # the whole session: its checkpoints, digest, threads too
            else:
                sel = lcm.care.purge.Selection("purged messages")
                sel.message_ids, sel.sessions = sorted(ids), {sid}
            lcm.care.purge.purge(conn, sel)
            removed += len(ids)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        conn.close()
    return removed


def _rewrite(path: str, criterion: dict, uuids: set[str]) -> None:
    """Replace the backup at `path` with a copy purged of `criterion` and `uuids`: built beside
    it, verified, renamed over it (the old one stays whole until then)."""
    import shutil
    tmp = f"{path}.scrub-{os.getpid()}"
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600))
        shutil.copyfile(path, tmp)
        _purge_copy(tmp, criterion, uuids)
        verify(tmp)
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(path))
    finally:
        remove_scratch(tmp)


def scrub_backups(vault_path: str, criterion: dict | None = None) -> dict:
    """After a purge of the vault at `vault_path`: rewrite each of its backups without what the
    purge list names and (a --match purge) without every text `criterion` matches, so no backup
    keeps a byte of it. {"scrubbed": paths, "failed": [{path, error}]}: a backup that cannot be
    rewritten (an unplugged disk, a damaged file) is named, never silently kept."""
    import lcm.care.purge
    uuids = purged_uuids(vault_path)
    done: dict = {"scrubbed": [], "failed": []}
    # the backups, and the copies lcm left beside the vault (doctor's, a restore's, a recovery's)
    for path in [b["path"] for b in list_backups(vault_path)] + lcm.care.purge.copies_beside(vault_path):
        try:
            _rewrite(path, criterion or {}, uuids)
            done["scrubbed"].append(path)
        except (LcmError, sqlite3.Error, OSError) as exc:
            error = getattr(exc, "message", None) or str(exc)
            if ".damaged-" in os.path.basename(path):
                error = f"a damaged copy SQLite cannot rewrite: delete it (rm {path})"
            done["failed"].append({"path": path, "error": error})
    for directory in places(vault_path)[1:]:
        if not os.path.isdir(directory):
            done["failed"].append({"path": directory, "error": "not reachable now (another disk, unplugged?)"})
    return done


def purge_everywhere(conn, sel, criterion: dict | None = None) -> dict:
    """lcm.care.purge.purge, then the same purge in every backup (scrub_backups): the one call of
    lcm_purge.py --yes. Returns purge()'s document plus `backups_scrubbed` and `backups_failed`."""
    import lcm.care.purge
    doc = lcm.care.purge.purge(conn, sel)
    done = scrub_backups(lcm.care.purge.vault_path(conn), criterion)
    doc["backups_scrubbed"], doc["backups_failed"] = done["scrubbed"], done["failed"]
    handled = set(done["scrubbed"]) | {f["path"] for f in done["failed"]}
    doc["backups"] = [path for path in doc["backups"] if path not in handled]
    return doc


def restore(backup_path: str, vault_path: str) -> dict:
    """Put the backup at `backup_path` in place as the vault at `vault_path`, atomically: the new
    vault is built beside it (`<vault>.restore-PID`), purged of every uuid on the purge list,
    checked, then renamed into place. At every instant a usable vault file is at `vault_path`
    (the old one until the rename). The old file, if any, is kept as `<vault>.replaced-<time>`.
    Returns {path, replaced, counts, dropped_purged}."""
    import lcm.vault.db
    import lcm.vault.purgelist
    verify(backup_path)
    vault_path = os.path.abspath(vault_path)
    directory = os.path.dirname(vault_path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = f"{vault_path}.restore-{os.getpid()}"
    uuids = purged_uuids(vault_path)
    try:
        src = sqlite3.connect(_ro_uri(backup_path), uri=True, isolation_level=None)
        try:
            _copy(src, tmp)
            backup_purged = {r[0] for r in src.execute("SELECT uuid FROM purged")}
        finally:
            src.close()
        dropped = _purge_copy(tmp, {}, uuids)
        # the list beside the vault holds the backup's purges too, from now on
        lcm.vault.purgelist.append(vault_path, sorted(backup_purged - set(lcm.vault.purgelist.read(vault_path))))
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")  # the vault's own mode (lcm.vault.db._create)
        finally:
            conn.close()
        counts = verify(tmp)
        fsync_file(tmp)
        replaced = None
        if os.path.exists(vault_path):
            replaced = f"{vault_path}.replaced-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            os.link(vault_path, replaced)
        # a -wal beside the old file belongs to it: left there, SQLite would apply it to the new one
        for suffix in ("-wal", "-shm"):
            if os.path.exists(vault_path + suffix):
                if replaced:
                    os.replace(vault_path + suffix, replaced + suffix)
                else:
                    os.remove(vault_path + suffix)
        os.replace(tmp, vault_path)
        fsync_dir(directory)
    except sqlite3.Error as exc:
        raise (lcm.vault.db.storage_error(exc, tmp, "cannot restore the backup") or LcmError(
            f"cannot restore {backup_path}: {exc}", "lcm_doctor.py checks the backup and the vault")) from None
    finally:
        remove_scratch(tmp)
    return {"path": vault_path, "replaced": replaced, "counts": counts, "dropped_purged": dropped}
