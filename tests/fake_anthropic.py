"""Fakes for the two model backends, so tests drive the real code paths with no network.

FakeAnthropic: a Messages API on 127.0.0.1 that the real `anthropic` SDK talks to.

    with FakeAnthropic() as api:              # or the pytest fixture `fake_api`
        api.enqueue(text="short summary")     # scripted replies, consumed in order
        api.enqueue(status=429)               # an error reply (Anthropic's error JSON)
        api.enqueue(text="late", delay=2.0)   # answer after a pause
        api.respond(lambda body: {"text": "echo " + FakeAnthropic.user_text(body)})
        ...
        api.requests                          # every request body (parsed JSON), in order

When the queue is empty the responder (if set) answers, else `default_text`. Error replies
carry a tiny `retry-after-ms` header so the SDK's retries are fast in tests.
Extend it by subclassing and adding to `routes` ({(method, path): handler(fake, request)}),
where `request` is a Request(method, path, headers, body) and a handler returns a Reply.

make_fake_claude(dir): an executable `claude` (a Python script) that answers like
`claude -p --output-format json` and logs every call (argv, stdin, prompt, LCM_* env) to
`dir/claude_calls.jsonl`. Pytest fixtures: `fake_api`, `fake_claude` (on PATH).
conftest.py loads this module as a pytest plugin, so every test can ask for them by name.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


@dataclass
class Reply:
    """One scripted answer. status != 200 makes an error reply in Anthropic's error shape."""
    text: str | None = None
    status: int = 200
    delay: float = 0.0
    tool_use: list | None = None          # [{"name": ..., "input": {...}, "id": optional}]
    usage: dict | None = None
    stop_reason: str | None = None
    model: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    body: dict | str | None = None        # raw response body, overrides everything above
    headers: dict = field(default_factory=dict)


@dataclass
class Request:
    method: str
    path: str
    headers: dict
    body: dict | None


