"""Bulk ingest speed against the floor of merely parsing the same lines.

Usage:
  python3 bench/ingest.py [--corpus DIR] [--vault PATH] [--messages N]

Builds the corpus with gen_corpus.py if DIR does not exist, then, in one run:
  floor  = read every transcript and json.loads each line, nothing else;
  ingest = lcm.capture.bulk.ingest_paths into a fresh vault (parse, flatten, insert, FTS index, commit).
Prints one JSON line; the target is ingest messages/second >= 20% of the floor's.
The vault is kept (other benchmarks reuse it).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "scripts"))

import lcm.capture.bulk
import lcm.vault.db  # noqa: E402
import lcm.capture.ingest  # noqa: E402

CONVERSATION = ("user", "assistant", "system")


def floor(files: list[str]) -> tuple[float, int, int]:
    """(seconds, conversation messages, bytes) for reading + json.loads of every line."""
    started = time.perf_counter()
    messages = size = 0
    loads = json.loads
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        size += len(data)
        for line in data.split(b"\n"):
            if line:
                entry = loads(line)
                if entry.get("type") in CONVERSATION and "uuid" in entry:
                    messages += 1
    return time.perf_counter() - started, messages, size


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="/tmp/lcm-bench/corpus-1m")
    p.add_argument("--vault", default="/tmp/lcm-bench/vault-1m.db")
    p.add_argument("--messages", type=int, default=1_000_000, help="corpus size when it must be generated")
    args = p.parse_args()
    if not os.path.isdir(args.corpus):
        subprocess.run([sys.executable, str(HERE / "gen_corpus.py"), "--messages", str(args.messages),
                        "--out", args.corpus], check=True, stdout=subprocess.DEVNULL)
    files = lcm.capture.bulk.transcript_files([args.corpus])
    floor_seconds, floor_messages, size = floor(files)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(args.vault + suffix):
            os.remove(args.vault + suffix)
    os.environ.setdefault("LCM_HOME", str(Path(args.vault).parent / "lcm-home"))  # externalised files
    conn = lcm.vault.db.connect(args.vault)
    started = time.perf_counter()
    result = lcm.capture.bulk.ingest_paths(conn, [args.corpus])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # count the write-back into the main file too
    ingest_seconds = time.perf_counter() - started
    conn.close()
    floor_rate = floor_messages / floor_seconds
    ingest_rate = result["messages_added"] / ingest_seconds
    print(json.dumps({
        "messages": result["messages_added"], "files": len(files), "corpus_bytes": size,
        "floor_seconds": round(floor_seconds, 2), "floor_msgs_per_s": round(floor_rate),
        "ingest_seconds": round(ingest_seconds, 2), "ingest_msgs_per_s": round(ingest_rate),
        "ratio": round(ingest_rate / floor_rate, 3), "target_ratio": 0.2,
        "vault_bytes": os.path.getsize(args.vault), "malformed_lines": result["malformed_lines"],
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
