"""Build realistic Claude Code transcript lines for tests (shapes from CLAUDE_CODE.md section 4).

    t = Transcript(tmp_path / "projects", session_id="s1", cwd="/home/u/proj")
    t.user("fix the failing test")
    t.assistant_text("Looking at it.")
    call = t.tool_use("Bash", {"command": "pytest -q"})
    t.tool_result(call, "1 failed", is_error=True)
    t.write()            # appends the new lines to <projects>/-home-u-proj/s1.jsonl

Every entry gets a fresh uuid chained by parentUuid and a timestamp one second after the last.
"""
from __future__ import annotations

import json
import re
import uuid as uuidlib
from datetime import datetime, timedelta, timezone
from pathlib import Path


def project_dir_name(cwd: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


class Transcript:
    def __init__(self, projects: Path, session_id: str | None = None, cwd: str = "/home/user/proj",
                 model: str = "claude-sonnet-4-5", start: str = "2026-11-20T09:00:00Z",
                 agent_id: str | None = None, layout: str = "subagents", parent: "Transcript | None" = None):
        self.session_id = session_id or (parent.session_id if parent else str(uuidlib.uuid4()))
        self.cwd = cwd
        self.model = model
        self.version = "2.1.330"  # the Claude Code version each line names (older layouts: "2.0.x")
        self.agent_id = agent_id
        self.time = datetime.fromisoformat(start.replace("Z", "+00:00"))
        self.last_uuid: str | None = None
        self.entries: list[dict] = []      # every entry made so far
        self.pending: list[str] = []       # lines not yet written
        project = Path(projects) / project_dir_name(cwd)
        if agent_id is None:
            self.path = project / f"{self.session_id}.jsonl"
        elif layout == "subagents":
            self.path = project / self.session_id / "subagents" / f"agent-{agent_id}.jsonl"
        else:  # older CLIs wrote agent files beside the session file
            self.path = project / f"agent-{agent_id}.jsonl"

    # -- building blocks -------------------------------------------------------
    def _tick(self) -> str:
        self.time += timedelta(seconds=1)
        return self.time.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def entry(self, type_: str, message: dict | None = None, **extra) -> dict:
        e = {
            "parentUuid": self.last_uuid,
            "isSidechain": self.agent_id is not None,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": self.version,
            "gitBranch": "main",
            "type": type_,
            "uuid": str(uuidlib.uuid4()),
            "timestamp": self._tick(),
        }
        if self.agent_id:
            e["agentId"] = self.agent_id
        if message is not None:
            e["message"] = message
        e.update(extra)
        self.last_uuid = e["uuid"]
        self.entries.append(e)
        self.pending.append(json.dumps(e, ensure_ascii=False))
        return e

    def raw_line(self, line: str) -> None:
        """Append an arbitrary (possibly malformed or non-conversation) line."""
        self.pending.append(line)

    def user(self, text: str, **extra) -> dict:
        return self.entry("user", {"role": "user", "content": text}, **extra)

    def assistant(self, blocks: list[dict], msg_id: str | None = None, usage: dict | None = None) -> dict:
        message = {
            "id": msg_id or "msg_" + uuidlib.uuid4().hex[:24],
            "type": "message", "role": "assistant", "model": self.model,
            "content": blocks, "stop_reason": None, "stop_sequence": None,
            "usage": usage or {"input_tokens": 1000, "cache_read_input_tokens": 0,
                               "cache_creation_input_tokens": 0, "output_tokens": 50},
        }
        return self.entry("assistant", message, requestId="req_" + uuidlib.uuid4().hex[:20])

    def assistant_text(self, text: str, **kw) -> dict:
        return self.assistant([{"type": "text", "text": text}], **kw)

    def thinking(self, text: str, **kw) -> dict:
        return self.assistant([{"type": "thinking", "thinking": text, "signature": "sig"}], **kw)

    def tool_use(self, name: str, tool_input: dict, **kw) -> str:
        tool_id = "toolu_" + uuidlib.uuid4().hex[:24]
        self.assistant([{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}], **kw)
        return tool_id

    def tool_result(self, tool_id: str, content, is_error: bool = False, **extra) -> dict:
        block = {"tool_use_id": tool_id, "type": "tool_result", "content": content, "is_error": is_error}
        return self.entry("user", {"role": "user", "content": [block]}, **extra)

    def compact_boundary(self, trigger: str = "auto", pre_tokens: int = 150000) -> dict:
        logical = self.last_uuid
        self.last_uuid = None
        return self.entry("system", None, subtype="compact_boundary", content="Conversation compacted",
                          isMeta=False, level="info", logicalParentUuid=logical,
                          compactMetadata={"trigger": trigger, "preTokens": pre_tokens})

    def title(self, text: str) -> None:
        self.pending.append(json.dumps({"type": "ai-title", "aiTitle": text, "sessionId": self.session_id}))

    # -- output ----------------------------------------------------------------
    def write(self) -> Path:
        """Append the pending lines (each newline-terminated) and return the file path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            for line in self.pending:
                f.write(line + "\n")
        self.pending.clear()
        return self.path


def coding_session(projects: Path, turns: int = 10, **kw) -> Transcript:
    """A plausible coding session: prompts, edits, commands (some failing), results."""
    t = Transcript(projects, **kw)
    for i in range(turns):
        t.user(f"Step {i}: please update module_{i}.py so the parser handles case {i}")
        t.assistant_text(f"I'll edit module_{i}.py and run the tests for case {i}.")
        edit = t.tool_use("Edit", {"file_path": f"/home/user/proj/module_{i}.py",
                                   "old_string": f"return {i}", "new_string": f"return {i} + 1"})
        t.tool_result(edit, f"The file /home/user/proj/module_{i}.py has been updated.")
        run = t.tool_use("Bash", {"command": f"pytest tests/test_module_{i}.py -q"})
        failed = i % 3 == 0
        t.tool_result(run, f"{'1 failed' if failed else '3 passed'} in 0.{i}s", is_error=failed)
        t.assistant_text(f"Case {i} is {'still failing' if failed else 'done'}.")
    return t
