"""Run one sub-agent per line of a JSONL file: each item gets its own agent that can look at files.

Like lcm_llm_map.py (same input, output, schema, retry, --resume and summary contract), but each
item is worked on by an agent with tools instead of a single call:
  claude backend     a headless `claude -p` per item (the user's Claude Code login), tools limited
                     to Read, Glob, Grep (plus Edit, Write, Bash with --allow-write)
  anthropic backend  a bounded tool loop over the API with read_file, list_dir, search confined to
                     --cwd (plus write_file with --allow-write)
Read-only is the default. Inside a sub-agent it runs only with --delegated-scope and --kept-work.

Usage:
  python3 scripts/lcm_agentic_map.py --input tasks.jsonl --output results.jsonl (--prompt TEXT | --prompt-file F)
      [--schema S.json] [--concurrency 4] [--max-turns 20] [--read-only | --allow-write] [--timeout 600]
      [--cwd DIR] [--model M] [--max-attempts 3] [--resume] [--dry-run]

Examples:
  python3 "$LCM_SCRIPTS/lcm_agentic_map.py" --input modules.jsonl --output audit.jsonl \\
      --prompt "Read this module and list its public functions that lack tests" --schema audit.schema.json
  python3 "$LCM_SCRIPTS/lcm_agentic_map.py" ... --resume   # finish an interrupted run
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import lcm.cli
import lcm.db
import lcm.guard
import lcm.llm
import lcm.maps as core
from lcm.errors import LcmError

READ_TOOLS_CLI = "Read,Glob,Grep"
WRITE_TOOLS_CLI = "Edit,Write,Bash"
MAX_TOOL_OUTPUT_CHARS = 50_000   # one tool result; the agent pages with offset/limit
MAX_SEARCH_HITS = 100
MAX_SEARCH_FILE_BYTES = 2_000_000
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}

TOOL_SPECS = [
    {"name": "read_file", "description": "Read a text file (paths relative to the working directory). "
     "Returns numbered lines; use offset and limit to page through a long file.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"}, "offset": {"type": "integer", "description": "first line, 1-based"},
         "limit": {"type": "integer", "description": "number of lines (default 400)"}}, "required": ["path"]}},
    {"name": "list_dir", "description": "List a directory (default: the working directory); directories end with /.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "search", "description": "Search file contents with a Python regular expression, recursively "
     "under path (default: the working directory). Returns path:line: text.",
     "input_schema": {"type": "object", "properties": {
         "pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}},
]
WRITE_TOOL_SPECS = [
    {"name": "write_file", "description": "Create or overwrite a text file under the working directory.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}},
]


def system_prompt(prompt: str, schema: dict | None, root: Path, allow_write: bool) -> str:
    access = ("You may read and modify files there." if allow_write else
              "This run is read-only: do not try to modify, create or delete anything.")
    return (f"You are a sub-agent working on one item of a batch job, in the directory {root}. "
            f"Use your tools to inspect files as the task needs. {access} When you are done, give your "
            f"final answer. {core.JSON_ONLY_RULES}\n\nTask:\n{prompt}{core.schema_rules(schema)}")


# ---------------------------------------------------------------------------
# File tools for the anthropic backend, confined to the working directory
# ---------------------------------------------------------------------------

class ToolError(Exception):
    """A tool call the agent got wrong or may not make: reported back to it as an error result."""


class CallFailed(Exception):
    """The item's model call failed for good (deadline passed, retries exhausted)."""


class FileTools:
    def __init__(self, root: Path, allow_write: bool):
        self.root = root
        self.allow_write = allow_write

    def specs(self) -> list[dict]:
        return TOOL_SPECS + (WRITE_TOOL_SPECS if self.allow_write else [])

    def resolve(self, raw: str | None) -> Path:
        target = (self.root / (raw or ".")).resolve()  # resolve() follows symlinks: no escape through them
        if target != self.root and not target.is_relative_to(self.root):
            raise ToolError(f"{raw} is outside the working directory {self.root}")
        return target

    def run(self, name: str, args: dict) -> str:
        if name == "write_file" and not self.allow_write:
            raise ToolError("refused: this run is read-only (no --allow-write); nothing was written")
        handler = {"read_file": self.read_file, "list_dir": self.list_dir, "search": self.search,
                   "write_file": self.write_file}.get(name)
        if handler is None:
            raise ToolError(f"unknown tool {name}")
        return handler(**{k: v for k, v in args.items() if k in handler.__code__.co_varnames})

    def read_file(self, path: str, offset: int = 1, limit: int = 400) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path} is not a file")
        offset, limit = max(1, int(offset or 1)), max(1, int(limit or 400))
        lines, size = [], 0
        with target.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if number < offset:
                    continue
                if number >= offset + limit or size > MAX_TOOL_OUTPUT_CHARS:
                    lines.append(f"... more lines: read_file with offset={number}")
                    break
                lines.append(f"{number}\t{line.rstrip()}")
                size += len(line)
        return "\n".join(lines) or "(empty file)"

    def list_dir(self, path: str = ".") -> str:
        target = self.resolve(path)
        if not target.is_dir():
            raise ToolError(f"{path} is not a directory")
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return "\n".join(names[:500]) + (f"\n... {len(names) - 500} more" if len(names) > 500 else "") or "(empty)"

    def search(self, pattern: str, path: str = ".") -> str:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from None
        target = self.resolve(path)
        files = [target] if target.is_file() else sorted(
            p for p in target.rglob("*") if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(target).parts))
        hits: list[str] = []
        for file in files:
            if file.stat().st_size > MAX_SEARCH_FILE_BYTES:
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue  # binary or unreadable
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{file.relative_to(self.root)}:{number}: {line.strip()[:300]}")
                    if len(hits) >= MAX_SEARCH_HITS:
                        return "\n".join(hits) + f"\n... stopped at {MAX_SEARCH_HITS} hits: narrow the pattern or path"
        return "\n".join(hits) or "no matches"

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {target.relative_to(self.root)}"


