"""Hook speed on a 1,000,000-message vault: UserPromptSubmit and Stop, run the way Claude Code runs them.

Usage:
  python3 bench/hooks.py [--vault PATH] [--runs 10] [--wait SECONDS]

The vault is the one bench/ingest.py builds (/tmp/lcm-bench/vault-1m.db, ready when
/tmp/lcm-bench/READY exists; --wait polls for it). One main transcript it already holds is copied
to a scratch directory (the corpus stays untouched) and ingested once as a warm-up. Each run then
appends one turn to that copy and times, as separate processes with the hooks.json command line
(`python3 -S hooks/<hook>.py`, payload on stdin):
  - UserPromptSubmit, after the user line is appended (incremental ingest of that line);
  - Stop, after the assistant lines are appended (ingest + the compaction-due check);
  - a bare `python3 -c pass` (the target's yardstick) and, for reference, `python3 -S -c pass`,
    interleaved with the hooks so load affects all of them alike.
A second series times UserPromptSubmit with LCM_RECALL=1 (opt-in, so outside the target).
Medians of --runs. Target: each hook at most 1.5x the bare interpreter. Compaction is kept from
being due (LCM_LEAF_CHUNK_TOKENS very large) so no background compaction competes for the CPU;
the due check itself still runs its queries. Prints one JSON line.
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
import time
from pathlib import Path

from benchlib import real_python

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from transcripts import Transcript  # noqa: E402

DEFAULT_VAULT = "/tmp/lcm-bench/vault-1m.db"
READY = "/tmp/lcm-bench/READY"
TARGET = 1.5


def pick_transcript(vault: str) -> tuple[str, str, str]:
    """(path, session_id, cwd) of a main-session transcript in the vault whose file still exists."""
    conn = sqlite3.connect(f"file:{vault}?mode=ro", uri=True)
    try:
        total = conn.execute("SELECT count(*) FROM transcripts WHERE agent_id IS NULL").fetchone()[0]
        rows = conn.execute("SELECT path, session_id FROM transcripts WHERE agent_id IS NULL"
                            " ORDER BY size LIMIT 50 OFFSET ?", (total // 2,)).fetchall()  # mid-sized
        for path, sid in rows:
            if os.path.isfile(path):
                cwd = conn.execute("SELECT cwd FROM messages WHERE session_id = ? AND cwd IS NOT NULL LIMIT 1",
                                   (sid,)).fetchone()
                return path, sid, (cwd[0] if cwd else "/home/user/proj")
    finally:
        conn.close()
    raise SystemExit(f"no transcript file of {vault} exists any more; rebuild the bench vault")


def timed(cmd: list[str], stdin: bytes, env: dict) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vault", default=DEFAULT_VAULT)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--wait", type=float, default=0, help="seconds to wait for the bench vault's READY file")
    p.add_argument("--python", help="interpreter to time (default: the binary behind `python3` on PATH)")
    args = p.parse_args(argv)

    deadline = time.monotonic() + args.wait
    while args.vault == DEFAULT_VAULT and not os.path.exists(READY) and time.monotonic() < deadline:
        time.sleep(5)
    if not os.path.exists(args.vault):
        print(json.dumps({"error": f"no vault at {args.vault}; run bench/ingest.py first (it writes {READY})"}))
        return 1

    source, sid, cwd = pick_transcript(args.vault)
    scratch = Path(tempfile.mkdtemp(prefix="lcm-bench-hooks-"))
    try:
        copy = scratch / Path(source).name
        shutil.copyfile(source, copy)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "CLAUDE"))}
        env.update({"LCM_DB": args.vault, "LCM_HOME": str(scratch / "lcm"), "CLAUDE_PLUGIN_ROOT": str(ROOT),
                    "LCM_LEAF_CHUNK_TOKENS": str(10 ** 9)})
        base = {"session_id": sid, "transcript_path": str(copy), "cwd": cwd, "prompt_id": "bench",
                "permission_mode": "default"}
        python = args.python or real_python()
        ups_cmd = [python, "-S", str(ROOT / "hooks" / "user_prompt_submit.py")]
        stop_cmd = [python, "-S", str(ROOT / "hooks" / "stop.py")]
        bare_cmd = [python, "-c", "pass"]
        bare_s_cmd = [python, "-S", "-c", "pass"]  # for reference: what -S alone saves
        turn = Transcript(scratch, session_id=sid, cwd=cwd)

        def append_lines() -> None:
            with open(copy, "a", encoding="utf-8") as f:
                for line in turn.pending:
                    f.write(line + "\n")
            turn.pending.clear()

        def prompt_payload(i: int) -> bytes:
            text = f"bench turn {i}: please rerun the parser tests and report the failures"
            turn.user(text)
            append_lines()
            return json.dumps({**base, "hook_event_name": "UserPromptSubmit", "prompt": text}).encode()

        def stop_payload(i: int) -> bytes:
            turn.assistant_text(f"Turn {i}: the parser tests pass now.")
            call = turn.tool_use("Bash", {"command": f"pytest -q tests/test_parser.py -k case{i}"})
            turn.tool_result(call, "3 passed in 0.12s")
            turn.assistant_text("Done.")
            append_lines()
            return json.dumps({**base, "hook_event_name": "Stop", "stop_hook_active": False,
                               "last_assistant_message": "Done.", "background_tasks": [],
                               "session_crons": []}).encode()

        warm_started = time.perf_counter()
        timed(ups_cmd, prompt_payload(0), env)  # warm-up: first sight of the copied file
        warmup_ms = (time.perf_counter() - warm_started) * 1000
        timed(stop_cmd, stop_payload(0), env)
        recall_env = {**env, "LCM_RECALL": "1"}
        bare, bare_s, ups, stop, recall = [], [], [], [], []
        for i in range(1, args.runs + 1):
            bare.append(timed(bare_cmd, b"", env))
            bare_s.append(timed(bare_s_cmd, b"", env))
            ups.append(timed(ups_cmd, prompt_payload(i), env))
            stop.append(timed(stop_cmd, stop_payload(i), env))
        for i in range(args.runs + 1, 2 * args.runs + 1):  # informational: LCM_RECALL=1 is opt-in
            recall.append(timed(ups_cmd, prompt_payload(i), recall_env))
        conn = sqlite3.connect(f"file:{args.vault}?mode=ro", uri=True)
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        added = conn.execute("SELECT count(*) FROM messages WHERE transcript_path = ?", (str(copy),)).fetchone()[0]
        conn.close()
        log = scratch / "lcm" / "lcm.log"
        errors = log.read_text().splitlines() if log.exists() else []
        med = {name: round(statistics.median(xs), 1) for name, xs in
               (("bare", bare), ("bare_s", bare_s), ("ups", ups), ("stop", stop), ("recall", recall))}
        result = {
            "vault": args.vault, "vault_messages": messages, "runs": args.runs,
            "turn_lines_ingested": added, "expected_lines": 5 * (args.runs + 1) + args.runs,
            "bare_python_ms": med["bare"], "bare_python_S_ms": med["bare_s"], "user_prompt_submit_ms": med["ups"], "stop_ms": med["stop"],
            "user_prompt_submit_ratio": round(med["ups"] / med["bare"], 2),
            "stop_ratio": round(med["stop"] / med["bare"], 2), "target_ratio": TARGET,
            "user_prompt_submit_with_recall_ms": med["recall"],
            "ok": med["ups"] <= TARGET * med["bare"] and med["stop"] <= TARGET * med["bare"] and not errors,
            "warmup_first_ingest_ms": round(warmup_ms, 1), "hook_log_lines": errors[:3],
            "python": python, "load_avg": os.getloadavg()[0],
        }
        print(json.dumps(result))
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
