"""Benchmark: extractive `lcm_compact.py --all --full` (LCM_LLM=none) over a large vault.

Usage:
  python3 bench/compact.py [--messages 100000] [--corpus DIR] [--keep DIR] [--seed 1]

Writes a synthetic ~/.claude/projects tree with bench/gen_corpus.py (or uses --corpus), ingests
it into a fresh vault (timed apart), then compacts every session with the default settings.
Prints one JSON line: messages, sessions, compacted (messages now under a leaf), seconds,
messages_per_second, leaf/condensed created, active-context tokens before and after, and the
largest depth reached.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--corpus", help="an existing projects/ tree to use instead of generating one")
    p.add_argument("--keep", help="directory for the corpus and vault (default: a temporary one)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="lcm-bench-compact-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["LCM_HOME"] = str(work / "home")
    os.environ["LCM_LLM"] = "none"
    for name in [n for n in os.environ if n.startswith("LCM_") and n not in ("LCM_HOME", "LCM_LLM")]:
        del os.environ[name]  # default settings only

    corpus = Path(args.corpus) if args.corpus else work / "projects"
    if not args.corpus and not corpus.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_corpus.py"), "--messages", str(args.messages),
                        "--out", str(corpus), "--seed", str(args.seed)], check=True, stdout=subprocess.DEVNULL)

    import lcm.summary.compact

    import lcm.vault.db
    import lcm.capture.bulk
    import lcm.capture.ingest

    conn = lcm.vault.db.connect(str(work / "home" / "lcm.db"))
    started = time.perf_counter()
    lcm.capture.bulk.ingest_paths(conn, [str(corpus)])
    ingest_seconds = time.perf_counter() - started
    sessions = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages ORDER BY session_id")]
    messages = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]

    started = time.perf_counter()
    results = [lcm.summary.compact.compact(conn, s, mode="full") for s in sessions]
    seconds = time.perf_counter() - started
    compacted = conn.execute("SELECT COUNT(*) FROM summary_sources WHERE message_id IS NOT NULL").fetchone()[0]
    before = sum(r["tokens_before"] for r in results)
    after = sum(r["tokens_after"] for r in results)
    again = time.perf_counter()
    rerun = [lcm.summary.compact.compact(conn, s, mode="full") for s in sessions]
    rerun_seconds = time.perf_counter() - again
    print(json.dumps({
        "bench": "compact_extractive_full",
        "messages": messages,
        "sessions": len(sessions),
        "compacted": compacted,
        "ingest_seconds": round(ingest_seconds, 2),
        "seconds": round(seconds, 2),
        "messages_per_second": round(compacted / seconds) if seconds else None,
        "leaf_created": sum(r["leaf_created"] for r in results),
        "condensed_created": sum(r["condensed_created"] for r in results),
        "max_depth": conn.execute("SELECT MAX(depth) FROM summaries").fetchone()[0],
        "tokens_before": before,
        "tokens_after": after,
        "reduction": round(1 - after / before, 4) if before else None,
        "rerun_created": sum(r["leaf_created"] + r["condensed_created"] for r in rerun),
        "rerun_seconds": round(rerun_seconds, 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
