"""The command-line skeleton every script shares: the parser whose --help is the script's
docstring, argument types, runnable `Next:` lines, JSON output, and run(), which turns an
LcmError or a storage failure into `Error: ...` / `Hint: ...` and exit 1.
"""
from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Iterable

import lcm.base.mask
import lcm.base.shell
from lcm.base.config import MAX_INT_ARG
from lcm.vault.db import older_vault, storage_error
from lcm.base.errors import LcmError

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
    """An ArgumentParser whose --help is the script's docstring, with --db and --json.

    The description is the docstring's first paragraph (however many lines it wraps over), the
    examples in the rest are shown runnable here (see command_prefix), and a usage error ends
    with a Hint: line, like every other error."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):
            self.print_usage(sys.stderr)
            sys.stderr.write(f"{self.prog}: error: {message}\n"
                             f"Hint: {help_command(self.prog)} shows every option, with examples\n")
            raise UsageError(2, message, self.prog)

    # argparse looks every message of its own up in gettext's catalogues. Python ships none for
    # them, yet each lookup probes the locale directories, and the first imports locale: ~1 ms
    # of every command. lcm's words are English; argparse's stay as written, untranslated.
    argparse._ = lambda message: message
    argparse.ngettext = lambda singular, plural, n: singular if n == 1 else plural
    summary, _, details = (doc or "").strip().partition("\n\n")
    width = _help_width()
    # the name usage lines and hints show: `lcm grep` under the lcm command, else the script's
    # own file name (also when main() is called in-process, where argv[0] is someone else's)
    caller = sys._getframe(1).f_globals.get("__file__")
    prog = sys.argv[0] if sys.argv and sys.argv[0].startswith("lcm ") else os.path.basename(caller or sys.argv[0])
    p = Parser(
        prog=prog,
        description=summary,
        epilog=lcm.base.shell.runnable(details.strip()) or None,
        # the width given up front: argparse would import shutil (several ms) to find it
        formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=width),
    )
    p.add_argument("--db", metavar="PATH", help="vault file (default: $LCM_DB, $LCM_HOME/lcm.db, ~/.claude-lcm/lcm.db)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (an error too: {\"error\", \"hint\"} on stdout)")
    usage_error = p.error
    # a usage error quotes the bad value, and a value pasted by mistake is often a secret
    p.error = lambda message: usage_error(lcm.base.mask.mask(message))
    return p


def help_command(prog: str) -> str:
    """The runnable `--help` command of a script started as `prog` (lcm_grep.py, or lcm grep)."""
    return (lcm.base.shell.command_prefix(prog) if prog.endswith(".py") else prog) + " --help"


class UsageError(SystemExit):
    """argparse's exit on bad usage (status 2), keeping the message for a --json error document."""

    def __init__(self, code: int, message: str, prog: str):
        super().__init__(code)
        self.message = message
        self.prog = prog


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


def exit_now(code: int) -> None:
    """End a read-only command's process without Python's teardown (freeing every module and
    object one by one: ~3 ms of a 50 ms lcm_grep process). Only for commands that hold nothing
    to close: a read-only vault connection has no checkpoint to run, and stdout and stderr are
    flushed here (a reader that went away is not an error)."""
    import os
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


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


def _wants_json(argv: list[str]) -> bool:
    """--json among the options (not after `--`, where it would be a query)."""
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def _report(exc: LcmError, as_json: bool = False) -> int:
    """Error: and Hint: on stderr; with --json also {"error", "hint"} on stdout, where a program
    reading the result finds one JSON document whether the command worked or not."""
    # masked: an error often repeats what was typed (an id, a pattern), and that may be a secret
    message = lcm.base.mask.mask(exc.message)
    hint = lcm.base.mask.mask(lcm.base.shell.runnable(exc.hint)) if exc.hint else exc.hint
    sys.stderr.write(f"Error: {message}\n")
    if hint:
        sys.stderr.write(f"Hint: {hint}\n")
    if as_json:
        print_json({"error": message, "hint": hint})
    return 1


def _older_vault_error(exc: sqlite3.Error) -> LcmError | None:
    """A query that needs a table or column an older vault, opened read-only, lacks: name the
    writing command that upgrades it (a reading command never migrates)."""
    older = older_vault(exc)
    if older is None:
        return None
    path, version = older
    return LcmError(f"{path} was written by an older lcm (schema {version}; this command needs a newer one)",
                    f"upgrade it once, keeping every message: {lcm.base.shell.command_line('lcm_init.py', '--db', path)}"
                    " (the hooks also do it when the next Claude Code session starts)")


# C0 controls but tab and newline, DEL and the C1 controls (0x9b starts a CSI too), as visible symbols
_CONTROLS = {**{c: 0x2400 + c for c in range(32) if c not in (9, 10)}, 0x7F: 0x2421,
             **{c: 0xFFFD for c in range(0x80, 0xA0)}}


class _Terminal:
    """stdout when it is a person's terminal: stored text quotes pages, files and tool output
    anyone wrote, and an escape sequence in it (clear the screen, set the title, OSC 52: write
    the clipboard) would be run by the terminal. Shown as symbols (␛ for ESC) instead."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text.translate(_CONTROLS))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def on_terminal() -> bool:
    """Whether run() found stdout to be a person's terminal (text written to sys.stdout then
    shows control characters as symbols; bytes written to its buffer do not)."""
    return isinstance(sys.stdout, _Terminal)


def run(main: Callable[[list[str] | None], int], argv: Iterable[str] | None = None) -> int:
    """Call main, turning an LcmError, and a storage failure with a known cause (disk full,
    read-only, permissions, damage), into `Error: ... / Hint: ...` on stderr and exit 1.

    A closed stdout (`| head`) ends the command quietly with 141, as SIGPIPE would.
    """
    as_json = False
    try:
        args = None if argv is None else list(argv)
        as_json = _wants_json(sys.argv[1:] if args is None else args)
        _check_text(sys.argv[1:] if args is None else args)
        if sys.stdout.isatty() and not isinstance(sys.stdout, _Terminal):
            sys.stdout = _Terminal(sys.stdout)
        if getattr(sys.stdout, "errors", None) in ("strict", "surrogateescape") and hasattr(sys.stdout, "reconfigure"):
            # a lone surrogate read from a stored line (output that was not UTF-8) prints as its
            # escape, as the searchable text stores it, instead of stopping the command
            sys.stdout.reconfigure(errors="backslashreplace")
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
    except UsageError as exc:
        if as_json:
            print_json({"error": exc.message, "hint": f"{help_command(exc.prog)} shows every option, with examples"})
        raise
    except LcmError as exc:
        return _report(exc, as_json)
    except (sqlite3.Error, OSError) as exc:
        error = storage_error(exc) or (_older_vault_error(exc) if isinstance(exc, sqlite3.Error) else None)
        if error is None and isinstance(exc, OSError) and isinstance(exc.filename, str):
            # a path the user gave that cannot be used: too long, missing, a directory, ...
            name = exc.filename if len(exc.filename) <= 200 else exc.filename[:200] + "..."
            error = LcmError(f"{name}: {exc.strerror}", "check the path")
        if error is None:
            raise
        return _report(error, as_json)
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        return 130
