"""The model seam: every model call lcm makes goes through this module.

Backends, picked by LCM_LLM (auto = the first that works, in this order):
  anthropic  the official SDK; needs ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN; honours
             ANTHROPIC_BASE_URL; the SDK retries 429, 5xx and overloaded (529) with backoff
  claude     the Claude Code CLI headless (`claude -p --output-format json`), on the user's
             own login; started without user settings, plugins or hooks, with LCM_SUBAGENT=1
  none       no model: callers fall back to deterministic extractive summaries

Everything sent to a model (system prompt, messages, the CLI's prompt) is masked by lcm.base.mask
first; callers that use the SDK directly pass their parameters through masked_params().

The anthropic package is imported inside the functions that use it (about 1.5 s to import),
never at module level: hooks import lcm scripts on every turn.
"""
from __future__ import annotations

from dataclasses import dataclass
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import time

from lcm.base.errors import ModelConfigError, ModelError, ModelRequestError
import lcm.base.config
import lcm.base.guard
import lcm.base.mask
import lcm.base.text

DEFAULT_MODEL = "claude-haiku-4-5"
DEFAULT_TIMEOUT = 120.0
# The SDK backs off exponentially (0.5 s doubling, capped at 8 s) or as the server's
# retry-after header says; four retries ride out a short overload without stalling a hook.
DEFAULT_MAX_RETRIES = 4



@dataclass
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    model: str
    backend: str


# ---------------------------------------------------------------------------
# Choosing a backend and a model
# ---------------------------------------------------------------------------

def sdk_available() -> bool:
    """True when the anthropic package is installed (checked without importing it)."""
    return importlib.util.find_spec("anthropic") is not None