# ---------------------------------------------------------------------------
# The anthropic backend: a bounded tool loop per item
# ---------------------------------------------------------------------------

def call_before(client, params: dict, deadline: float, timeout: float, retries: int):
    """One Messages call that gives up at the item's deadline (our own backoff, none in the SDK)."""
    import anthropic
    for attempt in range(retries + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            return client.with_options(timeout=remaining, max_retries=0).messages.create(**lcm.llm.masked_params(params))
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError, anthropic.NotFoundError) as exc:
            raise lcm.llm.ModelConfigError(f"the API refused the request ({exc.status_code}): {exc}",
                                           "check ANTHROPIC_API_KEY and --model, then rerun with --resume") from None
        except anthropic.APITimeoutError:
            break
        except (anthropic.RateLimitError, anthropic.InternalServerError, anthropic.APIConnectionError) as exc:
            if attempt == retries:
                raise CallFailed(f"API error after {retries} retries: {exc}") from None
            wait = min(0.5 * 2 ** attempt, 8.0)
            response = getattr(exc, "response", None)
            if response is not None and response.headers.get("retry-after-ms"):
                wait = float(response.headers["retry-after-ms"]) / 1000
            time.sleep(max(0.0, min(wait, deadline - time.monotonic())))
    raise CallFailed(f"timed out after {timeout:g}s")


def anthropic_worker(client, job: core.MapJob, args, root: Path, model: str):
    import anthropic
    tools = FileTools(root, args.allow_write)
    checker = core.AnswerChecker(job.schema)
    system = system_prompt(job.prompt, job.schema, root, args.allow_write)

    def process(index: int, value) -> core.Outcome:
        outcome = core.Outcome(ok=False)
        deadline = time.monotonic() + args.timeout
        messages: list = [{"role": "user", "content": core.item_text(value)}]
        tool_turns = 0
        params = {"model": model, "max_tokens": args.max_tokens, "system": system, "tools": tools.specs()}
        try:
            while True:
                response = call_before(client, {**params, "messages": messages}, deadline, args.timeout,
                                       args.api_retries)
                outcome.input_tokens += response.usage.input_tokens or 0
                outcome.output_tokens += response.usage.output_tokens or 0
                content = [block_param(block) for block in response.content]
                messages.append({"role": "assistant", "content": [c for c in content if c] or "(empty)"})
                calls = [block for block in response.content if block.type == "tool_use"]
                if calls:
                    tool_turns += 1
                    if tool_turns > args.max_turns:
                        outcome.error = f"no final answer within --max-turns {args.max_turns}"
                        return outcome
                    messages.append({"role": "user", "content": [tool_result(tools, call) for call in calls]})
                    continue
                outcome.attempts += 1
                text = "".join(block.text for block in response.content if block.type == "text")
                try:
                    outcome.result = checker.parse(text)
                    outcome.ok, outcome.error = True, None
                    return outcome
                except core.AnswerError as exc:
                    outcome.error = f"{exc} (after {outcome.attempts} attempts)"
                    if outcome.attempts >= args.max_attempts:
                        return outcome
                    messages.append({"role": "user", "content": core.retry_feedback(str(exc))})
        except CallFailed as exc:
            outcome.attempts = max(outcome.attempts, 1)
            outcome.error = str(exc)
        except anthropic.APIStatusError as exc:
            outcome.attempts = max(outcome.attempts, 1)
            outcome.error = f"API error {exc.status_code}: {exc}"
        return outcome
    return process


def block_param(block) -> dict | None:
    if block.type == "text":
        return {"type": "text", "text": block.text} if block.text else None
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return None


def tool_result(tools: FileTools, call) -> dict:
    try:
        output, is_error = tools.run(call.name, dict(call.input or {})), False
    except ToolError as exc:
        output, is_error = str(exc), True
    except (OSError, TypeError, ValueError) as exc:
        output, is_error = f"{call.name} failed: {exc}", True
    return {"type": "tool_result", "tool_use_id": call.id, "content": output[:MAX_TOOL_OUTPUT_CHARS],
            "is_error": is_error}


# ---------------------------------------------------------------------------
# The claude backend: one headless `claude -p` per item
# ---------------------------------------------------------------------------

