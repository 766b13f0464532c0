"""The file tools an API agent of lcm_agentic_map.py gets, confined to its working directory.

read_file, list_dir and search always; write_file only with --allow-write. A path that resolves
outside the directory (through `..` or a symlink) is refused, and so is any write in a read-only
run: the agent sees the refusal as the tool's error result and can go on.
"""
from __future__ import annotations

import re
from pathlib import Path

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


class ToolError(Exception):
    """A tool call the agent got wrong or may not make: reported back to it as an error result."""


class FileTools:
    def __init__(self, root: Path, allow_write: bool):
        self.root = root
        self.allow_write = allow_write

    def specs(self) -> list[dict]:
        return TOOL_SPECS + (WRITE_TOOL_SPECS if self.allow_write else [])

    def call(self, name: str, args: dict) -> tuple[str, bool]:
        """(output, is_error) of one tool call, as the tool loop hands it back to the model."""
        try:
            output, is_error = self.run(name, args), False
        except ToolError as exc:
            output, is_error = str(exc), True
        except (OSError, TypeError, ValueError) as exc:
            output, is_error = f"{name} failed: {exc}", True
        return output[:MAX_TOOL_OUTPUT_CHARS], is_error

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
