"""Deterministic extractive summaries for LCM_LLM=none: no model, same input, same output.

Built for coding sessions: what the user asked, choices the assistant stated (not narration of
its next step), files created or edited (from Edit/Write/MultiEdit/NotebookEdit tool calls),
commands run with their outcome, the line that says what each failure was (pytest's FAILED/E
lines, an exception, error:/fatal:), the final state of the todo list, and where the stretch
ended. The text always fits the token budget it is given, so the
caller can make it strictly shorter than its source. Stdlib only.
"""
from __future__ import annotations

import json
import re

import lcm.mask
from lcm.text import content_blocks


EDIT_TOOLS = {"Edit": "edited", "MultiEdit": "edited", "NotebookEdit": "edited", "Write": "written"}
READ_TOOLS = {"Read": "read", "NotebookRead": "read"}
# assistant sentences that record a choice or a finding
DECISION_WORDS = re.compile(
    r"\b(decided|decide|decision|instead|because|rather than|the (?:fix|cause|problem|issue|bug|reason) (?:is|was)|"
    r"root cause|chose|choose|switch(?:ed)? to|going with|the plan is|must|won't|will not|cannot|"
    r"works now|fixed|resolved|turns out)\b", re.I)
# narration of the next step ("Now I'll implement X", "Let me check Y"): not a choice, unless it
# says why or what instead
NARRATION = re.compile(r"^\W*(?:now|next|first|then|okay|ok|great|perfect)?[,!.]?\s*"
                       r"(?:let me|let's|i'll|i will|i'm going to|i am going to|we'll|we need to)\b", re.I)
CHOICE = re.compile(r"\b(instead|because|rather than|decided|chose)\b", re.I)
# the line of a failed tool result that says what failed, best first
PYTEST_FAILED = re.compile(r"^(FAILED|ERROR) \S+")
PYTEST_E = re.compile(r"^E\s+\S")
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b:?")
ERROR_WORD = re.compile(r"\b(?:error|fatal):|^ERROR\b", re.I)
EXIT_CODE = re.compile(r"^Exit code \d+$")
PYTEST_SUMMARY = re.compile(r"^=+ .* in [\d.]+s\b.*=+$")
TOOL_ERROR_TAGS = re.compile(r"</?tool_use_error>")
SENTENCE = re.compile(r"(?<=[.!?])\s+")
FILE_ID = re.compile(r"file_[0-9a-f]{16}(?![0-9a-z_])")  # no leading \b: it would defeat the fast literal scan
SECTION_NAMES = ("Asked", "Errors", "Decisions", "Commands")


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: max(limit - 3, 1)] + "..."


def key_line(text: str) -> str:
    """The line of a failed tool result that says what failed: pytest's first FAILED line (with
    how many more), else its first `E` line; the exception line closing a traceback; the first
    line saying error:/fatal:; a test run's closing summary line; else the first line."""
    lines = [ln.strip() for ln in TOOL_ERROR_TAGS.sub("\n", text).splitlines() if ln.strip()]
    if not lines:
        return "error"
    failed = [ln for ln in lines if PYTEST_FAILED.match(ln)]
    if failed:
        return failed[0] + (f" (+{len(failed) - 1} more failed)" if len(failed) > 1 else "")
    for pattern in (PYTEST_E,):
        hit = next((ln for ln in lines if pattern.match(ln)), None)
        if hit:
            return hit
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        hit = next((ln for ln in reversed(lines) if EXCEPTION_LINE.match(ln)), None)
        if hit:
            return hit
    hit = next((ln for ln in lines if ERROR_WORD.search(ln)), None)
    if hit:
        return hit
    # a test run that failed without a FAILED line says why in its closing "=== ... in 0.4s ===" line
    hit = next((ln for ln in reversed(lines) if PYTEST_SUMMARY.match(ln)), None)
    if hit:
        return hit
    if EXIT_CODE.match(lines[0]) and len(lines) > 1:  # Bash's "Exit code 127" alone says little
        return f"{lines[0]}: {lines[1]}"
    return lines[0]


def is_choice(sentence: str) -> bool:
    """A sentence that records a choice or finding, not narration of the next step."""
    return bool(DECISION_WORDS.search(sentence)) and (not NARRATION.match(sentence) or bool(CHOICE.search(sentence)))


def raw_blocks(raw) -> tuple[dict, list]:
    """(entry, content blocks) of a stored raw transcript line; tolerant of anything odd."""
    try:
        entry = json.loads(raw)
    except (ValueError, TypeError, RecursionError):
        return {}, []
    if not isinstance(entry, dict):
        return {}, []
    return entry, content_blocks(entry)


