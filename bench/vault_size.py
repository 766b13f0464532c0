"""Vault size against transcript size, and what packing costs, side by side with another tree.

Usage:
  python3 bench/vault_size.py --corpus DIR --base TREE [--out DIR] [--imports 1] [--rounds 2] [--hooks]

TREE is a checkout of lcm before packing (e.g. `git worktree add /tmp/base <commit>`). In one
run, for the base tree and this one:
  import  = `lcm_ingest.py DIR` into a fresh vault, wall and CPU time (--imports runs each,
            alternating; the best of each is reported);
  pack    = this tree only: `lcm_compact.py --pack --all`, then `--pack --vacuum`, timed apart;
  size    = vault bytes / transcript bytes, and where the bytes are (dbstat: tables, the
            full-text index, other indexes, free pages; plus the summed column lengths), for the
            base vault as imported and after VACUUM, and this tree's after import and after packing;
  grep    = median in-process lcm.search.engine.search time of bench/grep.py's queries, each the best
            of 5 runs (--rounds alternating rounds in fresh interpreters, each warmed first);
  expand  = lcm.readers.expand.expand(uuid, raw=True) of 300 random messages plus reading their lines:
            median, p95 and max in milliseconds;
  hooks   = with --hooks, each tree's bench/hooks.py on its own vault (Stop and UserPromptSubmit
            against a bare python3), --backlog-lines 0.
Prints one JSON document.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NEW = HERE.parent
sys.path.insert(0, str(HERE))
from grep import QUERIES  # noqa: E402  (the same queries as the grep benchmark)


def corpus_bytes(corpus: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(corpus)
               for n in names if n.endswith(".jsonl"))


def file_bytes(db: str) -> int:
    return sum(os.path.getsize(p) for p in (db, db + "-wal") if os.path.exists(p))


def breakdown(db: str, transcripts: int) -> dict:
    """Where the vault's bytes are, as fractions of the transcript bytes."""
    import sqlite3
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL's pages in the file, the WAL empty
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    doc = {"vault_bytes": file_bytes(db), "ratio": round(file_bytes(db) / transcripts, 3)}
    parts: dict[str, int] = {}
    try:
        kinds = dict(conn.execute("SELECT name, type FROM sqlite_master"))
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            key = ("fts" if "_fts" in name else "table:" + name if kinds.get(name) == "table" and name in
                   ("messages", "blocks") else "indexes" if kinds.get(name) == "index" or name.startswith("sqlite_autoindex")
                   else "other tables")
            parts[key] = parts.get(key, 0) + size
    except sqlite3.OperationalError:  # no dbstat in this build: pages only
        parts["all pages"] = conn.execute("PRAGMA page_count").fetchone()[0] * page
    parts["free pages"] = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
    doc["parts"] = {k: round(v / transcripts, 3) for k, v in sorted(parts.items())}
    cols = [r[1] for r in conn.execute("PRAGMA table_info(messages)")]
    sums = conn.execute("SELECT sum(length(CAST(raw AS BLOB))), sum(length(CAST(content AS BLOB))),"
                        " sum(length(transcript_path)) FROM messages").fetchone()
    doc["columns"] = {"raw": round((sums[0] or 0) / transcripts, 3), "content": round((sums[1] or 0) / transcripts, 3),
                      "transcript_path": round((sums[2] or 0) / transcripts, 3)}
    if "block_id" in cols:
        doc["columns"]["blocks.data"] = round((conn.execute("SELECT sum(length(data)) FROM blocks").fetchone()[0] or 0)
                                              / transcripts, 3)
    conn.close()
    return doc


def timed(cmd: list[str], cpu: list | None = None) -> tuple[float, dict]:
    """(wall seconds, the JSON it printed); the CPU seconds it and its children used go to `cpu`."""
    import resource
    start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cpu is not None:
        cpu.append(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2))
    if out.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr[-2000:]}")
    try:
        return took, json.loads(out.stdout)
    except ValueError:
        return took, {}


GREP = """
import json, statistics, sys, time
sys.path.insert(0, {scripts!r})
import lcm.vault.db, lcm.search.engine, lcm.search.query
conn = lcm.vault.db.connect({db!r}, create=False, readonly=True)
queries = {queries!r}
for q in queries:
    lcm.search.engine.search(conn, lcm.search.query.Query(q, all_sessions=True))
times, cpu = [], []
for q in queries:  # the best of 5 runs of each query: a loaded machine's preemptions filtered out
    best, best_cpu = 1e9, 1e9
    for _ in range(5):
        t, c = time.perf_counter(), time.thread_time()
        lcm.search.engine.search(conn, lcm.search.query.Query(q, all_sessions=True))
        best, best_cpu = min(best, time.perf_counter() - t), min(best_cpu, time.thread_time() - c)
    times.append(best * 1000)
    cpu.append(best_cpu * 1000)
print(json.dumps([times, cpu]))
"""

