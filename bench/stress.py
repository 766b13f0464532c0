"""Parallel writers on one vault: bulk imports of one tree while a live session's Stop hook fires.

Usage:
  python3 bench/stress.py [--messages 150000] [--imports 6] [--interval 0.05] [--corpus DIR] [--work DIR]

Builds the corpus with gen_corpus.py if DIR does not exist, then starts --imports
`lcm_ingest.py DIR` processes at once into one fresh vault. Meanwhile a live session grows by
one turn (a prompt and an answer) and its Stop hook runs as Claude Code runs it
(`python3 -S hooks/stop.py`, the real payload on stdin), again and again with --interval
seconds between hooks, until every import has exited. Then one more hook.
Checks: every import exits 0, every message of the tree and of the live session is stored
exactly once, PRAGMA integrity_check is ok, the last hook leaves the live session complete.
Prints one JSON line; the target is a hook's maximum wall time under 1.5 s.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid as uuidlib
from pathlib import Path

from benchlib import real_python

ROOT = Path(__file__).resolve().parent.parent
CONVERSATION = ("user", "assistant", "system")


def tree_uuids(corpus: str) -> tuple[set[str], int]:
    """(distinct conversation uuids, lines) of every transcript under corpus."""
    uuids, lines = set(), 0
    for path in Path(corpus).rglob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            lines += 1
            entry = json.loads(line)
            if entry.get("type") in CONVERSATION and entry.get("uuid"):
                uuids.add(entry["uuid"])
    return uuids, lines


class LiveSession:
    """A transcript Claude Code is still writing: one turn appended before each Stop."""

    def __init__(self, work: Path):
        self.sid = str(uuidlib.uuid4())
        self.cwd = str(work)
        self.path = work / "live-projects" / "-live" / f"{self.sid}.jsonl"
        self.path.parent.mkdir(parents=True)
        self.uuids: list[str] = []
        self.parent = None

    def turn(self, n: int) -> None:
        lines = []
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        for kind, message in (("user", {"role": "user", "content": f"turn {n}: run the tests again"}),
                              ("assistant", {"role": "assistant", "model": "claude-sonnet-4-5",
                                             "id": f"msg_live{n:05d}",
                                             "content": [{"type": "text", "text": f"All green at turn {n}."}]})):
            entry = {"parentUuid": self.parent, "isSidechain": False, "userType": "external", "cwd": self.cwd,
                     "sessionId": self.sid, "version": "2.1.197", "gitBranch": "main", "type": kind,
                     "uuid": str(uuidlib.uuid4()), "timestamp": stamp, "message": message}
            self.parent = entry["uuid"]
            self.uuids.append(entry["uuid"])
            lines.append(json.dumps(entry, separators=(",", ":")))
        with open(self.path, "a") as f:
            f.write("\n".join(lines) + "\n")

    def payload(self) -> str:
        return json.dumps({"session_id": self.sid, "transcript_path": str(self.path), "cwd": self.cwd,
                           "permission_mode": "default", "hook_event_name": "Stop", "stop_hook_active": False,
                           "last_assistant_message": "All green.", "prompt_id": "p1", "background_tasks": [],
                           "session_crons": []})


def run_hook(python: str, live: LiveSession, env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run([python, "-S", str(ROOT / "hooks" / "stop.py")], input=live.payload(), text=True,
                          capture_output=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0 or done.stdout:
        raise SystemExit(f"the Stop hook failed ({done.returncode}): {done.stdout} {done.stderr}")
    return wall


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=150_000, help="corpus size when it must be generated")
    p.add_argument("--imports", type=int, default=6, help="parallel lcm_ingest.py processes")
    p.add_argument("--interval", type=float, default=0.05, help="seconds between two Stop hooks")
    p.add_argument("--corpus", help="projects tree (default /tmp/lcm-bench/corpus-<messages>)")
    p.add_argument("--work", default="/tmp/lcm-bench/stress", help="scratch directory (emptied first)")
    args = p.parse_args()
    python = real_python()
    corpus = args.corpus or f"/tmp/lcm-bench/corpus-{args.messages // 1000}k"
    if not os.path.isdir(corpus):
        subprocess.run([sys.executable, str(ROOT / "bench" / "gen_corpus.py"), "--messages", str(args.messages),
                        "--out", corpus], check=True, stdout=subprocess.DEVNULL)
    expected, _ = tree_uuids(corpus)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    vault = work / "vault.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "CLAUDE", "PYTHON"))}
    env.update(LCM_HOME=str(work / "lcm-home"), LCM_DB=str(vault), CLAUDE_PLUGIN_ROOT=str(ROOT))
    live = LiveSession(work)
    live.turn(0)
    run_hook(python, live, env)  # the session already runs (and the vault exists) when the imports start

    started = time.perf_counter()
    imports = [subprocess.Popen([python, str(ROOT / "scripts" / "lcm_ingest.py"), corpus, "--json"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for _ in range(args.imports)]
    hook_walls: list[float] = []
    load = []
    while any(proc.poll() is None for proc in imports):
        live.turn(len(hook_walls) + 1)
        hook_walls.append(run_hook(python, live, env))
        load.append(os.getloadavg()[0])
        time.sleep(args.interval)
    import_seconds = time.perf_counter() - started
    results = []
    for proc in imports:
        out, err = proc.communicate()
        results.append({"exit": proc.returncode, "error": err.strip()[-300:] if proc.returncode else "",
                        "added": json.loads(out)["messages_added"] if proc.returncode == 0 else None,
                        "seconds": json.loads(out)["seconds"] if proc.returncode == 0 else None})
    last_hook = run_hook(python, live, env)

    conn = sqlite3.connect(vault)
    stored = [r[0] for r in conn.execute("SELECT uuid FROM messages")]
    integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    live_stored = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (live.sid,)).fetchone()[0]
    offset = conn.execute("SELECT byte_offset FROM transcripts WHERE path = ?", (str(live.path),)).fetchone()[0]
    conn.close()
    log = work / "lcm-home" / "lcm.log"
    gave_way = sum("busy" in line for line in log.read_text().splitlines()) if log.exists() else 0
    distinct = set(stored)
    walls = sorted(hook_walls)
    print(json.dumps({
        "corpus_messages": len(expected), "imports": args.imports, "import_exits": [r["exit"] for r in results],
        "import_errors": [r["error"] for r in results if r["error"]],
        "import_seconds": [r["seconds"] for r in results], "all_imports_seconds": round(import_seconds, 1),
        "messages_added_by_each": [r["added"] for r in results],
        "stored": len(stored), "distinct": len(distinct), "duplicates": len(stored) - len(distinct),
        "missing": len(expected - distinct), "integrity": integrity,
        "hooks": len(hook_walls), "hooks_gave_way": gave_way,
        "hook_max_s": round(walls[-1], 3) if walls else None,
        "hook_p95_s": round(walls[int(0.95 * (len(walls) - 1))], 3) if walls else None,
        "hook_median_s": round(statistics.median(walls), 3) if walls else None,
        "last_hook_s": round(last_hook, 3),
        "live_messages": len(live.uuids), "live_stored": live_stored,
        "live_complete": live_stored == len(live.uuids) and offset == live.path.stat().st_size,
        "load_avg_1m_max": round(max(load), 1) if load else None, "cpus": os.cpu_count(),
        "target_hook_max_s": 1.5,
        "ok": (all(r["exit"] == 0 for r in results) and len(stored) == len(distinct) == len(expected) + len(live.uuids)
               and integrity == "ok" and live_stored == len(live.uuids) and bool(walls) and walls[-1] < 1.5),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
