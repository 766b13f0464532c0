"""What happened in a session, read back from the vault's original transcript lines.

Checkpoint and resume share this extractor: files created and edited, commands run and which
failed, the latest todo list, errors not fixed later, the user's latest requests, the sentences
that state a choice and, for a turn that states none in words, the sentence that announces or
reports a change a successful call made (actions_chosen). Everything comes from `messages.raw`
(the verbatim JSONL line), so it sees tool inputs and `is_error` flags that the flat searchable
text loses.

Stdlib only; no model calls.
"""
from __future__ import annotations

import json
import re
import sqlite3

import lcm.summary.extract
import lcm.summary.failures
import lcm.base.mask
import lcm.vault.store
from lcm.summary.extract import typed_text
from lcm.base.text import content_blocks, one_line, summary_head

FILE_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
# a failed look-around (a missing file, a stopped shell) is exploration, not an error left to fix
LOOK_TOOLS = ("Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch", "BashOutput", "KillShell", "KillBash",
              "TaskOutput", "ToolSearch")
# the harness's own tools (a question to the person, plan mode): their failure leaves no work undone
INTERACTION_TOOLS = ("AskUserQuestion", "ExitPlanMode", "EnterPlanMode", "TodoWrite", "TaskCreate", "TaskUpdate",
                     "TaskList", "SendMessage")
# the user said no: not an error to fix
REJECTION = re.compile(r"^The user doesn't want to (proceed|take this action)")
# the permission settings stopped the call ("This command requires approval", "... was blocked. For
# security, ...", "Claude requested permissions to ..., but you haven't granted it yet"): unlike a
# person's "no" at a prompt, nobody chose to skip the work, and it never ran. Unresolved unless the
# same call runs later (a look-around included: what it would have read was never seen)
NOT_ALLOWED = re.compile(r"\brequires approval\b|\bwas blocked\. For security\b|^Permission to use \w+ (?:has been|was) denied|"
                         r"\bbut you haven't granted it yet\b")
DENIED_IS_UNRESOLVED = True
# a plan the person approved (ExitPlanMode that did not fail): its headline and approach are decisions
APPROVED_PLAN = True
# the harness's stand-in for a reply the API refused ("Credit balance is too low", an overload): the
# request it answers went undone, unless a real reply follows
API_ERROR_IS_UNRESOLVED = True
# a failed command a later run got past is a bug found, named by its error ("could not create lock
# file ... Permission denied"), when that line says what was wrong, not only that a check failed (a
# test runner's FAILED verdict, a linter's path:line:col finding, a mistyped command)
FIXED_FAILURE_IS_BUG = True  # a switch for bench/digest_rules_cv.py
SAYS_WHAT = re.compile(r"\b(?:error|fatal|cannot|can't|could ?not|unable|denied|invalid|missing|not (?:found|defined|"
                       r"iterable|available|allowed|supported|signed|compatible|exist)|does not exist|failed to|"
                       r"refused)\b", re.I)
VERDICT = re.compile(r"^(?:FAILED|ERROR:? file or directory not found)\b|^\S+:\d+:\d+\b|command not found")
# a line that the outputs of two commands that succeeded also printed (a banner the shell prints on every
# command, a profile's "bind: warning") is noise around a failure, never what failed
NOISE_SEEN = 2
NOISE_IS_NONE = True  # a switch for bench/digest_rules_cv.py
SAME_FAILURE_ONCE = True  # a switch for bench/digest_rules_cv.py
ERRORS_GOT_PAST = 4  # the newest shown, after the causes said in words
DECISIONS_SHOWN = 8  # a digest is read by a person: the newest worded choices, then those read from actions
KEEP = 50  # newest commands / errors kept in the returned lists


def _result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "").strip()


