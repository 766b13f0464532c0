"""Small helpers every reader shares: a value on one bounded line, the line of a summary that says
what it is about, and the content blocks of a transcript entry."""
from __future__ import annotations

import re

import lcm.base.mask

# terminal escapes: CSI (colours, cursor), OSC (titles, links) and the two-byte ones
# CSI sequences (colours, cursor moves, also in their one-byte 0x9b form), OSC sequences (titles,
# hyperlinks) and the remaining two-character escapes
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")


def one_line(text, limit: int) -> str:
    """`text` with its whitespace folded to single spaces, cut to `limit` characters with "..."."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


TAG_START = re.compile(r"<(?=[/!?A-Za-z])")


def untagged(text: str) -> str:
    """`text` to inject into Claude's context between lcm's own tags: a `<` that would start a tag
    (`</lcm_context>`, `<system-reminder>`) becomes `‹`, so transcript text (a fetched page, a file)
    cannot close the frame around it or open one of its own; `a < b`, `a -> b` stay as they are."""
    return TAG_START.sub("\u2039", text) if "<" in text else text


def strip_ansi(text: str) -> str:
    """`text` without terminal colour and cursor escapes (tool output captured from a terminal),
    nor a stray escape character left of a cut one; a carriage return (a progress bar redrawing
    its line) becomes a line break."""
    if "\x1b" not in text and "\x9b" not in text and "\r" not in text:
        return text
    text = ANSI.sub("", text).replace("\x1b", "").replace("\x9b", "")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def summary_head(content: str, limit: int = 160) -> str:
    """The first line of a summary that says something, masked: not its [label] (an extractive
    summary opens with one) nor a section heading ("Asked:")."""
    lines = [ln.strip() for ln in lcm.base.mask.mask(content or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if not ln.startswith("[") and not ln.endswith(":")]
    return one_line((said or lines or [""])[0].removeprefix("- "), limit)


def content_blocks(entry: dict) -> list[dict]:
    """The content blocks of a transcript entry, tolerant of anything odd: a string content is one
    text block, a list keeps its dict blocks, anything else is none. The message's content, else
    (system lines, older versions) the entry's own."""
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else entry.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []

def safe_text(text: str) -> str:
    """The text, storable as UTF-8: a lone surrogate (Claude Code's escape for output bytes that
    are not UTF-8, e.g. \\ud800) becomes the text of its escape. The raw line keeps the original."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
