"""The one item loop every map backend runs, and the pool that runs items.

An item is asked, its answer parsed and checked against the schema; a rejected answer goes back
to the model with the reason, up to --max-attempts. Backends differ only in how they ask
(lcm.maps.backends); this loop is the same for all of them.
"""
from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Callable

import lcm.base.errors
import lcm.base.progress
import lcm.base.llm
from lcm.base.errors import LcmError
from lcm.maps.job import MapJob, Outcome, iter_items
from lcm.maps.state import RunState

# Items queued ahead of the workers: enough to keep them busy, small enough to stay flat in memory.
WINDOW_PER_WORKER = 2

JSON_ONLY_RULES = (
    "Reply with exactly one JSON value (an object, array, string, number, true, false or null) and "
    "nothing else: no explanation before or after it, no markdown, no code fences."
)


class AnswerError(Exception):
    """A model answer that is not valid JSON or does not match the schema (worth a retry)."""


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
            # the start of the answer, so a reader of OUT sees what the model did instead
            raise AnswerError(f"the answer is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                              f"it began {_opening(body)}") from None
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


def _opening(text: str, chars: int = 80) -> str:
    """The first characters of an answer, on one line, quoted."""
    head = " ".join(text[:chars].split())
    return json.dumps(head + ("..." if len(text) > chars else ""), ensure_ascii=False)


def retry_feedback(error: str) -> str:
    return f"That answer was rejected: {error}. Reply again with only the corrected JSON value."


def schema_rules(schema: dict | None) -> str:
    if schema is None:
        return ""
    return "\n\nThe JSON value must validate against this JSON Schema (Draft 2020-12):\n" + json.dumps(schema, ensure_ascii=False)


# ---------------------------------------------------------------------------
# The item loop
# ---------------------------------------------------------------------------

# How a backend asks about one item: start(value) gives `ask(rejected, outcome) -> answer text`,
# called once per attempt; `rejected` is None the first time, then (the rejected answer, why).
# `ask` adds what it spent to outcome.input_tokens/output_tokens and raises lcm.base.errors.ModelError
# when the item cannot go on (ModelConfigError when no item can).
Ask = Callable[[object, Outcome], str]


def work_item(start: Callable[[object], Ask], value, checker: AnswerChecker, max_attempts: int) -> Outcome:
    """Ask, parse, check; feed a rejected answer back with the reason, up to max_attempts."""
    outcome = Outcome(ok=False)
    ask = start(value)
    rejected = None
    while outcome.attempts < max_attempts:
        outcome.attempts += 1
        try:
            text = ask(rejected, outcome)
        except lcm.base.errors.ModelConfigError:
            raise  # every other item would fail the same way: stop the run
        except lcm.base.errors.ModelError as exc:
            outcome.error = exc.message
            return outcome
        try:
            outcome.result = checker.parse(text)
        except AnswerError as exc:
            outcome.error = f"{exc} (after {outcome.attempts} attempt{'s' * (outcome.attempts > 1)})"
            rejected = (text, str(exc))
            continue
        outcome.ok, outcome.error = True, None
        return outcome
    return outcome


# ---------------------------------------------------------------------------
# Running items
# ---------------------------------------------------------------------------

def progress_bar(total: int, initial: int, desc: str):
    """A bar on stderr when it is a terminal (cleared when done), else None."""
    return lcm.base.progress.bar(total, desc, "item", initial=initial, leave=False)


def run_items(job: MapJob, state: RunState, start: Callable[[object], Ask], *, concurrency: int, desc: str,
              max_attempts: int) -> None:
    """Run work_item for every item not yet ok, keeping a bounded window in flight."""
    checker = AnswerChecker(job.schema)
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
            in_flight[pool.submit(work_item, start, value, checker, max_attempts)] = index
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