class FakeAnthropic:
    def __init__(self, default_text: str = "Fake summary.\nExpand for details about: nothing else.",
                 model: str = "claude-haiku-4-5", retry_after_ms: int = 1):
        self.default_text = default_text
        self.model = model
        self.retry_after_ms = retry_after_ms
        self.queue: deque[Reply] = deque()
        self.requests: list[dict] = []          # bodies of POST /v1/messages, in order
        self.log: list[Request] = []            # every request, any route
        self.responder: Callable[[dict], dict | Reply | str | None] | None = None
        self.routes: dict[tuple[str, str], Callable[["FakeAnthropic", Request], Reply]] = {
            ("POST", "/v1/messages"): FakeAnthropic.handle_messages,
            ("POST", "/v1/messages/count_tokens"): FakeAnthropic.handle_count_tokens,
            ("GET", "/v1/models"): FakeAnthropic.handle_models,
        }
        self.refused_keys: set[str] = set()     # requests carrying one of these keys (x-api-key or Bearer) get a 401
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------
    def enqueue(self, text: str | None = None, **kw) -> "FakeAnthropic":
        with self.lock:
            self.queue.append(Reply(text=text, **kw))
        return self

    def respond(self, responder: Callable[[dict], dict | Reply | str | None] | None) -> None:
        """Answer from the request: responder(body) -> Reply, kwargs dict, text, or None (default)."""
        self.responder = responder

    def next_reply(self, body: dict | None) -> Reply:
        with self.lock:
            if self.queue:
                return self.queue.popleft()
        if self.responder is not None:
            made = self.responder(body or {})
            if isinstance(made, Reply):
                return made
            if isinstance(made, dict):
                return Reply(**made)
            if isinstance(made, str):
                return Reply(text=made)
        return Reply(text=self.default_text)

    # -- helpers for assertions ------------------------------------------------
    @staticmethod
    def system_text(body: dict) -> str:
        system = body.get("system") or ""
        if isinstance(system, list):
            return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
        return system

    @staticmethod
    def user_text(body: dict) -> str:
        """Text of the last user message (a trailing system-role message is skipped)."""
        for message in reversed(body.get("messages") or []):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, list):
                return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
            return str(content)
        return ""

    # -- handlers ----------------------------------------------------------------
    def message_json(self, reply: Reply, body: dict) -> dict:
        blocks = []
        text = self.default_text if reply.text is None and not reply.tool_use else reply.text
        if text:
            blocks.append({"type": "text", "text": text})
        for call in reply.tool_use or []:
            blocks.append({"type": "tool_use", "id": call.get("id") or "toolu_" + uuid.uuid4().hex[:24],
                           "name": call["name"], "input": call.get("input", {})})
        prompt_chars = len(json.dumps(body.get("messages", ""))) + len(json.dumps(body.get("system", "")))
        usage = {"input_tokens": max(1, prompt_chars // 4), "output_tokens": max(1, len(text or "") // 4),
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        usage.update(reply.usage or {})
        return {
            "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
            "model": reply.model or body.get("model") or self.model, "content": blocks,
            "stop_reason": reply.stop_reason or ("tool_use" if reply.tool_use else "end_turn"),
            "stop_sequence": None, "usage": usage,
        }

    def handle_messages(self, request: Request) -> Reply:
        body = request.body or {}
        with self.lock:
            self.requests.append(body)
        reply = self.next_reply(body)
        if reply.status == 200 and reply.body is None:
            reply.body = self.message_json(reply, body)
        return reply

    def handle_models(self, request: Request) -> Reply:
        """GET /v1/models: the free request lcm_doctor.py checks a key with."""
        model = {"type": "model", "id": self.model, "display_name": "Fake model", "created_at": "2026-01-01T00:00:00Z"}
        return Reply(body={"data": [model], "has_more": False, "first_id": self.model, "last_id": self.model})

    def handle_count_tokens(self, request: Request) -> Reply:
        return Reply(body={"input_tokens": max(1, len(json.dumps(request.body or {})) // 4)})

    def error_body(self, reply: Reply) -> dict:
        kind = reply.error_type or ERROR_TYPES.get(reply.status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": reply.error_message or f"fake {kind}"},
                "request_id": "req_" + uuid.uuid4().hex[:20]}

    # -- server ------------------------------------------------------------------
    def sleep(self, seconds: float) -> None:
        """Sleep, but wake up when the server stops (so shutdown never hangs)."""
        self.stopping.wait(seconds)

    def release_delays(self) -> None:
        """Wake every reply still sleeping on its delay (e.g. after its client was killed)."""
        stopping, self.stopping = self.stopping, threading.Event()
        stopping.set()

    def _make_handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True   # else each keep-alive reply waits ~40 ms for an ACK

            def log_message(self, *args):  # keep test output clean
                pass

            def _serve(self, method: str):
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                path = self.path.split("?", 1)[0]
                request = Request(method, path, {k.lower(): v for k, v in self.headers.items()}, body)
                with fake.lock:
                    fake.log.append(request)
                handler = fake.routes.get((method, path))
                key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
                if key in fake.refused_keys:
                    reply = Reply(status=401, error_message="invalid x-api-key")
                elif handler is None:
                    reply = Reply(status=404, error_message=f"no route {method} {path}")
                else:
                    reply = handler(fake, request)
                if reply.delay:
                    fake.sleep(reply.delay)
                self._send(reply)

            def _send(self, reply: Reply):
                payload = reply.body if reply.body is not None else fake.error_body(reply)
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", "req_" + uuid.uuid4().hex[:20])
                if reply.status in (408, 409, 429) or reply.status >= 500:
                    self.send_header("retry-after-ms", str(fake.retry_after_ms))
                for key, value in reply.headers.items():
                    self.send_header(key, str(value))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                self._serve("POST")

            def do_GET(self):
                self._serve("GET")

            def do_DELETE(self):
                self._serve("DELETE")

        return Handler

    def start(self) -> "FakeAnthropic":
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._make_handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def env(self) -> dict:
        """Environment variables that point the SDK (or a `claude` child) at this fake."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "sk-ant-fake-key"}

    def __enter__(self) -> "FakeAnthropic":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture
def fake_api(monkeypatch):
    """A running FakeAnthropic with ANTHROPIC_BASE_URL and a dummy ANTHROPIC_API_KEY exported."""
    with FakeAnthropic() as api:
        for key, value in api.env().items():
            monkeypatch.setenv(key, value)
        yield api


# ---------------------------------------------------------------------------
# A fake `claude` executable
# ---------------------------------------------------------------------------

FAKE_CLAUDE = r'''#!{python}
"""Fake `claude -p --output-format json` written by tests/fake_anthropic.py."""
import fcntl, json, os, sys, time, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
LOG = os.path.join(HERE, "claude_calls.jsonl")
QUEUE = os.path.join(HERE, "claude_replies.json")
DEFAULT = {default}


def respond(call):  # replaced by the test's script, if any
    return None

{script}

def option(argv, name):
    if name in argv:
        i = argv.index(name)
        if i + 1 < len(argv):
            return argv[i + 1]
    return None


def main():
    argv = sys.argv[1:]
    if "--version" in argv:
        print("2.1.330 (Claude Code)")
        return 0
    if argv[:2] == ["auth", "status"]:  # as 2.1.x answers offline: JSON, exit 1 when logged out
        auth = os.path.join(HERE, "claude_auth.json")
        state = json.load(open(auth)) if os.path.exists(auth) else {{"loggedIn": True, "authMethod": "claude.ai",
                                                                     "apiProvider": "firstParty"}}
        print(json.dumps(state, indent=2))
        return 0 if state.get("loggedIn") else 1
    prompt = argv[argv.index("--") + 1] if "--" in argv else None
    stdin = None
    if prompt is None and not sys.stdin.isatty():
        stdin = sys.stdin.read()
        prompt = stdin
    call = {{"argv": argv, "prompt": prompt, "stdin": stdin, "cwd": os.getcwd(), "pid": os.getpid(),
             "env": {{k: v for k, v in os.environ.items()
                     if k.startswith(("LCM_", "ANTHROPIC_", "CLAUDE"))}}}}
    with open(QUEUE, "a+") as q:
        fcntl.flock(q, fcntl.LOCK_EX)
        q.seek(0)
        text = q.read()
        queue = json.loads(text) if text.strip() else []
        reply = queue.pop(0) if queue else None
        q.seek(0); q.truncate(); q.write(json.dumps(queue))
        with open(LOG, "a") as log:
            log.write(json.dumps(call) + "\n")
    if reply is None:
        reply = respond(call)
    if reply is None:
        reply = dict(DEFAULT)
    time.sleep(reply.get("delay", 0))
    if reply.get("raw_stdout") is not None:
        sys.stdout.write(reply["raw_stdout"])
        sys.stderr.write(reply.get("stderr", ""))
        return reply.get("exit_code", 0)
    model = option(argv, "--model") or "claude-haiku-4-5"
    is_error = bool(reply.get("is_error"))
    result = reply.get("result", "")
    out = {{"type": "result", "subtype": reply.get("subtype") or ("error_during_execution" if is_error else "success"),
           "is_error": is_error, "num_turns": reply.get("num_turns", 1), "result": result,
           "session_id": str(uuid.uuid4()), "total_cost_usd": reply.get("cost", 0.0001),
           "duration_ms": 5, "duration_api_ms": 1, "stop_reason": "end_turn", "terminal_reason": "completed",
           "permission_denials": [],
           "usage": {{"input_tokens": max(1, len(prompt or "") // 4), "cache_creation_input_tokens": 0,
                     "cache_read_input_tokens": 0, "output_tokens": max(1, len(str(result)) // 4)}},
           "modelUsage": {{model: {{"inputTokens": 1, "outputTokens": 1, "costUSD": 0.0001, "contextWindow": 200000}}}},
           "uuid": str(uuid.uuid4()), "api_error_status": reply.get("api_error_status")}}
    if "structured_output" in reply:
        out["structured_output"] = reply["structured_output"]
        if not result:
            out["result"] = json.dumps(reply["structured_output"])
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stderr.write(reply.get("stderr", ""))
    return reply.get("exit_code", 1 if is_error else 0)


sys.exit(main())
'''


class FakeClaude:
    """Handle on a fake `claude` executable: script replies, read the calls it saw."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.path = self.dir / "claude"
        self.log_path = self.dir / "claude_calls.jsonl"
        self.queue_path = self.dir / "claude_replies.json"

    def enqueue(self, result: str = "", **kw) -> "FakeClaude":
        """Queue one reply: result, is_error, exit_code, delay, structured_output, stderr, raw_stdout, subtype."""
        queue = json.loads(self.queue_path.read_text() or "[]") if self.queue_path.exists() else []
        queue.append({"result": result, **kw})
        self.queue_path.write_text(json.dumps(queue))
        return self

    def log_out(self) -> "FakeClaude":
        """Make `claude auth status` report no login, as the real CLI does before /login."""
        (self.dir / "claude_auth.json").write_text(json.dumps(
            {"loggedIn": False, "authMethod": "none", "apiProvider": "firstParty"}))
        return self

    def calls(self) -> list[dict]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line.strip()]


def make_fake_claude(directory, script: str = "", *, result: str = "Fake claude summary.\nExpand for details about: nothing else.",
                     **default) -> FakeClaude:
    """Write an executable fake `claude` into `directory` and return its FakeClaude handle.

    `script` is Python source pasted into the executable; it may define `respond(call) -> dict|None`
    (call = {"argv", "prompt", "stdin", "cwd", "pid", "env"}) to answer from the request. A queued
    reply (FakeClaude.enqueue) wins over `respond`; `result`/`default` set the fallback reply.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fake = FakeClaude(directory)
    source = FAKE_CLAUDE.format(python=sys.executable, default=repr({"result": result, **default}), script=script)
    fake.path.write_text(source)
    fake.path.chmod(0o755)
    return fake


@pytest.fixture
def fake_claude(tmp_path, monkeypatch):
    """A fake `claude` first on PATH (no API key in the environment, thanks to conftest)."""
    fake = make_fake_claude(tmp_path / "fake-bin")
    monkeypatch.setenv("PATH", f"{fake.dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return fake
