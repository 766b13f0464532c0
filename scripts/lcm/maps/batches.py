"""lcm_llm_map.py --batch: the items through the Message Batches API (half the price).

Submit every item not yet ok (in chunks), poll each batch with a doubling interval, collect and
check the answers; items whose answer was rejected, or whose request errored, expired or was
canceled, go into the next round with their conversation so far. The ids of batches not yet
collected are kept in the run's options, so --resume after a crash collects them instead of
paying for the same requests twice.
"""
from __future__ import annotations

import sys
import time

import lcm.base.llm
from lcm.maps.backends import Requests
from lcm.maps.job import MapJob, Outcome, iter_items
from lcm.maps.state import RunState
from lcm.maps.worker import AnswerChecker, AnswerError, retry_feedback

BATCH_CHUNK = 10_000          # requests per Message Batch (the API allows 100,000 / 256 MB)
MAX_POLL_INTERVAL = 60.0


class Pending:
    """An item going into another round: its conversation so far and what it has cost."""
    __slots__ = ("history", "attempts", "input_tokens", "output_tokens")

    def __init__(self):
        self.history: list = []
        self.attempts = self.input_tokens = self.output_tokens = 0


class BatchRun:
    def __init__(self, job: MapJob, state: RunState, client, requests: Requests, max_attempts: int,
                 poll_interval: float):
        self.job, self.state, self.client, self.requests = job, state, client, requests
        self.checker = AnswerChecker(job.schema)
        self.max_attempts = max_attempts
        self.poll_interval = poll_interval
        self.retry: dict[int, Pending] = {}
        self.done = state.done_indices()
        # batches sent with structured outputs on: only their refusals are "not the item's fault"
        self.structured = set(state.options.get("open_batches", [])) if requests.output_format else set()

    def run(self) -> None:
        """Rounds until every item is ok or out of attempts."""
        for batch_id in list(self.state.options.get("open_batches", [])):  # left by an interrupted run
            self.collect(batch_id)
        wanted = lambda i: i not in self.done  # noqa: E731 (the first round: every item not yet ok)
        while True:
            batch_ids = self.submit(wanted)
            if not batch_ids:
                break
            for batch_id in batch_ids:
                self.collect(batch_id)
            wanted = self.retry.__contains__
        self.state.flush()

    def _set_open(self, batch_ids: list[str]) -> None:
        self.state.save_options({**self.state.options, "open_batches": batch_ids})

    def submit(self, wanted) -> list[str]:
        batch_ids: list[str] = []
        chunk: list = []

        def send() -> None:
            masked = [{**request, "params": lcm.base.llm.masked_params(request["params"])} for request in chunk]
            batch_id = lcm.base.llm.batch_submit(self.client, masked)
            batch_ids.append(batch_id)
            if "output_config" in chunk[0]["params"]:
                self.structured.add(batch_id)
            self._set_open(self.state.options.get("open_batches", []) + [batch_id])
            sys.stderr.write(f"lcm: submitted batch {batch_id} ({len(chunk)} requests)\n")
            chunk.clear()

        for index, value in iter_items(self.job.input_path, skip=lambda i: not wanted(i)):
            history = self.retry[index].history if index in self.retry else []
            chunk.append({"custom_id": f"item-{index}", "params": self.requests.params(value, history)})
            if len(chunk) >= BATCH_CHUNK:
                send()
        if chunk:
            send()
        return batch_ids

    def wait_for(self, batch_id: str) -> None:
        interval = self.poll_interval
        while True:
            status, processing = lcm.base.llm.batch_status(self.client, batch_id)
            if status == "ended":
                return
            sys.stderr.write(f"lcm: batch {batch_id} {status}: {processing} processing, "
                             f"next check in {interval:.0f}s\n")
            time.sleep(interval)
            interval = min(interval * 2, MAX_POLL_INTERVAL)

    def collect(self, batch_id: str) -> None:
        self.wait_for(batch_id)
        for line in lcm.base.llm.batch_results(self.client, batch_id):
            index = int(line.custom_id.split("-", 1)[1])
            if index not in self.done:
                self.settle(index, line, batch_id in self.structured)
        self.state.flush()
        self._set_open([b for b in self.state.options.get("open_batches", []) if b != batch_id])

    def settle(self, index: int, line: lcm.base.llm.BatchResult, structured: bool) -> None:
        pending = self.retry.pop(index, None) or Pending()
        pending.attempts += 1
        if line.kind == "succeeded":
            pending.input_tokens += line.input_tokens
            pending.output_tokens += line.output_tokens
            try:
                value = self.checker.parse(line.text)
            except AnswerError as exc:
                error = f"{exc} (after {pending.attempts} attempts)"
                pending.history += [{"role": "assistant", "content": line.text or "(empty)"},
                                    {"role": "user", "content": retry_feedback(str(exc))}]
            else:
                self.state.record(index, Outcome(ok=True, result=value, attempts=pending.attempts,
                                                 input_tokens=pending.input_tokens,
                                                 output_tokens=pending.output_tokens))
                self.done.add(index)
                return
        elif line.kind == "errored":
            error = f"API error in batch: {line.error_type}: {line.error_message}"
            if line.error_type == "invalid_request_error":
                if structured and lcm.base.llm.refuses_structured_output(line.error_message):
                    self.requests.drop_structured()
                    pending.attempts -= 1  # not the item's fault
                else:
                    pending.attempts = self.max_attempts  # the same request would be refused again
        else:  # canceled or expired: submit it again
            error = f"batch request {line.kind}"
        if pending.attempts < self.max_attempts:
            self.retry[index] = pending
        else:
            self.state.record(index, Outcome(ok=False, error=error, attempts=pending.attempts,
                                             input_tokens=pending.input_tokens, output_tokens=pending.output_tokens))
