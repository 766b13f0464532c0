"""Check the vault and the installation, and repair what can be repaired.

Usage:
  python3 scripts/lcm_doctor.py [--fix] [--db PATH] [--json]

Checks: the vault's integrity and schema version; the full-text indexes against the text they
index; the summary DAG's rules (one parent at most, a leaf covers a contiguous run of one session,
a condensed node's children are one depth below, no message in two leaves); stage directories of
killed imports and lock files left under $LCM_HOME/locks; summaries written without a model
(extractive) or cut short (truncated), and whether a model could now upgrade them; whether the
hooks are installed and when each last ran (stamps under $LCM_HOME/last-run) or failed
($LCM_HOME/lcm.log); which model backend lcm would use and why; the vault's size and the free disk.

--fix first writes a backup beside the vault (lcm.db.backup-<time>, printed) whenever it is
about to change the vault, then rebuilds damaged full-text indexes, deletes summaries that break
the DAG's rules (the next lcm_compact.py summarises their messages again), and removes stale stage
directories and idle lock files. It never deletes a message.

--remask masks the text a vault stored before masking existed, or before a pattern was added to
$LCM_HOME/redact.txt: the searchable text of messages, summaries, notes, checkpoints, stored file
explorations and session titles (the original lines are kept as they are). It backs the vault up
first, reads every row (minutes on a very large vault), and a second run changes nothing.

Exit status: 0 when nothing is a problem (warnings are advice), 1 when a problem is found (after
--fix: one it could not repair). --json prints one document: `integrity` ("ok" or the problems
found), one key per check (schema, fts, dag, stale, fallback, masking, hooks, backend, disk), each with a
`status` of ok, warn or problem, and `problems`, `fixed`, `backup`.

Examples:
  python3 "$LCM_SCRIPTS/lcm_doctor.py"
  python3 "$LCM_SCRIPTS/lcm_doctor.py" --fix
  python3 "$LCM_SCRIPTS/lcm_doctor.py" --json
  python3 "$LCM_SCRIPTS/lcm_doctor.py" --remask      # after adding a pattern to redact.txt
"""
from __future__ import annotations

import os
import sqlite3
import sys

import lcm.cli
import lcm.config
import lcm.db
import lcm.schema
import lcm.doctor
import lcm.mask
from lcm.errors import LcmError

CHECKS = ("schema", "fts", "dag", "stale", "fallback", "masking", "hooks", "backend", "disk")


def _open(path_arg):
    """(connection or None, why it could not be opened for writing, or at all)."""
    try:
        return lcm.db.connect(path_arg, create=False), None
    except LcmError as exc:
        why = exc
    try:
        return lcm.db.connect(path_arg, create=False, readonly=True), why
    except LcmError:
        pass
    try:  # a read-only filesystem: SQLite cannot even make the -shm file; read the file as it is
        conn = sqlite3.connect(f"file:{lcm.config.db_path(path_arg)}?mode=ro&immutable=1", uri=True)
        conn.row_factory = sqlite3.Row
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # a file that is not a vault fails here
        return conn, why
    except sqlite3.DatabaseError:
        return None, why


def run_checks(conn, doc: dict) -> None:
    doc["backend"] = lcm.doctor.backend()
    doc["stale"] = lcm.doctor.stale()
    doc["hooks"] = lcm.doctor.hooks(conn)
    bad = lcm.mask.redact_problems()  # a pattern that cannot be used masks nothing: say so
    doc["masking"] = {"status": "warn" if bad else "ok", "redact_problems": bad}
    if conn is None:
        doc["disk"] = lcm.doctor.disk_at(doc["db"])
        return
    check = lcm.doctor.integrity(conn)
    doc["integrity"] = check["result"]
    doc["schema"] = {"status": "problem" if check["schema_version"] > check["code_schema_version"]
                     or not check["purge_guard"] else "ok", "version": check["schema_version"],
                     "current": check["code_schema_version"], "purge_guard": check["purge_guard"]}
    doc["_integrity_status"] = check["status"]
    doc["fts"] = lcm.doctor.fts(conn)
    doc["dag"] = lcm.doctor.dag(conn)
    doc["fallback"] = lcm.doctor.fallback_levels(conn, doc["backend"])
    doc["disk"] = lcm.doctor.disk(conn)