def _result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


# user-role text Claude Code writes itself (command wrappers, caveats, notifications), never
# something the person asked; and blocks it wraps around what they typed (an IDE selection)
HARNESS_PREFIXES = ("<command-", "<local-command-", "<task-notification", "<system-reminder",
                    "<bash-", "<user-prompt-submit-hook", "[Request interrupted", "Caveat: ",
                    "This session is being continued")
HARNESS_BLOCK = re.compile(r"<(ide_[a-z_]+|system-reminder)>.*?</\1>", re.S)


def typed_text(text: str) -> str:
    """What a person typed in a user text block: harness blocks removed, "" for harness text."""
    text = HARNESS_BLOCK.sub("", text).strip()
    return "" if text.startswith(HARNESS_PREFIXES) else text


class Facts:
    """What a run of messages (or of child summaries) says, section by section."""

    def __init__(self):
        self.asked: list[str] = []
        self.decisions: list[str] = []
        self.commands: list[str] = []
        self.errors: list[str] = []
        self.files: dict[str, str] = {}    # path -> action, first-seen order
        self.todos = ""                    # the latest todo list, one line
        self.file_ids: list[str] = []
        self.ended = ""

    def add_file(self, path: str, action: str) -> None:
        if not path:
            return
        # an edit or write outranks a read of the same file
        if path not in self.files or self.files[path] == "read":
            self.files[path] = action


def _thread(row) -> str:
    try:
        return row["thread"] or ""
    except (KeyError, IndexError):
        return ""


def facts_from_messages(rows) -> Facts:
    """rows: dicts/Rows with raw, role, type, is_meta, content."""
    facts = Facts()
    calls: dict[str, tuple[str, str]] = {}   # tool_use id -> (tool name, label)
    command_index: dict[str, int] = {}       # tool_use id -> position in facts.commands
    own = _thread(rows[0]) if rows else ""
    for row in rows:
        entry, blocks = raw_blocks(row["raw"])
        if blocks and lcm.mask.may_contain(row["raw"]):  # summaries quote commands and errors
            blocks = lcm.mask.mask_json(blocks)
        if "file_" in (row["content"] or ""):
            facts.file_ids.extend(FILE_ID.findall(row["content"]))
        role = row["role"]
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and role == "user" and not row["is_meta"]:
                text = typed_text(str(block.get("text") or ""))
                if text:
                    facts.asked.append(text)
            elif kind == "text" and role == "assistant":
                text = block.get("text") or ""
                if text.strip() and _thread(row) == own:  # a folded sub-agent's last words are not the end
                    facts.ended = text
                    facts.decisions.extend(s for s in SENTENCE.split(text) if is_choice(s))
            elif kind == "tool_use":
                name, data = block.get("name") or "tool", block.get("input") or {}
                if not isinstance(data, dict):
                    data = {}
                path = data.get("file_path") or data.get("notebook_path") or data.get("path") or ""
                if name in EDIT_TOOLS:
                    facts.add_file(str(path), EDIT_TOOLS[name])
                elif name in READ_TOOLS:
                    facts.add_file(str(path), READ_TOOLS[name])
                if name == "TodoWrite" and isinstance(data.get("todos"), list):
                    facts.todos = todo_line(data["todos"])  # only the final state matters
                if name == "Bash" and data.get("command"):
                    label = f"`{_one_line(data['command'], 120)}`"
                    command_index[block.get("id", "")] = len(facts.commands)
                    facts.commands.append(label)
                else:
                    label = name + (f" {path}" if path else "")
                calls[block.get("id", "")] = (name, label)
            elif kind == "tool_result" and block.get("is_error") is True:
                tool_id = block.get("tool_use_id", "")
                name, label = calls.get(tool_id, ("tool", "a tool call"))
                text = _result_text(block)
                if text.startswith("The user doesn't want to"):
                    facts.errors.append(f"rejected by the user ({_one_line(label, 60)})")
                else:  # what failed first: a width cut must not lose it to the command's text
                    facts.errors.append(f"{_one_line(key_line(text), 200)} ({_one_line(label, 60)})")
                if tool_id in command_index:
                    facts.commands[command_index.pop(tool_id)] += " (failed)"
            elif kind == "tool_result" and block.get("tool_use_id") in command_index:
                facts.commands[command_index.pop(block["tool_use_id"])] += " (ok)"
    return facts


