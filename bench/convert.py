"""Converting a vault from before blocks, online: time, peak extra disk, and the hooks meanwhile.

Usage:
  python3 bench/convert.py --vault PATH [--vacuum] [--hook-every SECONDS]

PATH is a vault an lcm from before blocks wrote (e.g. the base tree's `lcm_ingest.py` of a
1,000,000-message bench/gen_corpus.py corpus); it is converted in place. While
`lcm_compact.py --pack --all` runs (after the schema migration, timed apart), a Stop hook
(`python3 -S hooks/stop.py`, this tree) runs every --hook-every seconds on a copy of one of the
vault's transcripts with a new turn appended, and each hook's wall time is recorded; lcm.log
tells whether any gave up waiting (it then leaves its lines to the next hook). Disk: the vault
file, its -wal and -shm, and SQLite's temp directory (set to a scratch directory) are sampled every
0.2 s; peak extra = the largest total minus the vault's size before. With --vacuum, the same
is measured for `lcm_compact.py --pack --vacuum` afterwards (writers wait while VACUUM runs).
Prints one JSON document.
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
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
from transcripts import Transcript  # noqa: E402  (the tests' transcript writer)


def dir_bytes(path: str) -> int:
    total = 0
    for d, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(d, n))
            except OSError:
                pass
    return total


def vault_bytes(vault: str) -> int:
    return sum(os.path.getsize(p) for p in (vault, vault + "-wal", vault + "-shm") if os.path.exists(p))


def pick_transcript(vault: str) -> tuple[str, str]:
    conn = sqlite3.connect(f"file:{vault}?mode=ro", uri=True)
    try:
        for path, sid in conn.execute("SELECT path, session_id FROM transcripts WHERE agent_id IS NULL"
                                     " AND session_id IS NOT NULL ORDER BY size"):
            if os.path.isfile(path):
                return path, sid
    finally:
        conn.close()
    raise SystemExit("no transcript of the vault exists any more")


def run_phase(cmd: list[str], vault: str, tmpdir: str, hook, every: float) -> dict:
    """Run cmd; meanwhile sample disk and run the hook every `every` seconds."""
    before = vault_bytes(vault)
    peak = [0]
    hooks: list[float] = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], vault_bytes(vault) + dir_bytes(tmpdir) - before)
            time.sleep(0.2)

    def hooking():
        while not done.is_set():
            hooks.append(hook())
            done.wait(every)

    env = {**os.environ, "SQLITE_TMPDIR": tmpdir}
    threads = [threading.Thread(target=sample), threading.Thread(target=hooking)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for t in threads:
        t.start()
    out, err = proc.communicate()
    took = time.perf_counter() - started
    done.set()
    for t in threads:
        t.join()
    if proc.returncode:
        raise SystemExit(f"{cmd} failed: {err[-2000:]}")
    return {"seconds": round(took, 1), "bytes_before": before, "bytes_after": vault_bytes(vault),
            "peak_extra_bytes": peak[0], "hooks": len(hooks),
            "hook_median_s": round(statistics.median(hooks), 3) if hooks else None,
            "hook_max_s": round(max(hooks), 3) if hooks else None, "hook_times_s": [round(h, 3) for h in hooks],
            "result": json.loads(out)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vault", required=True)
    p.add_argument("--vacuum", action="store_true")
    p.add_argument("--hook-every", type=float, default=0.5)
    args = p.parse_args(argv)
    vault = os.path.abspath(args.vault)
    scratch = tempfile.mkdtemp(prefix="lcm-bench-convert-")
    try:
        source, sid = pick_transcript(vault)
        copy = os.path.join(scratch, os.path.basename(source))
        shutil.copyfile(source, copy)
        tmpdir = os.path.join(scratch, "sqlite-tmp")
        os.mkdir(tmpdir)
        home = os.path.join(scratch, "lcm")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "CLAUDE"))}
        env.update({"LCM_DB": vault, "LCM_HOME": home, "CLAUDE_PLUGIN_ROOT": str(ROOT),
                    "LCM_LEAF_CHUNK_TOKENS": str(10 ** 9)})  # no compaction competes
        turn = Transcript(Path(scratch), session_id=sid, cwd="/home/user/proj")
        count = [0]

        def hook() -> float:
            count[0] += 1
            turn.user(f"convert bench turn {count[0]}")
            turn.assistant_text(f"turn {count[0]} done")
            with open(copy, "a", encoding="utf-8") as f:
                f.writelines(line + "\n" for line in turn.pending)
            turn.pending.clear()
            payload = json.dumps({"session_id": sid, "transcript_path": copy, "cwd": "/home/user/proj",
                                  "hook_event_name": "Stop", "stop_hook_active": False}).encode()
            started = time.perf_counter()
            subprocess.run([sys.executable, "-S", str(ROOT / "hooks" / "stop.py")], input=payload, env=env,
                           capture_output=True)
            return time.perf_counter() - started

        compact = [sys.executable, str(ROOT / "scripts" / "lcm_compact.py"), "--db", vault, "--json", "--pack"]
        report = {"vault": vault, "vault_bytes_before": vault_bytes(vault)}
        conn = sqlite3.connect(f"file:{vault}?mode=ro", uri=True)
        report["messages"] = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
        report["schema_before"] = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
        # the schema migration alone (the first command or hook of the new lcm runs it)
        report["migrate"] = run_phase([sys.executable, str(ROOT / "scripts" / "lcm_init.py"), "--db", vault, "--json"],
                                      vault, tmpdir, hook, args.hook_every)
        report["pack"] = run_phase(compact + ["--all"], vault, tmpdir, hook, args.hook_every)
        if args.vacuum:
            report["vacuum"] = run_phase(compact + ["--vacuum"], vault, tmpdir, hook, args.hook_every)
        hook()  # one more after: every turn must be in the vault
        conn = sqlite3.connect(f"file:{vault}?mode=ro", uri=True)
        stored = conn.execute("SELECT count(*) FROM messages WHERE session_id = ? AND instr(content, 'convert bench turn')",
                              (sid,)).fetchone()[0]
        conn.close()
        report["turns_written"], report["turns_stored"] = count[0], stored
        log = os.path.join(home, "lcm.log")
        report["hook_log"] = open(log).read().splitlines()[:5] if os.path.exists(log) else []
        print(json.dumps(report, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
