"""lcm_grep's text output: a search document (lcm.search.engine) as lines a person or an agent reads,
with the commands that go further. Library only."""
from __future__ import annotations

import lcm.base.shell
import lcm.search.result_types


def scope_line(doc: dict, grant: str | None = None) -> str:
    """Where the search looked, in one sentence."""
    scope = doc["scope"]
    if scope["kind"] == "session":
        ids = scope.get("session_ids")
        where = (f"session {scope['session_id'][:8]}" if not ids else
                 f"the {len(ids)} session(s) of expansion grant {grant}")
    elif scope["kind"] == "project":
        where = f"project {scope['project']}" + (" (the current one)" if scope.get("default") else "")
    elif scope.get("widened_from"):
        where = f"all projects (nothing in {scope['widened_from']})"
    else:
        where = "all projects"
    return f"Searched {where}."


def head(r: dict) -> str:
    """The line that names a result: its id, then what its type's record says (time, where from)."""
    when = (r["created_at"] or "")[:16].replace("T", " ")
    rtype = lcm.search.result_types.TYPES[r["type"]]
    if rtype.head is None:
        return f"{r['id']}  {r['type']}  {when}  session {(r['session_id'] or '')[:8]}"
    return f"{r['id']}  {rtype.head({**r, 'when': when})}"


def context_lines(context: dict | None) -> list[str]:
    """The turns around a hit (lcm.search.conversation.turns_around), one line each, under it:
    `-2` two turns before, `+1` the one after."""
    if not context:
        return []
    def line(offset: int, t: dict) -> str:
        return f"      {offset:+d} {t['role']:9} {(t['created_at'] or '')[:16].replace('T', ' ')}  {t['text']}"
    before, after = context["before"], context["after"]
    return [line(i - len(before), t) for i, t in enumerate(before)] + [line(i, t) for i, t in enumerate(after, 1)]


def next_lines(doc: dict) -> list[str]:
    """Runnable commands that look closer at the first result (its type's record names them)."""
    first = doc["results"][0] if doc["results"] else None
    rtype = lcm.search.result_types.TYPES[first["type"]] if first else None
    commands = rtype.next(first) if rtype and rtype.next else []
    return [("Next: " if i == 0 else "      ") + lcm.base.shell.command_line(*command)
            for i, command in enumerate(commands)]


def report(doc: dict, options: list[str], next_offset: int, grant: str | None = None) -> str:
    """The whole text output of one search; `options` are the flags to repeat in its commands."""
    lines = [scope_line(doc, grant)]
    if not doc["results"]:
        lines.append(f"No matches for {doc['query']!r}.")
    for i, r in enumerate(doc["results"], 1):
        lines.append(f"[{i}] {head(r)}\n    {r['snippet']}")
        lines += context_lines(r.get("context"))
    query = lcm.base.shell.Positional(doc["query"])
    if doc["has_more"]:
        lines.append("... more: " + lcm.base.shell.command_line("lcm_grep.py", query, *options, "--offset", str(next_offset)))
    elsewhere = doc["scope"].get("stronger_elsewhere")
    if elsewhere:
        lines.append(f"{elsewhere} stronger match(es) in other projects: "
                     + lcm.base.shell.command_line("lcm_grep.py", query, *options, "--all-sessions"))
    return "\n".join(lines + next_lines(doc)) + "\n"
