"""The way back from a damaged vault: a new vault is built beside it from the newest backup
and the transcripts still on disk, and put in place in one rename; the damaged file is kept.

Atomic under SIGKILL at any point: the new vault is built under `<vault>.new-<pid>` and only a
complete one is renamed over the vault path; before that, the damaged file gets a second name
(`<vault>.damaged-<time>`, a hard link). So at every instant the vault path holds either the
damaged vault (which the hooks refuse and doctor recovers again) or the complete new one, never
nothing (the next hook would make an empty vault there). leftovers() names what a killed run
leaves (`.new-<pid>` of a dead process), which lcm_doctor.py --fix removes.

What it brings back: the newest backup (lcm.care.backup, when there is one: summaries, notes and
the messages of transcripts deleted since), then every message of the transcripts on disk. A
purged message never comes back: the purge list kept beside the vault (lcm.care.backup's
purged_uuids) and the one the damaged file still gives are loaded before anything is read, and
what a backup taken before the purge holds is purged again. What lived only in the vault and no
backup holds is lost, and plan() says what.
"""
from __future__ import annotations

import glob
import os
import sqlite3
import time

import lcm.care.backup
import lcm.base.config
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.vault.schema
import lcm.vault.store
import lcm.care.purge
from lcm.base.errors import LcmError

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


def newest_backup(path: str) -> str | None:
    """The newest verified backup of the vault at `path` (lcm.care.backup), or None: no backup
    kept, or none that can be read."""
    try:
        return lcm.care.backup.newest_backup(path)
    except (LcmError, OSError, sqlite3.Error):
        return None


def purged_uuids(path: str) -> set[str]:
    """The uuids purged from the vault at `path`, from the purge list kept beside it (which
    outlives the vault file), or an empty set without one."""
    try:
        return set(lcm.care.backup.purged_uuids(path))
    except (LcmError, OSError, sqlite3.Error):
        return set()


def lines_from_backup(path: str, uuids: set) -> dict:
    """{uuid: (original line, "the backup ...")} for the uuids the newest backup holds readable."""
    backup = newest_backup(path)
    if backup is None or not uuids:
        return {}
    try:
        conn = sqlite3.connect(lcm.vault.db.file_uri(backup, "mode=ro&immutable=1"), uri=True)
    except sqlite3.Error:
        return {}
    lcm.vault.store.install(conn, lcm.vault.schema.SCHEMA_VERSION)
    lcm.vault.store.before_blocks(conn)
    found = {}
    try:
        for uuid in sorted(uuids):
            try:
                row = conn.execute(f"SELECT {lcm.vault.store.LINE} FROM messages WHERE uuid = ?", (uuid,)).fetchone()
            except (sqlite3.Error, LcmError):
                continue  # damaged in the backup too
            if row is not None:
                found[uuid] = (lcm.vault.store.as_bytes(row[0]), f"the backup {backup}")
    finally:
        conn.close()
    return found


def _transcripts_on_disk(root: str) -> int:
    return len(glob.glob(os.path.join(glob.escape(root), "**", "*.jsonl"), recursive=True)) if os.path.isdir(root) else 0