def _first_line(text: str, limit: int = 200) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def user_request_text(entry: dict) -> str | None:
    """The words a person typed in this entry, or None for tool results and harness text."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain") \
            or entry.get("isCompactSummary") or entry.get("isVisibleInTranscriptOnly"):
        return None
    texts = []
    for block in content_blocks(entry):
        if block.get("type") != "text":
            continue
        text = typed_text(str(block.get("text", "")))
        if text:
            texts.append(text)
    return "\n".join(texts) or None


def _tool_key(name: str, tool_input: dict) -> str:
    """What a call acted on, so a later success of the same call resolves an earlier error."""
    for field in ("file_path", "notebook_path", "command", "path", "pattern", "url", "query", "taskId",
                  "shell_id", "bash_id"):
        if tool_input.get(field):
            return str(tool_input[field])
    return ""


def worklog(conn: sqlite3.Connection, session_id: str, *, after_id: int = 0,
            upto_id: int | None = None, request_limit: int = 3) -> dict:
    """Work done in `session_id` after message `after_id` (exclusive) up to `upto_id`, in
    conversation order; last_message_id is the last message in that order."""
    # in conversation order (messages.seq): after and up to the given messages
    sql = f"SELECT id, uuid, {lcm.vault.store.LINE} AS raw FROM messages WHERE session_id = ?"
    params: list = [session_id]
    if after_id:
        sql += " AND seq > (SELECT seq FROM messages WHERE id = ?)"
        params.append(after_id)
    if upto_id is not None:
        sql += " AND seq <= (SELECT seq FROM messages WHERE id = ?)"
        params.append(upto_id)
    calls: dict[str, dict] = {}      # tool_use id -> call
    order: list[dict] = []           # calls in the order they were made
    requests: list[dict] = []
    decisions: list[str] = []
    findings: list[str] = []         # causes found, fixes that worked
    todos: list[dict] | None = None
    tasks: dict[str, dict] = {}      # TaskCreate/TaskUpdate lists, keyed by task id
    count = last_id = 0
    last_words: list[str] = []       # the assistant's text after the latest request
    timeline: list[tuple] = []       # ("said", text) and ("call", call) of the main thread, in order,
                                     # ("asked", request text) between turns
    directed: list[str] = []         # the person's later prompts that steer the work
    worded: set[int] = set()         # turns (1 = the first request's) whose choice was stated in words
    worded_before = 0
    reply = ""                       # the assistant's latest text: the report, when the turn ends on it
    api_error: dict | None = None    # an API error no real reply followed (yet)
    seen: dict[str, int] = {}        # line -> how many successful results printed it near an end
    noise: set[str] = set()          # lines at least NOISE_SEEN of them printed
    for row in conn.execute(sql + " ORDER BY seq", params):
        count += 1
        last_id = row["id"]
        try:
            entry = json.loads(row["raw"])
        except ValueError:
            continue
        if lcm.base.mask.may_contain(row["raw"]):  # what it extracts is printed and written to files
            entry = lcm.base.mask.mask_json(entry)
        if entry.get("type") == "assistant" and not entry.get("isSidechain"):
            if entry.get("isApiErrorMessage"):  # not the assistant's words: the harness's, for a refused call
                said = " ".join(str(b.get("text", "")) for b in content_blocks(entry) if b.get("type") == "text")
                api_error = {"tool": "API", "target": str(entry.get("error") or entry.get("apiErrorStatus") or "error"),
                             "error": _first_line(said), "uuid": row["uuid"]}
                continue
            api_error = None
        text = user_request_text(entry)
        if text and reply:  # the reply that ended the turn before this request: a report
            chosen, wrong = lcm.summary.extract.report_parts(reply)
            decisions += chosen or lcm.summary.extract.listed_changes(reply)
            findings += wrong
            reply = ""
        if text:
            if len(decisions) > worded_before:  # the turn that ends here stated its choice in words
                worded.add(len(requests))
            requests.append({"uuid": row["uuid"], "at": entry.get("timestamp"), "text": text})
            timeline.append(("asked", text))
            worded_before = len(decisions)
            if not lcm.summary.extract.is_brief(text):  # a brief's lines are rules the work keeps
                said_choice = [f"(user) {s}" for s in lcm.summary.extract.sentences(
                    text, lcm.summary.extract.PERSON_HINTS) if lcm.summary.extract.is_person_choice(s)]
                decisions += said_choice
                if not said_choice and len(requests) > 1 and lcm.summary.extract.is_direction(text):
                    directed.append(f"(user) {_first_line(' '.join(text.split()))}")
            last_words = []  # the assistant's text since this request
        for block in content_blocks(entry):
            kind = block.get("type")
            if kind == "text" and entry.get("type") == "assistant" and not entry.get("isSidechain"):
                # the one rule of lcm.summary.extract: a stated choice, not narration, an option or a question
                said = str(block.get("text", ""))
                last_words.append(said)
                timeline.append(("said", said))
                reply = said
                told = lcm.summary.extract.sentences(said)
                decisions += [s for s in told if lcm.summary.extract.is_choice(s)]
                findings += [s for s in lcm.summary.extract.findings_in(told)
                             if not lcm.summary.extract.is_choice(s)]
            elif kind == "tool_use":
                tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
                call = {"id": block.get("id"), "name": block.get("name"), "input": tool_input,
                        "key": _tool_key(str(block.get("name")), tool_input), "uuid": row["uuid"],
                        "sidechain": bool(entry.get("isSidechain")), "status": "pending"}
                calls[str(block.get("id"))] = call
                order.append(call)
                if not call["sidechain"]:
                    timeline.append(("call", call))
                if call["name"] == "TodoWrite" and isinstance(tool_input.get("todos"), list):
                    todos = tool_input["todos"]
            elif kind == "tool_result" and str(block.get("tool_use_id")) in calls:
                call = calls[str(block.get("tool_use_id"))]
                text = _result_text(block)
                if block.get("is_error"):
                    call["status"] = "rejected" if REJECTION.match(text) else "denied" if NOT_ALLOWED.search(text) \
                        else "error"
                    # the line that says what failed, or for a rejection the person's reason
                    call["error"] = (_first_line(text.partition("reason for the rejection:")[2]) if
                                     call["status"] == "rejected" else _first_line(lcm.summary.failures.key_line(text, noise)))
                    if call["status"] == "rejected" and call["error"]:  # the person's own choice
                        decisions.append(f"(user, declining {call['name']}) {call['error']}")
                else:
                    call["status"] = "ok"
                    if NOISE_IS_NONE and call["name"] == "Bash":
                        for line in lcm.summary.failures.edge_lines(text):
                            seen[line] = seen.get(line, 0) + 1
                            if seen[line] == NOISE_SEEN:
                                noise.add(line)
                    if call["name"] == "ExitPlanMode" and APPROVED_PLAN and isinstance(call["input"].get("plan"), str):
                        # the person approved this plan: what it says it will do is decided
                        decisions += lcm.summary.extract.report_parts(call["input"]["plan"], decide=True)[0]
                result = entry.get("toolUseResult")
                if isinstance(result, dict):
                    call["result_type"] = result.get("type")
                    task = result.get("task")
                    if call["name"] == "TaskCreate" and isinstance(task, dict) and task.get("id"):
                        tasks[str(task["id"])] = {"content": call["input"].get("subject") or task.get("subject"),
                                                  "status": "pending"}
                if call["name"] == "TaskUpdate" and call["status"] == "ok":
                    task = tasks.get(str(call["input"].get("taskId")))
                    if task is not None and call["input"].get("status"):
                        task["status"] = call["input"]["status"]
    if reply:  # the session's last reply (a sub-agent's: what it handed back)
        chosen, wrong = lcm.summary.extract.report_parts(reply)
        decisions += lcm.summary.extract.closing_change(reply) + (chosen or lcm.summary.extract.listed_changes(reply))
        findings += wrong
    if len(decisions) > worded_before:
        worded.add(len(requests))
    log = _summarise(order, requests, decisions, todos, tasks, count, last_id, request_limit)
    # the choices read from actions fill what room the worded ones leave (these are surer)
    room = DECISIONS_SHOWN - len(log["decisions"])
    log["decisions"] += [d for d in _dedupe([_first_line(a) for a in dependencies_written(order) + settings_written(order)
                                             + actions_chosen(timeline, worded) + directed[-DIRECTED_CAP:]])
                         if d not in log["decisions"]][:max(room, 0)]
    got_past = log.pop("got_past")
    log["findings"] = _dedupe([_first_line(f) for f in findings])[-8:]
    if FIXED_FAILURE_IS_BUG:
        named = _dedupe([_first_line(e) for e in got_past if SAYS_WHAT.search(e) and not VERDICT.search(e)])
        log["findings"] += [e for e in named if e not in log["findings"]][-ERRORS_GOT_PAST:]
    log["open_questions"] = open_questions(last_words)
    if api_error and API_ERROR_IS_UNRESOLVED:
        log["unresolved_errors"].append(api_error)
    return log


# shell commands that change something (after sudo, env and the like: lcm.summary.worklog.command_families)
CHANGING_PROGRAMS = {"cp", "mv", "ln", "mount", "umount", "rm", "rmdir", "chmod", "chown", "tee", "install", "rsync",
                     "systemctl", "truncate", "patch"}
CHANGING_ACTIONS = {"git": {"commit", "push", "checkout", "switch", "merge", "rebase", "reset", "revert", "tag", "mv",
                            "rm", "cherry-pick", "restore"},
                    **{pm: {"install", "i", "add", "remove", "uninstall", "update", "upgrade"}
                       for pm in ("npm", "pnpm", "yarn", "bun", "pip", "pip3", "uv", "cargo", "apt", "apt-get", "brew",
                                  "poetry", "go")}}
ACTION_CAP = 4  # at most this many changes read from the actions (the most specific), so the list stays short


def changed_state(call: dict) -> bool:
    """A call that changed something and succeeded: a file edited or written, or a shell command
    that copies, moves, links, mounts, installs or commits."""
    if call["status"] != "ok":
        return False
    if call["name"] in FILE_TOOLS:
        return True
    if call["name"] != "Bash":
        return False
    for family in command_families(call["key"]):
        program, _, action = family.partition(" ")
        if program in CHANGING_PROGRAMS or action in CHANGING_ACTIONS.get(program, ()):
            return True
    return False


DIRECTED_CAP = 3  # the person's newest directions shown
DEPENDENCY_CAP = 2  # manifests whose new dependencies are listed, the newest


def _edits_made(order: list[dict]):
    """(file, new text, replaced text) of each write and edit of the main thread that succeeded, in order."""
    for call in order:
        if call["status"] != "ok" or call["name"] not in ("Write", "Edit", "MultiEdit") or call["sidechain"]:
            continue
        tool_input = call["input"]
        edits = tool_input.get("edits") if isinstance(tool_input.get("edits"), list) else [tool_input]
        for edit in edits:
            if isinstance(edit, dict):
                yield (call["key"], str(edit.get("content") or edit.get("new_string") or ""),
                       str(edit.get("old_string") or ""))


def dependencies_written(order: list[dict]) -> list[str]:
    """The dependencies and versions that successful writes and edits added to manifests
    (lcm.summary.extract.dependencies_chosen), one line a file, for the newest DEPENDENCY_CAP files."""
    lines: dict[str, str] = {}
    for path, new, old in _edits_made(order):
        line = lcm.summary.extract.dependencies_chosen(path, new, old)
        if line:
            lines.pop(path, None)
            lines[path] = line
    return list(lines.values())[-DEPENDENCY_CAP:]


SETTING_CAP = 2  # the newest settings an edit chose


def settings_written(order: list[dict]) -> list[str]:
    """The one setting each successful edit of a configuration or script chose
    (lcm.summary.extract.setting_chosen; a whole file written replaces nothing, so chooses none),
    the newest SETTING_CAP, one a key."""
    lines: dict[str, str] = {}
    for path, new, old in _edits_made(order):
        line = lcm.summary.extract.setting_chosen(path, new, old)
        if line:
            key = line.split("=", 1)[0]
            lines.pop(key, None)
            lines[key] = line
    return list(lines.values())[-SETTING_CAP:]


def actions_chosen(timeline: list[tuple], worded: set = frozenset()) -> list[str]:
    """Choices stated as actions, where the session shows the action taken ("Let me change the
    path to cyan", "Successfully moved the venv to /tmp and created a symlink"): for a call that
    changed something and succeeded, the sentence the reply right before it announces the change
    with, else the one a reply after it (before the next such call) reports it with
    (lcm.summary.extract.stated_change). One per turn, the turn's first; none for a turn that
    already stated its choice in words (`worded`: turn numbers, 1 = the first request's) or that
    carries out a brief; at most ACTION_CAP per session, the most specific."""
    if not lcm.summary.extract.ACTION_SAID:
        return []
    out: list[tuple[int, str]] = []   # (specificity, line), in order
    used: set[int] = set()            # timeline indexes of the texts already read
    asked, turn, briefed, done = -1, 0, False, False
    for i, (kind, item) in enumerate(timeline):
        if kind == "asked":
            asked, turn, done = i, turn + 1, False
            briefed = lcm.summary.extract.is_brief(item)
            continue
        if kind != "call" or done or briefed or turn in worded or not changed_state(item):
            continue
        line = ""
        for j in range(i - 1, asked, -1):  # the text that announced it, in this turn
            if timeline[j][0] == "said":
                if j not in used:
                    used.add(j)
                    line = lcm.summary.extract.stated_change(timeline[j][1], before=True)
                break
        for j in range(i + 1, len(timeline)) if not line else ():  # the text that reports it
            kind_j, item_j = timeline[j]
            if kind_j == "asked" or kind_j == "call" and changed_state(item_j):
                break
            if kind_j == "said" and j not in used:
                line = lcm.summary.extract.stated_change(item_j, before=False)
                if line:
                    used.add(j)
                    break
        if line:
            out.append((len(lcm.summary.extract.SPECIFIC.findall(line)), line))
            done = True
    kept = sorted(range(len(out)), key=lambda n: -out[n][0])[:ACTION_CAP]
    return [out[n][1] for n in sorted(kept)]


# an offer ("Would you like me to ...?") waits for nobody: the work is done either way
OFFER = re.compile(r"\b(?:would you like|do you want|want me to|shall i|should i (?:also|go ahead)|let me know)\b",
                   re.I)
# ... and so does a bare verb asked ("Start scaffolding?", "Proceed with the deploy?"): the next step, offered
OFFERED_STEP = re.compile(r"^(?:start|proceed|continue|commit|push|deploy|begin|apply|run|create|build|implement|"
                          r"scaffold|merge|go ahead|ship|publish|install|fix|add|update|write|move on)\b(?!.*\bor\b)"
                          r"(?:\W+\w+){0,4}\W*\?$", re.I)
# ... unless it offers a choice between ways on ("Want me to refine any section, or move on?"): the
# person's answer decides what comes next
CHOICE_OFFERED = re.compile(r"\bor\b|\(b\)", re.I)
OFFERS_OPEN = True  # a switch for bench/digest_rules_cv.py
QUESTION_END = re.compile(r"(?<=\?)\s+|\n+")


def open_questions(last_words: list[str]) -> list[str]:
    """The questions the assistant asked after the person's latest request, which the session
    ended without answering (offers to do more are not questions left open)."""
    found = []
    for text in last_words:
        for part in re.split(r"(?<=[.!?])\s+|\n+", text):
            part = part.strip().lstrip("-*>#0123456789. ").replace("**", "")
            offer = OFFER.search(part) and not (OFFERS_OPEN and CHOICE_OFFERED.search(part))
            if part.endswith("?") and len(part) > 12 and not offer and not OFFERED_STEP.match(part):
                found.append(_first_line(part))
    return _dedupe(found)[-5:]


def _summarise(order, requests, decisions, todos, tasks, count, last_id, request_limit) -> dict:
    created: list[str] = []
    edited: list[str] = []
    commands: list[dict] = []
    unresolved: dict[tuple, dict] = {}  # one problem -> its newest error, in the order of the newest
    got_past: list[str] = []  # the key lines of failed commands a later run of theirs got past
    for i, call in enumerate(order):
        name, status = call["name"], call["status"]
        if name in FILE_TOOLS and status in ("ok", "pending") and call["key"]:
            is_new = name == "Write" and call.get("result_type") != "update" and call["key"] not in edited
            target = created if is_new else edited
            if call["key"] not in created and call["key"] not in target:
                target.append(call["key"])
        if name == "Bash" and not call["sidechain"] and call["key"]:
            commands.append({"command": call["key"], "failed": status == "error", "uuid": call["uuid"],
                             "rejected": status in ("rejected", "denied"), "denied": status == "denied",
                             **({"error": call["error"]} if status in ("error", "rejected", "denied") else {})})
        if (status == "error" and name not in LOOK_TOOLS and not (name == "Bash" and looks_only(call["key"]))
                or status == "denied" and DENIED_IS_UNRESOLVED) \
                and name not in INTERACTION_TOOLS:
            # fixed by a later success of the same call: the same file edited, or the same command
            # run again (with other options, inside a longer line, through `uv run`: command_family)
            family = command_family(call["key"]) if name == "Bash" else None
            fixed = any(c["status"] == "ok" and (
                (c["key"] == call["key"] and (c["name"] == name or {c["name"], name} <= set(FILE_TOOLS)))
                or (name == "Bash" and c["name"] == "Bash" and (call["key"] in c["key"]
                                                               or family and family in command_families(c["key"]))))
                for c in order[i + 1:])
            if not fixed:
                # the same error from the same command family, tried again, is one problem: its newest try
                problem = (name, family or call["key"], call.get("error", "")) if SAME_FAILURE_ONCE else (i,)
                unresolved.pop(problem, None)
                unresolved[problem] = {"tool": name, "target": call["key"], "error": call.get("error", ""),
                                       "uuid": call["uuid"]}
            elif name == "Bash" and status == "error":
                got_past.append(call.get("error", ""))
    todo_list = todos if todos is not None else list(tasks.values())
    todo_list = [{"content": str(t.get("content") or t.get("subject") or ""),
                  "status": str(t.get("status") or "pending")}
                 for t in todo_list if isinstance(t, dict) and t.get("status") != "deleted"]
    return {
        "message_count": count,
        "last_message_id": last_id or None,
        "user_requests": requests[-request_limit:],
        "request_count": len(requests),
        "decisions": _dedupe([_first_line(d) for d in decisions])[-DECISIONS_SHOWN:],
        "files_created": created,
        "files_edited": edited,
        "command_count": len(commands),
        "failed_command_count": sum(c["failed"] for c in commands),
        "commands": commands[-KEEP:],         # newest last; bounded for --json
        "failed_commands": [c for c in commands if c["failed"]][-KEEP:],
        "todos": todo_list,
        "open_todos": [t for t in todo_list if t["status"] != "completed"],
        "unresolved_errors": list(unresolved.values())[-KEEP:],
        "got_past": got_past,
    }


# what runs a command without being it: `uv run pytest` is pytest
RUNNERS = (("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pnpm", "exec"), ("bundle", "exec"),
           ("python", "-m"), ("python3", "-m"), ("npx",), ("bunx",), ("time",), ("sudo",), ("env",), ("command",),
           ("xargs",), ("nohup",))
# programs whose first word after them names the action: `git push`, not `git`
SUBCOMMANDS = {"git", "npm", "pnpm", "yarn", "bun", "cargo", "go", "docker", "kubectl", "gh", "uv", "pip", "pip3",
               "make", "brew", "apt", "apt-get", "helm", "terraform", "poetry", "dotnet", "mvn", "gradle"}
# options of those programs that take the next word as their value: `git -C repo log` is `git log`
VALUED_OPTIONS = {"-C", "-c", "-f", "-n", "--prefix", "--dir", "--filter", "--namespace", "--context", "--git-dir",
                  "--work-tree", "--manifest-path", "--project"}
SETUP = {"cd", "source", ".", "export", "echo", "set", "pushd", "popd", "sleep", "true", ":"}


QUOTED = re.compile(r"'[^']*'|\"(?:\\.|[^\"\\])*\"")


def command_families(command: str) -> list[str]:
    """What each part of a shell line runs, as "program action" (`git push`, `pytest`, `npm test`):
    parts split at && || ; |, set-up parts (cd, export, echo) left out, variable assignments and
    runners (uv run, npx, python -m) skipped."""
    out = []
    for part in re.split(r"&&|\|\||;|\||\n", QUOTED.sub('""', command)):  # a quoted | or ; splits nothing
        words = [w for w in part.replace("(", " ").replace(")", " ").split() if w]
        changed = True
        while changed and words:  # `sudo FLAG=1 uv run pytest` runs pytest
            changed = False
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words.pop(0)
            for runner in RUNNERS:
                if tuple(w.lower() for w in words[:len(runner)]) == runner:
                    words = words[len(runner):]
                    changed = True
                    break
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        if program in SETUP:
            continue
        action = _action(program, words[1:]) if program in SUBCOMMANDS else ""
        out.append(f"{program} {action}".strip())
    return out


# shell programs that only look: their failure ("no commits yet", "No such file") is what was learnt
LOOK_PROGRAMS = {"ls", "cat", "head", "tail", "find", "grep", "rg", "wc", "which", "type", "pwd", "stat", "file", "du",
                 "df", "tree", "less", "diff", "sort", "uniq", "cut", "awk", "jq", "ps", "uname", "whoami", "lsblk",
                 "git log", "git status", "git diff", "git show", "git remote", "git branch", "git rev-parse",
                 "git config"}
LOOK_ONLY = True  # a switch for bench/digest_rules_cv.py


def looks_only(command: str) -> bool:
    """Every part of a shell line only looks (`ls -la && git log`): a failure is exploration."""
    families = command_families(command)
    return LOOK_ONLY and bool(families) and all(f in LOOK_PROGRAMS for f in families)


def _action(program: str, words: list[str]) -> str:
    """The first word after `program` that is neither an option nor an option's value."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in VALUED_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            return word
    return ""


# what a line pipes its output through (`... 2>&1 | tee build.log`, `| tail -20`): not the work itself
FILTERS = {"tee", "head", "tail", "grep", "less", "more", "sort", "uniq", "wc", "cut", "awk", "jq", "cat"}


def command_family(command: str) -> str | None:
    """The family of the part of a shell line that did the work: its last part that is not set-up."""
    families = command_families(command)
    worked = [f for f in families if f not in FILTERS]
    return (worked or families)[-1] if families else None


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    kept = []
    for item in reversed(items):
        if item and item not in seen:
            seen.add(item)
            kept.append(item)
    return kept[::-1]


def top_summaries(conn: sqlite3.Connection, session_id: str, limit: int = 5) -> list[dict]:
    """The highest parentless summaries of a session: the roots of its DAG, deepest first."""
    rows = conn.execute(
        "SELECT id, kind, depth, descendant_count, earliest_at, latest_at, substr(content, 1, 400) AS head"
        " FROM summaries WHERE session_id = ? AND parent_id IS NULL"
        " ORDER BY depth DESC, (SELECT seq FROM messages WHERE id = first_message_id) LIMIT ?",
        (session_id, limit)).fetchall()
    return [{**dict(r), "head": summary_head(r["head"])} for r in rows]


def _capped(lines: list[str], cap: int, more: str) -> list[str]:
    """At most `cap` lines, the newest kept, with a note saying how many were left out."""
    if len(lines) <= cap:
        return lines
    return [f"- ... {len(lines) - cap} earlier {more} not shown"] + lines[-cap:]


def sections(log: dict, top: list[dict], *, list_cap: int = 15, text_cap: int = 400) -> list[tuple[str, list[str]]]:
    """The worklog as markdown sections, most important first: (heading, bullet lines)."""
    out: list[tuple[str, list[str]]] = []
    requests = [f"- {one_line(r['text'], text_cap)} ({(r['at'] or '')[:16]}, {r['uuid']})"
                for r in reversed(log["user_requests"])]
    if requests:
        requests[0] = "- LATEST: " + requests[0][2:]
    out.append(("Current task (latest user requests, newest first)", requests or ["- none found"]))
    out.append(("Open todos", [f"- [{t['status']}] {one_line(t['content'], 200)}" for t in log["open_todos"]]
                or ["- none" if log["todos"] else "- no todo list in this session"]))
    out.append(("Files edited", _capped([f"- {f}" for f in log["files_edited"]], list_cap * 2, "files")
                or ["- none"]))
    out.append(("Files created", _capped([f"- {f}" for f in log["files_created"]], list_cap * 2, "files")
                or ["- none"]))
    out.append(("Unresolved errors", _capped(
        [f"- {e['tool']} {one_line(e['target'], 120)}: {one_line(e['error'], 160)} ({e['uuid']})"
         for e in log["unresolved_errors"]], list_cap // 2, "errors") or ["- none"]))
    out.append((f"Commands run ({log['command_count']}, {log['failed_command_count']} failed; newest last)", _capped(
        [f"- {'FAILED ' if c['failed'] else 'NOT ALLOWED by the settings ' if c.get('denied') else 'REJECTED by user ' if c['rejected'] else ''}"
         f"`{one_line(c['command'], 160)}`"
         + (f": {one_line(c['error'], 120)}" if c.get("error") else "") for c in log["commands"]],
        list_cap, "commands") or ["- none"]))
    out.append(("Decisions (sentences that state a choice; heuristic)",
                [f"- {one_line(d, 200)}" for d in log["decisions"]] or ["- none found"]))
    if log.get("findings"):
        out.append(("Findings (causes found, fixes that worked; heuristic)",
                    [f"- {one_line(f, 200)}" for f in log["findings"]]))
    if log.get("open_questions"):
        out.append(("Open questions (asked at the end, not answered)",
                    [f"- {one_line(q, 200)}" for q in log["open_questions"]]))
    out.append(("Top of the summary DAG", [
        f"- {s['id']} ({s['kind']}, depth {s['depth']}, {s['descendant_count']} messages,"
        f" {(s['earliest_at'] or '')[:16]} .. {(s['latest_at'] or '')[:16]}): {s['head']}" for s in top]
        or ["- no summaries yet (nothing compacted)"]))
    return out


def render(secs: list[tuple[str, list[str]]]) -> str:
    return "\n\n".join(f"## {heading}\n" + "\n".join(lines) for heading, lines in secs)
