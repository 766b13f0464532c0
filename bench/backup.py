"""What a backup of a large vault costs: time and bytes, against VACUUM INTO, and what a purge's
rewrite of one backup and a restore cost.

Usage:
  python3 bench/backup.py [--vault PATH] [--compare] [--purge]

The vault is one bench/ingest.py built (default /tmp/lcm-bench/vault-1m.db; a 300k one with
--vault). It is only read: backups go to a scratch directory, removed at the end.
  backup     lcm.care.backup.backup(): SQLite's online backup API in one step, the journal mode
             switched, fsync, quick_check and counts (the verification is timed separately too);
  vacuum     with --compare, `VACUUM INTO` of the same vault (the alternative the module weighs);
  rewrite    with --purge, a purge's rewrite of one backup (lcm.care.backup._rewrite: copy, purge
             of one message, check, rename), and restore() of that backup to a scratch vault.
Prints one JSON line: seconds, bytes, messages, MB/s.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

import lcm.care.backup  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vault", default="/tmp/lcm-bench/vault-1m.db")
    p.add_argument("--compare", action="store_true", help="also time VACUUM INTO of the same vault")
    p.add_argument("--purge", action="store_true", help="also time a purge's rewrite of the backup, and a restore")
    p.add_argument("--scratch", help="directory for the copies (default: beside the vault)")
    args = p.parse_args(argv)
    if not os.path.exists(args.vault):
        print(json.dumps({"error": f"no vault at {args.vault}; run bench/ingest.py first"}))
        return 1
    scratch = Path(tempfile.mkdtemp(prefix="lcm-bench-backup-", dir=args.scratch or os.path.dirname(args.vault)))
    os.environ["LCM_HOME"] = str(scratch / "home")
    os.environ["LCM_BACKUP_KEEP"] = "2"
    result: dict = {"vault": args.vault, "vault_bytes": os.path.getsize(args.vault)}
    try:
        done = lcm.care.backup.backup(args.vault, str(scratch / "backups"))
        started = time.perf_counter()
        lcm.care.backup.verify(done["path"], done["counts"])
        verify_s = time.perf_counter() - started
        result.update({"messages": done["counts"]["messages"], "backup_s": done["seconds"], "backup_bytes": done["bytes"],
                       "verify_s": round(verify_s, 2),
                       "backup_mb_per_s": round(done["bytes"] / 1e6 / max(done["seconds"], 1e-6), 1)})
        if args.compare:
            target = scratch / "vacuum.db"
            started = time.perf_counter()
            conn = sqlite3.connect(args.vault)
            conn.execute("VACUUM INTO ?", (str(target),))
            conn.close()
            result.update({"vacuum_into_s": round(time.perf_counter() - started, 2),
                           "vacuum_into_bytes": os.path.getsize(target)})
            target.unlink()
        if args.purge:
            conn = sqlite3.connect(f"file:{done['path']}?mode=ro", uri=True)
            uuid = conn.execute("SELECT uuid FROM messages ORDER BY id DESC LIMIT 1").fetchone()[0]
            conn.close()
            started = time.perf_counter()
            lcm.care.backup._rewrite(done["path"], {}, {uuid})
            result["purge_rewrite_s"] = round(time.perf_counter() - started, 2)
            started = time.perf_counter()
            lcm.care.backup.restore(done["path"], str(scratch / "restored.db"))
            result["restore_s"] = round(time.perf_counter() - started, 2)
        print(json.dumps(result))
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
