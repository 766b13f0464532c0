"""The `lcm` command: one entry point over the scripts, `lcm <verb> ARGS` = `lcm_<verb>.py ARGS`.

The scripts stay the stable interface (SKILL.md, hooks and older notes call them by path); this
only finds the one a verb names and runs its main() in the same process, so `lcm grep x` and
`python3 scripts/lcm_grep.py x` behave alike, exit code included. It serves three installs:
the console script of `pip install .` / `pipx install .` / `uv tool install .` (the scripts are
installed as top-level modules beside the package), and the plugin's `bin/lcm` inside Claude
Code. Standard library only.

`lcm <verb> --args-from-stdin` takes the verb's arguments from stdin instead, split as a shell
splits words (quotes, backslashes) but never run: the plugin's slash commands hand what the
person typed to lcm through a quoted heredoc, so no shell ever parses it (`x; touch f`, `$(...)`
and backticks are words, not commands).
"""
from __future__ import annotations

import os
import sys

USAGE = """usage: lcm <command> [ARGS...]      (lcm <command> --help for its options and examples)

lcm keeps every message of every Claude Code session in a local SQLite vault; these commands
search it, drill down to the original lines, and carry work across sessions.

commands:
"""
ARGS_FROM_STDIN = "--args-from-stdin"
FOOTER = """
Each command is also a script: python3 {scripts}/lcm_<command>.py (underscores, e.g. lcm_llm_map.py).
Every command takes --db PATH and --json; errors print Error: and a Hint: with what to run next."""


def scripts_dir() -> str:
    """Where the lcm_<verb>.py scripts are: beside this package (a clone's scripts/, or the
    site-packages an install put them in)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def verbs(directory: str | None = None) -> dict[str, str]:
    """{"grep": "/path/lcm_grep.py", "expand-query": ...}: every script, by its verb."""
    directory = directory or scripts_dir()
    found = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("lcm_") and name.endswith(".py"):
            found[name[4:-3].replace("_", "-")] = os.path.join(directory, name)
    return found


def summary_line(path: str) -> str:
    """The first paragraph of a script's docstring (its --help description) on one line, read
    without importing the script: `lcm --help` stays fast and never loads a model SDK."""
    import ast
    with open(path, encoding="utf-8") as handle:
        doc = ast.get_docstring(ast.parse(handle.read())) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def usage(found: dict[str, str]) -> str:
    width = max(len(verb) for verb in found)
    lines = [f"  {verb.ljust(width)}  {summary_line(path)}" for verb, path in found.items()]
    return USAGE + "\n".join(lines) + "\n" + FOOTER.format(scripts=scripts_dir()) + "\n"


def stdin_args(text: str) -> list[str]:
    """The words of `text` as a POSIX shell would split them, nothing expanded or run; `#` is a
    character. Claude Code writes `\\!` for a `!` that starts a word; splitting undoes that."""
    import shlex
    return shlex.split(text, comments=False, posix=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[1:] == [ARGS_FROM_STDIN]:
        try:
            args = [args[0], *stdin_args(sys.stdin.read())]
        except ValueError as exc:  # an unclosed quote
            import lcm.base.mask
            sys.stderr.write(f"Error: cannot split the arguments: {lcm.base.mask.mask(str(exc))}\n"
                             "Hint: close the quote, or put the argument in single quotes\n")
            return 1
    found = verbs()
    if not args or args[0] in ("-h", "--help", "help"):
        if len(args) > 1 and args[0] == "help":  # `lcm help grep` = `lcm grep --help`
            return main([args[1], "--help"])
        sys.stdout.write(usage(found))
        return 0 if args else 2
    verb = args[0].replace("_", "-")
    if verb not in found:
        import lcm.base.mask  # a word pasted by mistake is often a secret: repeated masked, as every error is
        sys.stderr.write(f"Error: lcm has no command {lcm.base.mask.mask(args[0])!r}\n"
                         f"Hint: lcm --help lists them: {', '.join(found)}\n")
        return 2
    directory = os.path.dirname(found[verb])
    if directory not in sys.path:
        sys.path.insert(0, directory)
    import importlib
    module = importlib.import_module("lcm_" + verb.replace("-", "_"))
    sys.argv = [f"lcm {verb}", *args[1:]]  # argparse's usage line then reads `lcm grep ...`
    try:
        return module.main(args[1:])
    except SystemExit as exc:  # argparse's --help and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


def console() -> None:
    """The console script's entry: exit with the command's code."""
    sys.exit(main())
