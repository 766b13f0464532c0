"""Hook speed on a 1,000,000-message vault: UserPromptSubmit and Stop, run the way Claude Code runs them.

Usage:
  python3 bench/hooks.py [--vault PATH] [--runs 10] [--wait SECONDS] [--base TREE --base-vault PATH] [--with-backup]
  python3 bench/hooks.py --backlog-only [--backlog-lines 20000]

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
With --with-backup, a third series times Stop while lcm_backup.py copies the same vault, one
backup after another (reported under "with_backup"; target: the same 1.5x). The automatic
backup is off (LCM_BACKUP=0) in the other series, so none competes with them.
With --base, another checkout's hooks (e.g. `git worktree add /tmp/base <commit>`) run in the
same loop against their own vault, so both trees meet the same load; reported under "base".
Both trees are byte-compiled first, as an installed plugin is. Medians of --runs. Target: each hook at most 1.5x the bare interpreter. Compaction is kept from
being due (LCM_LEAF_CHUNK_TOKENS very large) so no background compaction competes for the CPU;
the due check itself still runs its queries. Prints one JSON line.

Backlog (also printed, as "backlog"): a fresh vault, and a session of --backlog-lines transcript
lines that the hooks see for the first time (the plugin installed mid-session, or a long session
resumed). The first Stop ingests it all and detaches a compaction (LCM_LLM=none, default
settings); turns go on meanwhile. Reported: the first Stop's time, the median Stop while the
compaction runs, the seconds until the backlog is compacted (target: within 60), then the median
of 9 Stop hooks against a bare `python3 -c pass` (target: at most 1.5x).
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


def turn_lines(turn: Transcript, i: int) -> None:
    """One coding turn: a request, a command and its output, an edit, an answer (7 lines)."""
    turn.user(f"turn {i}: the parser drops case {i}; please fix it and rerun the tests")
    turn.assistant_text(f"I'll look at parser.py for case {i}.")
    run = turn.tool_use("Bash", {"command": f"pytest -q tests/test_parser.py -k case{i}"})
    turn.tool_result(run, f"FAILED tests/test_parser.py::test_case{i} - AssertionError\n" + "trace line\n" * 20,
                     is_error=i % 4 == 0)
    edit = turn.tool_use("Edit", {"file_path": f"/home/user/proj/parser_{i % 50}.py",
                                  "old_string": f"case {i}", "new_string": f"case {i} + 1"})
    turn.tool_result(edit, f"The file /home/user/proj/parser_{i % 50}.py has been updated.")
    turn.assistant_text(f"Case {i} is fixed: the guard now runs before the split.")


def backlog(python: str, lines: int) -> dict:
    """The backlog scenario of the module docstring."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import lcm.summary.dag
    import lcm.base.config
    import lcm.vault.db
    import lcm.base.errors
    scratch = Path(tempfile.mkdtemp(prefix="lcm-bench-backlog-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "CLAUDE"))}
        env.update({"LCM_HOME": str(scratch / "lcm"), "CLAUDE_PLUGIN_ROOT": str(ROOT), "LCM_LLM": "none"})
        os.environ.update({"LCM_HOME": env["LCM_HOME"], "LCM_LLM": "none"})
        project = scratch / "proj"
        project.mkdir()
        turn = Transcript(scratch / "projects", cwd=str(project))
        i = 0
        while len(turn.pending) < lines:
            turn_lines(turn, i)
            i += 1
        path = turn.write()
        payload = json.dumps({"session_id": turn.session_id, "transcript_path": str(path), "cwd": turn.cwd,
                              "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "ok",
                              "background_tasks": [], "session_crons": []}).encode()
        stop_cmd, bare_cmd = [python, "-S", str(ROOT / "hooks" / "stop.py")], [python, "-c", "pass"]

        def running() -> bool:
            try:
                with lcm.summary.dag.session_lock(turn.session_id, blocking=False):
                    return False
            except lcm.base.errors.LcmError:
                return True

        started = time.perf_counter()
        first_ms = timed(stop_cmd, payload, env)  # ingests every line, detaches the compaction
        during = []
        while time.perf_counter() - started < 600:
            time.sleep(0.5)
            conn = lcm.vault.db.connect()
            try:
                due = lcm.summary.dag.compaction_due(conn, turn.session_id)
            finally:
                conn.close()
            if not running() and (not due or time.perf_counter() - started > 30 and not during):
                break  # drained (or no compaction ever started: the log says why)
            if running():
                turn_lines(turn, i)
                i += 1
                turn.write()
                during.append(timed(stop_cmd, payload, env))
        drained_s = time.perf_counter() - started
        bare, after = [], []
        for _ in range(9):
            turn_lines(turn, i)
            i += 1
            turn.write()
            bare.append(timed(bare_cmd, b"", env))
            after.append(timed(stop_cmd, payload, env))
        conn = lcm.vault.db.connect()
        leaves = conn.execute("SELECT count(*) FROM summaries WHERE kind = 'leaf'").fetchone()[0]
        raw_left = lcm.summary.dag.body_rows(conn, turn.session_id, lcm.base.config.get("LCM_FRESH_TAIL_COUNT"))
        log = scratch / "lcm" / "lcm.log"
        med_bare, med_after = statistics.median(bare), statistics.median(after)
        return {
            "lines": lines, "first_stop_ms": round(first_ms, 1), "compacted_within_s": round(drained_s, 1),
            "target_s": 60, "leaves": leaves,
            "raw_tokens_left_before_tail": sum(r["token_count"] for r in raw_left if not r["covered"]),
            "stop_during_compaction_ms": round(statistics.median(during), 1) if during else None,
            "stop_during_compaction_ratio": round(statistics.median(during) / med_bare, 2) if during else None,
            "stops_during_compaction": len(during),
            "bare_python_ms": round(med_bare, 1), "stop_after_ms": round(med_after, 1),
            "stop_after_ratio": round(med_after / med_bare, 2), "target_ratio": TARGET,
            "ok": drained_s <= 60 and med_after <= TARGET * med_bare,
            "hook_log_lines": (log.read_text().splitlines() if log.exists() else [])[:3],
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Side:
    """One tree's hooks against its own vault: a scratch copy of one of its transcripts, the
    hooks.json command lines, and the turns appended to the copy."""

    def __init__(self, tree: Path, vault: str, python: str):
        self.tree, self.vault = tree, vault
        # an installed copy has its modules byte-compiled (pip does it; so does a first run unless
        # PYTHONDONTWRITEBYTECODE is set): measure that state, not a compile on every start
        subprocess.run([python, "-m", "compileall", "-q", str(tree / "scripts"), str(tree / "hooks")], check=True)
        # ... and masking's compiled patterns beside it (lcm.base.mask's store, which a first run
        # writes unless PYTHONDONTWRITEBYTECODE is set); an older tree (no such module) is let be
        subprocess.run([python, "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import lcm.base.mask;"
                        " lcm.base.mask.mask('password: token')", str(tree / "scripts")], capture_output=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
        source, sid, cwd = pick_transcript(vault)
        self.scratch = Path(tempfile.mkdtemp(prefix="lcm-bench-hooks-"))
        self.copy = self.scratch / Path(source).name
        shutil.copyfile(source, self.copy)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "CLAUDE"))}
        self.env.update({"LCM_DB": vault, "LCM_HOME": str(self.scratch / "lcm"), "CLAUDE_PLUGIN_ROOT": str(tree),
                         "LCM_LEAF_CHUNK_TOKENS": str(10 ** 9), "LCM_BACKUP": "0"})  # --with-backup runs its own
        self.base = {"session_id": sid, "transcript_path": str(self.copy), "cwd": cwd, "prompt_id": "bench",
                     "permission_mode": "default"}
        self.ups_cmd = [python, "-S", str(tree / "hooks" / "user_prompt_submit.py")]
        self.stop_cmd = [python, "-S", str(tree / "hooks" / "stop.py")]
        self.turn = Transcript(self.scratch, session_id=sid, cwd=cwd)
        self.times: dict[str, list[float]] = {"ups": [], "stop": [], "recall": [], "stop_backup": []}

    def append_lines(self) -> None:
        with open(self.copy, "a", encoding="utf-8") as f:
            for line in self.turn.pending:
                f.write(line + "\n")
        self.turn.pending.clear()

    def prompt(self, i: int, env: dict | None = None) -> float:
        text = f"bench turn {i}: please rerun the parser tests and report the failures"
        self.turn.user(text)
        self.append_lines()
        payload = json.dumps({**self.base, "hook_event_name": "UserPromptSubmit", "prompt": text}).encode()
        return timed(self.ups_cmd, payload, env or self.env)

    def stop(self, i: int) -> float:
        self.turn.assistant_text(f"Turn {i}: the parser tests pass now.")
        call = self.turn.tool_use("Bash", {"command": f"pytest -q tests/test_parser.py -k case{i}"})
        self.turn.tool_result(call, "3 passed in 0.12s")
        self.turn.assistant_text("Done.")
        self.append_lines()
        payload = json.dumps({**self.base, "hook_event_name": "Stop", "stop_hook_active": False,
                              "last_assistant_message": "Done.", "background_tasks": [],
                              "session_crons": []}).encode()
        return timed(self.stop_cmd, payload, self.env)

    def report(self, bare: float, runs: int) -> dict:
        med = {name: round(statistics.median(xs), 1) for name, xs in self.times.items() if xs}
        conn = sqlite3.connect(f"file:{self.vault}?mode=ro", uri=True)
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        added = conn.execute("SELECT count(*) FROM messages WHERE transcript_path = ?", (str(self.copy),)).fetchone()[0]
        conn.close()
        log = self.scratch / "lcm" / "lcm.log"
        errors = log.read_text().splitlines() if log.exists() else []
        return {
            "tree": str(self.tree), "vault": self.vault, "vault_messages": messages,
            "turn_lines_ingested": added, "expected_lines": 5 * (runs + 1) + runs,
            "user_prompt_submit_ms": med["ups"], "stop_ms": med["stop"],
            "user_prompt_submit_ratio": round(med["ups"] / bare, 2), "stop_ratio": round(med["stop"] / bare, 2),
            "user_prompt_submit_with_recall_ms": med["recall"],
            "user_prompt_submit_with_recall_ratio": round(med["recall"] / bare, 2),
            "ok": med["ups"] <= TARGET * bare and med["stop"] <= TARGET * bare and not errors,
            "warmup_first_ingest_ms": self.warmup_ms, "hook_log_lines": errors[:3],
        }


class BackupLoop:
    """lcm_backup.py of the side's vault, one after another, until finish(): the Stop hooks timed
    meanwhile meet a backup at every stage (the copy, fsync, quick_check)."""

    def __init__(self, side: Side, python: str):
        import threading
        self.side, self.python = side, python
        self.env = {**side.env, "LCM_BACKUP_KEEP": "1"}
        self.stop, self.done, self.seconds = threading.Event(), 0, []
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        time.sleep(0.5)  # under way before the first timed hook

    def _run(self) -> None:
        cmd = [self.python, str(self.side.tree / "scripts" / "lcm_backup.py"), "--to", str(self.side.scratch / "backups"),
               "--json", "--auto"]  # as the Stop hook starts it: low CPU and I/O priority
        while not self.stop.is_set():
            proc = subprocess.run(cmd, env=self.env, capture_output=True)
            if proc.returncode != 0:
                raise SystemExit(f"lcm_backup.py failed: {proc.stderr.decode()[-500:]}")
            self.done += 1
            self.seconds.append(json.loads(proc.stdout)["seconds"])

    def finish(self) -> dict:
        self.stop.set()
        self.thread.join()
        return {"backups_completed": self.done,
                "backup_s": round(statistics.median(self.seconds), 2) if self.seconds else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vault", default=DEFAULT_VAULT)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--wait", type=float, default=0, help="seconds to wait for the bench vault's READY file")
    p.add_argument("--python", help="interpreter to time (default: the binary behind `python3` on PATH)")
    p.add_argument("--backlog-lines", type=int, default=20000, help="size of the backlog session (0: skip)")
    p.add_argument("--backlog-only", action="store_true", help="only the backlog scenario (no 1M vault needed)")
    p.add_argument("--base", help="another checkout of lcm whose hooks run interleaved with this tree's")
    p.add_argument("--base-vault", help="the vault the --base tree's hooks write to (its own schema)")
    p.add_argument("--with-backup", action="store_true",
                   help="also time Stop hooks while lcm_backup.py copies the vault, one backup after another")
    args = p.parse_args(argv)
    python = args.python or real_python()
    if args.backlog_only:
        print(json.dumps({"backlog": backlog(python, args.backlog_lines), "load_avg": os.getloadavg()[0]}))
        return 0
    if bool(args.base) != bool(args.base_vault):
        raise SystemExit("--base and --base-vault go together")

    deadline = time.monotonic() + args.wait
    while args.vault == DEFAULT_VAULT and not os.path.exists(READY) and time.monotonic() < deadline:
        time.sleep(5)
    for vault in filter(None, (args.vault, args.base_vault)):
        if not os.path.exists(vault):
            print(json.dumps({"error": f"no vault at {vault}; run bench/ingest.py first (it writes {READY})"}))
            return 1

    sides = [Side(ROOT, args.vault, python)]
    if args.base:
        sides.append(Side(Path(args.base).resolve(), args.base_vault, python))
    try:
        for side in sides:
            warm_started = time.perf_counter()
            side.prompt(0)  # warm-up: first sight of the copied file
            side.warmup_ms = round((time.perf_counter() - warm_started) * 1000, 1)
            side.stop(0)
        bare, bare_s = [], []
        # interleaved, so that load affects the interpreter and every side's hooks alike
        for i in range(1, args.runs + 1):
            bare.append(timed([python, "-c", "pass"], b"", sides[0].env))
            bare_s.append(timed([python, "-S", "-c", "pass"], b"", sides[0].env))  # what -S alone saves
            for side in sides:
                side.times["ups"].append(side.prompt(i))
                side.times["stop"].append(side.stop(i))
        for i in range(args.runs + 1, 2 * args.runs + 1):  # LCM_RECALL=1: opt-in
            for side in sides:
                side.times["recall"].append(side.prompt(i, {**side.env, "LCM_RECALL": "1"}))
        if args.with_backup:
            backups = BackupLoop(sides[0], python)
            try:
                for i in range(2 * args.runs + 1, 3 * args.runs + 1):
                    bare.append(timed([python, "-c", "pass"], b"", sides[0].env))
                    sides[0].times["stop_backup"].append(sides[0].stop(i))
            finally:
                backup_figures = backups.finish()
        med_bare = statistics.median(bare)
        result = {"runs": args.runs, "bare_python_ms": round(med_bare, 1),
                  "bare_python_S_ms": round(statistics.median(bare_s), 1), "target_ratio": TARGET,
                  **sides[0].report(med_bare, args.runs), "python": python, "load_avg": os.getloadavg()[0]}
        if args.with_backup:
            result["expected_lines"] += 4 * args.runs  # the turns of the series beside the backups
            during = statistics.median(sides[0].times["stop_backup"])
            result["with_backup"] = {**backup_figures, "stop_ms": round(during, 1),
                                     "stop_ratio": round(during / med_bare, 2),
                                     "vs_stop_without": round(during / result["stop_ms"], 2),
                                     "ok": during <= TARGET * med_bare}
        if args.base:
            result["base"] = sides[1].report(med_bare, args.runs)
        if args.backlog_lines:
            result["backlog"] = backlog(python, args.backlog_lines)
        print(json.dumps(result))
        return 0
    finally:
        for side in sides:
            shutil.rmtree(side.scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