def plan(path: str) -> dict:
    """What a recovery of the damaged vault at `path` would read and what it would lose."""
    root = projects_root()
    recorded = _readable_rows(path, "SELECT path FROM transcripts")
    notes = _readable_rows(path, f"SELECT {NOTE_COLUMNS} FROM notes")
    purged = _readable_rows(path, "SELECT uuid, purged_at FROM purged")
    paths = [r[0] for r in recorded or () if isinstance(r[0], str)]
    gone = [p for p in paths if not os.path.isfile(p)]
    inside = root.rstrip(os.sep) + os.sep
    # transcripts once imported from elsewhere (lcm_ingest.py PATH): read again file by file
    elsewhere = sorted(p for p in paths if os.path.isfile(p) and not p.startswith(inside))
    backup = newest_backup(path)
    on_disk = _transcripts_on_disk(root) + len(elsewhere)
    lost = []
    if backup is None:
        if recorded is None:
            lost.append("messages of transcripts deleted since they were stored (the damaged file does not say which)")
        elif gone:
            lost.append(f"messages of {len(gone)} transcripts deleted since they were stored")
        lost.append("summaries (lcm_compact.py writes new ones from the messages)")
        if notes is None:
            lost.append("notes pinned with lcm_remember.py (unreadable in the damaged file)")
        lost.append("checkpoints kept in the vault (the .lcm-checkpoint.md files stay where they were written)")
    else:
        lost.append(f"what changed in the vault after the backup {backup} was taken, except the messages of"
                    " transcripts still on disk (read again) and purges (applied again)")
    kept_list = purged_uuids(path)
    if purged is None and not kept_list:
        lost.append("the list of purged messages: a message purged with lcm_purge.py comes back if its transcript"
                    " still holds it (purge it again)")
    return {"damaged": path, "projects_root": root, "other_files": elsewhere, "backup": backup,
            "transcripts_on_disk": on_disk, "source": "backup" if backup else "transcripts" if on_disk else None,
            "transcripts_recorded": None if recorded is None else len(paths), "transcripts_gone": len(gone),
            "notes_kept": len(notes or ()), "purged_kept": len({r[0] for r in purged or ()} | kept_list), "lost": lost}


def aside_path(path: str) -> str:
    return f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"


def _kept_aside(path: str) -> str | None:
    """An earlier run's second name for the damaged file now at `path` (a killed recovery)."""
    for earlier in sorted(glob.glob(glob.escape(path) + ".damaged-*")):
        if earlier.endswith(("-wal", "-shm")):
            continue
        try:
            if os.path.samefile(earlier, path):
                return earlier
        except OSError:
            continue
    return None


