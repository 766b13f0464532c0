"""Run one stateless model call per line of a JSONL file, outside the agent's context.

Each input line is one item; the model answers each with exactly one JSON value, checked
against --schema (retried with the error when it is not valid JSON or breaks the schema).
OUT gets one line per item in input order: {"item_index", "ok": true, "result"} or
{"item_index", "ok": false, "error"}. stdout is one JSON summary, never the data.
Run state lives in the vault: --resume finishes an interrupted run without redoing items.
--batch uses the Message Batches API (half the price, results within hours, usually minutes).

Usage:
  python3 scripts/lcm_llm_map.py --input IN.jsonl --output OUT.jsonl (--prompt TEXT | --prompt-file F)
      [--schema S.json] [--concurrency 16] [--model M] [--max-attempts 3] [--max-tokens 1024]
      [--timeout 120] [--resume] [--batch [--poll-interval 10]] [--dry-run]

Examples:
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" --input reviews.jsonl --output labels.jsonl \\
      --prompt "Classify the sentiment of this review" --schema label.schema.json --dry-run
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" --input reviews.jsonl --output labels.jsonl \\
      --prompt "Classify the sentiment of this review" --schema label.schema.json
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" ... --resume        # after a crash or Ctrl-C
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" ... --batch         # large jobs at half the price
"""
from __future__ import annotations

import sys
import threading
import time

import lcm.cli
import lcm.db
import lcm.llm
import lcm.maps as core
from lcm.errors import LcmError

SYSTEM_PROMPT = (
    "You process one item of a batch job: apply the task below to the item in the user message. "
    + core.JSON_ONLY_RULES
)
ASSUMED_ANSWER_TOKENS = 200   # per item, for the --dry-run estimate; --max-tokens is the ceiling
BATCH_CHUNK = 10_000          # requests per Message Batch (the API allows 100,000 / 256 MB)
MAX_POLL_INTERVAL = 60.0


def system_prompt(prompt: str, schema: dict | None) -> str:
    return f"{SYSTEM_PROMPT}\n\nTask:\n{prompt}{core.schema_rules(schema)}"


class Requests:
    """Builds Messages API parameters; drops structured outputs if the model refuses them."""

    def __init__(self, job: core.MapJob, model: str, max_tokens: int, backend: str):
        self.model = model
        self.max_tokens = max_tokens
        self.system = system_prompt(job.prompt, job.schema)
        self.output_format = None
        self._lock = threading.Lock()
        if job.schema is not None and backend == "anthropic":
            try:
                from anthropic import transform_schema  # the API's strict subset of JSON Schema
                self.output_format = {"type": "json_schema", "schema": transform_schema(job.schema)}
            except Exception:  # a schema the API's strict subset cannot express: plain prompt only
                self.output_format = None

    def params(self, value, history: list) -> dict:
        params = {"model": self.model, "max_tokens": self.max_tokens, "system": self.system,
                  "messages": [{"role": "user", "content": core.item_text(value)}, *history]}
        if self.output_format is not None:
            params["output_config"] = {"format": self.output_format}
        return lcm.llm.masked_params(params)

    def refused_structured(self, message: str) -> bool:
        """True (and structured outputs off from now on) when an error is about output_config."""
        lowered = message.lower()
        if self.output_format is None or not any(k in lowered for k in ("output_config", "output_format", "output format",
                                                                        "structured output", "json_schema")):
            return False
        with self._lock:
            if self.output_format is not None:
                sys.stderr.write(f"lcm: {self.model} refused structured outputs; using the plain JSON prompt\n")
            self.output_format = None
        return True


def api_error(exc, timeout: float) -> str:
    """One clear line for a failed call; ModelConfigError when no retry can help."""
    import anthropic
    body = getattr(exc, "body", None)
    detail = str(exc)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        detail = f"{body['error'].get('type', 'error')}: {body['error'].get('message', '')}"
    if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        raise lcm.llm.ModelConfigError(f"the API refused the credentials ({exc.status_code} {detail})",
                                       "check ANTHROPIC_API_KEY, then rerun with --resume")
    if isinstance(exc, anthropic.NotFoundError):
        raise lcm.llm.ModelConfigError(f"the API does not know this model ({detail})",
                                       "pass --model with a model your key can use, then rerun with --resume")
    if isinstance(exc, anthropic.APITimeoutError):
        return f"no answer within {timeout:g}s (the call was retried)"
    if isinstance(exc, anthropic.APIStatusError):
        return f"API error {exc.status_code} after retries: {detail}"
    if isinstance(exc, anthropic.APIConnectionError):
        return f"cannot reach the API: {exc}"
    raise exc


