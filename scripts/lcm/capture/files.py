"""Large-file externalisation: keep big content blocks out of the searchable text.

A content block (tool result, file read, pasted file) above LCM_LARGE_FILE_THRESHOLD tokens is
written once under $LCM_HOME/files/ and replaced in the message's searchable text by a short
reference plus a type-aware exploration summary (JSON shape, CSV columns, code signatures, text
head and tail). The original transcript line is untouched in `messages.raw`, so nothing is lost.

Library only (ingest calls `externalize`); inspect stored files with lcm_describe.py file_<id>.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re

import lcm.base.config
from lcm.base.errors import LcmError

HEAD_LINES = 12
TAIL_LINES = 6
LINE_CHARS = 160           # one summary line never exceeds this
SUMMARY_CHARS = 2400       # the whole exploration summary stays about 600 tokens
MAX_SIGNATURES = 40

CODE_EXTENSIONS = {
    ".py", ".js", ".jsx", ".ts", ".tsx", ".mjs", ".cjs", ".go", ".rs", ".java", ".kt", ".c", ".h",
    ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash", ".lua", ".sql",
}
# a line that declares something: enough to see the outline of a file in most languages
SIGNATURE = re.compile(
    r"^\s*(?:export\s+)?(?:pub(?:\(\w+\))?\s+)?(?:async\s+)?(?:static\s+)?"
    r"(?:def|class|function|func|fn|interface|struct|enum|trait|impl|type|module|"
    r"CREATE\s+(?:TABLE|VIEW|INDEX)|public|private|protected)\b.*",
    re.IGNORECASE,
)


def _clip(line: str, width: int = LINE_CHARS) -> str:
    line = line.rstrip()
    return line if len(line) <= width else line[: width - 3] + "..."


# Claude Code's Read result numbers each line (`    12→def main():`, or `12\t...` as cat -n does)
LINE_NUMBER = re.compile(r"^ *\d+(?:→|\t)", re.MULTILINE)


def without_line_numbers(content: str) -> str:
    """The file as written when most of its opening lines carry a Read-style line number, else
    `content` unchanged: outlines and kinds are read through the prefix."""
    head = [line for line in content[:4000].splitlines()[:20] if line.strip()]
    if not head or sum(1 for line in head if LINE_NUMBER.match(line)) < 0.8 * len(head):
        return content
    return LINE_NUMBER.sub("", content)


# a first line that opens a source file, never a table's header (`import { a, b } from 'x';`)
CODE_OPENING = re.compile(r"^\s*(?:import|from|#include|#!|package|using|use|require|const|let|var|<\?php|//|/\*)\b")


def detect_kind(name: str, content: str) -> str:
    """json | csv | tsv | code | markdown | text, from the name first, then the content.

    A block with Read's line numbers is a file that was read, whatever tool made it and whether or
    not its transcript line names the file (older Claude Code wrote no toolUseResult): its
    declarations decide before any comma does, so a module opening with `import { a, b }` lines
    is code, not a two-column table."""
    stripped_numbers = without_line_numbers(content)
    numbered = stripped_numbers is not content
    content = stripped_numbers
    ext = os.path.splitext(name or "")[1].lower()
    if ext in (".json", ".jsonl", ".ndjson", ".geojson"):
        return "json"
    if ext in (".csv", ".tsv"):
        return ext[1:]
    if ext in CODE_EXTENSIONS:
        return "code"
    if ext in (".md", ".markdown", ".rst"):
        return "markdown"
    stripped = content.lstrip()[:1]
    if stripped in ("{", "["):
        try:
            json.loads(content)
            return "json"
        except ValueError:
            pass
    signatures = sum(1 for line in content[:20000].splitlines() if SIGNATURE.match(line))
    if numbered and signatures >= 3:
        return "code"
    head = content[:4000].splitlines()[:5]
    if len(head) >= 3 and not CODE_OPENING.match(head[0]):
        for delim, kind in (("\t", "tsv"), (",", "csv")):
            counts = {line.count(delim) for line in head}
            if len(counts) == 1 and counts.pop() >= 1:
                return kind
    if signatures >= 3:
        return "code"
    return "text"


def _json_shape(value, depth: int = 0, max_depth: int = 3) -> str:
    """A compact type sketch: {"a": int, "b": [{"c": str}] x120}."""
    if isinstance(value, dict):
        if depth >= max_depth:
            return "{...}"
        parts = [f"{json.dumps(k)}: {_json_shape(v, depth + 1, max_depth)}" for k, v in list(value.items())[:12]]
        more = f", ... {len(value) - 12} more keys" if len(value) > 12 else ""
        return "{" + ", ".join(parts) + more + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return f"[{_json_shape(value[0], depth + 1, max_depth)}] x{len(value)}"
    if isinstance(value, bool) or value is None:
        return "bool" if isinstance(value, bool) else "null"
    return {int: "int", float: "float", str: "str"}.get(type(value), type(value).__name__)


def _summarize_json(content: str) -> list[str]:
    try:
        data = json.loads(content)
    except ValueError:
        lines = content.splitlines()
        try:  # JSON Lines: shape of the first record
            first = json.loads(lines[0])
            return [f"JSON Lines, {len(lines)} records", "record shape: " + _json_shape(first)]
        except (ValueError, IndexError):
            return ["JSON (does not parse)"] + _summarize_text(content)
    kind = type(data).__name__.replace("dict", "object").replace("list", "array")
    lines = [f"JSON {kind}", "shape: " + _json_shape(data)]
    if isinstance(data, dict):
        lines.append("top-level keys: " + ", ".join(list(data)[:40]))
    return lines


def _summarize_table(content: str, delimiter: str) -> list[str]:
    rows = list(csv.reader(io.StringIO(content[:200000]), delimiter=delimiter))
    total = content.count("\n") + (0 if content.endswith("\n") else 1)
    if not rows:
        return ["empty table"]
    header = rows[0]
    lines = [f"{'CSV' if delimiter == ',' else 'TSV'} table, {total - 1} data rows, {len(header)} columns",
             "columns: " + ", ".join(header[:60])]
    for row in rows[1:4]:
        lines.append("row: " + _clip(", ".join(row)))
    return lines


def _summarize_code(content: str) -> list[str]:
    all_lines = content.splitlines()
    signatures = [f"{n}: {_clip(line.strip())}" for n, line in enumerate(all_lines, 1) if SIGNATURE.match(line)]
    lines = [f"code, {len(all_lines)} lines, {len(signatures)} declarations"]
    lines += signatures[:MAX_SIGNATURES]
    if len(signatures) > MAX_SIGNATURES:
        lines.append(f"... {len(signatures) - MAX_SIGNATURES} more declarations")
    return lines


def _summarize_text(content: str) -> list[str]:
    all_lines = content.splitlines()
    lines = [f"text, {len(all_lines)} lines"]
    headings = [_clip(line) for line in all_lines if line.startswith("#")][:20]
    if headings:
        lines.append("headings: " + " | ".join(h.lstrip("# ") for h in headings))
    lines.append("head:")
    lines += ["  " + _clip(line) for line in all_lines[:HEAD_LINES]]
    if len(all_lines) > HEAD_LINES + TAIL_LINES:
        lines.append(f"  ... {len(all_lines) - HEAD_LINES - TAIL_LINES} lines ...")
        lines.append("tail:")
        lines += ["  " + _clip(line) for line in all_lines[-TAIL_LINES:]]
    else:
        lines += ["  " + _clip(line) for line in all_lines[HEAD_LINES:]]
    return lines


def exploration_summary(kind: str, content: str) -> str:
    """A bounded, type-aware description of the content."""
    content = without_line_numbers(content)
    if kind == "json":
        lines = _summarize_json(content)
    elif kind in ("csv", "tsv"):
        lines = _summarize_table(content, "," if kind == "csv" else "\t")
    elif kind == "code":
        lines = _summarize_code(content)
    else:
        lines = _summarize_text(content)
    text = "\n".join(lines)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 4] + "\n..."


def _store(content_bytes: bytes, sha: str) -> str:
    """Write the content once per hash (0600, atomically); return its path."""
    directory = lcm.base.config.files_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{sha}.txt"
    if not path.exists():
        tmp = directory / f".{sha}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(content_bytes)
        os.replace(tmp, path)
    return str(path)


def externalize(conn, *, session_id: str, message_uuid: str, name: str, content: str) -> str:
    """Store a large block under $LCM_HOME/files + a `files` row; return the replacement text.

    Runs inside the caller's transaction (no BEGIN here). Content is stored once per sha256.
    """
    data = content.encode("utf-8", "surrogatepass")
    sha = hashlib.sha256(data).hexdigest()
    try:
        path = _store(data, sha)
    except OSError as exc:
        raise LcmError(f"cannot write {lcm.base.config.files_dir()}: {exc.strerror}",
                       "check the permissions of $LCM_HOME/files") from None
    kind = detect_kind(name, content)
    tokens = lcm.base.config.estimate_tokens(content)
    summary = exploration_summary(kind, content)
    file_id = lcm.base.config.new_id("file")
    conn.execute(
        "INSERT INTO files (id, session_id, message_uuid, name, kind, byte_size, token_count, sha256,"
        " path, exploration, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (file_id, session_id, message_uuid, name, kind, len(data), tokens, sha, path, summary, lcm.base.config.now_iso()),
    )
    return f"[{file_id}] {name or 'content'} ({kind}, {tokens} tokens)\n{summary}"


def read_content(row) -> str:
    """The stored content of a `files` row, or an LcmError naming the missing file."""
    try:
        with open(row["path"], "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        raise LcmError(f"content of {row['id']} is missing at {row['path']}",
                       f"the original line is still in the vault: lcm_describe.py {row['message_uuid']}") from None