def fix(conn, doc: dict) -> None:
    """Repair what the checks found; a backup comes before the first change to the vault."""
    path = doc["db"]
    if doc.get("unopenable"):
        doc["backup"] = lcm.doctor.copy_file(path)
        doc["not_fixed"].append("the vault cannot be opened, so nothing in it was repaired")
        return
    if doc.get("access"):
        doc["not_fixed"].append("the vault is read-only here, so nothing in it was repaired")
    else:
        broken = (doc["integrity"] != "ok" or doc["fts"]["damaged"] or doc["dag"]["broken"]
                  or not doc["schema"]["purge_guard"])
        if broken:
            doc["backup"] = lcm.doctor.backup(conn, path)
        if doc["integrity"] != "ok":
            conn.execute("REINDEX")  # rebuilds every index from its table: the usual damage
            doc["fixed"].append("rebuilt every index (REINDEX)")
        if doc["fts"]["damaged"] or doc["integrity"] != "ok":
            tables = list(doc["fts"]["tables"])
            lcm.doctor.rebuild_fts(conn, tables)
            doc["fixed"].append("rebuilt the full-text indexes " + ", ".join(tables))
        if not doc["schema"]["purge_guard"]:
            conn.execute(lcm.schema.PURGED_TRIGGER)
            doc["fixed"].append("restored the trigger that keeps purged messages out of the vault")
        if doc["dag"]["broken"]:
            ids = [r[0] for q in lcm.doctor.DAG_CHECKS for r in conn.execute(q[1])]
            dropped = lcm.doctor.drop_broken_summaries(conn, ids)
            doc["fixed"].append(f"deleted {dropped} summaries that broke the DAG's rules, with their ancestors"
                                " (lcm_compact.py summarises their messages again)")
    removed = lcm.doctor.remove_stale(doc["stale"])
    if removed:
        doc["fixed"].append(f"removed {len(removed)} stale stage directories and idle lock files")


def remask(conn, doc: dict) -> None:
    """Mask the text stored before masking (or before a redact.txt pattern); a backup comes first."""
    if conn is None or doc.get("unopenable") or doc.get("access"):
        doc["not_fixed"].append("the vault cannot be written here, so its stored text was not masked again")
        return
    doc["backup"] = doc["backup"] or lcm.doctor.backup(conn, doc["db"])
    changed = lcm.doctor.remask_content(conn)
    doc["fixed"].append("masked the stored text again: " + (", ".join(
        f"{n} {table} rows" for table, n in changed.items() if n) or "nothing needed it"))


def _line(status: str, name: str, text: str) -> str:
    return f"{status.upper() if status != 'ok' else 'ok':8} {name}: {text}\n"


def _mb(n) -> str:
    return "?" if n is None else f"{n / 1e6:.1f} MB"


