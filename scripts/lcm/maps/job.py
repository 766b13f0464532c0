"""A map job: the command line both map tools share, and everything checked before the first
model call (prompt, schema, input lines, output path), plus the --dry-run cost estimate.

Validation streams the input once and keeps only a count, a hash and the first item: a job of
a million lines is checked in constant memory.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import lcm.cli
import lcm.base.config
import lcm.base.mask
from lcm.base.errors import LcmError


@dataclass
class Outcome:
    """How one item ended in this invocation."""
    ok: bool
    result: object = None
    error: str | None = None
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_turns: int = 0           # tool-using turns so far (agents only; not stored)


@dataclass
class MapOptions:
    """What a map run was asked for: the two map commands' flags as plain values."""
    input: str
    output: str
    prompt: str | None = None
    prompt_file: str | None = None
    schema: str | None = None
    db: str | None = None         # the vault that keeps the run's state (default: $LCM_DB ...)
    resume: bool = False
    dry_run: bool = False
    model: str | None = None
    concurrency: int = 4
    max_attempts: int = 3
    timeout: float = 120.0
    max_tokens: int = 1024
    api_retries: int = 2
    batch: bool = False           # llm_map: the Message Batches API
    poll_interval: float = 10.0   # ... its first wait between status checks
    cwd: str = "."                # agentic_map: where the agents work
    allow_write: bool = False
    max_turns: int = 20


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
    p.add_argument("--concurrency", type=positive_int, default=concurrency, metavar="N",
                   help=f"items in flight at once (default {concurrency})")
    p.add_argument("--model", metavar="M", help="model id or alias (default: $LCM_SUMMARY_MODEL, else a small model)")
    p.add_argument("--max-attempts", type=positive_int, default=max_attempts, metavar="N",
                   help=f"tries per item when an answer is not valid JSON or breaks the schema (default {max_attempts})")
    p.add_argument("--timeout", type=lcm.cli.seconds_arg, default=timeout, metavar="S",
                   help=f"seconds allowed per call (default {timeout:g})")
    p.add_argument("--resume", action="store_true",
                   help="continue the earlier run with the same input and output: redo only items not ok")
    p.add_argument("--dry-run", action="store_true",
                   help="validate, count and estimate; no model call, nothing written")


positive_int = lcm.cli.int_arg(1)  # bounded: a huge count is a usage error, not a crash later


def dry_run_code(result: dict) -> int:
    """A command's exit code for its printed document: 1 for a --dry-run no backend could run
    (its "problem" and "hint" say why; the same go to stderr), else 0."""
    if result.get("ready") is False:
        sys.stderr.write(f"Error: {result['problem']}\nHint: {result['hint']}\n")
        return 1
    return 0


# ---------------------------------------------------------------------------
# Validation: all of it before any model call or write
# ---------------------------------------------------------------------------

def prepare(opts: MapOptions, kind: str) -> MapJob:
    """Check prompt, schema, input and output; LcmError on the first problem."""
    prompt = read_prompt(opts.prompt, opts.prompt_file)
    schema = load_schema(opts.schema) if opts.schema else None
    input_path = Path(opts.input).expanduser()
    output_path = Path(opts.output).expanduser()
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
    if output.exists() and not output.is_file():  # a device or FIFO: the final rename would replace it
        raise LcmError(f"output {output} is not a regular file", "pass the path of a file to write to --output")
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
    return lcm.base.mask.mask(value) if isinstance(value, str) else json.dumps(lcm.base.mask.mask_json(value), ensure_ascii=False)


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
    per_item_fixed = lcm.base.config.estimate_tokens(fixed_text)
    total = 0
    for _index, value in iter_items(job.input_path):
        total += per_item_fixed + lcm.base.config.estimate_tokens(item_text(value))
    return total
