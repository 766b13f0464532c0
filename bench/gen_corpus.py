"""Write a synthetic ~/.claude/projects tree of N conversation messages for benchmarks.

Usage:
  python3 bench/gen_corpus.py --messages N --out DIR [--seed S]

The shape follows the real transcripts in ../shared/data/claude-projects (measured there):
per line, about 30% assistant tool_use, 30% tool_result, 19% assistant text, 6% thinking,
5% user prompts, 4% system lines, plus attachments, titles, file-history and queue lines;
line sizes drawn from log-normal fits of each kind's median and 90th percentile (tool results
carry a long tail up to ~120 KB and a duplicate `toolUseResult`, as Bash results do); one line
per content block with the real envelope (uuid chain, message.id, usage, cwd, gitBranch ...);
the lines of one response share its message.id, requestId and usage, as Claude Code writes them.
Sessions hold a few hundred to a few thousand messages, grouped ~8 to a project; about one
session in five has subagent transcripts (current `<session>/subagents/` layout); long
sessions contain a compact_boundary + compact summary. Deterministic for a given --seed.
Prints one JSON line: {"messages", "lines", "files", "sessions", "bytes", "seconds"}.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
import uuid as uuidlib
from datetime import datetime, timedelta, timezone

# main-thread models and their shares (sub-agents run on the first); their names as Claude Code writes them
MODELS = ("claude-haiku-4-5-20251001", "claude-sonnet-4-5-20250929", "claude-opus-4-7", "claude-opus-4-5-20251101")
MODEL_WEIGHTS = (10, 55, 25, 10)
TOOLS = [("Bash", 26), ("Read", 18), ("Edit", 17), ("TodoWrite", 10), ("Grep", 5), ("Glob", 3),
         ("MultiEdit", 2), ("Write", 2), ("WebFetch", 1), ("WebSearch", 1)]
WORDS = ("the function returns value error test file module import class def self config parser "
         "session message token context summary compact vault index query result output input path "
         "line column table schema migration commit branch merge review change update fix bug issue "
         "python sqlite json async await request response handler client server cache retry timeout "
         "café naïve résumé 日本語 テスト données über straße").split()


def lognormal(rng, median, p90, cap):
    sigma = math.log(p90 / median) / 1.2816  # z of the 90th percentile
    return max(1, min(cap, int(rng.lognormvariate(math.log(median), sigma))))


class Corpus:
    def __init__(self, out: str, seed: int):
        self.rng = random.Random(seed)
        self.out = out
        # one big pool of prose/code-like text; blocks are slices of it (fast, still tokenizable)
        words = self.rng.choices(self.vocabulary(), cum_weights=self.zipf, k=400_000)
        for i in range(0, len(words), 13):
            words[i] += self.rng.choice((".\n", ",", "()", ":", " =", "\n    "))
        self.pool = " ".join(words)
        self.clock = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
        self.messages = self.lines = self.files = self.sessions = self.bytes = 0

    def vocabulary(self) -> list[str]:
        """~20k words, Zipf-weighted like prose and code: common English, invented identifiers,
        snake_case names, paths and numbers, a few non-ASCII words."""
        rng, syllables = self.rng, "ka lo mi ser tan vel dor pi qu ent ion ing ar st re co de mo".split()
        words = list(WORDS)
        while len(words) < 20_000:
            word = "".join(rng.choice(syllables) for _ in range(rng.randrange(2, 5)))
            roll = rng.random()
            if roll < 0.15:
                word += "_" + rng.choice(syllables) + rng.choice(syllables)
            elif roll < 0.22:
                word = f"src/{word}/{rng.choice(syllables)}.py"
            elif roll < 0.3:
                word = str(rng.randrange(0, 100_000))
            words.append(word)
        total, self.zipf = 0.0, []
        for rank in range(1, len(words) + 1):
            total += 1 / rank
            self.zipf.append(total)
        return words

    def text(self, n: int) -> str:
        start = self.rng.randrange(0, len(self.pool) - n - 1) if n < len(self.pool) - 2 else 0
        return self.pool[start:start + n]

    def _uuid(self) -> str:
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    def _tick(self) -> str:
        self.clock += timedelta(milliseconds=self.rng.randrange(300, 20_000))
        return self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"

    def tool_output(self, name: str, tool_input: dict) -> tuple[str, dict]:
        """(tool_result text, toolUseResult) with the per-tool sizes measured in the real data:
        Read results are long, Edit results short but their toolUseResult carries the whole
        original file, Bash duplicates stdout."""
        rng, path = self.rng, tool_input.get("file_path", "")
        if name == "Read":
            output = self.text(lognormal(rng, 3000, 15_000, 110_000))
            return output, {"type": "text", "file": {"filePath": path, "content": output, "numLines": 80}}
        if name in ("Edit", "MultiEdit", "Write"):
            output = self.text(lognormal(rng, 700, 3000, 20_000))
            return output, {"filePath": path, "oldString": self.text(80), "newString": self.text(90),
                            "originalFile": self.text(lognormal(rng, 6000, 30_000, 200_000))}
        if name == "TodoWrite":
            return self.text(lognormal(rng, 200, 300, 2000)), {"oldTodos": [self.text(300)], "newTodos": [self.text(900)]}
        if name == "Bash":
            output = self.text(lognormal(rng, 500, 3000, 60_000))
            return output, {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
        output = self.text(lognormal(rng, 800, 3000, 30_000))
        return output, {"content": output, "mode": "content", "numFiles": rng.randrange(1, 20)}

    # -- one transcript file --------------------------------------------------------------------
    def session(self, path: str, sid: str, cwd: str, n_messages: int, agent_id: str | None = None) -> None:
        rng, lines, parent = self.rng, [], [None]
        base = {"isSidechain": agent_id is not None, "userType": "external", "cwd": cwd, "sessionId": sid,
                "version": "2.1.114", "gitBranch": "main"}
        if agent_id:
            base["agentId"] = agent_id

        def emit(kind: str, message: dict | None, **extra) -> None:
            entry = {"parentUuid": parent[0], **base, "type": kind, "uuid": self._uuid(), "timestamp": self._tick()}
            if message is not None:
                entry["message"] = message
            entry.update(extra)
            parent[0] = entry["uuid"]
            lines.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
            self.messages += 1

        # one API response is written as one line per content block, each with the response's
        # message.id, requestId and usage (the streamed first lines with a partial output count),
        # as Claude Code writes them: usage counts each response once
        responses: dict[str, tuple] = {}
        model = MODELS[0] if agent_id else rng.choices(MODELS, MODEL_WEIGHTS)[0]

        def assistant(block: dict, msg_id: str) -> None:
            if msg_id not in responses:
                write, hour = rng.randrange(0, 3000), rng.random() < 0.5
                usage = {"input_tokens": rng.randrange(1, 40), "cache_creation_input_tokens": write,
                         "cache_read_input_tokens": rng.randrange(10_000, 150_000), "output_tokens": rng.randrange(1, 900),
                         "cache_creation": {"ephemeral_5m_input_tokens": 0 if hour else write,
                                            "ephemeral_1h_input_tokens": write if hour else 0},
                         "service_tier": "standard"}
                responses[msg_id] = ("req_" + self._uuid().replace("-", "")[:24], usage)
                if block.get("type") != "tool_use":  # a tool call ends the response: its line has the final count
                    usage = {**usage, "output_tokens": min(usage["output_tokens"], rng.randrange(1, 12))}
            request, usage = responses[msg_id]
            emit("assistant", {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                               "content": [block], "stop_reason": None, "stop_sequence": None, "usage": usage},
                 requestId=request)

        def meta(line: dict) -> None:
            lines.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))

        target = self.messages + n_messages
        compact_at = self.messages + n_messages // 2 if n_messages > 1500 and not agent_id else -1
        while self.messages < target:
            if rng.random() < 0.15:
                meta({"type": "file-history-snapshot", "messageId": self._uuid(), "isSnapshotUpdate": False,
                      "snapshot": {"messageId": self._uuid(), "trackedFileBackups": {}, "timestamp": self._tick()}})
            if rng.random() < 0.12:
                meta({"type": "queue-operation", "operation": "enqueue", "timestamp": self._tick(), "sessionId": sid,
                      "content": self.text(lognormal(rng, 100, 600, 10_000))})
            emit("user", {"role": "user", "content": self.text(lognormal(rng, 120, 1900, 24_000))},
                 promptId=self._uuid(), permissionMode="default")
            if rng.random() < 0.3:
                meta({"parentUuid": parent[0], **base, "type": "attachment", "uuid": self._uuid(),
                      "timestamp": self._tick(), "attachment": {"type": "hook_success", "hookName": "UserPromptSubmit",
                                                                "stdout": self.text(lognormal(rng, 300, 400, 6000))}})
            msg_id = "msg_" + self._uuid().replace("-", "")[:24]
            if rng.random() < 0.9:
                assistant({"type": "thinking", "thinking": self.text(lognormal(rng, 550, 2600, 11_000)),
                           "signature": self.text(300).encode().hex()[:400]}, msg_id)
            for _ in range(min(int(rng.expovariate(1 / 5.5)), 40)):
                if self.messages + 3 > target:
                    break
                if rng.random() < 0.45:
                    assistant({"type": "text", "text": self.text(lognormal(rng, 140, 900, 14_000))}, msg_id)
                name = rng.choices([t for t, _ in TOOLS], [w for _, w in TOOLS])[0]
                tool_id = "toolu_" + self._uuid().replace("-", "")[:24]
                tool_input = {"command" if name == "Bash" else "file_path": self.text(lognormal(rng, 60, 200, 2000))}
                if name in ("Edit", "MultiEdit", "Write", "TodoWrite"):
                    tool_input["content"] = self.text(lognormal(rng, 250, 1400, 14_000))
                assistant({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}, msg_id)
                msg_id = "msg_" + self._uuid().replace("-", "")[:24]
                output, tool_result = self.tool_output(name, tool_input)
                if rng.random() < 0.001:  # a pasted screenshot
                    content = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                            "data": os.urandom(1).hex() * 60_000}}]
                else:
                    content = output
                emit("user", {"role": "user", "content": [{"tool_use_id": tool_id, "type": "tool_result",
                                                           "content": content, "is_error": rng.random() < 0.06}]},
                     toolUseResult=tool_result,
                     sourceToolAssistantUUID=parent[0])
            if self.messages < target:
                assistant({"type": "text", "text": self.text(lognormal(rng, 200, 1200, 14_000))}, msg_id)
            if self.messages < target and rng.random() < 0.85:
                emit("system", None, subtype="turn_duration", durationMs=rng.randrange(1000, 400_000), isMeta=False)
            if compact_at >= 0 and self.messages >= compact_at and self.messages + 2 <= target:
                compact_at = -1
                logical, parent[0] = parent[0], None
                emit("system", None, subtype="compact_boundary", content="Conversation compacted", isMeta=False,
                     level="info", logicalParentUuid=logical,
                     compactMetadata={"trigger": "auto", "preTokens": 160_000, "postTokens": 12_000})
                emit("user", {"role": "user", "content": "This session is being continued from a previous "
                              "conversation that ran out of context. " + self.text(4000)},
                     isCompactSummary=True, isVisibleInTranscriptOnly=True)
        while self.messages < target:  # top up to the exact count
            assistant({"type": "text", "text": self.text(lognormal(rng, 140, 900, 14_000))}, msg_id)
        if not agent_id:
            meta({"type": "ai-title", "aiTitle": self.text(40).strip(), "sessionId": sid})
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        with open(path, "wb") as f:
            f.write(data)
        self.lines += len(lines)
        self.bytes += len(data)
        self.files += 1

    def build(self, total: int) -> None:
        project, in_project = None, 99
        while self.messages < total:
            if in_project >= self.rng.randrange(4, 12):
                project, in_project = "/home/dev/work/" + self.text(12).strip().replace(" ", "-"), 0
            in_project += 1
            sid = self._uuid()
            pdir = os.path.join(self.out, "".join(c if c.isalnum() else "-" for c in project))
            size = min(total - self.messages, int(math.exp(self.rng.uniform(math.log(200), math.log(3000)))))
            agents = []
            if self.rng.random() < 0.2 and size > 400:
                agents = [self._uuid().replace("-", "")[:17] for _ in range(self.rng.randrange(1, 4))]
            main_size = size - 60 * len(agents)
            self.session(os.path.join(pdir, sid + ".jsonl"), sid, project, main_size)
            for agent in agents:
                self.session(os.path.join(pdir, sid, "subagents", f"agent-{agent}.jsonl"), sid, project, 60, agent)
            self.sessions += 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, required=True, help="conversation messages to write")
    p.add_argument("--out", required=True, help="directory to create (a projects/ tree)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    started = time.perf_counter()
    corpus = Corpus(args.out, args.seed)
    corpus.build(args.messages)
    print(json.dumps({"messages": corpus.messages, "lines": corpus.lines, "files": corpus.files,
                      "sessions": corpus.sessions, "bytes": corpus.bytes,
                      "seconds": round(time.perf_counter() - started, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