def _print(doc: dict) -> None:
    out = sys.stdout
    d = doc["disk"]
    out.write(f"Vault {doc['db']} ({_mb(d['vault_bytes'])}, WAL {_mb(d['wal_bytes'])}, stored files "
              f"{_mb(d['files_bytes'])}; {_mb(d['free_bytes'])} free on its disk)\n")
    if doc.get("unopenable"):
        out.write(_line("problem", "damage", doc["unopenable"]))
    if doc.get("access"):
        out.write(_line("problem", "access", doc["access"]))
    if "schema" in doc:  # the vault could be read
        integ = doc["integrity"]
        text = "ok" if integ == "ok" else "; ".join(integ[:5]) + (" ..." if len(integ) > 5 else "")
        s = doc["schema"]
        guard = "" if s["purge_guard"] else "; the trigger that keeps purged messages out is missing"
        out.write(_line(doc["_integrity_status"], "integrity",
                        f"{text}; schema {s['version']} (this lcm: {s['current']}){guard}"))
        f = doc["fts"]
        text = ("; ".join(f"{t} {v}" for t, v in f["tables"].items()) if f["tables"]
                else "no FTS5 in this SQLite: search falls back to LIKE")
        out.write(_line(f["status"], "full-text index", text))
        g = doc["dag"]
        text = f"{g['summaries']} summaries, rules hold" if not g["broken"] else (
            f"{g['broken']} of {g['summaries']} summaries break its rules: " + "; ".join(
                f"{x['summary_id']} {x['problems'][0]}" for x in g["faults"][:3]))
        out.write(_line(g["status"], "summary DAG", text))
        b = doc["fallback"]
        text = f"{b['extractive']} extractive, {b['fallback']} fallback, {b['truncated']} truncated summaries"
        if b["fallback"]:
            text += (f" (fallback: the model failed while writing them: {', '.join(b['fallback_ids'][:3])}"
                     + (" ..." if b["fallback"] > 3 else "") + ")")
        if b["upgradable"]:
            text += (f"; a model ({b['backend']}) can now rewrite them: lcm_compact.py --upgrade"
                     f" --session {b['sessions'][0]}" + (" (and each other session listed by --json)" if len(b['sessions']) > 1 else ""))
        out.write(_line(b["status"], "fallback summaries", text))
    st = doc["stale"]
    text = (f"{len(st['stage_dirs'])} stage directories of killed imports ({', '.join(st['stage_dirs'][:3])}); "
            if st["stage_dirs"] else "no stage directories of killed imports; ")
    text += f"{len(st['locks_held'])} locks held by running processes, {len(st['locks_idle'])} idle lock files"
    out.write(_line(st["status"], "stale files", text))
    h = doc["hooks"]
    ran = {e: t for e, t in h["last_run"].items() if t}
    text = ("installed: " + "; ".join(h["installed"])) if h["installed"] else "not installed (README: Install as a plugin)"
    text += "; last run: " + (", ".join(f"{e} {t}" for e, t in ran.items()) if ran else "never seen")
    if h["last_ingest"]:
        text += f"; last ingest {h['last_ingest']}"
    for event, err in h["last_error"].items():
        text += f"; last {event} failure: {err}"
    out.write(_line(h["status"], "hooks", text))
    k = doc["masking"]
    out.write(_line(k["status"], "masking", "; ".join(k["redact_problems"][:3]) if k["redact_problems"]
                    else "built-in patterns" + (" and redact.txt" if os.path.exists(lcm.mask.redact_path()) else "")))
    m = doc["backend"]
    out.write(_line(m["status"], "model backend", f"{m['backend']} ({m['reason']})" + (
        f"; {m['hint']}" if m.get("hint") else "")))
    out.write(_line(d["status"], "disk", f"{_mb(d['free_bytes'])} free" + (
        "; free some space: writes will fail soon" if d["status"] == "problem" else
        "; less than the vault's size (a backup or VACUUM would not fit)" if d["status"] == "warn" else "")))
    if doc["backup"]:
        out.write(f"Backup written first: {doc['backup']}\n")
    for line in doc["fixed"]:
        out.write(f"Fixed: {line}\n")
    for line in doc["not_fixed"]:
        out.write(f"Not fixed: {line}\n")
    if doc["problems"]:
        fixable = not (doc["fixed"] or doc["not_fixed"]) and _fixable(doc)
        out.write(f"{doc['problems']} problem{'s' * (doc['problems'] != 1)}."
                  + (" Run lcm_doctor.py --fix (it backs the vault up first)." if fixable else "") + "\n")
    else:
        out.write("Healthy.\n")


def _fixable(doc: dict) -> bool:
    """Whether --fix would repair something (a full disk or a read-only vault it cannot)."""
    if doc.get("access"):
        return bool(doc["stale"]["stage_dirs"])
    return any(doc.get(k, {}).get("status") == "problem" for k in ("fts", "dag", "stale")) or bool(
        doc.get("unopenable")) or doc.get("_integrity_status") == "problem"


def _count(doc: dict) -> int:
    statuses = [doc[k]["status"] for k in CHECKS if k in doc]
    statuses.append(doc.get("_integrity_status", "problem"))  # absent: the file could not be read at all
    readable_but_damaged = bool(doc.get("unopenable")) and "_integrity_status" in doc
    return statuses.count("problem") + bool(doc.get("access")) + readable_but_damaged


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("--fix", action="store_true", help="back up the vault, then repair what the checks found")
    p.add_argument("--remask", action="store_true", help="back up the vault, then mask text stored before masking"
                   " (or before a redact.txt pattern was added)")
    args = p.parse_args(argv)
    path = str(lcm.config.db_path(args.db))
    if not os.path.exists(path):
        raise LcmError(f"no vault at {path}", "run lcm_init.py or lcm_ingest.py --all first, or pass --db")
    if os.path.isdir(path):
        raise LcmError(f"{path} is a directory, not a vault", "pass --db PATH of the vault file (lcm.db)")
    conn, why = _open(args.db)
    doc = {"db": path, "integrity": None, "backup": None, "fixed": [], "not_fixed": []}
    if why is not None:  # damaged (however much of it can still be read), or not writable here
        damaged = conn is None or getattr(why, "cause", None) == "corrupt"
        doc["unopenable" if damaged else "access"] = f"{why.message} ({why.hint})" if why.hint else why.message
    if conn is None:
        doc["integrity"] = [why.message]
    run_checks(conn, doc)
    if args.fix:
        fix(conn, doc)
    if args.remask:
        remask(conn, doc)
    if doc["fixed"] and conn is not None:
        run_checks(conn, doc)  # report the state after the repairs
    doc["problems"] = _count(doc)
    if args.json:
        doc["status"] = "problem" if doc["problems"] else "ok"
        doc.pop("_integrity_status", None)
        lcm.cli.print_json(doc)
    else:
        _print(doc)
    return 1 if doc["problems"] else 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
