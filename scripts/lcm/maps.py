"""Shared machinery of lcm_llm_map.py and lcm_agentic_map.py.

A map job is: validate everything up front (input lines, schema, prompt, output path), keep
run state in the vault (map_runs, map_items) as items finish, run items on a bounded thread
pool without holding the dataset in memory, and at the end write the output in input order to a
temporary file that replaces OUT in one step, so a crash never leaves a half file that looks
complete. `--resume` picks the matching earlier run and redoes only what did not end ok.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import lcm.cli
import lcm.config
import lcm.db
import lcm.mask
from lcm.errors import LcmError

# Rows of finished items are committed in groups: one transaction per item would cost more than
# the call itself at high concurrency; a crash loses at most this much finished work.
FLUSH_EVERY_ITEMS = 64
FLUSH_EVERY_SECONDS = 0.5

# Items queued ahead of the workers: enough to keep them busy, small enough to stay flat in memory.
WINDOW_PER_WORKER = 2

JSON_ONLY_RULES = (
    "Reply with exactly one JSON value (an object, array, string, number, true, false or null) and "
    "nothing else: no explanation before or after it, no markdown, no code fences."
)


class AnswerError(Exception):
    """A model answer that is not valid JSON or does not match the schema (worth a retry)."""


@dataclass
class Outcome:
    """How one item ended in this invocation."""
    ok: bool
    result: object = None
    error: str | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class MapJob:
    """Everything validated before the first model call."""
    kind: str                     # llm | agentic
    input_path: Path
    output_path: Path
    prompt: str
    schema: dict | None
    total: int
    input_sha256: str
    first_item: object = None
    options: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def add_map_args(p, *, concurrency: int, timeout: float, max_attempts: int = 3) -> None:
    p.add_argument("--input", required=True, metavar="IN.jsonl", help="one JSON value per line (blank lines skipped)")
    p.add_argument("--output", required=True, metavar="OUT.jsonl", help="results, one line per item, in input order")
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", metavar="TEXT", help="the instruction applied to every item")
    prompt.add_argument("--prompt-file", metavar="FILE", help="read the instruction from FILE")
    p.add_argument("--schema", metavar="S.json", help="JSON Schema (Draft 2020-12) every result must match")
    p.add_argument("--concurrency", type=_positive_int, default=concurrency, metavar="N",
                   help=f"items in flight at once (default {concurrency})")
    p.add_argument("--model", metavar="M", help="model id or alias (default: $LCM_SUMMARY_MODEL, else a small model)")
    p.add_argument("--max-attempts", type=_positive_int, default=max_attempts, metavar="N",
                   help=f"tries per item when an answer is not valid JSON or breaks the schema (default {max_attempts})")
    p.add_argument("--timeout", type=_positive_float, default=timeout, metavar="S",
                   help=f"seconds allowed per call (default {timeout:g})")
    p.add_argument("--resume", action="store_true",
                   help="continue the earlier run with the same input and output: redo only items not ok")
    p.add_argument("--dry-run", action="store_true",
                   help="validate, count and estimate; no model call, nothing written")


_positive_int = lcm.cli.int_arg(1)  # bounded: a huge count is a usage error, not a crash later
_positive_float = lcm.cli.seconds_arg  # finite and above 0


# ---------------------------------------------------------------------------
# Validation: all of it before any model call or write
# ---------------------------------------------------------------------------

def prepare(args, kind: str) -> MapJob:
    """Check prompt, schema, input and output; LcmError on the first problem."""
    prompt = read_prompt(args.prompt, args.prompt_file)
    schema = load_schema(args.schema) if args.schema else None
    input_path = Path(args.input).expanduser()
    output_path = Path(args.output).expanduser()
    total, digest, first = scan_input(input_path)
    check_output_path(output_path, input_path)
    return MapJob(kind=kind, input_path=input_path.resolve(), output_path=output_path.resolve(), prompt=prompt,
                  schema=schema, total=total, input_sha256=digest, first_item=first)


def read_prompt(text: str | None, path: str | None) -> str:
    if path:
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise LcmError(f"cannot read prompt file {path}: {exc.strerror}", "check the --prompt-file path") from None
    if not (text or "").strip():
        raise LcmError("the prompt is empty", "pass the instruction with --prompt TEXT or --prompt-file FILE")
    return text.strip()


def load_schema(path: str) -> dict:
    """Read a JSON Schema file and check it against the Draft 2020-12 meta-schema."""
    try:
        raw = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise LcmError(f"cannot read schema {path}: {exc.strerror}", "check the --schema path") from None
    try:
        schema = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LcmError(f"schema {path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                       "fix the schema file") from None
    except RecursionError:
        raise LcmError(f"schema {path} is nested too deeply", "fix the schema file") from None
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "(root)"
        raise LcmError(f"schema {path} is not a valid JSON Schema (Draft 2020-12) at {where}: {exc.message}",
                       "fix the schema; see https://json-schema.org/draft/2020-12") from None
    return schema


def scan_input(path: Path) -> tuple[int, str, object]:
    """Stream the input once: count items, hash the bytes, and name the first bad line."""
    if not path.is_file():
        raise LcmError(f"input file {path} does not exist" if not path.exists() else f"input {path} is not a file",
                       "pass --input IN.jsonl: one JSON value per line")
    digest = hashlib.sha256()
    total = 0
    first = None
    try:
        with path.open("rb") as handle:
            for line_no, raw in enumerate(handle, 1):
                digest.update(raw)
                if not raw.strip():
                    continue
                try:
                    value = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
                    reason = (exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
                              if isinstance(exc, UnicodeDecodeError) else "nested too deeply")
                    raise LcmError(f"{path} line {line_no} is not valid JSON: {reason}",
                                   "every non-blank line must be one JSON value (JSON Lines)") from None
                if total == 0:
                    first = value
                total += 1
    except OSError as exc:
        raise LcmError(f"cannot read input {path}: {exc.strerror}", "check the --input path") from None
    if total == 0:
        raise LcmError(f"input {path} has no items", "write one JSON value per line")
    return total, digest.hexdigest(), first


def check_output_path(output: Path, input_path: Path) -> None:
    if output.resolve() == input_path.resolve():
        raise LcmError("--output is the input file", "write the results to another file")
    if output.is_dir():
        raise LcmError(f"output {output} is a directory", "pass a file path to --output")
    parent = output.resolve().parent
    if not parent.is_dir():
        raise LcmError(f"output directory {parent} does not exist", "create it first, or choose another --output")
    if not os.access(parent, os.W_OK):
        raise LcmError(f"cannot write to {parent}", "choose a writable --output location")


def iter_items(path: Path, skip: Callable[[int], bool] | None = None) -> Iterator[tuple[int, object]]:
    """(item_index, value) for every non-blank line, read lazily; `skip(index)` drops done items."""
    index = 0
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            if skip is None or not skip(index):
                yield index, json.loads(raw)
            index += 1


def item_text(value) -> str:
    """What the model sees of an item: a string as is, anything else as compact JSON; secrets masked."""
    return lcm.mask.mask(value) if isinstance(value, str) else json.dumps(lcm.mask.mask_json(value), ensure_ascii=False)


# ---------------------------------------------------------------------------
# Answers: parse, validate, explain the failure for the retry
# ---------------------------------------------------------------------------

def strip_fences(text: str) -> str:
    """Drop a surrounding ```json ... ``` fence, which models add despite being told not to."""
    body = text.strip()
    if body.startswith("```"):
        first_newline = body.find("\n")
        body = body[first_newline + 1:] if first_newline != -1 else body[3:]
        if body.rstrip().endswith("```"):
            body = body.rstrip()[:-3]
    return body.strip()


class AnswerChecker:
    """Turns answer text into a validated JSON value, or raises AnswerError saying why not."""

    def __init__(self, schema: dict | None):
        self.validator = None
        if schema is not None:
            from jsonschema import Draft202012Validator
            self.validator = Draft202012Validator(schema)

    def parse(self, text: str):
        body = strip_fences(text or "")
        if not body:
            raise AnswerError("the answer was empty; expected one JSON value")
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            raise AnswerError(f"the answer is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except RecursionError:
            raise AnswerError("the answer is JSON nested too deeply") from None
        self.check(value)
        return value

    def check(self, value) -> None:
        if self.validator is None:
            return
        errors = sorted(self.validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            where = "/".join(str(part) for part in first.absolute_path) or "(root)"
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise AnswerError(f"the answer does not match the schema at {where}: {first.message}{more}")


def retry_feedback(error: str) -> str:
    return f"That answer was rejected: {error}. Reply again with only the corrected JSON value."


def take_claude_result(outcome: Outcome, result: dict, checker) -> tuple[str, str] | None:
    """Count a `claude -p` result's usage and check its answer: None when accepted, else
    (the rejected answer, why) for the retry prompt."""
    usage = result.get("usage") or {}
    outcome.input_tokens += int(usage.get("input_tokens") or 0)
    outcome.output_tokens += int(usage.get("output_tokens") or 0)
    structured = result.get("structured_output")
    text = json.dumps(structured) if structured is not None else str(result.get("result") or "")
    try:
        outcome.result = checker.parse(text)
    except AnswerError as exc:
        outcome.error = f"{exc} (after {outcome.attempts} attempts)"
        return text, str(exc)
    outcome.ok, outcome.error = True, None
    return None


def schema_rules(schema: dict | None) -> str:
    if schema is None:
        return ""
    return "\n\nThe JSON value must validate against this JSON Schema (Draft 2020-12):\n" + json.dumps(schema, ensure_ascii=False)


# ---------------------------------------------------------------------------
# Run state in the vault
# ---------------------------------------------------------------------------

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
            with lcm.db.transaction(conn):
                conn.execute("UPDATE map_runs SET status = 'running', updated_at = ? WHERE id = ?",
                             (lcm.config.now_iso(), row["id"]))
            state = cls(conn, row["id"], row["total"])
            state.options = json.loads(row["options"] or "{}")
            return state
        if resume:
            sys.stderr.write("lcm: no earlier run for this input and output; starting a new one\n")
        elif row is not None and row["status"] != "done":
            sys.stderr.write(f"lcm: run {row['id']} for the same input and output did not finish; "
                             "--resume would continue it. Starting a new run.\n")
        run_id = lcm.config.new_id("map")
        now = lcm.config.now_iso()
        with lcm.db.transaction(conn):
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
            None if outcome.ok else outcome.error, outcome.input_tokens, outcome.output_tokens, lcm.config.now_iso(),
        ))
        if len(self._pending) >= FLUSH_EVERY_ITEMS or time.monotonic() - self._last_flush >= FLUSH_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        with lcm.db.transaction(self.conn):
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
        with lcm.db.transaction(self.conn):
            self.conn.execute("UPDATE map_runs SET options = ?, updated_at = ? WHERE id = ?",
                              (json.dumps(options, sort_keys=True), lcm.config.now_iso(), self.run_id))

    def finish(self, status: str) -> None:
        self.flush()
        with lcm.db.transaction(self.conn):
            self.conn.execute("UPDATE map_runs SET status = ?, updated_at = ? WHERE id = ?",
                              (status, lcm.config.now_iso(), self.run_id))

    def totals(self) -> dict:
        row = self.conn.execute(
            "SELECT COALESCE(SUM(status = 'ok'), 0), COALESCE(SUM(status = 'error'), 0),"
            " COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0)"
            " FROM map_items WHERE run_id = ?", (self.run_id,)).fetchone()
        return {"succeeded": row[0], "failed": row[1], "input_tokens": row[2], "output_tokens": row[3]}


# ---------------------------------------------------------------------------
# Running items and writing the output
# ---------------------------------------------------------------------------

def progress_bar(total: int, initial: int, desc: str):
    """A tqdm bar on stderr (hidden when stderr is not a terminal); a no-op without tqdm."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit="item", file=sys.stderr, disable=None, leave=False)


