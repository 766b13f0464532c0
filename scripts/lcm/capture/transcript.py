"""Reading Claude Code transcript JSONL: which file is which, the searchable text of an entry,
and the new complete lines of a file parsed into message rows (lcm.capture.ingest writes them).

Stdlib only and cheap to import: the ingest hook loads it on every turn. The entry format is
internal to Claude Code and changes between versions, so everything here is defensive: unknown
entry types, block types and keys are tolerated, never fatal.
"""
from __future__ import annotations

import json
import os
import stat

try:
    from _sha1 import sha1  # CPython's built-in SHA-1: importing hashlib loads OpenSSL, ~3 ms a hook
except ImportError:
    from hashlib import sha1

import lcm.base.text
import lcm.base.config
import lcm.capture.exclude
import lcm.capture.tokens
import lcm.base.mask
import lcm.vault.order
from lcm.base.errors import LcmError

# Entries of these types with a uuid are conversation messages; everything else is metadata.
CONVERSATION_TYPES = frozenset(("user", "assistant", "system"))
# title lines: type -> key holding the text, in increasing precedence
TITLE_KEYS = {"summary": "summary", "ai-title": "aiTitle", "custom-title": "customTitle"}

HEAD_BYTES = 4096  # the first line (up to this many bytes) identifies a file across runs


def describe_path(path: str) -> tuple[str | None, str | None, bool]:
    """(session id guessed from the path, agent id, is a subagent file) for a transcript path.

    Layouts: `<project>/<session>.jsonl`, `<project>/<session>/subagents/agent-<id>.jsonl`
    (current CLIs) and `<project>/agent-<id>.jsonl` (CLIs up to 2.0). The lines' own `sessionId`
    wins over this guess; it only fills in for lines that lack one.
    """
    name = os.path.basename(path)
    stem = name[:-6] if name.endswith(".jsonl") else name
    if not (stem.startswith("agent-") and len(stem) > 6 and name.endswith(".jsonl")):
        return stem, None, False
    agent_id, parent = stem[6:], os.path.dirname(path)
    if os.path.basename(parent) == "subagents":
        return os.path.basename(os.path.dirname(parent)) or None, agent_id, True
    return None, agent_id, True


def _dump(value) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:  # nested deeper than json can write back: its words, flat
        return " ".join(_leaves(value))


def _leaves(value) -> list[str]:
    """Every key and scalar of a JSON value as text, without recursion (any depth is fine)."""
    out, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in reversed(list(item.items())):
                stack += [inner, key]
        elif isinstance(item, list):
            stack += reversed(item)
        elif item is not None:
            out.append(item if isinstance(item, str) else json.dumps(item))
    return out


def _text(value) -> str:
    """A field that should hold text, as text: a number, list or object becomes its JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else _dump(value)


def _result_text(content) -> str:
    """A tool_result's content: a string, or a list of text/image/... blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block_text(b, True) for b in content)
    return "" if content is None else _dump(content)