def todo_line(todos: list) -> str:
    """A TodoWrite list as one line: [status] content; ..."""
    items = [f"[{t.get('status', '?')}] {_one_line(t.get('content') or t.get('subject') or '', 80)}"
             for t in todos if isinstance(t, dict)]
    return "; ".join(items)


def facts_from_summaries(contents: list[str]) -> Facts:
    """Merge child summaries: extractive ones section by section, others by their opening line."""
    facts = Facts()
    targets = {"Asked": facts.asked, "Decisions": facts.decisions, "Commands": facts.commands,
               "Errors": facts.errors}
    for content in contents:
        section = None
        parsed_any = False
        for line in content.splitlines():
            head = line.split(":", 1)[0]
            if head in targets and line.rstrip().endswith(":"):
                section, parsed_any = targets[head], True
            elif line.startswith("- ") and section is not None:
                section.append(line[2:])
            elif line.startswith("Files: "):
                parsed_any = True
                for item in line[7:].split(", "):
                    match = re.match(r"(.*) \((\w+)\)$", item.strip())
                    if match:
                        facts.add_file(match.group(1), match.group(2))
            elif line.startswith("Ended: "):
                facts.ended, section = line[7:], None
            elif line.startswith("Todos: "):
                facts.todos, section = line[7:], None
            elif line.startswith(("Expand for details about:", "[")):
                section = None
        if not parsed_any:  # a model-written child: keep its first substantive line
            first = next((l for l in content.splitlines() if l.strip() and not l.startswith("Expand for")), "")
            if first:
                facts.decisions.append(first)
        facts.file_ids.extend(FILE_ID.findall(content))
    return facts


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for item in items:
        key = item.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def render(facts: Facts, header: str, expand_hint: str, budget_tokens: int) -> str | None:
    """The summary text, never above budget_tokens (estimate_tokens); None if it cannot fit."""
    budget = max(budget_tokens, 1) * 4
    asked, decisions = _dedupe(facts.asked), _dedupe(facts.decisions)
    # failed commands first: they are what a reader needs; then the rest in order
    commands = _dedupe([c for c in facts.commands if c.endswith("(failed)")] +
                       [c for c in facts.commands if not c.endswith("(failed)")])
    errors = _dedupe(facts.errors)
    files = ", ".join(f"{path} ({action})" for path, action in facts.files.items()) or "none"
    stored = sorted(set(facts.file_ids))
    footer = f"Expand for details about: {expand_hint}"
    # shrink item count and width together until the text fits
    for items, width in ((8, 240), (6, 160), (4, 120), (3, 90), (2, 70), (1, 60), (1, 40), (0, 0)):
        parts = [header]
        # what failed is the fact a reader most needs: the errors get twice the room
        for name, values, room in zip(SECTION_NAMES, (asked, errors, decisions, commands),
                                      (items, 2 * items, items, items)):
            if values and room:
                shown = values[:room] if name != "Asked" or len(values) <= room else \
                    values[: room - 1] + values[-1:]  # keep the last request too
                parts.append(f"{name}:")
                parts.extend(f"- {_one_line(v, width)}" for v in shown)
                if len(values) > len(shown):
                    parts.append(f"- ... {len(values) - len(shown)} more")
        if facts.todos and items:
            parts.append(f"Todos: {_one_line(facts.todos, width * 3)}")
        if facts.ended and items:
            parts.append(f"Ended: {_one_line(facts.ended, width * 2)}")
        parts.append(f"Files: {files}" if items else f"Files: {_one_line(files, 200)}")
        if stored:
            parts.append("Stored files: " + " ".join(stored[: max(items, 1) * 4]))
        parts.append(footer)
        text = "\n".join(parts)
        if len(text) <= budget:
            return text
    return None  # not even the headline fits: the caller falls back to plain truncation


def summarize_messages(rows, span: str, budget_tokens: int) -> str | None:
    facts = facts_from_messages(rows)
    return render(facts, f"[extractive summary of {span}]", "the exact wording, tool output and reasoning",
                  budget_tokens)


def summarize_summaries(contents: list[str], span: str, budget_tokens: int) -> str | None:
    facts = facts_from_summaries(contents)
    return render(facts, f"[extractive summary of {span}]", "each summarised part, in order", budget_tokens)


def truncate(source: str, span: str, budget_tokens: int) -> str:
    """Level 3: the head of the source, cut to budget_tokens, saying so."""
    budget = max(budget_tokens, 0) * 4
    header = f"[truncated: the start of {span}]\n"
    footer = "\nExpand for details about: everything after this cut"
    room = budget - len(header) - len(footer)
    if room < 40:
        return source[:budget]
    return header + source[:room] + footer