def run_items(job: MapJob, state: RunState, process: Callable[[int, object], Outcome], concurrency: int,
              desc: str) -> None:
    """Run `process(index, value)` for every item not yet ok, keeping a bounded window in flight."""
    done = state.done_indices()
    bar = progress_bar(job.total, len(done), desc)
    items = iter_items(job.input_path, skip=done.__contains__)
    window = concurrency * WINDOW_PER_WORKER
    in_flight: dict = {}

    def settle(futures) -> None:
        for future in futures:
            index = in_flight.pop(future)
            try:
                outcome = future.result()
            except LcmError:
                raise  # a configuration problem: every other item would fail the same way
            except Exception as exc:  # an unexpected bug in one item must not lose the others
                outcome = Outcome(ok=False, error=f"internal error: {type(exc).__name__}: {exc}", attempts=1)
            state.record(index, outcome)
            if bar is not None:
                bar.update(1)

    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="lcm-map")
    try:
        for index, value in items:
            while len(in_flight) >= window:
                finished, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
                settle(finished)
            in_flight[pool.submit(process, index, value)] = index
        while in_flight:
            finished, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            settle(finished)
    except BaseException:
        # keep what finished; queued items are dropped, calls already running end on their own
        pool.shutdown(wait=False, cancel_futures=True)
        state.flush()
        raise
    finally:
        if bar is not None:
            bar.close()
    pool.shutdown()
    state.flush()


