"""lcm_doctor.py's work: examine(...) checks a vault and what surrounds it, repair(...) fixes
what can be fixed, after one backup at most.

Each check is a dict with a `status` ("ok", "warn" or "problem") and its findings. Only a
problem makes lcm_doctor.py exit 1; a warning is advice. Examining never changes the vault: it
is opened read-only (the full-text check needs a write-capable handle and changes nothing).
A vault SQLite cannot read is not patched in place: the recovery (lcm.care.recovery) keeps the
damaged file aside and rebuilds from the transcripts on disk.
"""
from __future__ import annotations

import errno
import filecmp
import glob
import os
import re
import shutil
import sqlite3
import time

import lcm.summary.compact
import lcm.base.config
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.care.installation
import lcm.base.mask
import lcm.care.purge
import lcm.care.recovery
import lcm.vault.schema
import lcm.base.shell
import lcm.vault.squeeze
import lcm.vault.store
from lcm.base.errors import LcmError

LOW_DISK_BYTES = 64 << 20     # less free space than this: writes will soon fail
LISTED = 20                   # findings listed per check
CHECKS = ("schema", "blocks", "fts", "dag", "stale", "leftovers", "fallback", "masking", "hooks", "backend", "disk",
          "storage")


# ---------------------------------------------------------------------------
# Examine
# ---------------------------------------------------------------------------

def _open(path: str):
    """(read-only connection or None, the LcmError of a damaged vault). Anything the guard
    refuses as not a vault is raised: doctor never offers to move another application's file."""
    try:
        return lcm.vault.db.connect(path, create=False, readonly=True), None
    except LcmError as exc:
        if getattr(exc, "cause", None) == "corrupt":
            return None, exc
        if getattr(exc, "cause", None) not in ("readonly", "cantopen", "permission"):
            raise
    # a read-only filesystem: SQLite cannot even make the -shm file; read the file as it is
    conn = sqlite3.connect(lcm.vault.db.file_uri(path, "mode=ro&immutable=1"), uri=True)
    conn.row_factory = sqlite3.Row
    lcm.vault.store.install(conn, lcm.vault.schema.SCHEMA_VERSION)  # lcm_line(): packed lines read like plain ones
    lcm.vault.squeeze.install(conn)  # lcm_text(): compressed text read like plain
    lcm.vault.db.check_tables(conn, path)
    lcm.vault.store.before_blocks(conn)
    return conn, None


def _write_problem(path: str) -> str | None:
    """Why the vault cannot be written here (read-only filesystem, permissions), or None."""
    cause = lcm.vault.db._path_cause(path, os.path.dirname(path) or ".")
    if cause not in ("readonly", "permission"):
        return None
    error = lcm.vault.db.storage_error(OSError(errno.EROFS if cause == "readonly" else errno.EACCES, cause), path)
    return f"{error.message} ({error.hint})"


def _masking(conn, k: dict) -> None:
    """How many messages were stored under older masking rules (grep and the other readers mask
    them again on output; --remask masks them in place, and output then shows them as stored)."""
    try:
        k["stored_before_rules"] = conn.execute(
            "SELECT count(*) FROM messages WHERE id < (SELECT value FROM vault_meta WHERE key = 'masked_from_message')"
        ).fetchone()[0]
    except sqlite3.OperationalError:  # a vault from before vault_meta
        return
    if k["stored_before_rules"] and k["status"] == "ok":
        k["status"] = "warn"


def masking_text(k: dict) -> str:
    """doctor's masking line: the patterns in use or what is wrong with redact.txt, and the
    messages stored under older rules."""
    text = ("; ".join(k["redact_problems"][:3]) if k["redact_problems"]
            else "built-in patterns" + (" and redact.txt" if os.path.exists(lcm.base.mask.redact_path()) else ""))
    if k.get("stored_before_rules"):
        text += (f"; {k['stored_before_rules']} messages were stored under older masking rules (masked again"
                 f" whenever shown): {lcm.base.shell.command_line('lcm_doctor.py', '--remask')} masks them in place")
    return text


def _vault_checks(conn, path: str, doc: dict, quick: bool = False) -> None:
    check = integrity(conn, quick)
    doc["integrity"] = check["result"]
    s = doc["schema"] = {"version": check["schema_version"], "current": check["code_schema_version"],
                         "purge_guard": check["purge_guard"]}
    s["status"] = lcm.care.installation.status(s["version"] > s["current"] or not s["purge_guard"], s["version"] < s["current"])
    doc["_integrity_status"] = check["status"]
    writable = None if doc.get("access") or quick else _rw(path)
    try:
        doc["fts"] = fts(writable or conn, quick)
    finally:
        if writable is not None:
            writable.close()
    try:
        doc["dag"] = dag(conn)
        doc["fallback"] = fallback_levels(conn, doc["backend"])
    except sqlite3.OperationalError as exc:  # a vault of an older schema lacks columns the checks read
        doc["dag"] = {"status": "warn", "summaries": 0, "broken": 0, "faults": [], "not_checked": str(exc)}
        doc["fallback"] = {"status": "ok", "extractive": 0, "fallback": 0, "fallback_ids": [], "truncated": 0,
                           "upgradable": 0, "sessions": [], "backend": doc["backend"]["backend"]}
    doc["storage"] = storage(conn)
    doc["blocks"] = blocks(conn)
    doc["contents"] = contents(conn)
    if lcm.care.recovery.interrupted(conn):
        doc["rebuild_interrupted"] = True


