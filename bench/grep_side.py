"""Grep side by side: this tree on its vault against another tree on its vault of the same corpus.

Usage:
  python3 bench/grep_side.py --base-tree TREE --base-db BASE.db --db NEW.db [--rounds 3]

For each of bench/grep.py's queries, lcm.search.engine.search in-process (all sessions), the
best of 5 runs, in a fresh interpreter per tree and round, rounds alternating base / new (a
loaded machine's preemptions filtered out, its drift shared). Reports the median over queries
of each round (wall and thread CPU), the medians of the rounds, the difference in ms (issue 32:
at most +1 ms), and whether every query gave the same result set (types, ids and snippets, in order, a stored file by its session: its id is drawn at random;
regex mode and a CJK query included). A regex that matches little (a scan to its time limit,
3 s) and the CJK query are timed once per round (`base_slow`, `new_slow`: ms, whether the
result said it stopped early, count). Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from grep import QUERIES  # noqa: E402  (the same queries as the grep benchmark)

RUN = """
import json, sys, time
sys.path.insert(0, {scripts!r})
import lcm.vault.db, lcm.search.engine, lcm.search.query
Q = lcm.search.query.Query
conn = lcm.vault.db.connect({db!r}, create=False, readonly=True)
queries = {queries!r}
def ids(doc):
    # a stored file's id is random (file_ + 16 hex, drawn at import): it is known by its session instead
    return [[r.get("type"), r.get("session_id") if r.get("type") == "file" else r.get("uuid") or r.get("id"),
             r.get("snippet")] for r in doc["results"]]
found = {{}}
for q in queries:
    found[q] = ids(lcm.search.engine.search(conn, Q(q, all_sessions=True)))
found["regex:time(out|d)"] = ids(lcm.search.engine.search(conn, Q("time(out|d)", mode="regex", all_sessions=True)))
# regex mode scans the stored text newest first until its time limit: its time and whether it said it stopped
slow = {{}}
for name, q in (("regex", Q("t.{{0,40}}imeou[tz]+ x?", mode="regex", all_sessions=True)),
                ("cjk", Q("日本語 テスト", all_sessions=True))):
    t = time.perf_counter()
    doc = lcm.search.engine.search(conn, q)
    slow[name] = {{"ms": round((time.perf_counter() - t) * 1000, 1), "stopped_early": doc.get("stopped_early", False), "count": doc["count"]}}
times, cpu = [], []
for q in queries:
    best, best_cpu = 1e9, 1e9
    for _ in range(5):
        t, c = time.perf_counter(), time.thread_time()
        lcm.search.engine.search(conn, Q(q, all_sessions=True))
        best, best_cpu = min(best, time.perf_counter() - t), min(best_cpu, time.thread_time() - c)
    times.append(best * 1000)
    cpu.append(best_cpu * 1000)
print(json.dumps([times, cpu, found, slow]))
"""


def run(tree: str, db: str):
    out = subprocess.run([sys.executable, "-c", RUN.format(scripts=os.path.join(tree, "scripts"), db=db,
                                                          queries=QUERIES)], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-tree", required=True)
    p.add_argument("--base-db", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    doc = {"base": [], "new": [], "base_cpu": [], "new_cpu": [], "load": []}
    same = None
    for _ in range(a.rounds):
        for side, tree, db in (("base", a.base_tree, a.base_db), ("new", str(HERE.parent), a.db)):
            times, cpu, found, slow = run(tree, db)
            doc.setdefault(side + "_slow", []).append(slow)
            doc[side].append(round(statistics.median(times), 3))
            doc[side + "_cpu"].append(round(statistics.median(cpu), 3))
            if side == "base":
                base_found = found
            else:
                same = [q for q in found if found[q] != base_found.get(q)] if same is None else same
        doc["load"].append(os.getloadavg()[0])
    doc["median_base_ms"] = statistics.median(doc["base"])
    doc["median_new_ms"] = statistics.median(doc["new"])
    doc["diff_ms"] = round(doc["median_new_ms"] - doc["median_base_ms"], 3)
    doc["diff_cpu_ms"] = round(statistics.median(doc["new_cpu"]) - statistics.median(doc["base_cpu"]), 3)
    doc["queries_differing"] = same
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
