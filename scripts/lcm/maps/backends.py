"""How each backend asks a model about one map item (the `start` functions of lcm.maps.worker).

  llm_api       lcm_llm_map.py over the API: one stateless call per attempt; a rejected answer
                and the reason go back as the next turns of the same short conversation
  llm_claude    lcm_llm_map.py through `claude -p` (the user's Claude Code login, no API key)
  agent_api     lcm_agentic_map.py over the API: a bounded tool loop with lcm.maps.tools
  agent_claude  lcm_agentic_map.py through a headless `claude -p` agent with restricted tools

Every call goes through lcm.base.llm, which masks what a model reads.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import lcm.base.errors
import lcm.base.llm
from lcm.maps.job import MapJob, item_text
from lcm.maps.tools import FileTools
from lcm.maps.worker import JSON_ONLY_RULES, retry_feedback, schema_rules

LLM_SYSTEM_PROMPT = ("You process one item of a batch job: apply the task below to the item in the user message. "
                     + JSON_ONLY_RULES)
READ_TOOLS_CLI = "Read,Glob,Grep"
WRITE_TOOLS_CLI = "Edit,Write,Bash"


def llm_system_prompt(prompt: str, schema: dict | None) -> str:
    return f"{LLM_SYSTEM_PROMPT}\n\nTask:\n{prompt}{schema_rules(schema)}"


def agent_system_prompt(prompt: str, schema: dict | None, root: Path, allow_write: bool) -> str:
    access = ("You may read and modify files there." if allow_write else
              "This run is read-only: do not try to modify, create or delete anything.")
    return (f"You are a sub-agent working on one item of a batch job, in the directory {root}. "
            f"Use your tools to inspect files as the task needs. {access} When you are done, give your "
            f"final answer. {JSON_ONLY_RULES}\n\nTask:\n{prompt}{schema_rules(schema)}")


def agent_cli_tools(allow_write: bool) -> str:
    return READ_TOOLS_CLI + ("," + WRITE_TOOLS_CLI if allow_write else "")


def claude_answer(result: dict, outcome) -> str:
    """The answer text of a `claude -p` result (its structured output when there is one); its
    usage is added to the outcome."""
    usage = result.get("usage") or {}
    outcome.input_tokens += int(usage.get("input_tokens") or 0)
    outcome.output_tokens += int(usage.get("output_tokens") or 0)
    structured = result.get("structured_output")
    return json.dumps(structured) if structured is not None else str(result.get("result") or "")


def _with_feedback(value, rejected, said: str) -> str:
    """The item again, with the rejected answer and why: `claude -p` keeps no conversation."""
    if rejected is None:
        return item_text(value)
    return f"{item_text(value)}\n\n{said}\n{rejected[0]}\n\n{retry_feedback(rejected[1])}"


# ---------------------------------------------------------------------------
# lcm_llm_map.py
# ---------------------------------------------------------------------------

class Requests:
    """Builds Messages API parameters; drops structured outputs if the model refuses them."""

    def __init__(self, job: MapJob, model: str, max_tokens: int, backend: str):
        self.model = model
        self.max_tokens = max_tokens
        self.system = llm_system_prompt(job.prompt, job.schema)
        self.output_format = lcm.base.llm.json_output_format(job.schema) if backend == "anthropic" else None
        self._lock = threading.Lock()

    def params(self, value, history: list) -> dict:
        """The call's parameters (unmasked: lcm.base.llm masks them on the way out)."""
        params = {"model": self.model, "max_tokens": self.max_tokens, "system": self.system,
                  "messages": [{"role": "user", "content": item_text(value)}, *history]}
        if self.output_format is not None:
            params["output_config"] = {"format": self.output_format}
        return params

    def drop_structured(self) -> None:
        """Turn structured outputs off (once, whichever item saw the refusal first)."""
        with self._lock:
            if self.output_format is not None:
                sys.stderr.write(f"lcm: {self.model} refused structured outputs; using the plain JSON prompt\n")
            self.output_format = None


def llm_api(client, requests: Requests, timeout: float):
    def start(value):
        history: list = []

        def ask(rejected, outcome) -> str:
            if rejected is not None:
                history.extend([{"role": "assistant", "content": rejected[0] or "(empty)"},
                                {"role": "user", "content": retry_feedback(rejected[1])}])
            while True:
                params = requests.params(value, history)
                try:
                    text, spent_in, spent_out = lcm.base.llm.map_message(client, params, timeout)
                except lcm.base.llm.StructuredOutputRefused:
                    if "output_config" not in params:
                        raise  # refused without structured outputs: the request itself is wrong
                    requests.drop_structured()
                    continue  # not the item's fault: the same attempt, without output_config
                outcome.input_tokens += spent_in
                outcome.output_tokens += spent_out
                return text
        return ask
    return start


def llm_claude(requests: Requests, schema: dict | None, timeout: float):
    def start(value):
        def ask(rejected, outcome) -> str:
            result = lcm.base.llm.run_claude(_with_feedback(value, rejected, "Your previous answer was:"),
                                        system=requests.system, model=requests.model, max_turns=1, tools="",
                                        json_schema=schema, timeout=timeout)
            return claude_answer(result, outcome)
        return ask
    return start


# ---------------------------------------------------------------------------
# lcm_agentic_map.py
# ---------------------------------------------------------------------------

def agent_api(client, job: MapJob, root: Path, model: str, *, allow_write: bool, max_turns: int, max_tokens: int,
              timeout: float, retries: int):
    tools = FileTools(root, allow_write)
    params = {"model": model, "max_tokens": max_tokens, "tools": tools.specs(),
              "system": agent_system_prompt(job.prompt, job.schema, root, allow_write)}

    def start(value):
        deadline = time.monotonic() + timeout  # for the whole item, retries included
        messages: list = [{"role": "user", "content": item_text(value)}]

        def ask(rejected, outcome) -> str:
            if rejected is not None:  # the rejected answer is already the conversation's last turn
                messages.append({"role": "user", "content": retry_feedback(rejected[1])})
            return lcm.base.llm.map_tool_loop(client, params, messages, tools.call, max_turns=max_turns,
                                         deadline=deadline, timeout=timeout, retries=retries, tally=outcome)
        return ask
    return start


def agent_claude(job: MapJob, root: Path, model: str | None, *, allow_write: bool, max_turns: int, timeout: float):
    system = agent_system_prompt(job.prompt, job.schema, root, allow_write)
    tools = agent_cli_tools(allow_write)

    def start(value):
        deadline = time.monotonic() + timeout

        def ask(rejected, outcome) -> str:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise lcm.base.errors.ModelError(f"timed out after {timeout:g}s")
            try:
                # run_claude gives the child LCM_SUBAGENT=1 and one more delegation level
                result = lcm.base.llm.run_claude(_with_feedback(value, rejected, "Your previous final answer was:"),
                                            system=system, model=model, max_turns=max_turns, tools=tools,
                                            allowed_tools=tools, json_schema=job.schema, timeout=remaining,
                                            cwd=str(root))
            except lcm.base.errors.ModelConfigError:
                raise
            except lcm.base.errors.ModelError:
                if time.monotonic() >= deadline:
                    raise lcm.base.errors.ModelError(f"timed out after {timeout:g}s (the agent was killed)") from None
                raise
            return claude_answer(result, outcome)
        return ask
    return start