def _rw(path: str):
    """A write-capable handle for FTS5's integrity-check (an INSERT that writes nothing)."""
    try:
        conn = sqlite3.connect(lcm.vault.db.file_uri(path, "mode=rw"), uri=True, timeout=2.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 2000")
        lcm.vault.squeeze.install(conn)  # the index's checked against the decoded text
        return conn
    except sqlite3.Error:
        return None


def examine(db_arg: str | None = None, probe: bool = True, quick: bool = False) -> dict:
    """Every check, read-only. probe=False skips the model backend's live probe. quick: only what
    cannot be rebuilt (every stored block, SQLite's quick_check of the tables), not what can be
    (index consistency, the full-text indexes): about 40% of the time (bench/verify.py)."""
    path = str(lcm.base.config.db_path(db_arg))
    if not os.path.lexists(path) and db_arg is None:  # a --db that names no file is a mistyped path
        return fresh(path)
    conn, why = _open(path)
    doc = {"db": path, "integrity": None, "backup": None, "fixed": [], "not_fixed": [], "recovery": None}
    doc["backend"] = lcm.care.installation.backend(probe)
    doc["stale"] = lcm.care.installation.stale()
    doc["leftovers"] = leftovers(path)
    bad = lcm.base.mask.redact_problems()  # a pattern that cannot be used masks nothing: say so
    doc["masking"] = {"status": "warn" if bad else "ok", "redact_problems": bad, "stored_before_rules": 0}
    try:
        if conn is not None:
            try:
                doc["access"] = _write_problem(path)
                _vault_checks(conn, path, doc, quick)
                _masking(conn, doc["masking"])
                doc["hooks"] = lcm.care.installation.hooks(conn)
            except sqlite3.DatabaseError as exc:  # pages past the header are damaged
                why = lcm.vault.db.storage_error(exc, path)
                if why is None or getattr(why, "cause", None) != "corrupt":
                    raise
                for key in ("access", "schema", "blocks", "fts", "dag", "fallback", "storage", "_integrity_status"):
                    doc.pop(key, None)
                conn.close()
                conn = None
        if conn is not None and doc["integrity"] != "ok" and not _index_only(doc["integrity"]):
            why = LcmError(f"{path} is damaged: " + "; ".join(doc["integrity"][:3]))  # beyond what REINDEX mends
            why.cause = "corrupt"
        if why is not None and getattr(why, "cause", None) == "corrupt":
            doc["damage"] = why.message
            doc["recovery"] = lcm.care.recovery.plan(path)
            doc["integrity"] = doc["integrity"] if isinstance(doc["integrity"], list) else [why.message]
        if "hooks" not in doc:
            doc["hooks"] = lcm.care.installation.hooks(None)
        doc["disk"] = disk_at(path)
    finally:
        if conn is not None:
            conn.close()
    doc["problems"] = count_problems(doc)
    return doc


def leftovers(path: str) -> dict:
    """What killed recoveries left beside the vault: a half-built `.new-<pid>` (a problem: --fix
    removes it) and the damaged files kept aside (a warning: named, kept for you to delete)."""
    doc = lcm.care.recovery.leftovers(path)
    doc["status"] = lcm.care.installation.status(bool(doc["stale"]), bool(doc["damaged_copies"]))
    return doc


def leftovers_text(k: dict) -> str:
    text = (f"{len(k['stale'])} half-built vaults of killed runs ({', '.join(k['stale'][:3])}): lcm_doctor.py --fix"
            " removes them" if k["stale"] else "no half-built vaults of killed runs")
    if k["damaged_copies"]:
        text += (f"; {len(k['damaged_copies'])} damaged vaults kept aside by a recovery ("
                 + ", ".join(k["damaged_copies"][:3]) + "): they may still hold what the recovery could not bring"
                 " back, and whatever was purged since; delete them once you no longer need them")
    return text


def fresh(path: str) -> dict:
    """Right after installing: no vault yet, because no session has started (the SessionStart hook
    creates it) and nothing was imported. Nothing is wrong, unless Claude Code loads lcm from a
    directory that no longer holds it, or sessions ran since the install that no hook saw."""
    h = lcm.care.installation.hooks(None)
    doc = {"db": path, "fresh": True, "hooks": h, "backup": None, "fixed": [], "not_fixed": [], "recovery": None,
           "problems": int(h["status"] == "problem")}
    doc["next"] = ("no vault yet at " + path + ": start `claude` once in a project (its hooks create the vault and"
                   " capture every session from then on); to bring in past sessions too, run lcm_ingest.py --all")
    return doc


def contents(conn) -> dict:
    """What the vault holds, counted as lcm_status.py and lcm_sessions.py count it (one row of
    `sessions` per session, every stored message, every summary)."""
    row = conn.execute("SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages),"
                       " (SELECT count(*) FROM summaries)").fetchone()
    return {"sessions": row[0], "messages": row[1], "summaries": row[2]}


# what PRAGMA integrity_check says about an index whose table is sound: REINDEX rebuilds it
INDEX_ONLY = re.compile(r"^(row \d+ missing from index|wrong # of entries in index|non-unique entry in index)")


def _index_only(rows: list[str]) -> bool:
    return all(INDEX_ONLY.match(row) for row in rows)


def count_problems(doc: dict) -> int:
    statuses = [doc[k]["status"] for k in CHECKS if k in doc]
    return (statuses.count("problem") + bool(doc.get("damage")) + bool(doc.get("access"))
            + (doc.get("_integrity_status") == "problem") + bool(doc.get("rebuild_interrupted")))


def fixable(doc: dict) -> bool:
    """Whether --fix would repair something (a full disk or a read-only vault it cannot)."""
    if doc.get("access"):
        return bool(doc["stale"]["stage_dirs"])
    return bool(doc.get("damage") or doc.get("rebuild_interrupted")) or any(
        doc.get(k, {}).get("status") == "problem" for k in ("fts", "dag", "stale", "blocks", "leftovers")) or (
        doc.get("_integrity_status") == "problem")


def recovery_text(r: dict) -> str:
    """The recovery as lcm_doctor.py prints it: what --fix would do, or what it did."""
    if r.get("not_rebuilt"):
        return ""  # said among what --fix could not fix
    if r.get("moved_to"):
        source = (f"{r['from_backup']} messages from the backup {r['backup']}, then " if r.get("backup") else "")
        return (f"Recovered: {r['messages']} messages of {r['sessions']} sessions ({source}every message of the"
                f" {r['files']} transcripts on disk); the damaged vault is kept as {r['moved_to']}"
                + (f"; {r['purged_again']} messages purged after the backup was taken were purged again"
                   if r.get("purged_again") else "") + "\nNot recovered: " + "; ".join(r["lost"]) + "\n")
    if r["source"] is None:
        return (f"Recovery: nothing to rebuild it from: no backup, and no transcript under {r['projects_root']}"
                " (Claude Code deletes them after cleanupPeriodDays). lcm_doctor.py --fix leaves the damaged vault"
                " where it is.\n")
    known = (f"{r['transcripts_recorded'] - r['transcripts_gone']} of the {r['transcripts_recorded']} transcripts"
             " it recorded are still on disk" if r["transcripts_recorded"] is not None else
             f"{r['transcripts_on_disk']} transcripts are on disk")
    source = (f"from the backup {r['backup']}, then the transcripts under {r['projects_root']} ({known})"
              if r["backup"] else f"from the transcripts under {r['projects_root']} ({known})")
    return (f"Recovery: lcm_doctor.py --fix builds a new vault {source} and puts it in place of the damaged file,"
            " which is kept aside (nothing deleted).\nIt cannot bring back: " + "; ".join(r["lost"]) + "\n")


# ---------------------------------------------------------------------------
# Repair
# ---------------------------------------------------------------------------

def repair(doc: dict, remask: bool = False, fix: bool = True) -> dict:
    """Repair what examine() found (and with remask, mask text stored before masking); returns
    a fresh examine() with what was done in `backup`, `fixed`, `not_fixed` and `recovery`."""
    path = doc["db"]
    done = {"backup": None, "fixed": [], "not_fixed": [], "recovery": None}
    if fix:
        removed = lcm.care.installation.remove_stale(doc["stale"])
        if removed:
            done["fixed"].append(f"removed {len(removed)} stale stage directories and idle lock files")
        removed = lcm.care.recovery.remove_leftovers(doc["leftovers"])
        if removed:
            done["fixed"].append(f"removed {len(removed)} half-built vault files of killed runs: " + ", ".join(removed))
    if doc.get("access") and (fix or remask):
        done["not_fixed"].append("the vault is read-only here, so nothing in it was repaired")
    elif doc.get("damage"):
        if fix:
            _recover(path, done, keep_damaged=True)
        else:
            done["not_fixed"].append("the vault is damaged, so its text was not masked again: --fix recovers it first")
    elif fix or remask:
        if fix and doc["integrity"] != "ok":
            # a byte copy, made before the vault is opened here: closing a second handle on the file
            # would drop the locks of the connection below (the backup API may stop at the damage)
            done["backup"] = copy_file(path)
        conn = lcm.vault.db.connect(path, create=False)
        try:
            if fix:
                _repair_in_place(conn, path, doc, done)
            if remask and done["recovery"] is None:
                done["backup"] = done["backup"] or backup(conn, path)
                changed = remask_content(conn)
                done["fixed"].append("masked the stored text again: " + (", ".join(
                    f"{n} {table} rows" for table, n in changed.items() if n) or "nothing needed it"))
        finally:
            conn.close()
        if done.get("_rebuild"):
            _recover(path, done, keep_damaged=False)
    done.pop("_rebuild", None)
    if not (done["fixed"] or done["recovery"]):
        return {**doc, **done}
    after = examine(path, probe=False)  # the state after the repairs; the backend was probed already
    after.update(done, backend=doc["backend"])
    after["problems"] = count_problems(after)
    return after


def _repair_in_place(conn, path: str, doc: dict, done: dict) -> None:
    damaged = doc["integrity"] != "ok"
    bad_blocks = doc.get("blocks", {}).get("damaged")
    found = find_lines(conn, path, bad_blocks) if bad_blocks else {}
    if damaged or doc["fts"]["damaged"] or doc["dag"]["broken"] or not doc["schema"]["purge_guard"] or found:
        done["backup"] = done["backup"] or backup(conn, path)
    if bad_blocks:  # (with nothing found, no backup: a vault whose loss is known is not copied at every run)
        restore_blocks(conn, bad_blocks, found, done)
    try:
        if damaged:
            conn.execute("REINDEX")  # rebuilds every index from its table: the usual damage
            done["fixed"].append("rebuilt every index (REINDEX)")
        if doc["fts"]["damaged"] or damaged:
            tables = list(doc["fts"]["tables"])
            rebuild_fts(conn, tables)
            done["fixed"].append("rebuilt the full-text indexes " + ", ".join(tables))
        still = damaged and [r[0] for r in conn.execute("PRAGMA integrity_check(1)")] != ["ok"]
    except sqlite3.DatabaseError:
        still = True
    if still:
        done["_rebuild"] = True  # the tables themselves are damaged: rebuild; the backup is the copy kept
        return
    if not doc["schema"]["purge_guard"]:
        conn.execute(lcm.vault.schema.PURGED_TRIGGER)
        done["fixed"].append("restored the trigger that keeps purged messages out of the vault")
    if doc["dag"]["broken"]:
        ids = [r[0] for q in DAG_CHECKS for r in conn.execute(q[1])]
        dropped = drop_broken_summaries(conn, ids)
        done["fixed"].append(f"deleted {dropped} summaries that broke the DAG's rules, with their ancestors"
                             " (lcm_compact.py summarises their messages again)")
    if doc.get("rebuild_interrupted"):
        result = _finish_rebuild(conn)
        done["fixed"].append(f"finished the interrupted rebuild: {result} messages read from the transcripts")


def find_lines(conn, path: str, damaged: list[dict]) -> dict:
    """{uuid: (original line, where from)} for the messages of damaged blocks: from the
    transcripts still on disk (found by uuid), else from the newest backup."""
    wanted = {m["uuid"] for d in damaged for m in d["messages"]}
    found = lines_from_transcripts(conn, damaged, wanted)
    if wanted - found.keys():
        found.update(lcm.care.recovery.lines_from_backup(path, wanted - found.keys()))
    return found


def restore_blocks(conn, damaged: list[dict], found: dict, done: dict) -> None:
    """Put back the lines of damaged blocks that find_lines() found; what it did not find is
    listed as lost in done["lost"] and stays addressable, each read stopping with an Error that
    names doctor (a backup disk plugged in later can still restore it)."""
    restored, sources, lost, identical = 0, set(), [], []
    conn.execute("PRAGMA secure_delete = ON")  # the damaged block's pages are zeroed as it goes
    with lcm.vault.db.transaction(conn):
        for d in damaged:
            members = conn.execute("SELECT id, uuid, created_at FROM messages WHERE block_id = ? ORDER BY block_pos",
                                   (d["block_id"],)).fetchall()
            have = [(m[0], found[m[1]][0]) for m in members if m[1] in found]
            missing = [{"uuid": m[1], "created_at": m[2]} for m in members if m[1] not in found]
            if have:
                try:
                    result = lcm.vault.store.restore_block(conn, d["block_id"], have)
                    # re-packed like the original, the data differs from the damaged block only where it was hit
                    if result["same_size"]:
                        identical.append(result["bytes_differing"])
                except ValueError as exc:  # not the lines the block held: keep it as it is
                    done["not_fixed"].append(f"block {d['block_id']} of session {d['session_id']}: {exc}")
                    missing = [{"uuid": m[1], "created_at": m[2]} for m in members]
                    have = []
            restored += len(have)
            sources.update(found[m[1]][1] for m in members if m[1] in found and have)
            if missing:
                lost.append({"session_id": d["session_id"], "block_id": d["block_id"], "count": len(missing),
                             "first_at": min((m["created_at"] or "" for m in missing), default=None),
                             "last_at": max((m["created_at"] or "" for m in missing), default=None),
                             "messages": missing})
    if restored:
        done["fixed"].append(f"restored the original lines of {restored} messages in damaged blocks from "
                             + " and ".join(sorted(sources)) + " (each found by its uuid, re-packed and read back"
                             + (f"; {len(identical)} re-packed block{'s' * (len(identical) != 1)} the damaged one's size,"
                                f" differing from it in {sum(identical)} byte{'s' * (sum(identical) != 1)}: the damage"
                                if identical else "") + ")")
    if lost:
        done["lost"] = lost
        done["not_fixed"].append(
            f"lost: the original lines of {sum(x['count'] for x in lost)} messages, which no transcript on disk"
            " and no backup holds: " + "; ".join(
                f"session {x['session_id']}, {x['count']} messages from {_when(x['first_at'])} to {_when(x['last_at'])}"
                f" ({', '.join(m['uuid'] for m in x['messages'][:3])}{' ...' if x['count'] > 3 else ''})"
                for x in lost[:LISTED]) + ". Their rows, searchable text and summaries stay; reading their lines"
            " says they are damaged. To let them go: lcm_purge.py --message UUID (or --session ID)")


def lines_from_transcripts(conn, damaged: list[dict], wanted: set) -> dict:
    """{uuid: (original line, "transcripts")} for the wanted uuids found in the transcripts on
    disk that the damaged blocks' sessions were read from (split on newlines, as ingest does)."""
    import lcm.capture.transcript
    sessions = sorted({d["session_id"] for d in damaged if d["session_id"]})
    paths = [r[0] for r in conn.execute(
        f"SELECT path FROM transcripts WHERE session_id IN ({','.join('?' * len(sessions))}) ORDER BY path", sessions)]
    paths += [r[0] for r in conn.execute(
        f"SELECT DISTINCT transcript_path FROM blocks WHERE id IN ({','.join('?' * len(damaged))})",
        [d["block_id"] for d in damaged]) if r[0] and r[0] not in paths]
    found = {}
    for path in paths:
        if len(found) == len(wanted):
            break
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue  # deleted since (Claude Code's cleanupPeriodDays), or unreadable
        for line in data.split(b"\n"):
            if b'"uuid"' not in line:
                continue
            try:
                entry = lcm.capture.transcript.loads(line)
            except (ValueError, RecursionError):
                continue
            uuid = entry.get("uuid") if isinstance(entry, dict) else None
            if uuid in wanted and uuid not in found:
                found[uuid] = (line, "transcripts")
    return found


def _finish_rebuild(conn) -> int:
    root = lcm.care.recovery.projects_root()
    added = lcm.capture.bulk.ingest_paths(conn, [root])["messages_added"] if os.path.isdir(root) else 0
    with lcm.vault.db.transaction(conn):
        conn.execute("DELETE FROM vault_meta WHERE key = 'rebuild'")
    return added


def _recover(path: str, done: dict, keep_damaged: bool) -> None:
    result = lcm.care.recovery.rebuild(path, keep_damaged=keep_damaged)
    if result.get("not_rebuilt"):
        done["not_fixed"].append(result["not_rebuilt"])
        done["recovery"] = result
        return
    result["moved_to"] = result["moved_to"] or done["backup"]
    done["recovery"] = result  # lcm_doctor.py prints it as "Recovered: ..." (recovery_text)


def integrity(conn, quick: bool = False) -> dict:
    """PRAGMA integrity_check (quick: quick_check, which skips indexes against their tables) and
    the schema version."""
    rows = [r[0] for r in conn.execute("PRAGMA quick_check(100)" if quick else "PRAGMA integrity_check(100)")]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    doc = {"result": "ok" if rows == ["ok"] else rows, "schema_version": version,
           "code_schema_version": lcm.vault.schema.SCHEMA_VERSION, "purge_guard": purge_guard(conn)}
    doc["status"] = lcm.care.installation.status(rows != ["ok"] or version > lcm.vault.schema.SCHEMA_VERSION or not doc["purge_guard"])
    return doc


def purge_guard(conn) -> bool:
    """False when messages were purged but the trigger that keeps them out of the vault is missing."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    if "purged" not in tables or "messages_purged" in tables:
        return True
    return conn.execute("SELECT 1 FROM purged LIMIT 1").fetchone() is None


def fts(conn, quick: bool = False) -> dict:
    """Whether each FTS5 index agrees with the text it indexes (FTS5's own integrity-check
    against the content: it re-reads every row; quick: not checked)."""
    tables = {}
    for table in lcm.care.purge.fts_tables(conn):
        if quick:
            tables[table] = "not checked (--quick)"
            continue
        try:
            conn.execute(f'INSERT INTO "{table}"("{table}", rank) VALUES (\'integrity-check\', 1)')
            tables[table] = "ok"
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc):
                tables[table] = "not checked (read-only vault)"
            elif "locked" in str(exc) or "busy" in str(exc):  # the check takes the write lock
                tables[table] = "not checked (an import or compaction is writing: run lcm_doctor.py again later)"
            else:
                tables[table] = f"damaged: {exc}"
        except sqlite3.DatabaseError as exc:
            tables[table] = f"damaged: {exc}"
    damaged = [t for t, v in tables.items() if v.startswith("damaged")]
    return {"status": lcm.care.installation.status(bool(damaged)), "tables": tables, "damaged": damaged,
            "available": bool(tables) or lcm.vault.schema.has_fts5(conn)}


def blocks(conn) -> dict:
    """Every stored block read back whole (its codec byte, zlib's checksum over every byte, its
    framing, its line count and size as recorded) and every packed message's place inside its
    block: damage SQLite's own checks cannot see, since the file around it is sound. Names the
    damaged blocks' sessions and messages (uuid, date)."""
    doc = {"status": "ok", "checked": 0, "bytes": 0, "damaged": [], "sessions": [], "messages": 0}
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'blocks'").fetchone():
        return doc  # a vault from before blocks: every line is plain
    sizes, bad = {}, {}
    for row in conn.execute("SELECT id, line_count, line_bytes, data FROM blocks"):
        doc["checked"] += 1
        doc["bytes"] += len(row[3])
        sizes[row[0]] = row[1]
        why = lcm.vault.store.verify_block(row)
        if why:
            bad[row[0]] = why
    for block_id, count, distinct, low, high in conn.execute(
            "SELECT block_id, count(*), count(DISTINCT block_pos), min(block_pos), max(block_pos) FROM messages"
            " WHERE block_id IS NOT NULL GROUP BY block_id"):
        if block_id not in sizes:
            bad.setdefault(block_id, "its row is missing")
        elif distinct != count or low < 0 or high >= sizes[block_id]:
            bad.setdefault(block_id, "a message's place in it is outside it or shared")
    doc["damaged"] = damaged_blocks(conn, bad)
    doc["sessions"] = sorted({b["session_id"] for b in doc["damaged"]})
    doc["messages"] = sum(b["count"] for b in doc["damaged"])
    doc["status"] = lcm.care.installation.status(bool(bad))
    return doc


def damaged_blocks(conn, bad: dict) -> list[dict]:
    """For each damaged block id (-> why): its session and messages (uuid, date), oldest first."""
    out = []
    for block_id, why in sorted(bad.items()):
        rows = conn.execute("SELECT uuid, created_at, session_id FROM messages WHERE block_id = ? ORDER BY block_pos",
                            (block_id,)).fetchall()
        dates = sorted(r[1] for r in rows if r[1])
        out.append({"block_id": block_id, "why": why, "session_id": rows[0][2] if rows else None,
                    "count": len(rows), "first_at": dates[0] if dates else None,
                    "last_at": dates[-1] if dates else None,
                    "messages": [{"uuid": r[0], "created_at": r[1]} for r in rows]})
    return out


def _when(stamp: str | None) -> str:
    return (stamp or "?")[:19].replace("T", " ")


def blocks_text(b: dict) -> str:
    """doctor's stored-blocks line."""
    size = f"{b['checked']} blocks ({b['bytes'] / 1e6:.1f} MB) read back whole"
    if not b["damaged"]:
        return size
    parts = [f"session {d['session_id']}: {d['count']} messages, {_when(d['first_at'])} to"
             f" {_when(d['last_at'])} (block {d['block_id']}: {d['why']}; first "
             + ", ".join(m["uuid"] for m in d["messages"][:3]) + ")" for d in b["damaged"][:LISTED]]
    return (f"{len(b['damaged'])} damaged of {b['checked']} blocks: the original lines of {b['messages']} messages"
            f" cannot be read; " + "; ".join(parts) + ". lcm_doctor.py --fix restores them from the transcripts"
            " or a backup (--json lists every message)")


def storage(conn) -> dict:
    """How the vault's size compares with the transcripts it holds, what each part of it weighs
    (weights(): tables, full-text indexes, other indexes, blocks, the searchable text), and
    whether lines wait to be packed into blocks or rows of text to be compressed (a vault from
    before, or packing that has not run): a warning."""
    import lcm.vault.pack
    try:
        doc = lcm.vault.pack.ratio(conn)
    except sqlite3.OperationalError:  # opened read-only before its migration: nothing packed yet
        doc = {"ratio": None, "plain_lines": conn.execute("SELECT count(*) FROM messages").fetchone()[0]}
    doc["unsqueezed_rows"] = lcm.vault.pack.unsqueezed(conn)
    doc["pending"] = max(doc["plain_lines"], doc["unsqueezed_rows"]) >= lcm.vault.pack.CONVERT_LINES
    doc["status"] = lcm.care.installation.status(False, doc["pending"])
    doc["parts"] = weights(conn, doc.get("transcript_bytes"))
    waiting = [f"{doc['plain_lines']} lines not yet packed"] + (
        [f"{doc['unsqueezed_rows']} rows of text not yet compressed"] if doc["unsqueezed_rows"] else [])
    shares = ", ".join(f"{k} {v['share']}" for k, v in doc["parts"].items() if v.get("share") is not None)
    doc["text"] = ((f"vault/transcripts {doc['ratio']}; " if doc["ratio"] else "") + "; ".join(waiting)
                   + (": convert with lcm_compact.py --pack --all --vacuum" if doc["pending"] else "")
                   + (f"\n  of transcripts: {shares}" if shares else ""))
    return doc


def weights(conn, transcripts: int | None) -> dict:
    """Bytes of each part of the vault, and its share of the transcript bytes: the messages
    table and, inside it, the searchable text column; the blocks of original lines; the
    full-text indexes (FTS5's shadow tables); the other indexes; every other table; free pages.
    From SQLite's dbstat where the build has it (it reads every page: seconds on a large vault),
    else pages only."""
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    parts: dict[str, int] = {}
    try:
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_master"))
        fts = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")}
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            owner = next((f for f in fts if name.startswith(f + "_")), None)
            key = ("full-text indexes" if owner else name if name in ("messages", "blocks")
                   else "indexes" if kinds.get(name) == "index" or name.startswith("sqlite_autoindex") else "other tables")
            parts[key] = parts.get(key, 0) + size
    except sqlite3.OperationalError:  # no dbstat in this build
        parts["all pages"] = conn.execute("PRAGMA page_count").fetchone()[0] * page
    parts["free pages"] = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
    rows, squeezed, text = conn.execute("SELECT count(*), coalesce(sum(typeof(content) = 'blob'), 0),"
                                        " coalesce(sum(length(CAST(content AS BLOB))), 0) FROM messages").fetchone()
    out = {k: {"bytes": v} for k, v in parts.items()}
    out["searchable text"] = {"bytes": text, "rows": rows, "compressed_rows": squeezed}  # inside messages
    for v in out.values():
        v["share"] = round(v["bytes"] / transcripts, 3) if transcripts else None
    return out


DAG_CHECKS = (
    # (what is wrong, query returning the ids of the summaries at fault)
    ("names a parent that does not list it as a child",
     "SELECT c.id FROM summaries c WHERE c.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM summary_sources s"
     " WHERE s.summary_id = c.parent_id AND s.child_id = c.id)"),
    ("lists a child whose parent is another node (a node with two parents)",
     "SELECT s.summary_id FROM summary_sources s JOIN summaries c ON c.id = s.child_id"
     " WHERE c.parent_id IS NOT s.summary_id"),
    ("is a leaf with summaries as sources, or a condensed node with messages",
     "SELECT p.id FROM summaries p JOIN summary_sources s ON s.summary_id = p.id"
     " WHERE (p.kind = 'leaf') != (s.message_id IS NOT NULL) OR (p.kind = 'leaf') != (p.depth = 0)"),
    ("has a child that is not one depth below it or belongs to another session",
     "SELECT p.id FROM summary_sources s JOIN summaries p ON p.id = s.summary_id JOIN summaries c ON c.id = s.child_id"
     " WHERE c.depth != p.depth - 1 OR c.session_id != p.session_id"),
    ("has no sources",
     "SELECT p.id FROM summaries p WHERE NOT EXISTS (SELECT 1 FROM summary_sources s WHERE s.summary_id = p.id)"),
    ("shares a message with another leaf",
     "SELECT s.summary_id FROM summary_sources s WHERE s.message_id IN (SELECT message_id FROM summary_sources"
     " WHERE message_id IS NOT NULL GROUP BY message_id HAVING count(*) > 1)"),
    ("is a leaf with messages of another session",
     "SELECT s.summary_id FROM summary_sources s JOIN summaries p ON p.id = s.summary_id"
     " JOIN messages m ON m.id = s.message_id WHERE m.session_id != p.session_id"),
    # in conversation order (messages.seq), within the threads the leaf holds (a sub-agent's run
    # may be a leaf of its own, or folded into the main thread's); leaves built on the old ingest
    # order wait for the next lcm_compact.py, which rebuilds them
    ("is a leaf whose messages are not one contiguous run of its session",
     "SELECT leaf.id FROM (SELECT p.id, p.session_id, p.first_message_id AS first, p.last_message_id AS last,"
     " count(*) AS n, min(m.seq) AS lo, max(m.seq) AS hi, sum(m.seq IS NULL) AS unplaced"
     " FROM summaries p JOIN summary_sources s ON s.summary_id = p.id JOIN messages m ON m.id = s.message_id"
     " WHERE p.kind = 'leaf' AND p.built_on != 'ingest' GROUP BY p.id) AS leaf"
     " WHERE leaf.unplaced > 0 OR (SELECT seq FROM messages WHERE id = leaf.first) IS NOT leaf.lo"
     " OR (SELECT seq FROM messages WHERE id = leaf.last) IS NOT leaf.hi OR leaf.n != (SELECT count(*)"
     " FROM messages x WHERE x.session_id = leaf.session_id AND x.seq BETWEEN leaf.lo AND leaf.hi"
     " AND x.thread IN (SELECT t.thread FROM summary_sources ts JOIN messages t ON t.id = ts.message_id"
     " WHERE ts.summary_id = leaf.id))"),
)


def dag(conn) -> dict:
    """The summary DAG's invariants (design: each node one parent at most, a leaf a contiguous
    run of one session, a condensed node's children one depth below, no message in two leaves)."""
    faults: dict[str, list[str]] = {}
    for what, query in DAG_CHECKS:
        for (sid,) in conn.execute(query):
            faults.setdefault(sid, [])
            if what not in faults[sid]:
                faults[sid].append(what)
    total = conn.execute("SELECT count(*) FROM summaries").fetchone()[0]
    return {"status": lcm.care.installation.status(bool(faults)), "summaries": total, "broken": len(faults),
            "faults": [{"summary_id": s, "problems": p} for s, p in sorted(faults.items())][:LISTED]}


def fallback_levels(conn, backend: dict) -> dict:
    """Summaries written without a model (extractive by choice, or fallback: the model failed
    during their pass) or cut short (truncated)."""
    counts = dict(conn.execute("SELECT level, count(*) FROM summaries WHERE level IN ('extractive', 'fallback',"
                               " 'truncated') GROUP BY level").fetchall())
    sessions = [r[0] for r in conn.execute(
        "SELECT session_id FROM summaries WHERE level IN ('extractive', 'fallback') GROUP BY session_id"
        " ORDER BY count(*) DESC LIMIT ?", (LISTED,))]
    without = counts.get("extractive", 0) + counts.get("fallback", 0)
    upgradable = without if backend["backend"] not in ("none", None) else 0
    return {"status": lcm.care.installation.status(False, upgradable > 0 or counts.get("fallback", 0) > 0),
            "extractive": counts.get("extractive", 0), "fallback": counts.get("fallback", 0),
            "fallback_ids": [r["id"] for r in lcm.summary.compact.fallback_summaries(conn, LISTED)],
            "truncated": counts.get("truncated", 0), "upgradable": upgradable, "backend": backend["backend"],
            "sessions": sessions}


def disk_at(path: str) -> dict:
    def size(p):
        try:
            return os.path.getsize(p)
        except OSError:
            return 0
    files_bytes = 0
    for directory, _dirs, names in os.walk(lcm.base.config.files_dir()):
        files_bytes += sum(size(os.path.join(directory, n)) for n in names)
    try:
        free = shutil.disk_usage(os.path.dirname(path) or ".").free
    except OSError:
        free = None
    vault = size(path)
    doc = {"path": path, "vault_bytes": vault, "wal_bytes": size(path + "-wal"), "files_bytes": files_bytes,
           "free_bytes": free}
    doc["status"] = lcm.care.installation.status(free is not None and free < LOW_DISK_BYTES, free is not None and free < vault)
    return doc


# ---------------------------------------------------------------------------
# Repairs (after backup())
# ---------------------------------------------------------------------------

def backup(conn, path: str) -> str:
    """A consistent copy of the vault beside it (SQLite's backup API), mode 0600; returns its path."""
    need = os.path.getsize(path) + (os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0)
    free = shutil.disk_usage(os.path.dirname(path) or ".").free
    if free < need + LOW_DISK_BYTES:
        raise LcmError(f"not enough free space beside {path} for a backup ({need >> 20} MB needed,"
                       f" {free >> 20} MB free)", "free some space on that disk, then run lcm_doctor.py --fix again")
    target = f"{path}.backup-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
    dest = sqlite3.connect(target)
    try:
        conn.backup(dest)
    finally:
        dest.close()
    return target


def _same_bytes(a: str, b: str) -> bool:
    if not (os.path.exists(a) and os.path.exists(b)):
        return not (os.path.exists(a) or os.path.exists(b))
    return filecmp.cmp(a, b, shallow=False)


def copy_file(path: str) -> str:
    """A byte copy of a damaged vault (and its -wal) beside it, unless an earlier run already
    left one: however often --fix runs, one copy of the same damaged file is enough."""
    for earlier in sorted(glob.glob(glob.escape(path) + ".backup-*") + glob.glob(glob.escape(path) + ".damaged-*")):
        if not earlier.endswith(("-wal", "-shm")) and _same_bytes(earlier, path) and _same_bytes(
                earlier + "-wal", path + "-wal"):
            return earlier
    target = f"{path}.backup-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    for suffix in ("", "-wal"):
        if os.path.exists(path + suffix):
            shutil.copyfile(path + suffix, target + suffix)
            os.chmod(target + suffix, 0o600)
    return target


def rebuild_fts(conn, tables: list[str]) -> None:
    import lcm.capture.indexes  # the indexes derived from the messages are remade by their own module
    with lcm.vault.db.transaction(conn):
        for table in tables:
            if table not in lcm.capture.indexes.DERIVED:
                conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'rebuild\')')
        if set(tables) & set(lcm.capture.indexes.DERIVED):
            lcm.capture.indexes.rebuild(conn)


