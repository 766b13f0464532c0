"""lcm_grep's text output: a search document (lcm.search.engine) as lines a person or an agent reads,
with the commands that go further. Library only."""
from __future__ import annotations

import lcm.base.shell


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
    """The line that names a result: its id, type, time and where it comes from."""
    when = (r["created_at"] or "")[:16].replace("T", " ")
    session = f"session {(r['session_id'] or '')[:8]}"
    if r["type"] == "message":
        return (f"{r['id']}  {r['role']}  {when}  {session}"
                + (f"  in {r['covering_summary_id']}" if r["covering_summary_id"] else "")
                + (f"  (next to {r['next_to'][:8]})" if r["next_to"] else ""))
    if r["type"] == "summary":
        return f"{r['id']}  {r['kind']} summary (depth {r['depth']})  {when}  {session}"
    where = {"note": r.get("project") or "all projects", "title": f"{session}  {r.get('project') or ''}",
             "file": r.get("name") or "", "checkpoint": r.get("path") or session,
             "digest": f"{session} ({r.get('level')})"}[r["type"]]
    return f"{r['id']}  {r['type']}  {when}  {where}"


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
    """Runnable commands that look closer at the first result."""
    first = doc["results"][0] if doc["results"] else None
    if first is None:
        return []
    Positional, line = lcm.base.shell.Positional, lcm.base.shell.command_line
    if first["type"] in ("message", "summary"):
        target = first["covering_summary_id"] or first["id"]
        return ["Next: " + line("lcm_describe.py", Positional(first["id"])),
                "      " + line("lcm_expand.py", Positional(target))]
    if first["type"] == "file":
        return ["Next: " + line("lcm_describe.py", Positional(first["id"]))]
    if first["type"] in ("title", "digest", "checkpoint") and first["session_id"]:
        return ["Next: " + line("lcm_sessions.py", Positional(first["session_id"]))]
    return ["Next: " + line("lcm_remember.py", "--list", "--all")]


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