def write_output(state: RunState, output_path: Path) -> None:
    """Stream the run's items from the vault, in input order, into OUT via a temporary file."""
    tmp = output_path.with_name(f".{output_path.name}.{os.getpid()}.tmp")
    expected = 0
    try:
        with tmp.open("w", encoding="utf-8") as out:
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


def report(state: RunState, output_path: Path) -> int:
    """Write OUT, mark the run done, print the one-line JSON summary."""
    state.flush()
    write_output(state, output_path)
    state.finish("done")
    result = summary(state, output_path)
    if result["failed"]:
        sys.stderr.write(f"lcm: {result['failed']} of {result['total']} items failed (lines with \"ok\": false "
                         f"in {output_path}); rerun the same command with --resume to retry only those\n")
    lcm.cli.print_json(result)
    return 0


# ---------------------------------------------------------------------------
# Cost estimate for --dry-run (list prices in USD per million tokens: input, output)
# ---------------------------------------------------------------------------

PRICES = [  # first matching substring wins; check the pricing page before a large job
    ("opus-4-5", 5.0, 25.0), ("opus-4-6", 5.0, 25.0), ("opus", 15.0, 75.0),
    ("sonnet", 3.0, 15.0),
    ("haiku-4", 1.0, 5.0), ("haiku-3-5", 0.8, 4.0), ("haiku", 0.25, 1.25),
]


def price_of(model: str | None) -> tuple[float, float] | None:
    name = (model or "").lower()
    for key, prompt_price, answer_price in PRICES:
        if key in name:
            return prompt_price, answer_price
    return None


def cost_usd(model: str | None, input_tokens: int, output_tokens: int, batch: bool = False) -> float | None:
    price = price_of(model)
    if price is None:
        return None
    cost = (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
    return round(cost / 2 if batch else cost, 4)  # the Batches API costs half


def estimate_input_tokens(job: MapJob, fixed_text: str) -> int:
    """Estimated prompt tokens of the whole job: the fixed part once per item plus each item."""
    per_item_fixed = lcm.config.estimate_tokens(fixed_text)
    total = 0
    for _index, value in iter_items(job.input_path):
        total += per_item_fixed + lcm.config.estimate_tokens(item_text(value))
    return total