def drop_broken_summaries(conn, ids: list[str]) -> int:
    """Delete summaries that break the DAG's rules, with their ancestors; the next lcm_compact.py
    summarises their messages again. Returns how many were deleted."""
    with lcm.vault.db.transaction(conn):
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS purge_summaries (id TEXT PRIMARY KEY)")
        conn.execute("DELETE FROM temp.purge_summaries")
        conn.executemany("INSERT OR IGNORE INTO temp.purge_summaries VALUES (?)", ((i,) for i in ids))
        lcm.care.purge.add_ancestors(conn)
        return lcm.care.purge.drop_summaries(conn)


def remask_content(conn, batch: int = 2000) -> dict:
    """Mask the stored text of a vault filled before masking (or before a new redact.txt
    pattern): messages, summaries and pinned notes (their full-text indexes kept in step),
    checkpoints, stored file explorations and session titles. The original lines in messages.raw are not touched.

    Returns {table: rows changed}. Running it again changes nothing.
    """
    lcm.base.mask.reload_user_patterns()  # this often runs because a pattern was just added to redact.txt
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
            with lcm.vault.db.transaction(conn):
                # a message's text through lcm_text (compressed or not); a changed one is stored as text
                # (packing compresses it again when it next converts)
                read = "lcm_text(content)" if table == "messages" else column
                rows = conn.execute(f"SELECT rowid, {read} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                                    (last, batch)).fetchall()
                for rowid, old in rows:
                    new = lcm.base.mask.mask(old)
                    if new is old or new == old:
                        continue
                    if index:  # external-content FTS: the old text out, the new in
                        conn.execute(f"INSERT INTO {index}({index}, rowid, content) VALUES ('delete', ?, ?)",
                                     (rowid, old))
                    if table in ("messages", "summaries"):
                        conn.execute(f"UPDATE {table} SET {column} = ?, token_count = ? WHERE rowid = ?",
                                     (new, lcm.base.config.estimate_tokens(new), rowid))
                    else:
                        conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (new, rowid))
                    if index:
                        conn.execute(f"INSERT INTO {index}(rowid, content) VALUES (?, ?)", (rowid, new))
                    count += 1
            if len(rows) < batch:
                break
            last = rows[-1][0]
        changed[table] = count
    if changed.get("messages"):  # the search indexes derived from the old text, made anew
        from lcm.capture import indexes
        with lcm.vault.db.transaction(conn):
            indexes.rebuild(conn)
            # the rewritten rows are plain text again: packing's next run compresses them (lcm.vault.pack)
            conn.execute("DELETE FROM vault_meta WHERE key = 'squeezed_through'")
    if "zdicts" in tables:  # a text dictionary is made of stored lines: those masking changes leave it
        keep = lambda line: lcm.base.mask.mask(line) == line  # noqa: E731
        for (dict_id, data) in conn.execute("SELECT id, data FROM zdicts").fetchall():
            if not all(keep(line) for line in bytes(data).decode("utf-8", "surrogatepass").split("\n")):
                with lcm.vault.db.transaction(conn):
                    lcm.vault.squeeze.replace_dictionary(conn, dict_id, keep)
                changed["zdicts"] = changed.get("zdicts", 0) + 1
    if "vault_meta" in tables:  # every message and summary is masked now: output need not mask them again
        with lcm.vault.db.transaction(conn):
            # (every row from the first on: rows a hook added meanwhile were masked as stored)
            conn.execute("UPDATE vault_meta SET value = 1 WHERE key IN ('masked_from_message', 'masked_from_summary')")
    return changed
