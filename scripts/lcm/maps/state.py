"""Run state of a map job in the vault (map_runs, map_items), the output file and the summary.

Finished items are recorded as they end, so `--resume` redoes only what did not end ok. At the
end the output is written in input order to a temporary file that replaces OUT in one step: a
crash never leaves a half file that looks complete.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import lcm.base.config
import lcm.vault.db
from lcm.base.errors import LcmError
from lcm.maps.job import MapJob, Outcome

# Rows of finished items are committed in groups: one transaction per item would cost more than
# the call itself at high concurrency; a crash loses at most this much finished work.
FLUSH_EVERY_ITEMS = 64
FLUSH_EVERY_SECONDS = 0.5


class RunState:
    """One map run's rows in map_runs / map_items. Used from the main thread only."""

    def __init__(self, conn, run_id: str, total: int):
        self.conn = conn
        self.run_id = run_id
        self.total = total
        self.options: dict = {}
        self._pending: list[tuple] = []
        self._last_flush = time.monotonic()

    @classmethod
    def open(cls, conn, job: MapJob, model: str | None, resume: bool) -> "RunState":
        """A new run, or with resume the latest matching one (same kind, input and output)."""
        row = conn.execute(
            "SELECT * FROM map_runs WHERE kind = ? AND input_path = ? AND output_path = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1",
            (job.kind, str(job.input_path), str(job.output_path)),
        ).fetchone()
        schema_text = json.dumps(job.schema, sort_keys=True) if job.schema is not None else None
        if resume and row is not None:
            if row["input_sha256"] != job.input_sha256:
                raise LcmError(f"{job.input_path} changed since run {row['id']} started",
                               "drop --resume to start a new run over the new input")
            if row["prompt"] != job.prompt or row["schema"] != schema_text:
                raise LcmError(f"run {row['id']} used a different prompt or schema",
                               "resume with the same --prompt/--schema, or drop --resume to start over")
            with lcm.vault.db.transaction(conn):
                conn.execute("UPDATE map_runs SET status = 'running', updated_at = ? WHERE id = ?",
                             (lcm.base.config.now_iso(), row["id"]))
            state = cls(conn, row["id"], row["total"])
            state.options = json.loads(row["options"] or "{}")
            return state
        if resume:
            sys.stderr.write("lcm: no earlier run for this input and output; starting a new one\n")
        elif row is not None and row["status"] != "done":
            sys.stderr.write(_unfinished_note(conn, row))
        run_id = lcm.base.config.new_id("map")
        now = lcm.base.config.now_iso()
        with lcm.vault.db.transaction(conn):
            conn.execute(
                "INSERT INTO map_runs (id, kind, input_path, input_sha256, output_path, prompt, schema, model,"
                " options, status, total, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, job.kind, str(job.input_path), job.input_sha256, str(job.output_path), job.prompt,
                 schema_text, model, json.dumps(job.options, sort_keys=True), "running", job.total, now, now),
            )
        state = cls(conn, run_id, job.total)
        state.options = dict(job.options)
        return state

    def done_indices(self) -> set[int]:
        """Items that already ended ok; everything else is (re)done. Ints only: ~30 MB at 1M items."""
        return {r[0] for r in self.conn.execute(
            "SELECT item_index FROM map_items WHERE run_id = ? AND status = 'ok'", (self.run_id,))}

    def record(self, index: int, outcome: Outcome) -> None:
        self._pending.append((
            self.run_id, index, "ok" if outcome.ok else "error", outcome.attempts,
            json.dumps(outcome.result, ensure_ascii=False) if outcome.ok else None,
            None if outcome.ok else outcome.error, outcome.input_tokens, outcome.output_tokens, lcm.base.config.now_iso(),
        ))
        if len(self._pending) >= FLUSH_EVERY_ITEMS or time.monotonic() - self._last_flush >= FLUSH_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        with lcm.vault.db.transaction(self.conn):
            # attempts and tokens add up over resumes: they are what the run really cost
            self.conn.executemany(
                "INSERT INTO map_items (run_id, item_index, status, attempts, result, error, input_tokens,"
                " output_tokens, updated_at) VALUES (?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT (run_id, item_index) DO UPDATE SET status = excluded.status,"
                " attempts = attempts + excluded.attempts, result = excluded.result, error = excluded.error,"
                " input_tokens = input_tokens + excluded.input_tokens,"
                " output_tokens = output_tokens + excluded.output_tokens, updated_at = excluded.updated_at",
                self._pending,
            )
        self._pending = []

    def save_options(self, options: dict) -> None:
        self.options = options
        with lcm.vault.db.transaction(self.conn):
            self.conn.execute("UPDATE map_runs SET options = ?, updated_at = ? WHERE id = ?",
                              (json.dumps(options, sort_keys=True), lcm.base.config.now_iso(), self.run_id))

    def finish(self, status: str) -> None:
        self.flush()
        with lcm.vault.db.transaction(self.conn):
            self.conn.execute("UPDATE map_runs SET status = ?, updated_at = ? WHERE id = ?",
                              (status, lcm.base.config.now_iso(), self.run_id))

    def totals(self) -> dict:
        row = self.conn.execute(
            "SELECT COALESCE(SUM(status = 'ok'), 0), COALESCE(SUM(status = 'error'), 0),"
            " COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)"
            " FROM map_items WHERE run_id = ?", (self.run_id,)).fetchone()
        return {"succeeded": row[0], "failed": row[1], "input_tokens": row[2], "output_tokens": row[3]}


