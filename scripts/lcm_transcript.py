"""Reading Claude Code transcript JSONL: which file is which, and the searchable text of an entry.

Stdlib only and cheap to import: the ingest hook loads it on every turn. The entry format is
internal to Claude Code and changes between versions, so everything here is defensive: unknown
entry types, block types and keys are tolerated, never fatal.
"""
from __future__ import annotations

import json
import os
import re

# Entries of these types with a uuid are conversation messages; everything else is metadata.
CONVERSATION_TYPES = frozenset(("user", "assistant", "system"))
# title lines: type -> key holding the text, in increasing precedence
TITLE_KEYS = {"summary": "summary", "ai-title": "aiTitle", "custom-title": "customTitle"}

_AGENT_FILE = re.compile(r"^agent-(.+)\.jsonl$")


def describe_path(path: str) -> tuple[str | None, str | None, bool]:
    """(session id guessed from the path, agent id, is a subagent file) for a transcript path.

    Layouts: `<project>/<session>.jsonl`, `<project>/<session>/subagents/agent-<id>.jsonl`
    (current CLIs) and `<project>/agent-<id>.jsonl` (CLIs up to 2.0). The lines' own `sessionId`
    wins over this guess; it only fills in for lines that lack one.
    """
    name = os.path.basename(path)
    match = _AGENT_FILE.match(name)
    if match is None:
        return name[:-6] if name.endswith(".jsonl") else name, None, False
    parent = os.path.dirname(path)
    if os.path.basename(parent) == "subagents":
        return os.path.basename(os.path.dirname(parent)) or None, match.group(1), True
    return None, match.group(1), True


def _dump(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


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
        return block.get("text") or ""
    if kind == "tool_use" or kind == "server_tool_use":
        return f"{block.get('name', '')} {_dump(block.get('input', {}))}"
    if kind == "tool_result" or kind == "web_search_tool_result":
        text = _result_text(block.get("content"))
        return "[error] " + text if block.get("is_error") is True else text
    if kind == "thinking":
        return (block.get("thinking") or "") if index_thinking else ""
    if kind == "redacted_thinking":
        return ""
    if kind == "image":
        return "[image]"
    if kind == "document":
        title = block.get("title")
        return f"[document: {title}]" if title else "[document]"
    if kind == "tool_reference":
        return f"[tool: {block.get('tool_name', '')}]"
    if isinstance(block.get("text"), str):
        return block["text"]
    return f"[{kind}]" if kind else _dump(block)


def entry_blocks(entry: dict, index_thinking: bool = True) -> list[str]:
    """The searchable text of a conversation entry, one string per content block."""
    message = entry.get("message")
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
    """(role, subtype, model, api_message_id) of a conversation entry."""
    message = entry.get("message")
    if not isinstance(message, dict):
        message = {}
    kind = entry["type"]
    role = message.get("role") if isinstance(message.get("role"), str) else kind
    subtype = entry.get("subtype") if isinstance(entry.get("subtype"), str) else None
    if subtype is None and entry.get("isCompactSummary") is True:
        subtype = "compact_summary"
    model = message.get("model") if kind == "assistant" and isinstance(message.get("model"), str) else None
    msg_id = message.get("id") if isinstance(message.get("id"), str) else None
    return role, subtype, model, msg_id


def title_of(entry: dict) -> tuple[int, str] | None:
    """(precedence, title) for a title line, else None."""
    key = TITLE_KEYS.get(entry.get("type"))
    if key is None:
        return None
    text = entry.get(key)
    if not isinstance(text, str) or not text.strip():
        return None
    return list(TITLE_KEYS).index(entry["type"]), text.strip()


def text_or_none(value) -> str | None:
    return value if isinstance(value, str) and value else None