def anthropic_worker(client, requests: Requests, checker: core.AnswerChecker, max_attempts: int, timeout: float):
    import anthropic

    def process(index: int, value) -> core.Outcome:
        history: list = []
        outcome = core.Outcome(ok=False)
        while outcome.attempts < max_attempts:
            try:
                response = client.messages.create(**requests.params(value, history))
            except anthropic.BadRequestError as exc:
                if requests.refused_structured(str(exc.body or exc)):
                    continue
                outcome.attempts += 1
                outcome.error = api_error(exc, timeout)
                return outcome  # the same request would be refused again
            except anthropic.APIError as exc:
                outcome.attempts += 1
                outcome.error = api_error(exc, timeout)
                return outcome  # the SDK already retried 429, 5xx and timeouts with backoff
            except TypeError as exc:  # the SDK found no credentials at all
                if "authentication" in str(exc).lower():
                    raise lcm.llm.ModelConfigError("no Anthropic credentials found", lcm.llm.NO_BACKEND_HINT) from None
                raise
            outcome.attempts += 1
            outcome.input_tokens += response.usage.input_tokens or 0
            outcome.output_tokens += response.usage.output_tokens or 0
            text = "".join(b.text for b in response.content if getattr(b, "type", "") == "text")
            try:
                outcome.result = checker.parse(text)
                outcome.ok, outcome.error = True, None
                return outcome
            except core.AnswerError as exc:
                outcome.error = f"{exc} (after {outcome.attempts} attempt{'s' * (outcome.attempts > 1)})"
                history += [{"role": "assistant", "content": text or "(empty)"},
                            {"role": "user", "content": core.retry_feedback(str(exc))}]
        return outcome
    return process


def claude_worker(requests: Requests, schema: dict | None, checker: core.AnswerChecker, max_attempts: int,
                  timeout: float):
    """The same contract through `claude -p` (the user's Claude Code login, no API key)."""
    def process(index: int, value) -> core.Outcome:
        outcome = core.Outcome(ok=False)
        prompt = core.item_text(value)
        while outcome.attempts < max_attempts:
            outcome.attempts += 1
            try:
                result = lcm.llm.run_claude(prompt, system=requests.system, model=requests.model, max_turns=1,
                                            tools="", json_schema=schema, timeout=timeout)
            except lcm.llm.ModelConfigError:
                raise
            except lcm.llm.ModelError as exc:
                outcome.error = exc.message
                return outcome
            rejected = core.take_claude_result(outcome, result, checker)
            if rejected is None:
                return outcome
            text, why = rejected
            prompt = (f"{core.item_text(value)}\n\nYour previous answer was:\n{text}\n\n"
                      f"{core.retry_feedback(why)}")
        return outcome
    return process


# ---------------------------------------------------------------------------
# --batch: the Message Batches API
# ---------------------------------------------------------------------------

class Retry:
    """An item whose answer was rejected: its conversation so far and what it has cost."""
    __slots__ = ("history", "attempts", "input_tokens", "output_tokens")

    def __init__(self):
        self.history: list = []
        self.attempts = self.input_tokens = self.output_tokens = 0


def run_batches(job: core.MapJob, state: core.RunState, client, requests: Requests, checker: core.AnswerChecker,
                max_attempts: int, poll_interval: float) -> None:
    """Submit every item not yet ok, poll with backoff, collect, validate; resubmit rejects with feedback."""
    done = state.done_indices()
    retry: dict[int, Retry] = {}
    for batch_id in list(state.options.get("open_batches", [])):  # left by an interrupted invocation
        collect(client, state, batch_id, checker, requests, retry, done, max_attempts, poll_interval)
    first_round = True
    while True:
        if first_round:
            wanted = lambda i: i not in done  # noqa: E731
        else:
            wanted = retry.__contains__
        batch_ids = submit(client, state, job, requests, retry, wanted)
        first_round = False
        if not batch_ids:
            break
        for batch_id in batch_ids:
            collect(client, state, batch_id, checker, requests, retry, done, max_attempts, poll_interval)
    state.flush()


def submit(client, state, job, requests: Requests, retry: dict, wanted) -> list[str]:
    batch_ids: list[str] = []
    chunk: list = []

    def send() -> None:
        batch = client.messages.batches.create(requests=chunk)
        batch_ids.append(batch.id)
        state.save_options({**state.options, "open_batches": state.options.get("open_batches", []) + [batch.id]})
        sys.stderr.write(f"lcm: submitted batch {batch.id} ({len(chunk)} requests)\n")
        chunk.clear()

    for index, value in core.iter_items(job.input_path, skip=lambda i: not wanted(i)):
        history = retry[index].history if index in retry else []
        chunk.append({"custom_id": f"item-{index}", "params": requests.params(value, history)})
        if len(chunk) >= BATCH_CHUNK:
            send()
    if chunk:
        send()
    return batch_ids


def wait_for(client, batch_id: str, poll_interval: float):
    interval = poll_interval
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        counts = batch.request_counts
        sys.stderr.write(f"lcm: batch {batch_id} {batch.processing_status}: {counts.processing} processing, "
                         f"next check in {interval:.0f}s\n")
        time.sleep(interval)
        interval = min(interval * 2, MAX_POLL_INTERVAL)