def block_text(block, index_thinking: bool) -> str:
    """Flat searchable text of one content block."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return _dump(block)
    kind = block.get("type")
    if kind == "text":
        return _text(block.get("text"))
    if kind == "tool_use" or kind == "server_tool_use":
        return f"{_text(block.get('name'))} {_dump(block.get('input', {}))}"
    if kind == "tool_result" or kind == "web_search_tool_result":
        text = _result_text(block.get("content"))
        return "[error] " + text if block.get("is_error") is True else text
    if kind == "thinking":
        return _text(block.get("thinking")) if index_thinking else ""
    if kind == "redacted_thinking":
        return ""
    if kind == "image":
        return "[image]"
    if kind == "document":
        title = _text(block.get("title"))
        return f"[document: {title}]" if title else "[document]"
    if kind == "tool_reference":
        return f"[tool: {_text(block.get('tool_name'))}]"
    if isinstance(block.get("text"), str):
        return block["text"]
    return f"[{kind}]" if isinstance(kind, str) and kind else _dump(block)


def entry_blocks(entry: dict, index_thinking: bool = True) -> list[str]:
    """The searchable text of a conversation entry, one string per content block.

    Any shape is read: a tool_result nested too deep to walk block by block gives its words."""
    try:
        return _entry_blocks(entry, index_thinking)
    except RecursionError:
        message = entry.get("message")
        return [" ".join(_leaves(message if message is not None else entry.get("content")))]


def _entry_blocks(entry: dict, index_thinking: bool) -> list[str]:
    message = entry.get("message")
    if isinstance(message, str):
        return [message]
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, list):
            return [block_text(b, index_thinking) for b in content]
        if content is None:
            return []
        return [content if isinstance(content, str) else _dump(content)]
    # system lines carry their text at top level ("Conversation compacted", hook summaries, ...)
    content = entry.get("content")
    if isinstance(content, str):
        return [content]
    return [] if content is None else [_dump(content)]


def message_fields(entry: dict) -> tuple:
    """(role, subtype, model) of a conversation entry."""
    message = entry.get("message")
    if not isinstance(message, dict):
        message = {}
    kind = entry["type"]
    role = text_or_none(message.get("role")) or kind
    subtype = text_or_none(entry.get("subtype"))
    if subtype is None and entry.get("isCompactSummary") is True:
        subtype = "compact_summary"
    model = text_or_none(message.get("model")) if kind == "assistant" else None
    return role, subtype, model


def title_of(entry: dict) -> tuple[int, str] | None:
    """(precedence, title) for a title line, else None."""
    key = TITLE_KEYS.get(entry.get("type"))
    if key is None:
        return None
    text = entry.get(key)
    if not isinstance(text, str) or not text.strip():
        return None
    return list(TITLE_KEYS).index(entry["type"]), lcm.base.mask.mask(lcm.base.text.safe_text(text.strip()))


def safe_row(row: tuple) -> tuple:
    """A message row with every text field lcm.base.text.safe_text (for the rare row SQLite refused)."""
    return tuple(lcm.base.text.safe_text(v) if isinstance(v, str) else v for v in row)


def text_or_none(value) -> str | None:
    """A non-empty text field, storable (see lcm.base.text.safe_text), else None. Fields other than the
    flat content are short and almost always ASCII, which isascii() tells at no cost."""
    if not isinstance(value, str) or not value:
        return None
    return value if value.isascii() else lcm.base.text.safe_text(value)


def int_or_none(value) -> int | None:
    """A token count as SQLite can hold it (64-bit); anything else (an object, 2**63) is None."""
    return value if type(value) is int and -(1 << 63) <= value < (1 << 63) else None


def _uuid(value) -> str | None:
    """The entry's uuid as text: a string, or a number written where a string was expected."""
    if isinstance(value, str):
        return text_or_none(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _big_int(digits: str):
    return int(digits) if len(digits) <= 4000 else float(digits)


def loads(line: bytes):
    """json.loads, which also takes integers of more digits than int() converts by default, and
    bytes that are not UTF-8 (a damaged file): read as lone surrogates, the raw line kept as is."""
    try:
        return json.loads(line)
    except RecursionError:
        raise
    except UnicodeDecodeError:
        return loads(line.decode("utf-8", "surrogateescape"))
    except ValueError:
        return json.loads(line, parse_int=_big_int)


CWD_LINES = 50  # lines searched for a transcript's cwd: its first conversation entry has one
CWD_LINE_BYTES = 1 << 20  # a longer line (a pasted file) is skipped, not parsed


def transcript_cwd(path: str) -> str | None:
    """The working directory a transcript's first entries record (its project), else None."""
    try:
        with open_transcript(path)[0] as f:  # never blocks on a FIFO
            for _ in range(CWD_LINES):
                line = f.readline(CWD_LINE_BYTES)
                if not line:
                    break
                try:
                    entry = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if type(entry) is dict and isinstance(entry.get("cwd"), str) and entry["cwd"]:
                    return entry["cwd"]
    except (OSError, LcmError):
        pass  # ingest reports an unreadable file itself
    return None


# ---------------------------------------------------------------------------
# Reading the new lines of one transcript (no vault access: bulk ingest runs this in a worker)
# ---------------------------------------------------------------------------

def _head_hash(head: bytes) -> str:
    cut = head.find(b"\n")
    return sha1(head if cut < 0 else head[:cut]).hexdigest()


def open_transcript(path: str):
    """Open a transcript for reading, or raise an LcmError that says why not.

    Opened without blocking and checked after opening: a FIFO (or a file swapped for one) would
    otherwise hang the reader, and a device never end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise LcmError(f"no such transcript: {path}", "check the path; transcripts live under ~/.claude/projects") from None
    except OSError as exc:
        raise LcmError(f"cannot read {path}: {exc.strerror}", "check the path and its permissions") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise LcmError(f"not a regular file: {path}", "pass a transcript .jsonl file or a directory of them")
    return os.fdopen(fd, "rb"), st


class Session:
    """What one batch of lines says about one session."""
    __slots__ = ("project", "first", "last", "model", "title", "title_rank", "messages")

    def __init__(self):
        self.project = self.first = self.last = self.model = self.title = None
        self.title_rank = -1
        self.messages = 0


class Batch:
    """The new lines of one transcript, parsed without touching the vault (so bulk ingest can
    parse the next file in a worker process while SQLite indexes this one)."""

    def __init__(self, path: str, row: dict | None):
        self.path, self.row = path, row
        self.offset = self.line_no = self.malformed_before = self.consumed = 0
        self.head_hash = None
        self.unchanged = False
        self.rows: list[tuple] = []
        self.large: list[tuple] = []  # (row index, blocks, entry, uuid, session) with a block over the threshold
        self.staged = 0  # bulk ingest: rows moved to a stage file (rows is then empty) ...
        self.stage_start = 0  # ... as that file's rows stage_start + 1 to stage_start + staged
        # bulk ingest, found by the parser (lcm.capture.indexes.Found), by index in rows: the CJK runs of a
        # row's text, and the opening of a row that may be a prompt or a reply
        self.cjk: dict[int, str] = {}
        self.talk: dict[int, str] = {}
        self.malformed: list[dict] = []
        self.excluded = 0  # conversation lines left out: their cwd is in LCM_EXCLUDE
        self.first_excluded: int | None = None  # index (in this read's lines) of the first of them
        self.compactions: list[tuple] = []
        self.agent_calls: list[tuple] = []  # rows for agent_calls: which Task/Agent call started which sub-agent
        self.usage: list[tuple] = []  # (uuid, *lcm.capture.tokens.of_entry) of each line with usage
        self.version: str | None = None  # the Claude Code version the newest conversation line names
        self.leaf_titles: list[tuple] = []  # (leafUuid, title) of older CLIs' summary lines (lcm.capture.ingest places them)
        self.sessions: dict[str | None, Session] = {}
        self.msg_sid = row["session_id"] if row else None  # session of the file's first message
        self.guess_sid, self.agent_id, self.is_agent_file = describe_path(path)


def read_new_lines(path: str, row: dict | None, index_thinking: bool, max_chars: int) -> Batch:
    """Read and parse the bytes of `path` not consumed yet (whole lines only)."""
    batch = Batch(path, row)
    f, st = open_transcript(path)
    with f:
        batch.head_hash = _head_hash(f.read(HEAD_BYTES))
        if row is not None and st.st_size >= row["size"] and row["head_hash"] == batch.head_hash:
            batch.offset, batch.line_no = row["byte_offset"], row["line_count"]
            batch.malformed_before = row["malformed_lines"]
        # else: new, shrunk or replaced: read from the start (uuid dedup keeps this safe)
        if row is not None and batch.offset == st.st_size == row["byte_offset"] and batch.offset > 0:
            batch.unchanged = True  # nothing new: no write at all (the hook's common case)
            return batch
        f.seek(max(batch.offset - 1, 0))
        data = f.read()
    if batch.offset > 0:
        # the byte before offset tells whether the last consumed line had its newline yet
        continued, data = data[:1] != b"\n", data[1:]
        if continued:  # we took an unterminated final line last time; skip to its end
            cut = data.find(b"\n")
            skip = len(data) if cut < 0 else cut + 1
            batch.offset, data = batch.offset + skip, data[skip:]
    lines = data.split(b"\n")
    tail = lines.pop()  # bytes after the last newline: a line still being written
    batch.consumed = len(data) - len(tail)
    if tail.strip():
        # a complete JSON object cannot be a strict prefix of a longer one, so an unterminated
        # final line that parses is whole (files that simply lack the trailing newline)
        try:
            if isinstance(loads(tail), dict):
                lines.append(tail)
                batch.consumed = len(data)
        except (ValueError, RecursionError):
            pass
    parse_lines(batch, lines, index_thinking, max_chars)
    if batch.first_excluded is not None:
        # the offset stops before the first excluded line: they are read again (and still left
        # out) next time, so removing the glob later imports them; lines stored meanwhile dedupe
        skipped = batch.first_excluded
        batch.consumed = sum(len(line) + 1 for line in lines[:skipped])
        batch.line_no -= len(lines) - skipped
        batch.malformed = [bad for bad in batch.malformed if bad["line"] <= batch.line_no]
    if batch.is_agent_file and batch.rows:
        batch.agent_calls += map(safe_row, lcm.vault.order.calls_of_meta(path, batch.msg_sid, batch.agent_id))
    return batch


def parse_lines(batch: Batch, lines: list[bytes], index_thinking: bool, max_chars: int) -> None:
    path, rows, sessions, line_no = batch.path, batch.rows, batch.sessions, batch.line_no
    file_sid = batch.msg_sid if batch.is_agent_file and batch.msg_sid else batch.guess_sid
    fallback_sid = batch.guess_sid or os.path.basename(path)
    estimate, mask, mask_json, may_mask = lcm.base.config.estimate_tokens, lcm.base.mask.mask, lcm.base.mask.mask_json, lcm.base.mask.may_contain
    excluded = lcm.capture.exclude.line_filter()  # None without LCM_EXCLUDE
    cwd_out = False  # the last cwd seen was excluded: lines without one (titles) stay out too
    for line in lines:
        line_no += 1
        try:
            entry = loads(line)
        except (ValueError, RecursionError):
            if line.strip():
                batch.malformed.append({"path": path, "line": line_no})
            continue
        if type(entry) is not dict:
            continue  # valid JSON but not an entry: nothing to keep
        kind = entry.get("type")
        if type(kind) is not str:
            continue
        sid = text_or_none(entry.get("sessionId"))
        if sid is not None and file_sid is None:
            file_sid = sid
        if excluded is not None:
            cwd = entry.get("cwd")
            if isinstance(cwd, str) and cwd:
                cwd_out = excluded(cwd)
            if cwd_out:
                if kind in CONVERSATION_TYPES:
                    batch.excluded += 1
                    if batch.first_excluded is None:
                        batch.first_excluded = line_no - batch.line_no - 1
                continue
        if kind not in CONVERSATION_TYPES:
            title = title_of(entry)
            if title is not None and kind == "summary":
                # older CLIs: a summary line titles the session holding its leafUuid, which is often
                # not the file it sits in (a resumed session's file opens with its parent's titles)
                leaf = _uuid(entry.get("leafUuid"))
                if leaf is not None:
                    batch.leaf_titles.append((leaf, title[1]))
                continue
            if title is not None:  # no sessionId: the file's session, decided later
                s = sessions.setdefault(sid, Session())
                if title[0] >= s.title_rank:
                    s.title_rank, s.title = title
            continue
        uuid = _uuid(entry.get("uuid"))
        if uuid is None:
            continue
        sid = sid or file_sid or fallback_sid
        blocks = entry_blocks(entry, index_thinking)
        content = "\n".join(b for b in blocks if b)
        if may_mask(content):  # rare; search, snippets and summaries never see a secret
            if "\\" in content:  # a tool input's JSON escapes (\n): mask its decoded strings
                blocks = entry_blocks(mask_json(entry), index_thinking)
                content = "\n".join(b for b in blocks if b)
            content = mask(content)
        if any(len(b) > max_chars for b in blocks):
            blocks = [lcm.base.text.safe_text(b) for b in blocks]  # these go to files of their own
            batch.large.append((len(rows), blocks, entry, uuid, sid))
        role, subtype, model = message_fields(entry)
        sidechain = entry.get("isSidechain") is True
        # which Task/Agent call started which sub-agent (lcm/vault/order.py): dict lookups, no text scan
        if not sidechain and (kind == "assistant" or "toolUseResult" in entry):
            calls = lcm.vault.order.calls_of_entry(entry, sid, uuid)
            if calls:
                batch.agent_calls += map(safe_row, calls)
        created = text_or_none(entry.get("timestamp"))
        # cwd, git_branch and api_message_id stay NULL: nothing reads them from the row, and the
        # line keeps them (0.014 of the transcripts' bytes at 300k messages, lcm.vault.schema)
        rows.append((uuid, sid, text_or_none(entry.get("parentUuid")), kind, role, subtype, created,
                     None, None, model, None,
                     sidechain, text_or_none(entry.get("agentId")) or batch.agent_id,
                     entry.get("isMeta") is True, content, estimate(content), line, path, line_no))
        if kind == "assistant":
            usage = lcm.capture.tokens.of_entry(entry)
            if usage is not None:
                batch.usage.append((uuid, *usage))
        s = sessions.get(sid) or sessions.setdefault(sid, Session())
        s.messages += 1
        if batch.msg_sid is None:
            batch.msg_sid = sid
        if s.project is None:
            s.project = text_or_none(entry.get("cwd"))
        if created:
            if s.first is None or created < s.first:
                s.first = created
            if s.last is None or created > s.last:
                s.last = created
        version = entry.get("version")
        if type(version) is str:
            batch.version = version
        if model and not sidechain and not model.startswith("<"):  # skip "<synthetic>"
            s.model = model
        if subtype == "compact_boundary":
            meta = entry.get("compactMetadata") if isinstance(entry.get("compactMetadata"), dict) else {}
            batch.compactions.append((sid, uuid, text_or_none(meta.get("trigger")), int_or_none(meta.get("preTokens")),
                                      int_or_none(meta.get("postTokens")), created))
    batch.line_no = line_no
    orphan = sessions.pop(None, None)
    if orphan is not None and (batch.msg_sid or file_sid):
        s = sessions.setdefault(batch.msg_sid or file_sid, Session())
        if orphan.title_rank >= s.title_rank:
            s.title_rank, s.title = orphan.title_rank, orphan.title