def _unfinished_note(conn, row) -> str:
    """What to say about an earlier run of the same job that did not end: --resume is worth
    naming only when it would keep finished work (a run that failed before any item ended has
    nothing to continue)."""
    done = conn.execute("SELECT COUNT(*) FROM map_items WHERE run_id = ? AND status = 'ok'", (row["id"],)).fetchone()[0]
    if not done:
        stopped = "failed" if row["status"] == "failed" else "stopped"
        return f"lcm: run {row['id']} for the same input and output {stopped} before any item was done; starting a new run.\n"
    return (f"lcm: run {row['id']} for the same input and output did not finish ({done} of {row['total']} items ok); "
            "--resume would continue it. Starting a new run.\n")


# ---------------------------------------------------------------------------
# The output and the summary
# ---------------------------------------------------------------------------

def write_output(state: RunState, output_path: Path) -> None:
    """Stream the run's items from the vault, in input order, into OUT via a temporary file."""
    tmp = output_path.with_name(f".{output_path.name}.{os.getpid()}.tmp")
    expected = 0
    try:
        # 0600 like every file lcm writes: results may quote what the items held
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as out:
            rows = state.conn.execute(
                "SELECT item_index, status, result, error FROM map_items WHERE run_id = ? ORDER BY item_index",
                (state.run_id,))
            for index, status, result, error in rows:
                if index != expected:
                    raise LcmError(f"run {state.run_id} has no result for item {expected}",
                                   "rerun with --resume to finish it")
                if status == "ok":
                    out.write(f'{{"item_index": {index}, "ok": true, "result": {result}}}\n')
                else:
                    out.write(json.dumps({"item_index": index, "ok": False, "error": error}, ensure_ascii=False) + "\n")
                expected += 1
            if expected != state.total:
                raise LcmError(f"run {state.run_id} has results for {expected} of {state.total} items",
                               "rerun with --resume to finish it")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, output_path)
    finally:
        if tmp.exists():
            tmp.unlink()


def summary(state: RunState, output_path: Path) -> dict:
    totals = state.totals()
    return {"map_id": state.run_id, "total": state.total, "succeeded": totals["succeeded"],
            "failed": totals["failed"], "output": str(output_path), "input_tokens": totals["input_tokens"],
            "output_tokens": totals["output_tokens"]}


def report(state: RunState, output_path: Path) -> dict:
    """Write OUT, mark the run done; the summary the command prints."""
    state.flush()
    write_output(state, output_path)
    state.finish("done")
    result = summary(state, output_path)
    if result["failed"]:
        sys.stderr.write(f"lcm: {result['failed']} of {result['total']} items failed (lines with \"ok\": false "
                         f"in {output_path}); rerun the same command with --resume to retry only those\n")
    return result


