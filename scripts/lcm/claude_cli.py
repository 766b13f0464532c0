"""The claude backend of the model seam (lcm.llm): the Claude Code CLI run headless
(`claude -p --output-format json`) on the user's own login, without their settings, plugins or
hooks, with LCM_SUBAGENT=1. What it is sent is masked first."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import lcm.guard
import lcm.mask
import lcm.transcript
from lcm.errors import ModelConfigError, ModelError

NO_BACKEND_HINT = ("set ANTHROPIC_API_KEY, or log in to Claude Code so `claude -p` works (LCM_LLM=claude), "
                   "or set LCM_LLM=none for extractive summaries without a model")
TIMEOUT = 120.0  # seconds one headless run may take, by default
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
               json_schema: dict | str | None = None, timeout: float = TIMEOUT,
               env: dict | None = None, cwd: str | None = None) -> dict:
    """Run `claude -p --output-format json` once and return its parsed result object.

    No user/project settings are loaded (so no plugins or hooks run inside it), nothing is
    persisted as a session, and LCM_SUBAGENT=1 marks the child as lcm's own sub-agent.
    A timeout kills the child's whole process group. Failures raise ModelError.
    """
    prompt, system = lcm.mask.mask(prompt), lcm.mask.mask(system)  # what a model reads never holds a secret
    # and a lone surrogate quoted from a stored line goes as its escape: argv and stdin are UTF-8
    prompt, system = lcm.transcript.safe_text(prompt), system and lcm.transcript.safe_text(system)
    child_env = lcm.guard.child_env(env)
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