EXPAND = """
import json, random, statistics, sys, time
sys.path.insert(0, {scripts!r})
import lcm.vault.db, lcm.readers.expand
conn = lcm.vault.db.connect({db!r}, create=False, readonly=True)
uuids = [r[0] for r in conn.execute("SELECT uuid FROM messages ORDER BY id")]
random.Random(7).shuffle(uuids)
times, cpu, size = [], [], 0
for uuid in uuids[:300]:
    t, c = time.perf_counter(), time.thread_time()
    doc = lcm.readers.expand.expand(conn, uuid, raw=True, max_tokens=10**9)
    size += sum(len(bytes(r["raw"])) for r in doc["_rows"])
    times.append((time.perf_counter() - t) * 1000)
    cpu.append((time.thread_time() - c) * 1000)
times.sort()
cpu.sort()
print(json.dumps({{"median_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(len(times) * .95)], 3),
                  "max_ms": round(times[-1], 3), "cpu_median_ms": round(statistics.median(cpu), 3),
                  "cpu_p95_ms": round(cpu[int(len(cpu) * .95)], 3), "cpu_max_ms": round(cpu[-1], 3), "bytes": size}}))
"""


def in_tree(tree: Path, code: str, db: str, **kw):
    out = subprocess.run([sys.executable, "-c", code.format(scripts=str(tree / "scripts"), db=db, **kw)],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--base", required=True, help="a checkout of lcm before packing")
    p.add_argument("--out", default="/tmp/lcm-vault-size")
    p.add_argument("--imports", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--hooks", action="store_true")
    args = p.parse_args(argv)
    trees = {"base": Path(args.base).resolve(), "new": NEW}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    transcripts = corpus_bytes(args.corpus)
    report: dict = {"corpus": args.corpus, "transcript_bytes": transcripts}
    vaults = {name: str(out / f"{name}.db") for name in trees}
    imports: dict[str, list] = {name: [] for name in trees}
    import_cpu: dict[str, list] = {name: [] for name in trees}
    loads: dict[str, list] = {}
    for _ in range(args.imports):
        for name, tree in trees.items():
            for suffix in ("", "-wal", "-shm", "-turn.lock", "-pack.lock"):
                if os.path.exists(vaults[name] + suffix):
                    os.remove(vaults[name] + suffix)
            took, doc = timed([sys.executable, str(tree / "scripts" / "lcm_ingest.py"), args.corpus,
                               "--db", vaults[name], "--json"], import_cpu[name])
            imports[name].append(round(took, 2))
            loads.setdefault(name, []).append(round(os.getloadavg()[0], 2))  # the machine's load as it ended
            report.setdefault("messages", doc.get("messages_added"))
    report["import_s"] = {name: min(ts) for name, ts in imports.items()}
    report["import_s_all"] = imports
    report["import_load_all"] = loads
    report["import_ratio"] = round(report["import_s"]["new"] / report["import_s"]["base"], 3)
    # CPU seconds of the import and its parser process: its cost without the machine's other load
    report["import_cpu_s"] = {name: min(ts) for name, ts in import_cpu.items()}
    report["import_cpu_ratio"] = round(report["import_cpu_s"]["new"] / report["import_cpu_s"]["base"], 3)
    report["size"] = {"base_imported": breakdown(vaults["base"], transcripts),
                      "new_imported": breakdown(vaults["new"], transcripts)}
    compact = [sys.executable, str(NEW / "scripts" / "lcm_compact.py"), "--db", vaults["new"], "--json"]
    pack_cpu: list = []
    took, doc = timed(compact + ["--pack", "--all"], pack_cpu)
    report["pack_s"] = round(took, 2)
    report["pack_cpu_s"] = pack_cpu[0]
    report["pack_to_import"] = round(took / report["import_s"]["new"], 3)
    took, _ = timed(compact + ["--pack", "--vacuum"])
    report["vacuum_s"] = round(took, 2)
    report["size"]["new_packed"] = breakdown(vaults["new"], transcripts)
    start = time.perf_counter()
    base_vacuumed = str(out / "base-vacuumed.db")
    shutil.copyfile(vaults["base"], base_vacuumed)
    import sqlite3
    sqlite3.connect(base_vacuumed).execute("VACUUM")
    report["size"]["base_vacuumed"] = breakdown(base_vacuumed, transcripts)
    report["base_vacuum_s"] = round(time.perf_counter() - start, 2)
    os.remove(base_vacuumed)
    grep: dict[str, list] = {name: [] for name in trees}
    grep_cpu: dict[str, list] = {name: [] for name in trees}
    expand: dict[str, list] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            wall, cpu = in_tree(tree, GREP, vaults[name], queries=QUERIES)
            loads.setdefault("grep", []).append(round(os.getloadavg()[0], 2))
            grep[name] += wall
            grep_cpu[name] += cpu
            expand[name].append(in_tree(tree, EXPAND, vaults[name]))
    import statistics
    report["grep_median_ms"] = {name: round(statistics.median(ts), 2) for name, ts in grep.items()}
    report["grep_ratio"] = round(report["grep_median_ms"]["new"] / report["grep_median_ms"]["base"], 3)
    # CPU time of the searching thread: what the code costs, without the waits a loaded machine adds
    report["grep_cpu_median_ms"] = {name: round(statistics.median(ts), 2) for name, ts in grep_cpu.items()}
    report["grep_cpu_ratio"] = round(report["grep_cpu_median_ms"]["new"] / report["grep_cpu_median_ms"]["base"], 3)
    report["expand"] = {name: runs[-1] for name, runs in expand.items()}
    if args.hooks:
        report["hooks"] = {}
        for name, tree in trees.items():
            _, doc = timed([sys.executable, str(tree / "bench" / "hooks.py"), "--vault", vaults[name],
                            "--runs", "10", "--backlog-lines", "0"])
            report["hooks"][name] = doc
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
