"""lcm usage over a large vault: the report by each grouping, and a whole lcm_usage.py process.

Usage:
  python3 bench/usage.py [--corpus DIR] [--vault PATH] [--repeat N]

Imports --corpus (bench/gen_corpus.py --messages 1000000) into --vault first when the vault
does not exist yet. Target (issue 34): under 2 s over a 1,000,000-message vault. Prints one
JSON line: messages, usage rows, responses counted, seconds of each grouping (best of
--repeat, in-process), seconds of a whole `lcm_usage.py --by day --json` process, and the
target.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

TARGET_SECONDS = 2.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="/tmp/lcm-bench/corpus-1m")
    p.add_argument("--vault", default="/tmp/lcm-bench/vault-usage-1m.db")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    ingest = None
    if not os.path.exists(args.vault):
        started = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "lcm_ingest.py"), "--db", args.vault, args.corpus,
                        "--json"], check=True, stdout=subprocess.DEVNULL)
        ingest = round(time.perf_counter() - started, 1)
    import lcm.vault.db
    import lcm.readers.usage
    conn = lcm.vault.db.connect(args.vault, create=False, readonly=True)
    figures = {"messages": conn.execute("SELECT count(*) FROM messages").fetchone()[0],
               "usage_rows": conn.execute("SELECT count(*) FROM usage").fetchone()[0], "ingest_seconds": ingest}
    for by in lcm.readers.usage.BY:
        best = None
        for _ in range(args.repeat):
            started = time.perf_counter()
            doc = lcm.readers.usage.report(conn, by)
            took = time.perf_counter() - started
            best = took if best is None else min(best, took)
        figures[f"by_{by}_seconds"] = round(best, 3)
        figures["responses"] = doc["totals"]["responses"]
    best = None
    for _ in range(args.repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "lcm_usage.py"), "--db", args.vault, "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        took = time.perf_counter() - started
        best = took if best is None else min(best, took)
    figures["process_seconds"] = round(best, 3)
    figures["target_seconds"] = TARGET_SECONDS
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
