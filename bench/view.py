"""Page render times of lcm_view.py on a large vault: every page a person opens, served by the real
server on 127.0.0.1 and fetched over HTTP, as the browser would.

Usage:
  python3 bench/view.py [--db /tmp/lcm-bench/vault-1m.db] [--runs 5]

Pages: the sessions list (first page and a later one, a title filter), the longest session (its
first page, its last page, and the page a search hit links to), its summary DAG, a leaf and a
condensed node, and search (five queries). When the longest session has no summaries yet, it is
compacted once first (LCM_LLM=none, small leaves so its DAG has several levels): that writes
summaries into the bench vault, nothing else. Target: every page under 300 ms (the median of
--runs; the worst run is printed too). Prints one JSON line.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import lcm.vault.db  # noqa: E402
from lcm.view.server import Viewer  # noqa: E402

QUERIES = ["database migration", "why did the deploy fail", "TypeError undefined", "retry backoff timeout",
           "pytest fixture"]


def fetch(port: int, token: str, path: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    started = time.perf_counter()
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}", "Cookie": f"lcm_view={token}"})
    response = conn.getresponse()
    response.read()
    elapsed = time.perf_counter() - started
    conn.close()
    if response.status != 200:
        raise SystemExit(f"{path}: HTTP {response.status}")
    return elapsed * 1000


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--db", default="/tmp/lcm-bench/vault-1m.db")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    conn = lcm.vault.db.connect(args.db, create=False)
    messages = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    sid, length = conn.execute("SELECT session_id, count(*) FROM messages GROUP BY session_id"
                               " ORDER BY count(*) DESC LIMIT 1").fetchone()
    if not conn.execute("SELECT 1 FROM summaries WHERE session_id = ? LIMIT 1", (sid,)).fetchone():
        env = {**os.environ, "LCM_DB": args.db, "LCM_LLM": "none", "LCM_LEAF_CHUNK_TOKENS": "4000",
               "LCM_LEAF_MIN_TOKENS": "1000", "LCM_CONDENSED_MIN_FANOUT": "3",
               "LCM_LEAF_MIN_FANOUT": "3"}
        subprocess.run([sys.executable, str(ROOT / "scripts" / "lcm_compact.py"), "--session", sid, "--full"],
                       env=env, check=True, capture_output=True)
    leaf = conn.execute("SELECT id FROM summaries WHERE session_id = ? AND kind = 'leaf' LIMIT 1", (sid,)).fetchone()
    condensed = conn.execute("SELECT id FROM summaries WHERE session_id = ? AND kind = 'condensed'"
                             " ORDER BY depth DESC LIMIT 1", (sid,)).fetchone()
    middle = conn.execute("SELECT uuid FROM messages WHERE session_id = ? ORDER BY seq LIMIT 1 OFFSET ?",
                          (sid, length // 2)).fetchone()[0]
    summaries = conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (sid,)).fetchone()[0]
    conn.close()
    s = quote(sid, safe="")
    paths = {"sessions": "/", "sessions_page_10": "/?page=10", "sessions_filter": "/?q=fix",
             "session_first_page": f"/s/{s}", "session_last_page": f"/s/{s}?page={(length - 1) // 200}",
             "session_at_hit": f"/s/{s}?at={middle}", "dag": f"/s/{s}/dag"}
    if leaf:
        paths["leaf_node"] = f"/n/{leaf[0]}"
    if condensed:
        paths["condensed_node"] = f"/n/{condensed[0]}"
    for i, query in enumerate(QUERIES):
        paths[f"search_{i}"] = "/search?q=" + quote(query)
    server = Viewer(args.db)
    server.start()
    try:
        for path in paths.values():  # warm the page cache once, as a person's second click would be
            fetch(server.port, server.token, path)
        times = {name: [fetch(server.port, server.token, path) for _ in range(args.runs)] for name, path in paths.items()}
    finally:
        server.shutdown()
        server.server_close()
    medians = {name: round(statistics.median(t), 1) for name, t in times.items()}
    print(json.dumps({"messages": messages, "session_messages": length, "session_summaries": summaries,
                      "median_ms": medians, "worst_ms": {n: round(max(t), 1) for n, t in times.items()},
                      "slowest_median_ms": max(medians.values()), "target_ms": 300,
                      "ok": max(medians.values()) < 300}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