def resolve_backend(environ: dict | None = None) -> str:
    """"anthropic" | "claude" | "none": LCM_LLM, or for auto the first backend that can work."""
    env = os.environ if environ is None else environ
    choice = lcm.base.config.get("LCM_LLM", env)
    if choice != "auto":
        return choice
    if (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")) and sdk_available():
        return "anthropic"
    if claude_executable(env):
        return "claude"
    return "none"


def session_model(conn, session_id: str | None) -> str | None:
    """Model of the session's main thread (its latest real assistant message), None when unknown.

    Sub-agent messages are skipped: they often run a smaller model (Haiku under an Opus session),
    and "inherit the session's model" means the model the person was talking to.
    """
    if conn is None or not session_id:
        return None
    row = conn.execute(
        "SELECT model FROM messages WHERE session_id = ? AND is_sidechain = 0 AND model IS NOT NULL"
        " AND model != '' AND model NOT LIKE '<%' ORDER BY id DESC LIMIT 1",  # '<synthetic>': harness lines
        (session_id,),
    ).fetchone()
    if row:
        return row[0]
    # ingest records the main thread's model per session too (a vault whose rows lack it)
    row = conn.execute("SELECT model FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row and row[0] and not row[0].startswith("<"):
        return row[0]
    return None


def resolve_model(conn=None, session_id: str | None = None) -> str:
    """LCM_SUMMARY_MODEL, else the session's own model, else DEFAULT_MODEL."""
    return lcm.base.config.get("LCM_SUMMARY_MODEL") or session_model(conn, session_id) or DEFAULT_MODEL


# ---------------------------------------------------------------------------
# anthropic backend
# ---------------------------------------------------------------------------

_CLIENT_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
_clients: dict[tuple, object] = {}


def anthropic_client(timeout: float = DEFAULT_TIMEOUT, max_retries: int = DEFAULT_MAX_RETRIES):
    """An anthropic.Anthropic client with explicit timeout and retry count.

    The SDK reads ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL itself.
    """
    try:
        import anthropic
    except ImportError:
        raise ModelConfigError("the anthropic package is not installed",
                               "pip install -r requirements.txt, or set LCM_LLM=claude or LCM_LLM=none") from None
    key = (timeout, max_retries, *(os.environ.get(name) for name in _CLIENT_ENV))
    client = _clients.get(key)
    if client is None:  # one client per configuration: reuses its connection pool across calls
        client = _clients[key] = anthropic.Anthropic(timeout=timeout, max_retries=max_retries)
    return client


def _api_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return f"{err.get('type', 'error')}: {err['message']}"
    return str(exc)


def _create(params: dict, *, timeout: float, max_retries: int):
    """One Messages API call (params masked by the caller); SDK errors become ModelError."""
    client = anthropic_client(timeout=timeout, max_retries=max_retries)
    import anthropic

    # named in errors that are printed and logged: a gateway's URL may carry user:password@
    base = lcm.base.mask.mask(os.environ.get("ANTHROPIC_BASE_URL") or "the Anthropic API")
    try:
        response = client.messages.create(**params)
    except json.JSONDecodeError:  # a body that is not JSON: a proxy's or gateway's page, answered with 200
        raise ModelError(f"{base} answered with something that is not a Messages API response",
                         "check ANTHROPIC_BASE_URL (a proxy or gateway may stand in between); or set LCM_LLM=none") from None
    except TypeError as exc:  # the SDK found no credentials at all
        if "authentication" in str(exc).lower():
            raise ModelConfigError("no Anthropic credentials found", NO_BACKEND_HINT) from None
        raise
    except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
        raise ModelConfigError(
            f"{base} refused the credentials ({exc.status_code} {_api_message(exc)})",
            "check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN); or set LCM_LLM=claude to use the "
            "Claude Code login, or LCM_LLM=none for extractive summaries",
        ) from None
    except anthropic.NotFoundError as exc:
        raise ModelConfigError(
            f"{base} does not know model {params.get('model')!r} ({_api_message(exc)})",
            "set LCM_SUMMARY_MODEL to a model your key can use, e.g. claude-haiku-4-5",
        ) from None
    except anthropic.BadRequestError as exc:
        raise ModelRequestError(f"{base} rejected the request: {_api_message(exc)}",
                         "the prompt may be too long for the model; lower LCM_LEAF_CHUNK_TOKENS") from None
    except anthropic.APITimeoutError:
        raise ModelError(f"{base} did not answer within {timeout:g}s ({max_retries} retries)",
                         "retry later, or set LCM_LLM=none for extractive summaries") from None
    except anthropic.APIConnectionError as exc:
        raise ModelError(f"cannot reach {base}: {exc}",
                         "check the network or ANTHROPIC_BASE_URL; or set LCM_LLM=none") from None
    except anthropic.APIStatusError as exc:
        raise ModelError(
            f"{base} failed with {exc.status_code} after {max_retries} retries: {_api_message(exc)}",
            "the API is busy or failing; retry later, or set LCM_LLM=none for extractive summaries",
        ) from None
    # the SDK does not validate a response: JSON of another shape (no content list, no usage)
    # would fail later, far from here, as a TypeError
    if not (isinstance(getattr(response, "content", None), list) and getattr(response, "usage", None) is not None
            and all(isinstance(b.text, str) for b in response.content if getattr(b, "type", None) == "text")):
        raise ModelError(f"{base} answered with JSON that is not a Messages API response",
                         "check ANTHROPIC_BASE_URL (a proxy or gateway may stand in between); or set LCM_LLM=none")
    return response


def _text_of(response) -> str:
    return "".join(block.text for block in response.content if getattr(block, "type", "") == "text")


def _anthropic_complete(system, messages, *, max_tokens, model, timeout, max_retries,
                        temperature=None) -> Completion:
    params = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system:
        params["system"] = system
    if temperature is not None and sdk_takes_temperature():
        params["temperature"] = temperature
    response = _create(params, timeout=timeout, max_retries=max_retries)
    usage = response.usage
    return Completion(text=_text_of(response), input_tokens=usage.input_tokens or 0,
                      output_tokens=usage.output_tokens or 0, model=response.model or model, backend="anthropic")


_TAKES_TEMPERATURE: list[bool] = []  # decided once per process


def sdk_takes_temperature() -> bool:
    """Whether the installed anthropic SDK sends a sampling temperature. SDKs before 1.0 take
    `temperature` on messages.create (and send API version 2023-06-01, which honours it); later
    majors removed the sampling parameters, and the API version they send (2026-10-21) answers
    any of them, even at its default, with a 400. So it is sent only where the SDK takes it."""
    if not _TAKES_TEMPERATURE:
        try:
            import inspect
            from anthropic.resources.messages import Messages
            _TAKES_TEMPERATURE.append("temperature" in inspect.signature(Messages.create).parameters)
        except (ImportError, AttributeError, TypeError, ValueError):
            _TAKES_TEMPERATURE.append(False)
    return _TAKES_TEMPERATURE[0]


def masked_params(params: dict) -> dict:
    """Messages API parameters with the text a model reads (system, messages) masked, and every
    string sendable: the request body is UTF-8, which a lone surrogate (Claude Code's escape for
    output bytes that were not UTF-8, quoted from a stored line) is not."""
    out = dict(params)
    for key in ("system", "messages"):
        if key in out:
            out[key] = _utf8(lcm.base.mask.mask_json(out[key]))
    return out


def _utf8(value):
    """value with each lone surrogate of its strings as its escape (lcm.base.text.safe_text)."""
    if isinstance(value, str):
        return lcm.base.text.safe_text(value)
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    if isinstance(value, dict):
        return {k: _utf8(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------
# claude backend
# ---------------------------------------------------------------------------

def _claude_complete(system, messages, *, max_tokens, model, timeout) -> Completion:
    result = run_claude(_flatten_messages(messages), system=system, model=model, max_turns=1, tools="",
                        timeout=timeout)
    usage = result.get("usage") or {}
    used_model = next(iter(result.get("modelUsage") or {}), None) or model or "claude"
    return Completion(text=str(result.get("result") or ""), input_tokens=int(usage.get("input_tokens") or 0),
                      output_tokens=int(usage.get("output_tokens") or 0), model=used_model, backend="claude")


# ---------------------------------------------------------------------------
# The one entry point
# ---------------------------------------------------------------------------

def complete(system: str | None, messages, *, max_tokens: int, model: str | None = None,
             backend: str | None = None, timeout: float = DEFAULT_TIMEOUT,
             max_retries: int = DEFAULT_MAX_RETRIES, temperature: float | None = None) -> Completion:
    """One model answer. `messages` is a list of {"role","content"} dicts or a plain user string.

    temperature goes where the backend takes one: the Messages API through an SDK that still
    has the parameter (sdk_takes_temperature); the claude CLI has no such option. Elsewhere the
    backend's default applies.

    Raises ModelConfigError for problems retrying cannot fix (no credentials, refused key,
    unknown model, backend none) and ModelError for anything else.
    """
    backend = backend or resolve_backend()
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    system, messages = _utf8(lcm.base.mask.mask(system)), _utf8(lcm.base.mask.mask_json(messages))  # as masked_params
    if backend == "anthropic":
        return _anthropic_complete(system, messages, max_tokens=max_tokens, model=model or DEFAULT_MODEL,
                                   timeout=timeout, max_retries=max_retries, temperature=temperature)
    if backend == "claude":
        return _claude_complete(system, messages, max_tokens=max_tokens, model=model, timeout=timeout)
    raise ModelConfigError("no model backend is available (LCM_LLM resolves to none)", NO_BACKEND_HINT)


class Breaker:
    """A circuit breaker over complete() for one pass of many calls (a compaction).

    The first failure of the backend itself (unreachable, refused key, overloaded past the
    retries) opens it: every later call of the pass raises that failure at once, so a dead API
    costs one call's retries, not one per chunk. A refused request (ModelRequestError: this
    prompt, not the backend) leaves it closed.
    """

    def __init__(self):
        self.failure: ModelError | None = None

    def complete(self, *args, **kwargs) -> Completion:
        if self.failure is not None:
            raise self.failure
        try:
            return complete(*args, **kwargs)
        except ModelRequestError:
            raise
        except ModelError as exc:
            self.failure = exc
            raise


# ---------------------------------------------------------------------------
# Tool loops (anthropic backend): the model calls tools that the caller runs in-process
# ---------------------------------------------------------------------------

@dataclass
class ToolLoop:
    """The end of a tool loop. `messages` is the whole conversation, the model's last turn
    included, so a caller can append a user turn (e.g. feedback on a malformed answer) and
    call tool_loop again to continue it."""
    text: str
    messages: list
    turns: int                 # model calls made
    input_tokens: int
    output_tokens: int
    model: str
    stopped: str               # "answer" | "max_turns" (the model still wanted a tool)


def _block_param(block) -> dict | None:
    """A response content block as a request parameter (the model's turn, sent back to it)."""
    if block.type == "text":
        return {"type": "text", "text": block.text} if block.text else None
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return None


def tool_loop(system: str | None, messages, tools: list[dict], run_tool, *, max_turns: int, max_tokens: int,
              model: str | None = None, force_answer: bool = True, deadline: float | None = None,
              timeout: float = DEFAULT_TIMEOUT, max_retries: int = DEFAULT_MAX_RETRIES,
              max_tool_output_chars: int = 100_000) -> ToolLoop:
    """Let the model call `tools` until it answers, over at most `max_turns` model calls.

    run_tool(name, input) -> (text, is_error) runs one call; an exception it raises ends the
    loop (the caller's to handle). force_answer: the last allowed call offers no tool
    (tool_choice none), so the loop ends with an answer; otherwise a tool call on the last
    turn ends it with stopped="max_turns". deadline (time.monotonic()) bounds the whole loop:
    each call's timeout is what is left. Everything sent is masked, tool results included.
    Raises ModelError / ModelConfigError as complete() does.
    """
    messages = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
    model = model or DEFAULT_MODEL
    used_in = used_out = 0
    used_model = model
    for turn in range(1, max_turns + 1):
        params = {"model": model, "max_tokens": max_tokens, "tools": tools, "messages": messages}
        if system:
            params["system"] = system
        if force_answer and turn == max_turns:
            params["tool_choice"] = {"type": "none"}
        call_timeout = timeout
        if deadline is not None:
            call_timeout = min(timeout, deadline - time.monotonic())
            if call_timeout <= 0:
                raise ModelError(f"no answer within the time allowed ({turn - 1} model calls made)",
                                 "raise the timeout, or ask a narrower question")
        response = _create(masked_params(params), timeout=call_timeout, max_retries=max_retries)
        used_in += response.usage.input_tokens or 0
        used_out += response.usage.output_tokens or 0
        used_model = response.model or model
        turn_blocks = [b for b in (_block_param(block) for block in response.content) if b]
        messages.append({"role": "assistant", "content": turn_blocks or "(empty)"})
        calls = [block for block in response.content if block.type == "tool_use"]
        if not calls or turn == max_turns:
            return ToolLoop(text=_text_of(response).strip(), messages=messages, turns=turn, input_tokens=used_in,
                            output_tokens=used_out, model=used_model, stopped="max_turns" if calls else "answer")
        results = []
        for call in calls:
            text, is_error = run_tool(call.name, dict(call.input or {}))
            results.append({"type": "tool_result", "tool_use_id": call.id,
                            "content": str(text)[:max_tool_output_chars], "is_error": bool(is_error)})
        messages.append({"role": "user", "content": results})
    raise ValueError("max_turns must be at least 1")


# ---------------------------------------------------------------------------
# Probing the key (lcm.care.installation, for lcm_doctor.py): one request that costs nothing
# ---------------------------------------------------------------------------

def probe_key(timeout: float) -> tuple[str, str]:
    """(outcome, detail) of listing one model with the configured key (GET /v1/models):
    "ok"; "refused" (401/403); "status" (another HTTP answer: a gateway without the endpoint, an
    outage); "unreachable" (no connection, timeout); "package" (the SDK cannot be used)."""
    try:
        import anthropic
        client = anthropic.Anthropic(timeout=timeout, max_retries=0)
    except Exception as exc:  # noqa: BLE001 - a broken install fails in many ways; each means "cannot import"
        return "package", f"{type(exc).__name__}: {exc}"
    try:
        client.models.list(limit=1)
    except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
        return "refused", f"{exc.status_code} {_api_message(exc)}"
    except anthropic.APIStatusError as exc:
        return "status", str(exc.status_code)
    except anthropic.APIError as exc:
        return "unreachable", type(exc).__name__
    return "ok", ""


# ---------------------------------------------------------------------------
# Calls the map tools make (lcm/maps): one call whose errors say whether the item or every item
# failed; a tool loop held to the item's deadline with a backoff of its own; Message Batches
# ---------------------------------------------------------------------------

class StructuredOutputRefused(ModelError):
    """The model refused `output_config` (structured outputs): send the plain prompt instead."""


_STRUCTURED_WORDS = ("output_config", "output_format", "output format", "structured output", "json_schema")


def refuses_structured_output(message: str) -> bool:
    """True when an API error message is about structured outputs (so dropping them may help)."""
    lowered = message.lower()
    return any(word in lowered for word in _STRUCTURED_WORDS)


def json_output_format(schema: dict | None) -> dict | None:
    """`output_config.format` for a JSON Schema, in the API's strict subset; None when the
    schema cannot be expressed there (the prompt alone then asks for the shape)."""
    if schema is None:
        return None
    try:
        from anthropic import transform_schema
        return {"type": "json_schema", "schema": transform_schema(schema)}
    except Exception:
        return None


def _map_call_error(exc, timeout: float) -> ModelError:
    """The map tools' reading of a failed call: ModelConfigError when no item can succeed."""
    import anthropic
    detail = _api_message(exc)
    if isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        return ModelConfigError(f"the API refused the credentials ({exc.status_code} {detail})",
                                "check ANTHROPIC_API_KEY, then rerun with --resume")
    if isinstance(exc, anthropic.NotFoundError):
        return ModelConfigError(f"the API does not know this model ({detail})",
                                "pass --model with a model your key can use, then rerun with --resume")
    if isinstance(exc, anthropic.BadRequestError) and refuses_structured_output(str(exc.body or exc)):
        return StructuredOutputRefused(f"API error {exc.status_code} after retries: {detail}")
    if isinstance(exc, anthropic.APITimeoutError):
        return ModelError(f"no answer within {timeout:g}s (the call was retried)")
    if isinstance(exc, anthropic.APIStatusError):
        return ModelError(f"API error {exc.status_code} after retries: {detail}")
    if isinstance(exc, anthropic.APIConnectionError):
        return ModelError(f"cannot reach the API: {exc}")
    raise exc


def map_message(client, params: dict, timeout: float) -> tuple[str, int, int]:
    """One Messages call (the client's own retries included): (answer text, input tokens, output
    tokens). Raises ModelConfigError, StructuredOutputRefused, or ModelError for this item."""
    import anthropic
    try:
        response = client.messages.create(**masked_params(params))
    except anthropic.APIError as exc:
        raise _map_call_error(exc, timeout) from None
    except TypeError as exc:  # the SDK found no credentials at all
        if "authentication" in str(exc).lower():
            raise ModelConfigError("no Anthropic credentials found", NO_BACKEND_HINT) from None
        raise
    usage = response.usage
    return _text_of(response), usage.input_tokens or 0, usage.output_tokens or 0


def _call_before(client, params: dict, deadline: float, timeout: float, retries: int):
    """One Messages call that gives up at `deadline`, with its own backoff (the client has none)."""
    import time

    import anthropic
    for attempt in range(retries + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            return client.with_options(timeout=remaining, max_retries=0).messages.create(**masked_params(params))
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError, anthropic.NotFoundError) as exc:
            raise ModelConfigError(f"the API refused the request ({exc.status_code}): {exc}",
                                   "check ANTHROPIC_API_KEY and --model, then rerun with --resume") from None
        except anthropic.APITimeoutError:
            break
        except (anthropic.RateLimitError, anthropic.InternalServerError, anthropic.APIConnectionError) as exc:
            if attempt == retries:
                raise ModelError(f"API error after {retries} retries: {exc}") from None
            wait = min(0.5 * 2 ** attempt, 8.0)
            response = getattr(exc, "response", None)
            if response is not None and response.headers.get("retry-after-ms"):
                wait = float(response.headers["retry-after-ms"]) / 1000
            time.sleep(max(0.0, min(wait, deadline - time.monotonic())))
        except anthropic.APIStatusError as exc:
            raise ModelError(f"API error {exc.status_code}: {exc}") from None
    raise ModelError(f"timed out after {timeout:g}s")


def map_tool_loop(client, params: dict, messages: list, run_tool, *, max_turns: int, deadline: float,
                  timeout: float, retries: int, tally) -> str:
    """Call the model with tools until it answers without one; return that answer's text.

    `messages` grows in place (so a retry continues the same conversation), `run_tool(name,
    input) -> (output, is_error)` runs one call, `tally.tool_turns` counts tool-using turns across
    calls and `tally.input_tokens/output_tokens` what was spent. Raises ModelError after
    `max_turns` tool-using turns, ModelConfigError or ModelError when a call fails."""
    while True:
        response = _call_before(client, {**params, "messages": messages}, deadline, timeout, retries)
        tally.input_tokens += response.usage.input_tokens or 0
        tally.output_tokens += response.usage.output_tokens or 0
        content = [_block_param(block) for block in response.content]
        messages.append({"role": "assistant", "content": [c for c in content if c] or "(empty)"})
        calls = [block for block in response.content if block.type == "tool_use"]
        if not calls:
            return _text_of(response)
        tally.tool_turns += 1
        if tally.tool_turns > max_turns:
            raise ModelError(f"no final answer within --max-turns {max_turns}")
        results = []
        for call in calls:
            output, is_error = run_tool(call.name, dict(call.input or {}))
            results.append({"type": "tool_result", "tool_use_id": call.id, "content": output, "is_error": is_error})
        messages.append({"role": "user", "content": results})


@dataclass
class BatchResult:
    """One line of a Message Batch's results, read out of the SDK's objects."""
    custom_id: str
    kind: str                 # succeeded | errored | canceled | expired
    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    error_type: str = ""
    error_message: str = ""


def batch_submit(client, requests: list[dict]) -> str:
    """Create a Message Batch of {"custom_id", "params"} requests (params already masked); its id."""
    return client.messages.batches.create(requests=requests).id


def batch_status(client, batch_id: str) -> tuple[str, int]:
    """(processing_status, requests still processing) of a Message Batch."""
    batch = client.messages.batches.retrieve(batch_id)
    return batch.processing_status, batch.request_counts.processing


def batch_results(client, batch_id: str):
    """Yield a BatchResult for every request of an ended Message Batch (in the API's order)."""
    for line in client.messages.batches.results(batch_id):
        result = line.result
        if result.type == "succeeded":
            message = result.message
            yield BatchResult(line.custom_id, "succeeded", _text_of(message),
                              message.usage.input_tokens or 0, message.usage.output_tokens or 0)
        elif result.type == "errored":
            error = result.error.error
            yield BatchResult(line.custom_id, "errored", error_type=error.type, error_message=error.message)
        else:
            yield BatchResult(line.custom_id, result.type)


# The claude backend of the model seam (lcm.base.llm): the Claude Code CLI run headless

NO_BACKEND_HINT = ("set ANTHROPIC_API_KEY, or log in to Claude Code so `claude -p` works (LCM_LLM=claude), "
                   "or set LCM_LLM=none for extractive summaries without a model")
CLAUDE_TIMEOUT = 120.0  # seconds one headless run may take, by default
# One argv string may not exceed 128 KiB on Linux; longer prompts go through stdin.
MAX_PROMPT_ARG_BYTES = 100_000


def claude_executable(environ: dict | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return shutil.which("claude", path=env.get("PATH"))


def _auth_failure(message: str) -> bool:
    lowered = message.lower()
    return any(word in lowered for word in ("/login", "not logged in", "invalid api key", "authentication",
                                             "unauthorized", "oauth"))


def run_claude(prompt: str, *, system: str | None = None, model: str | None = None, max_turns: int | None = 1,
               tools: str | list | None = "", allowed_tools: str | list | None = None,
               json_schema: dict | str | None = None, timeout: float = CLAUDE_TIMEOUT,
               env: dict | None = None, cwd: str | None = None) -> dict:
    """Run `claude -p --output-format json` once and return its parsed result object.

    No user/project settings are loaded (so no plugins or hooks run inside it), nothing is
    persisted as a session, and LCM_SUBAGENT=1 marks the child as lcm's own sub-agent.
    A timeout kills the child's whole process group. Failures raise ModelError.
    """
    prompt, system = lcm.base.mask.mask(prompt), lcm.base.mask.mask(system)  # what a model reads never holds a secret
    # and a lone surrogate quoted from a stored line goes as its escape: argv and stdin are UTF-8
    prompt, system = lcm.base.text.safe_text(prompt), system and lcm.base.text.safe_text(system)
    child_env = lcm.base.guard.child_env(env)
    exe = claude_executable(child_env)
    if not exe:
        raise ModelConfigError("the claude CLI is not on PATH",
                               "install Claude Code (npm install -g @anthropic-ai/claude-code), or " + NO_BACKEND_HINT)
    argv = [exe, "-p", "--output-format", "json", "--setting-sources", "", "--no-session-persistence"]
    if model:
        argv += ["--model", model]
    if max_turns:
        argv += ["--max-turns", str(max_turns)]
    if tools is not None:
        argv += ["--tools", tools if isinstance(tools, str) else ",".join(tools)]
    if allowed_tools:
        argv += ["--allowedTools", allowed_tools if isinstance(allowed_tools, str) else " ".join(allowed_tools)]
    if system:
        argv += ["--append-system-prompt", system]
    if json_schema is not None:
        argv += ["--json-schema", json_schema if isinstance(json_schema, str) else json.dumps(json_schema)]
    stdin_text = None
    if len(prompt.encode("utf-8")) <= MAX_PROMPT_ARG_BYTES:
        argv += ["--", prompt]
    else:
        stdin_text = prompt  # `claude -p` reads the prompt from stdin when none is given
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env, cwd=cwd,
                                text=True, encoding="utf-8", errors="replace", start_new_session=True)
    except OSError as exc:
        raise ModelConfigError(f"cannot start {exe}: {exc.strerror}", "check the claude installation") from None
    try:
        out, err = proc.communicate(stdin_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.communicate()
        raise ModelError(f"claude -p did not finish within {timeout:g}s and was killed",
                         "retry, raise the timeout, or set LCM_LLM=none") from None
    result = None
    try:
        parsed = json.loads(out) if out.strip() else None
        result = parsed if isinstance(parsed, dict) else None
    except json.JSONDecodeError:
        pass
    if result is None or proc.returncode != 0 or result.get("is_error"):
        detail = ""
        if result is not None:
            detail = str(result.get("result") or result.get("subtype") or "")
        detail = detail or (err or out or "").strip()[-500:] or f"exit status {proc.returncode}"
        if _auth_failure(detail):
            raise ModelConfigError(f"claude -p is not logged in: {detail}",
                                   "run `claude` once and /login, or set ANTHROPIC_API_KEY, or LCM_LLM=none")
        raise ModelError(f"claude -p failed (exit {proc.returncode}): {detail}",
                         "run the same `claude -p` by hand to see why, or set LCM_LLM=none")
    return result


def _flatten_messages(messages) -> str:
    """One prompt string from Messages-API style messages (for the CLI backend)."""
    if isinstance(messages, str):
        return messages
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
        parts.append(str(content))
    return "\n\n".join(parts)
