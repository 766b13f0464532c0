"""What verifying a vault costs, per GB: each of lcm_doctor.py's storage checks timed apart.

Usage:
  python3 bench/verify.py [--messages N] [--vault PATH] [--keep DIR]

Without --vault: writes a bench/gen_corpus.py corpus of N messages (default 100,000), imports
it (`lcm_ingest.py --all`) and packs every line (`lcm_compact.py --pack --all --vacuum`), as a
vault the hooks have kept for a while. Then times, on that vault (opened read-only, as doctor
does; the full-text check with a write-capable handle): reading every stored block back whole
(lcm.care.doctor.blocks: decompress, zlib's checksum, framing, each message's place), SQLite's
`PRAGMA quick_check` and `PRAGMA integrity_check`, FTS5's `integrity-check` of each full-text
index, and the whole `lcm_doctor.py` run, plain and `--quick` (a process, as a person runs it). The page cache is
warm (each check runs twice, the second is reported): a cold read adds the disk's own speed.
Prints one JSON line: sizes, seconds of each check, and seconds per GB of vault file.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "scripts"))

import lcm.care.doctor  # noqa: E402
import lcm.care.purge  # noqa: E402
import lcm.vault.db  # noqa: E402


def timed(fn, repeat: int = 2) -> float:
    best = None
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        took = time.perf_counter() - began
        best = took if best is None else min(best, took)
    return round(best, 3)


def build(messages: int, work: str) -> str:
    projects = os.path.join(work, "home", ".claude", "projects")
    subprocess.run([sys.executable, str(HERE / "gen_corpus.py"), "--messages", str(messages), "--out", projects],
                   check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, HOME=os.path.join(work, "home"), LCM_HOME=os.path.join(work, "home", ".claude-lcm"))
    for script, *argv in (("lcm_ingest.py", "--all"), ("lcm_compact.py", "--pack", "--all", "--vacuum")):
        subprocess.run([sys.executable, str(ROOT / "scripts" / script), *argv], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.path.join(work, "home", ".claude-lcm", "lcm.db")


def measure(vault: str) -> dict:
    size = os.path.getsize(vault)
    conn = lcm.vault.db.connect(vault, create=False, readonly=True)
    rw = sqlite3.connect(lcm.vault.db.file_uri(vault, "mode=rw"), uri=True, isolation_level=None)
    tables = lcm.care.purge.fts_tables(conn)
    blocks = lcm.care.doctor.blocks(conn)
    doc = {"vault_bytes": size, "messages": conn.execute("SELECT count(*) FROM messages").fetchone()[0],
           "blocks": blocks["checked"], "block_bytes": blocks["bytes"], "damaged_blocks": len(blocks["damaged"])}
    seconds = {
        "blocks": timed(lambda: lcm.care.doctor.blocks(conn)),
        "quick_check": timed(lambda: conn.execute("PRAGMA quick_check").fetchall()),
        "integrity_check": timed(lambda: conn.execute("PRAGMA integrity_check").fetchall()),
        "fts_integrity": timed(lambda: [rw.execute(f"INSERT INTO \"{t}\"(\"{t}\", rank) VALUES ('integrity-check', 1)")
                                        for t in tables]),
    }
    conn.close()
    rw.close()
    env = dict(os.environ, LCM_LLM="none")
    for name, extra in (("doctor", []), ("doctor_quick", ["--quick"])):
        seconds[name] = timed(lambda: subprocess.run([sys.executable, str(ROOT / "scripts" / "lcm_doctor.py"),
                                                      "--db", vault, *extra], env=env, stdout=subprocess.DEVNULL), 1)
    doc["load_average"] = round(os.getloadavg()[0], 1)  # the machine is shared: the figures scale with it
    doc["seconds"] = seconds
    doc["seconds_per_gb"] = {k: round(v / (size / 1e9), 1) for k, v in seconds.items()}
    return doc


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--vault", help="measure this vault instead of building one")
    p.add_argument("--keep", help="build in this directory and keep it")
    args = p.parse_args()
    if args.vault:
        print(json.dumps(measure(args.vault)))
        return
    work = args.keep or tempfile.mkdtemp(prefix="lcm-bench-verify-")
    os.makedirs(work, exist_ok=True)
    try:
        began = time.perf_counter()
        vault = build(args.messages, work)
        doc = measure(vault)
        doc["build_seconds"] = round(time.perf_counter() - began, 1)
        print(json.dumps(doc))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