def _second_name(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # a filesystem without hard links: a copy, made whole before it is named
        import shutil
        shutil.copyfile(src, dst + ".part")
        os.chmod(dst + ".part", 0o600)
        os.replace(dst + ".part", dst)


def _swap(path: str, new: str, keep_damaged: bool) -> str | None:
    """Put the complete vault `new` at `path` in one rename; the damaged file first gets a
    second name (with its -wal), so a kill at any point loses neither. Returns that name."""
    aside = None
    if keep_damaged and os.path.exists(path):
        aside = _kept_aside(path) or aside_path(path)
        if not os.path.exists(aside):
            _second_name(path, aside)
        if os.path.exists(path + "-wal") and not os.path.exists(aside + "-wal"):
            _second_name(path + "-wal", aside + "-wal")
    for suffix in ("-wal", "-shm"):  # the damaged file's: applied to the new vault they would wreck it
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass
    os.replace(new, path)
    lcm.care.backup.fsync_dir(os.path.dirname(path))
    return aside


def _remove(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal", "-turn.lock", "-pack.lock"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass


def _from_backup(backup: str, new: str) -> None:
    """A consistent copy of the backup at `new` (SQLite's backup API), 0600."""
    os.close(os.open(new, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
    src = sqlite3.connect(lcm.vault.db.file_uri(backup, "mode=ro"), uri=True)
    dst = sqlite3.connect(new)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _purge_again(conn, uuids: set) -> int:
    """Purge from the new vault the messages a backup taken before their purge still holds."""
    ids = []
    for chunk in [sorted(uuids)[i:i + 500] for i in range(0, len(uuids), 500)]:
        ids += [r[0] for r in conn.execute(f"SELECT id FROM messages WHERE uuid IN ({','.join('?' * len(chunk))})",
                                           chunk)]
    if not ids:
        return 0
    sel = lcm.care.purge.Selection("messages purged after the backup was taken")
    sel.message_ids = sorted(ids)
    for chunk in [ids[i:i + 500] for i in range(0, len(ids), 500)]:
        sel.sessions.update(r[0] for r in conn.execute(
            f"SELECT DISTINCT session_id FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    lcm.care.purge.purge(conn, sel)
    return len(ids)


def rebuild(path: str, keep_damaged: bool = True) -> dict:
    """Build a new vault beside the damaged one at `path` (from the newest backup, when there is
    one, then every transcript on disk, purges applied), and put it in place atomically (see
    the module docstring). keep_damaged=False drops the damaged file instead of keeping it under
    a second name, for a caller that already copied it. Returns plan() with what was done; with
    nothing to build from (no backup, no transcript) it changes nothing and says so."""
    done = plan(path)
    done["moved_to"] = None
    if done["source"] is None:
        done["not_rebuilt"] = (f"nothing to rebuild it from: no backup, and no transcript under"
                               f" {done['projects_root']}; the damaged vault stays where it is")
        return done
    notes = _readable_rows(path, f"SELECT {NOTE_COLUMNS} FROM notes") or []
    purged = _readable_rows(path, "SELECT uuid, purged_at FROM purged") or []
    now = lcm.base.config.now_iso()
    forgotten = {r[0] for r in purged} | purged_uuids(path)
    new = f"{path}.new-{os.getpid()}"
    _remove(new)
    try:
        if done["backup"]:
            _from_backup(done["backup"], new)
        conn = lcm.vault.db.connect(new)  # made (or an older backup upgraded) here
        try:
            with lcm.vault.db.transaction(conn):
                conn.execute(lcm.vault.schema.PURGED_TRIGGER)  # before anything is read: a purged line stays out
                conn.executemany("INSERT OR IGNORE INTO purged (uuid, purged_at) VALUES (?, ?)",
                                 [tuple(r) for r in purged] + [(u, now) for u in sorted(forgotten)])
                conn.executemany(f"INSERT OR IGNORE INTO notes ({NOTE_COLUMNS}) VALUES (?, ?, ?, ?, ?)", notes)
            done["purged_again"] = _purge_again(conn, forgotten) if done["backup"] else 0
            before = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
            sources = ([done["projects_root"]] if os.path.isdir(done["projects_root"]) else []) + done["other_files"]
            result = lcm.capture.bulk.ingest_paths(conn, sources) if sources else {"messages_added": 0, "files": 0}
            done.update(from_backup=before, messages=conn.execute("SELECT count(*) FROM messages").fetchone()[0],
                        files=result["files"], sessions=conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise LcmError(f"the vault rebuilt at {new} does not pass SQLite's quick_check",
                               "check the disk (it may be failing), then run lcm_doctor.py --fix again")
        finally:
            conn.close()  # the last connection: SQLite checkpoints and removes new's -wal
        done["moved_to"] = _swap(path, new, keep_damaged)
        _remove(new)  # its lock files (the vault itself is in place now)
    except BaseException:
        _remove(new)  # an error (a kill leaves it to leftovers())
        raise
    return done


def leftovers(path: str) -> dict:
    """Files beside the vault that a killed recovery or creation left (`<vault>.new-<pid>...` of
    a process that is gone: removed by lcm_doctor.py --fix), and the damaged files recoveries
    kept aside (named: they may hold what no recovery brought back; delete them yourself)."""
    stale, running = [], []
    for name in sorted(glob.glob(glob.escape(path) + ".new-*")):
        pid = name[len(path) + len(".new-"):].split(".", 1)[0].split("-", 1)[0]
        alive = False
        if pid.isdigit():
            try:
                os.kill(int(pid), 0)
                alive = True
            except ProcessLookupError:
                pass
            except OSError:
                alive = True  # another user's process
        (running if alive else stale).append(name)
    damaged = [p for p in sorted(glob.glob(glob.escape(path) + ".damaged-*")) if not p.endswith(("-wal", "-shm"))]
    return {"stale": stale, "in_use": running, "damaged_copies": damaged}


def remove_leftovers(found: dict) -> list[str]:
    removed = []
    for name in found["stale"]:
        try:
            os.remove(name)
            removed.append(name)
        except OSError:
            pass
    return removed


def interrupted(conn) -> bool:
    """Whether a rebuild into this vault (by an lcm before atomic recovery) stopped before its
    ingest finished."""
    try:
        return conn.execute("SELECT 1 FROM vault_meta WHERE key = 'rebuild'").fetchone() is not None
    except sqlite3.Error:
        return False