def collect(client, state, batch_id, checker, requests: Requests, retry: dict, done: set, max_attempts: int,
            poll_interval: float) -> None:
    wait_for(client, batch_id, poll_interval)
    for line in client.messages.batches.results(batch_id):
        index = int(line.custom_id.split("-", 1)[1])
        if index in done:
            continue
        pending = retry.pop(index, None) or Retry()
        result = line.result
        pending.attempts += 1
        error = None
        if result.type == "succeeded":
            message = result.message
            pending.input_tokens += message.usage.input_tokens or 0
            pending.output_tokens += message.usage.output_tokens or 0
            text = "".join(b.text for b in message.content if getattr(b, "type", "") == "text")
            try:
                value = checker.parse(text)
            except core.AnswerError as exc:
                error = f"{exc} (after {pending.attempts} attempts)"
                pending.history += [{"role": "assistant", "content": text or "(empty)"},
                                    {"role": "user", "content": core.retry_feedback(str(exc))}]
            else:
                state.record(index, core.Outcome(ok=True, result=value, attempts=pending.attempts,
                                                 input_tokens=pending.input_tokens,
                                                 output_tokens=pending.output_tokens))
                done.add(index)
                continue
        elif result.type == "errored":
            err = result.error.error
            error = f"API error in batch: {err.type}: {err.message}"
            if err.type == "invalid_request_error":
                if requests.refused_structured(err.message):
                    pending.attempts -= 1  # not the item's fault
                else:
                    pending.attempts = max_attempts  # the same request would be refused again
        else:  # canceled or expired: submit it again
            error = f"batch request {result.type}"
        if pending.attempts < max_attempts:
            retry[index] = pending
        else:
            state.record(index, core.Outcome(ok=False, error=error, attempts=pending.attempts,
                                             input_tokens=pending.input_tokens, output_tokens=pending.output_tokens))
    state.flush()
    state.save_options({**state.options, "open_batches": [b for b in state.options.get("open_batches", [])
                                                          if b != batch_id]})


# ---------------------------------------------------------------------------

def dry_run(job: core.MapJob, requests: Requests, backend: str, batch: bool) -> int:
    input_tokens = core.estimate_input_tokens(job, requests.system)
    answer = min(requests.max_tokens, ASSUMED_ANSWER_TOKENS)
    first = requests.params(job.first_item, [])
    lcm.cli.print_json({
        "dry_run": True, "total": job.total, "backend": backend, "model": requests.model, "batch": batch,
        "estimated_input_tokens": input_tokens, "estimated_output_tokens": answer * job.total,
        "estimated_cost_usd": core.cost_usd(requests.model, input_tokens, answer * job.total, batch),
        "max_cost_usd": core.cost_usd(requests.model, input_tokens, requests.max_tokens * job.total, batch),
        "cost_note": f"list prices; output assumed {answer} tokens per item, max_cost_usd at --max-tokens",
        "first_request": first,
    })
    return 0


def _main(argv):
    p = lcm.cli.parser(__doc__)
    core.add_map_args(p, concurrency=16, timeout=120.0)
    p.add_argument("--max-tokens", type=core._positive_int, default=1024, metavar="N",
                   help="answer length cap per call (default 1024)")
    p.add_argument("--api-retries", type=lcm.cli.int_arg(0, 20), default=lcm.llm.DEFAULT_MAX_RETRIES, metavar="N",
                   help="SDK retries per call on 429, 5xx and timeouts, with backoff "
                        f"(default {lcm.llm.DEFAULT_MAX_RETRIES})")
    p.add_argument("--batch", action="store_true", help="use the Message Batches API (anthropic backend only)")
    p.add_argument("--poll-interval", type=core._positive_float, default=10.0, metavar="S",
                   help="first wait between batch status checks; doubles up to 60 s (default 10)")
    args = p.parse_args(argv)

    job = core.prepare(args, "llm")
    job.options = {"max_attempts": args.max_attempts, "max_tokens": args.max_tokens, "batch": args.batch}
    backend = lcm.llm.resolve_backend()
    model = args.model or lcm.llm.resolve_model()
    requests = Requests(job, model, args.max_tokens, backend)
    if args.dry_run:
        return dry_run(job, requests, backend, args.batch)
    if backend == "none":
        raise lcm.llm.ModelConfigError("lcm_llm_map.py needs a model, and no backend is available",
                                       lcm.llm.NO_BACKEND_HINT)
    if args.batch and backend != "anthropic":
        raise LcmError("--batch needs the anthropic backend (an API key)",
                       "set ANTHROPIC_API_KEY, or drop --batch to run the items one call each")
    checker = core.AnswerChecker(job.schema)

    conn = lcm.db.connect(args.db)
    state = core.RunState.open(conn, job, model, args.resume)
    try:
        if backend == "anthropic":
            client = lcm.llm.anthropic_client(timeout=args.timeout, max_retries=max(0, args.api_retries))
            if args.batch:
                run_batches(job, state, client, requests, checker, args.max_attempts, args.poll_interval)
            else:
                process = anthropic_worker(client, requests, checker, args.max_attempts, args.timeout)
                core.run_items(job, state, process, args.concurrency, "llm_map")
        else:
            process = claude_worker(requests, job.schema, checker, args.max_attempts, args.timeout)
            core.run_items(job, state, process, args.concurrency, "llm_map")
    except LcmError:
        state.finish("failed")
        raise
    return core.report(state, job.output_path)


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())
