"""Commands as printed: every command lcm prints (a `Next:` line, a hint, a help example) runs
where it is printed, as `lcm <verb>` when `lcm` is on PATH, else python3 and the script's path."""
from __future__ import annotations

import os


def shell_quote(text: str) -> str:
    """`text` as one shell word (shlex.quote, without importing shlex)."""
    if text and all(ch.isalnum() or ch in "@%+=:,./-_" for ch in text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


_LCM_ON_PATH: list[bool] = []  # computed once per process


def lcm_on_path() -> bool:
    """True when an executable `lcm` is on PATH (the installed command, or the plugin's bin/lcm
    inside Claude Code's Bash tool)."""
    if not _LCM_ON_PATH:
        _LCM_ON_PATH.append(any(
            os.path.isfile(os.path.join(d, "lcm")) and os.access(os.path.join(d, "lcm"), os.X_OK)
            for d in os.environ.get("PATH", "").split(os.pathsep) if d))
    return _LCM_ON_PATH[0]


SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # beside the package


def command_prefix(script: str) -> str:
    """How to start `script` so that the line runs where it is printed: `lcm <verb>` when `lcm`
    is on PATH, else python3 and the script's full path (which needs no variable set). The one
    rule every printed command follows."""
    if lcm_on_path():
        return "lcm " + script[len("lcm_"):-len(".py")].replace("_", "-")
    return "python3 " + shell_quote(os.path.join(SCRIPTS_DIR, script))


def runnable(text: str) -> str:
    """`text` with every command it names written as command_prefix does: a script named bare
    (`lcm_init.py --all`) or through `python3 "$LCM_SCRIPTS/lcm_x.py"` (as docstrings show them)
    becomes `lcm init --all` or `python3 /path/to/scripts/lcm_init.py --all`. Used on hints and
    help examples, so that what they name runs in the shell that printed them."""
    if "lcm_" not in text:
        return text
    parts, i = [], 0
    while (start := text.find("lcm_", i)) != -1:
        end = start + 4
        while end < len(text) and (text[end].islower() or text[end] == "_"):
            end += 1
        script = text[start:end] + ".py"
        named = end > start + 4 and text.startswith(".py", end) and not text[end + 3:end + 4].isalnum()
        quoted = text[max(0, start - len(_QUOTED)):start] == _QUOTED and text[end + 3:end + 4] == '"'
        if named and quoted:
            parts += [text[i:start - len(_QUOTED)], command_prefix(script)]
            i = end + 4
        elif named and not (start and (text[start - 1].isalnum() or text[start - 1] in "_/.-")):
            parts += [text[i:start], command_prefix(script)]
            i = end + 3
        else:
            parts.append(text[i:end])
            i = end
    return "".join(parts) + text[i:]


_QUOTED = 'python3 "$LCM_SCRIPTS/'


def command_line(script: str, *args: str) -> str:
    """A command a user or agent can paste and run as is: command_prefix(script) ARGS.
    Arguments are quoted; one that starts with '-' but is not an option goes after `--`."""
    positional = [shell_quote(a) for a in args if isinstance(a, Positional)]
    options = [shell_quote(str(a)) for a in args if not isinstance(a, Positional)]
    if any(a.startswith("-") for a in args if isinstance(a, Positional)):
        words = options + ["--"] + positional
    else:
        words = positional + options
    return " ".join([command_prefix(script)] + words)


class Positional(str):
    """An argument of command_line that is a positional value (an id, a query), not an option."""


SESSIONS_HINT = command_line("lcm_sessions.py") + " lists the stored sessions and their ids"
