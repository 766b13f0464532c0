"""Wall time of a hook's incremental ingest of one new turn, against a bare Python start.

Usage:
  python3 bench/hook_ingest.py [--vault PATH] [--corpus DIR] [--runs 10] [--python EXE]

Takes the largest session transcript of the corpus that the vault was built from, copies it
beside the vault (so the shared corpus is never modified) and ingests the copy once (untimed:
every line is already in the vault). Then, --runs times: append one new turn (prompt, text,
tool call, tool result, answer: 5 lines) and run, as a NEW PROCESS the way a hook does,
  python3 -c "import lcm.vault.db, lcm.capture.ingest; lcm.capture.ingest.ingest_file(lcm.vault.db.connect(VAULT), PATH)"
interleaved with a bare `python3 -c pass`. Medians of both, and the same pair with `-S` (the
plugin's hooks start Python with -S). The added rows are deleted again at the end.
Prints one JSON line; the target is hook median <= 1.5x the bare start.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import time
import uuid as uuidlib
from pathlib import Path

from benchlib import real_python

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
HOOK = ("import sys; sys.path.insert(0, {scripts!r}); import lcm.vault.db, lcm.capture.ingest; "
        "r = lcm.capture.ingest.ingest_file(lcm.vault.db.connect({vault!r}), {path!r}); "
        "sys.exit(0 if r['messages_added'] == 5 else 3)")


def turn_lines(sid: str, cwd: str, n: int) -> list[str]:
    """One realistic turn of 5 conversation lines."""
    parent, lines = None, []
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    base = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": sid,
            "version": "2.1.114", "gitBranch": "main", "timestamp": stamp}
    tool_id = f"toolu_bench{n:04d}"
    bodies = [
        ("user", {"role": "user", "content": f"Turn {n}: run the parser tests and fix what fails"}),
        ("assistant", {"role": "assistant", "content": [{"type": "text", "text": "Running the tests first."}]}),
        ("assistant", {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": "Bash",
                                                         "input": {"command": "pytest tests/test_parser.py -q"}}]}),
        ("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "is_error": True,
                                               "content": "F.." + " assert parse('a=1') == {'a': 1}\n" * 40}]}),
        ("assistant", {"role": "assistant", "content": [{"type": "text", "text": "One failure in parse(); fixing."}]}),
    ]
    for kind, message in bodies:
        entry = {"parentUuid": parent, **base, "type": kind, "uuid": str(uuidlib.uuid4()), "message": message}
        if kind == "assistant":
            message.update(id=f"msg_bench{n:04d}", model="claude-sonnet-4-5-20250929",
                           usage={"input_tokens": 3, "cache_read_input_tokens": 90_000, "output_tokens": 120})
        parent = entry["uuid"]
        lines.append(json.dumps(entry, separators=(",", ":")))
    return lines


def wall(cmd: list[str], env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vault", default="/tmp/lcm-bench/vault-1m.db")
    p.add_argument("--corpus", default="/tmp/lcm-bench/corpus-1m")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--python", help="interpreter for both the hook and the baseline"
                                    " (default: the binary behind `python3` on PATH)")
    args = p.parse_args()
    args.python = args.python or real_python()
    if not os.path.exists(args.vault):
        raise SystemExit(f"no vault at {args.vault}: run bench/ingest.py first")
    mains = [f for f in Path(args.corpus).rglob("*.jsonl") if "subagents" not in f.parts]
    source = max(mains, key=lambda f: f.stat().st_size)
    work = Path(args.vault).parent / "hook-bench"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    path = work / source.name
    shutil.copyfile(source, path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "PYTHON"))}
    env["LCM_HOME"] = str(work / "lcm-home")
    first = json.loads(source.read_bytes().split(b"\n", 1)[0])
    conn = sqlite3.connect(args.vault, timeout=30)
    session_before = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (first["sessionId"],)).fetchone()
    vault_messages = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    hook = [args.python, "-c", HOOK.format(scripts=str(SCRIPTS), vault=args.vault, path=str(path))]
    setup = hook[:2] + [hook[2].replace("== 5", ">= 0")]
    wall(setup, env)  # first sight of the copy: every uuid is already stored
    added: list[str] = []
    times: dict[str, list[float]] = {"hook": [], "bare": [], "hook_S": [], "bare_S": []}
    try:
        for n in range(args.runs):
            for flag, suffix in (([], ""), (["-S"], "_S")):
                lines = turn_lines(first["sessionId"], first.get("cwd", "/tmp"), len(added))
                with open(path, "a") as f:
                    f.write("\n".join(lines) + "\n")
                added += [json.loads(line)["uuid"] for line in lines]
                times["bare" + suffix].append(wall([args.python, *flag, "-c", "pass"], env))
                times["hook" + suffix].append(wall([hook[0], *flag, *hook[1:]], env))
    finally:
        with conn:
            conn.executemany("DELETE FROM messages WHERE uuid = ?", [(u,) for u in added])
            conn.execute("DELETE FROM transcripts WHERE path = ?", (str(path),))
            if session_before is not None:
                conn.execute(f"REPLACE INTO sessions VALUES ({','.join('?' * len(session_before))})", session_before)
        conn.close()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    print(json.dumps({
        "vault_messages": vault_messages, "transcript_bytes": source.stat().st_size, "runs": args.runs,
        "hook_median_ms": round(med["hook"], 1), "bare_python_median_ms": round(med["bare"], 1),
        "ratio": round(med["hook"] / med["bare"], 2),
        "hook_S_median_ms": round(med["hook_S"], 1), "bare_python_S_median_ms": round(med["bare_S"], 1),
        "ratio_S": round(med["hook_S"] / med["bare_S"], 2), "target_ratio": 1.5,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
