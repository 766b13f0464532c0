"""The command-line skeleton every script shares: the parser whose --help is the script's
docstring, argument types, runnable `Next:` lines, JSON output, and run(), which turns an
LcmError or a storage failure into `Error: ...` / `Hint: ...` and exit 1.
"""
from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Iterable

import lcm.mask
from lcm.config import MAX_INT_ARG
from lcm.db import older_vault, storage_error
from lcm.errors import LcmError

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for annotations only
    import argparse


def _help_width() -> int:
    """The terminal's width for --help, as shutil.get_terminal_size would find it, less 2."""
    try:
        return int(os.environ["COLUMNS"]) - 2
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns - 2
    except (AttributeError, ValueError, OSError):
        return 78


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An ArgumentParser whose --help is the script's docstring, with --db and --json."""
    import argparse
    summary, _, details = (doc or "").strip().partition("\n")
    width = _help_width()
    p = argparse.ArgumentParser(
        description=summary,
        epilog=details.strip() or None,
        # the width given up front: argparse would import shutil (several ms) to find it
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=width),
    )
    p.add_argument("--db", metavar="PATH", help="vault file (default: $LCM_DB, $LCM_HOME/lcm.db, ~/.claude-lcm/lcm.db)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    usage_error = p.error
    # a usage error quotes the bad value, and a value pasted by mistake is often a secret
    p.error = lambda message: usage_error(lcm.mask.mask(message))
    return p


def add_session_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", metavar="ID", help="session id or a unique prefix of it (default: $LCM_SESSION_ID)")


LIMIT_MAX = 200  # the most results one page may hold: every output must fit an agent's context


def _limit(raw: str) -> int:
    import argparse
    value = int(raw) if raw.strip().lstrip("-").isdigit() else None
    if value is None or not 1 <= value <= LIMIT_MAX:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {LIMIT_MAX} (page with --offset)")
    return value


def int_arg(low: int = 0, high: int = MAX_INT_ARG) -> Callable[[str], int]:
    """An argparse type: an integer from low to high (a bad value is a usage error, exit 2)."""
    def parse(raw: str) -> int:
        import argparse
        try:
            value = int(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{raw[:40]} is not between {low} and {high}")
        return value
    return parse


def seconds_arg(raw: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    import argparse
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw[:40]!r} is not a number") from None
    if not 0 < value <= 10**7:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{raw[:40]} is not a number of seconds above 0")
    return value


def add_limit_arg(p: argparse.ArgumentParser, default: int = 20) -> None:
    p.add_argument("--limit", type=_limit, default=default, metavar="N",
                   help=f"at most N results, 1-{LIMIT_MAX} (default {default})")


def shell_quote(text: str) -> str:
    """`text` as one shell word (shlex.quote, without importing shlex)."""
    if text and all(ch.isalnum() or ch in "@%+=:,./-_" for ch in text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


def command_line(script: str, *args: str) -> str:
    """A command a user or agent can paste and run as is: python3 "$LCM_SCRIPTS/<script>" ARGS.
    Arguments are quoted; one that starts with '-' but is not an option goes after `--`."""
    positional = [shell_quote(a) for a in args if isinstance(a, Positional)]
    options = [shell_quote(str(a)) for a in args if not isinstance(a, Positional)]
    if any(a.startswith("-") for a in args if isinstance(a, Positional)):
        words = options + ["--"] + positional
    else:
        words = positional + options
    return " ".join([f'python3 "$LCM_SCRIPTS/{script}"'] + words)


class Positional(str):
    """An argument of command_line that is a positional value (an id, a query), not an option."""


def print_json(data) -> None:
    import json  # here: a text-mode lcm_grep never needs it
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=None) + "\n")


def freeze_imports() -> None:
    """Call once in a script's `__main__` block, before main().

    Everything allocated so far (modules, and site's imports) lives until exit, yet Python's
    collector would walk it in every full collection and once more at shutdown. gc.freeze() sets
    it aside: about 5 ms of a 60 ms grep process here. Objects made later are collected as usual.
    """
    import gc
    gc.freeze()


def _check_text(argv: list[str]) -> None:
    """Refuse arguments that are not UTF-8 (Python hands them over with surrogate escapes, which
    SQLite, JSON and the terminal all reject later, far from the cause)."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")[:60]
            raise LcmError(f"argument {shown!r} is not valid UTF-8 text",
                           "pass ids, text and paths as UTF-8 (rename a file whose name is not)") from None


def _report(exc: LcmError) -> int:
    # masked: an error often repeats what was typed (an id, a pattern), and that may be a secret
    sys.stderr.write(f"Error: {lcm.mask.mask(exc.message)}\n")
    if exc.hint:
        sys.stderr.write(f"Hint: {lcm.mask.mask(exc.hint)}\n")
    return 1


def _older_vault_error(exc: sqlite3.Error) -> LcmError | None:
    """A query that needs a table or column an older vault, opened read-only, lacks: name the
    writing command that upgrades it (a reading command never migrates)."""
    older = older_vault(exc)
    if older is None:
        return None
    path, version = older
    return LcmError(f"{path} was written by an older lcm (schema {version}; this command needs a newer one)",
                    f"upgrade it once, keeping every message: {command_line('lcm_init.py', '--db', path)}"
                    " (the hooks also do it when the next Claude Code session starts)")


def run(main: Callable[[list[str] | None], int], argv: Iterable[str] | None = None) -> int:
    """Call main, turning an LcmError, and a storage failure with a known cause (disk full,
    read-only, permissions, damage), into `Error: ... / Hint: ...` on stderr and exit 1.

    A closed stdout (`| head`) ends the command quietly with 141, as SIGPIPE would.
    """
    try:
        args = None if argv is None else list(argv)
        _check_text(sys.argv[1:] if args is None else args)
        code = main(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except BrokenPipeError:
        # the reader left (`| head`): stop quietly, as Unix tools do; stdout goes to /dev/null so
        # the interpreter's own flush at exit does not complain either
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141  # 128 + SIGPIPE, what `grep | head` reports
    except LcmError as exc:
        return _report(exc)
    except (sqlite3.Error, OSError) as exc:
        error = storage_error(exc) or (_older_vault_error(exc) if isinstance(exc, sqlite3.Error) else None)
        if error is None and isinstance(exc, OSError) and isinstance(exc.filename, str):
            # a path the user gave that cannot be used: too long, missing, a directory, ...
            name = exc.filename if len(exc.filename) <= 200 else exc.filename[:200] + "..."
            error = LcmError(f"{name}: {exc.strerror}", "check the path")
        if error is None:
            raise
        return _report(error)
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        return 130