def claude_worker(job: core.MapJob, args, root: Path, model: str | None):
    checker = core.AnswerChecker(job.schema)
    system = system_prompt(job.prompt, job.schema, root, args.allow_write)
    tools = READ_TOOLS_CLI + ("," + WRITE_TOOLS_CLI if args.allow_write else "")

    def process(index: int, value) -> core.Outcome:
        outcome = core.Outcome(ok=False)
        deadline = time.monotonic() + args.timeout
        prompt = core.item_text(value)
        while outcome.attempts < args.max_attempts:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.error = f"timed out after {args.timeout:g}s"
                return outcome
            outcome.attempts += 1
            try:
                # run_claude gives the child LCM_SUBAGENT=1 and one more delegation level
                result = lcm.llm.run_claude(prompt, system=system, model=model, max_turns=args.max_turns,
                                            tools=tools, allowed_tools=tools, json_schema=job.schema,
                                            timeout=remaining, cwd=str(root))
            except lcm.llm.ModelConfigError:
                raise
            except lcm.llm.ModelError as exc:
                timed_out = time.monotonic() >= deadline
                outcome.error = f"timed out after {args.timeout:g}s (the agent was killed)" if timed_out else exc.message
                return outcome
            rejected = core.take_claude_result(outcome, result, checker)
            if rejected is None:
                return outcome
            text, why = rejected
            prompt = (f"{core.item_text(value)}\n\nYour previous final answer was:\n{text}\n\n"
                      f"{core.retry_feedback(why)}")
        return outcome
    return process


# ---------------------------------------------------------------------------

def _main(argv):
    p = lcm.cli.parser(__doc__)
    core.add_map_args(p, concurrency=4, timeout=600.0)
    p.add_argument("--max-turns", type=core._positive_int, default=20, metavar="N",
                   help="tool-using turns per item before it fails (default 20)")
    access = p.add_mutually_exclusive_group()
    access.add_argument("--read-only", dest="allow_write", action="store_false", default=False,
                        help="agents may only read, list and search files (the default)")
    access.add_argument("--allow-write", dest="allow_write", action="store_true",
                        help="agents may also write files (and, with claude, edit and run Bash)")
    p.add_argument("--cwd", metavar="DIR", default=".", help="directory the agents work in (default: current)")
    p.add_argument("--max-tokens", type=core._positive_int, default=4096, metavar="N",
                   help="answer length cap per model turn (default 4096)")
    p.add_argument("--api-retries", type=lcm.cli.int_arg(0, 20), default=lcm.llm.DEFAULT_MAX_RETRIES, metavar="N",
                   help="retries per call on 429, 5xx and connection errors, within --timeout")
    lcm.guard.add_guard_args(p)
    args = p.parse_args(argv)

    lcm.guard.check_delegation("lcm_agentic_map.py", args.delegated_scope, args.kept_work,
                               instead="read the files with your own tools, or use lcm_llm_map.py for tool-free work")
    job = core.prepare(args, "agentic")
    root = Path(args.cwd).expanduser().resolve()
    if not root.is_dir():
        raise LcmError(f"--cwd {args.cwd} is not a directory", "pass the directory the agents should work in")
    job.options = {"max_attempts": args.max_attempts, "max_turns": args.max_turns, "allow_write": args.allow_write,
                   "cwd": str(root)}
    backend = lcm.llm.resolve_backend()
    model = args.model or lcm.llm.resolve_model()
    if args.dry_run:
        system = system_prompt(job.prompt, job.schema, root, args.allow_write)
        first_turn = core.estimate_input_tokens(job, system)
        lcm.cli.print_json({
            "dry_run": True, "total": job.total, "backend": backend, "model": model, "read_only": not args.allow_write,
            "tools": ",".join(t["name"] for t in FileTools(root, args.allow_write).specs()) if backend == "anthropic"
            else READ_TOOLS_CLI + ("," + WRITE_TOOLS_CLI if args.allow_write else ""),
            "estimated_first_turn_input_tokens": first_turn,
            "min_cost_usd": core.cost_usd(model, first_turn, 200 * job.total),
            "cost_note": f"each item may take up to {args.max_turns} turns, each re-sending its conversation; "
                         "expect several times min_cost_usd",
            "first_request": {"system": system, "prompt": core.item_text(job.first_item)},
        })
        return 0
    if backend == "none":
        raise lcm.llm.ModelConfigError("lcm_agentic_map.py needs a model, and no backend is available",
                                       lcm.llm.NO_BACKEND_HINT)

    conn = lcm.db.connect(args.db)
    state = core.RunState.open(conn, job, model, args.resume)
    try:
        if backend == "anthropic":
            process = anthropic_worker(lcm.llm.anthropic_client(timeout=args.timeout, max_retries=0),
                                       job, args, root, model)
        else:
            process = claude_worker(job, args, root, model)
        core.run_items(job, state, process, args.concurrency, "agentic_map")
    except LcmError:
        state.finish("failed")
        raise
    return core.report(state, job.output_path)


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())
