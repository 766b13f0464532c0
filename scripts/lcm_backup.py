"""Back up the vault now, or list its backups: verified copies lcm also takes by itself, daily.

Usage:
  python3 scripts/lcm_backup.py [--to DIR] [--db PATH] [--json]
  python3 scripts/lcm_backup.py --list [--to DIR] [--db PATH] [--json]

Claude Code deletes transcripts after cleanupPeriodDays (30 days by default); from then on the
vault is the only copy of a session. The Stop hook therefore starts a backup by itself, detached,
once every LCM_BACKUP_INTERVAL_HOURS (24) unless LCM_BACKUP=0. A backup is a complete vault file
(SQLite's online backup API: consistent while hooks write), checked after writing (quick_check,
row counts), mode 0600 in a 0700 directory: LCM_BACKUP_DIR, else $LCM_HOME/backups. The newest
LCM_BACKUP_KEEP (3) are kept in each directory (fewer while they exceed LCM_BACKUP_MAX_MB).
--to DIR writes one to another disk (kept within the same bound there); lcm remembers DIR, so a
later lcm_purge.py rewrites those backups too. lcm_doctor.py --fix restores from the newest one.

Examples:
  python3 "$LCM_SCRIPTS/lcm_backup.py"
  python3 "$LCM_SCRIPTS/lcm_backup.py" --to /mnt/usb/lcm-backups
  python3 "$LCM_SCRIPTS/lcm_backup.py" --list
"""
from __future__ import annotations

import sys

import lcm.base.config
import lcm.base.shell
import lcm.care.backup
import lcm.cli


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("--to", metavar="DIR", help="write the backup there (another disk) instead of the backup directory")
    p.add_argument("--list", action="store_true", help="list the backups of the vault, newest first")
    p.add_argument("--auto", action="store_true", help="what the Stop hook runs: at a low CPU and disk priority,"
                   " and quietly nothing when another backup is running")
    args = p.parse_args(argv)
    lcm.base.config.validate_config()
    vault = lcm.base.config.db_path_str(args.db)
    if args.list:
        found = lcm.care.backup.list_backups(vault, [args.to] if args.to else None)
        if args.json:
            lcm.cli.print_json({"items": found, "count": len(found)})
            return 0
        for b in found:
            print(f"{b['taken']}  {b['bytes'] / 1e6:8.1f} MB  {b['path']}")
        if not found:
            print(lcm.base.shell.runnable("No backups yet: lcm_backup.py makes one."))
        return 0
    if args.auto:
        lcm.care.backup.yield_cpu()
    try:
        doc = lcm.care.backup.backup(vault, args.to)
    except lcm.care.backup.BackupRunning:
        if args.auto:
            return 0  # the hook's run found a manual one under way: that one is today's
        raise
    if args.json:
        lcm.cli.print_json(doc)
        return 0
    print(f"Backed up {doc['counts']['messages']} messages to {doc['path']} ({doc['bytes'] / 1e6:.1f} MB,"
          f" verified, {doc['seconds']:.1f} s).")
    for path in doc["removed"]:
        print(f"Removed an older backup past the bound: {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
