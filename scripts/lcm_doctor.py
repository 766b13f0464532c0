"""Check the vault and the installation, and repair what can be repaired.

Usage:
  python3 scripts/lcm_doctor.py [--fix | --quick] [--remask] [--db PATH] [--json]

Checks, without changing anything: the vault's integrity and schema version; every stored block
of original lines read back whole (its codec byte, zlib's checksum, each message's place in it),
naming the sessions and messages of a damaged one; the full-text indexes against the text they
index; the summary DAG's rules (one parent at most, a leaf covers a contiguous run of one session,
a condensed node's children are one depth below, no message in two leaves); stage directories of
killed imports and lock files left under $LCM_HOME/locks; half-built vaults of killed recoveries
(lcm.db.new-<pid>) and damaged vaults kept aside; summaries written without a model (extractive)
or cut short (truncated); where Claude Code loads the plugin from and whether that directory
still holds it; when each hook last ran (stamps under $LCM_HOME/last-run) or failed
($LCM_HOME/lcm.log), and the sessions recorded since that no hook saw; the model backend lcm
would use, probed at no cost (the claude CLI's login, or the API key against the models list;
"unverified" when it cannot be reached); the vault's size against its transcripts
and what each part weighs as a share of them (the messages table and its searchable text, the
blocks of original lines, full-text indexes, other indexes, other tables, free pages:
storage.parts in --json), lines or text still waiting to be packed, and free disk. One to two and a half
minutes per GB of vault on a busy 2-core machine (bench/verify.py); --quick checks only what
cannot be rebuilt (every stored block, SQLite's quick_check of the tables), not the indexes:
about 40% of that.

--fix copies the vault beside it first (lcm.db.backup-<time>, printed; one copy of a damaged
file, however often it runs), then puts back the lines of damaged blocks (from the transcripts
still on disk, found by uuid, else from the newest backup; what neither holds is listed as lost),
rebuilds damaged indexes, deletes summaries that break the DAG's rules (the next lcm_compact.py
summarises their messages again), and removes stale stage directories, idle lock files and
half-built vaults. It never deletes a message. A vault SQLite cannot read (cut short, a broken
header) is recovered instead: a new vault is built beside it from the newest backup and the
transcripts still on disk, purges applied again, and renamed into place; the damaged file is kept
(lcm.db.damaged-<time>). Killed at any point, it leaves a vault at the path, and the next --fix
completes it. With no backup and no transcript it changes nothing. Doctor without --fix says
what a recovery would bring back and what not.

--remask masks the text stored before masking existed, or before a pattern was added to
$LCM_HOME/redact.txt (the searchable text of messages, summaries, notes, checkpoints, file
explorations, titles; original lines are kept). Backup first; minutes on a very large vault.

Exit 0 when nothing is a problem (warnings are advice), 1 when a problem is found (after --fix:
one it could not repair). --json: `integrity`, a key per check (schema, blocks, fts, dag, stale,
leftovers, fallback, storage, masking, hooks, backend, disk) with a `status` (ok, warn, problem),
`problems`, `fixed`, `backup`, and after --fix `lost` (messages whose lines nothing could restore).

Examples:
  python3 "$LCM_SCRIPTS/lcm_doctor.py"; python3 "$LCM_SCRIPTS/lcm_doctor.py" --fix --json
  python3 "$LCM_SCRIPTS/lcm_doctor.py" --quick       # every stored block, quickly
  python3 "$LCM_SCRIPTS/lcm_doctor.py" --remask      # after adding a pattern to redact.txt
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.care.doctor
import lcm.base.shell


def _line(status: str, name: str, text: str) -> str:
    return f"{status.upper() if status != 'ok' else 'ok':8} {name}: {text}\n"


def _mb(n) -> str:
    return "?" if n is None else f"{n / 1e6:.1f} MB"


def _vault_lines(doc: dict) -> str:
    integ, s, f, g, b = doc["integrity"], doc["schema"], doc["fts"], doc["dag"], doc["fallback"]
    text = "ok" if integ == "ok" else "; ".join(integ[:5]) + (" ..." if len(integ) > 5 else "")
    if doc.get("contents"):
        c = doc["contents"]
        text += f" ({c['sessions']} sessions, {c['messages']} messages, {c['summaries']} summaries)"
    text += f"; schema {s['version']} (this lcm: {s['current']})" + (
        "; lcm_init.py upgrades it (every message is kept)" if s["version"] < s["current"] else "") + (
        "" if s["purge_guard"] else "; the trigger that keeps purged messages out is missing")
    out = _line(doc["_integrity_status"] if s["status"] == "ok" else s["status"], "integrity", text)
    if doc.get("blocks") is not None:
        out += _line(doc["blocks"]["status"], "stored blocks", lcm.care.doctor.blocks_text(doc["blocks"]))
    out += _line(f["status"], "full-text index", "; ".join(f"{t} {v}" for t, v in f["tables"].items())
                 if f["tables"] else "no FTS5 in this SQLite: search falls back to LIKE")
    text = f"{g['summaries']} summaries, rules hold" if not g["broken"] else (
        f"{g['broken']} of {g['summaries']} summaries break its rules: " + "; ".join(
            f"{x['summary_id']} {x['problems'][0]}" for x in g["faults"][:3]))
    out += _line(g["status"], "summary DAG", g.get("not_checked") or text)
    text = f"{b['extractive']} extractive, {b['fallback']} fallback, {b['truncated']} truncated summaries"
    if b["fallback"]:
        text += (f" (fallback: the model failed while writing them: {', '.join(b['fallback_ids'][:3])}"
                 + (" ..." if b["fallback"] > 3 else "") + ")")
    if b["upgradable"]:
        text += (f"; a model ({b['backend']}) can now rewrite them: lcm_compact.py --upgrade --session"
                 f" {b['sessions'][0]}" + (" (and each other session listed by --json)" if len(b["sessions"]) > 1 else ""))
    if doc.get("rebuild_interrupted"):
        out += _line("problem", "rebuild", "an earlier recovery stopped before it had read every transcript")
    out += _line(b["status"], "fallback summaries", text)
    if doc.get("storage") is not None:
        out += _line(doc["storage"]["status"], "storage", lcm.base.shell.runnable(doc["storage"]["text"]))
    return out


def _print(doc: dict) -> None:
    if doc.get("fresh"):
        h = doc["hooks"]
        out = lcm.base.shell.runnable(doc["next"]) + "\n"
        if h["status"] == "problem":
            out += _line("problem", "hooks", f"{h['problem']}; {lcm.base.shell.runnable(h['hint'])}")
        sys.stdout.write(out)
        return
    d = doc["disk"]
    out = (f"Vault {doc['db']} ({_mb(d['vault_bytes'])}, WAL {_mb(d['wal_bytes'])}, stored files "
           f"{_mb(d['files_bytes'])}; {_mb(d['free_bytes'])} free on its disk)\n")
    if doc.get("damage"):
        out += _line("problem", "damage", f"SQLite cannot read the vault ({doc['damage']})")
    if doc.get("access"):
        out += _line("problem", "access", doc["access"])
    if "schema" in doc:
        out += _vault_lines(doc)
    st = doc["stale"]
    text = (f"{len(st['stage_dirs'])} stage directories of killed imports ({', '.join(st['stage_dirs'][:3])}); "
            if st["stage_dirs"] else "no stage directories of killed imports; ")
    out += _line(st["status"], "stale files", text + f"{len(st['locks_held'])} locks held by running processes,"
                 f" {len(st['locks_idle'])} idle lock files")
    out += _line(doc["leftovers"]["status"], "leftovers", lcm.care.doctor.leftovers_text(doc["leftovers"]))
    h = doc["hooks"]
    ran = {e: t for e, t in h["last_run"].items() if t}
    text = ("loaded from: " + "; ".join(h["installed"])) if h["installed"] else "not installed (README: Install)"
    text += "; last run: " + (", ".join(f"{e} {t}" for e, t in ran.items()) if ran else "never seen")
    text += "".join(f"; last {event} failure: {err}" for event, err in h["last_error"].items())
    if h.get("problem"):
        text = f"{h['problem']}; {text}; {lcm.base.shell.runnable(h['hint'])}"
    elif h.get("advice"):
        text = f"{h['advice']}; {text}"
    out += _line(h["status"], "hooks", text)
    k = doc["masking"]
    out += _line(k["status"], "masking", lcm.care.doctor.masking_text(k))
    m = doc["backend"]
    out += _line(m["status"], "model backend", f"{m['backend']} ({m['reason']}): {m.get('detail', '')}"
                 + (f"; {m['hint']}" if m.get("hint") else ""))
    out += _line(d["status"], "disk", f"{_mb(d['free_bytes'])} free" + (
        "; free some space: writes will fail soon" if d["status"] == "problem" else
        "; less than the vault's size (a backup or VACUUM would not fit)" if d["status"] == "warn" else ""))
    if doc["backup"]:
        out += f"Backup written first: {doc['backup']}\n"
    out += "".join(f"Fixed: {line}\n" for line in doc["fixed"])
    out += "".join(f"Not fixed: {line}\n" for line in doc["not_fixed"])
    if doc["recovery"]:
        out += lcm.care.doctor.recovery_text(doc["recovery"])
    if doc["problems"]:
        hint = (" Run lcm_doctor.py --fix (it backs the vault up first)." if not (doc["fixed"] or doc["not_fixed"])
                and lcm.care.doctor.fixable(doc) and not doc.get("damage") else "")
        out += f"{doc['problems']} problem{'s' * (doc['problems'] != 1)}.{hint}\n"
    else:
        out += "Healthy.\n"
    sys.stdout.write(out)


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("--fix", action="store_true", help="back up the vault, then repair what the checks found")
    p.add_argument("--quick", action="store_true", help="check only what cannot be rebuilt (every stored block,"
                   " the tables), not the indexes: about 40%% of the time, for frequent runs")
    p.add_argument("--remask", action="store_true", help="back up the vault, then mask text stored before masking"
                   " (or before a redact.txt pattern was added)")
    args = p.parse_args(argv)
    if args.quick and (args.fix or args.remask):
        p.error("--quick only checks; --fix checks everything first")
    doc = lcm.care.doctor.examine(args.db, quick=args.quick)
    if (args.fix or args.remask) and not doc.get("fresh"):  # no vault yet: nothing to repair
        doc = lcm.care.doctor.repair(doc, remask=args.remask, fix=args.fix)
    doc["status"] = "problem" if doc["problems"] else "ok"
    lcm.cli.print_json({k: v for k, v in doc.items() if k != "_integrity_status"}) if args.json else _print(doc)
    return 1 if doc["problems"] else 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
