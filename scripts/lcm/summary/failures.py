"""Which line of a failed tool result says what failed: named rules per kind of failure.

A failed command prints hundreds of lines of progress, warnings and stack frames around the one
line a reader needs. Each rule below names a kind of failure (a compiler, a test runner, a package
manager, a container build, a language's stack trace) and finds its line; the first rule that
matches wins, most specific first. Everything else falls to generic rules (a line saying error,
failed, fatal), then a test run's closing summary, then the first line. ANSI colour and cursor
codes are removed first: terminal output is full of them, and they belong in no summary.
Stdlib and lcm.base.text only.
"""
from __future__ import annotations

import bisect
import itertools
import re

import lcm.base.text

TOOL_ERROR_TAGS = re.compile(r"</?tool_use_error>")


class Output:
    """The cleaned lines of a failed result, and the same joined by newlines, so that each rule
    is one regular-expression scan in C (re.MULTILINE: ^ is a line start) rather than a Python
    loop over the lines."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.text = "\n".join(lines)
        self.starts = list(itertools.accumulate((len(ln) + 1 for ln in lines[:-1]), initial=0))

    def index(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos) - 1

    def line(self, pos: int) -> str:
        return self.lines[self.index(pos)]


def _regex(pattern: str):
    return re.compile(pattern, re.M)


def _guarded(needs: tuple[str, ...], rule):
    """rule, run only when the output holds one of the literal strings its pattern needs: a
    substring test in C is ten times cheaper than a scan, and most rules do not apply."""
    if not needs:
        return rule
    return lambda out: rule(out) if any(n in out.text for n in needs) else None


def _first(pattern: str, *needs: str):
    regex = _regex(pattern)

    def rule(out):
        match = regex.search(out.text)
        return out.line(match.start()) if match else None
    return _guarded(needs, rule)


def _last(pattern: str, *needs: str):
    regex = _regex(pattern)

    def rule(out):
        match = None
        for match in regex.finditer(out.text):
            pass
        return out.line(match.start()) if match else None
    return _guarded(needs, rule)


WARNING = re.compile(r"^\W*warn(?:ing)?\b", re.I)


def _first_said(pattern: str, *needs: str):
    """The first matching line that is no warning ("[WARN] nspawn not found, will be installed")."""
    regex = _regex(pattern)

    def rule(out):
        return next((line for line in (out.line(m.start()) for m in regex.finditer(out.text))
                     if not WARNING.match(line)), None)
    return _guarded(needs, rule)


def _counted(pattern: str, noun: str, *needs: str):
    """The first matching line, saying how many more matched (several failing tests)."""
    regex = _regex(pattern)

    def rule(out):
        hits = sorted({out.index(m.start()) for m in regex.finditer(out.text)})
        if not hits:
            return None
        return out.lines[hits[0]] + (f" (+{len(hits) - 1} more {noun})" if len(hits) > 1 else "")
    return _guarded(needs, rule)


def _with_next(pattern: str, when: str, *needs: str):
    """The first matching line, joined to the next one when the match ends as `when` says (Rust
    puts a panic's message, and rustc an error's location, on the following line)."""
    regex, tail = _regex(pattern), re.compile(when)

    def rule(out):
        match = regex.search(out.text)
        if match is None:
            return None
        i = out.index(match.start())
        line = out.lines[i]
        if i + 1 < len(out.lines) and tail.search(line + "\n" + out.lines[i + 1]):
            return f"{line} {out.lines[i + 1]}"
        return line
    return _guarded(needs, rule)


# Python: the exception line that closes a traceback (the last one: chained exceptions end there)
PY_EXCEPTION = r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b:?"
_py_exception = _last(PY_EXCEPTION, "Error", "Exception", "Exit", "Interrupt", "Warning")


def _python_traceback(out):
    return _py_exception(out) if "Traceback (most recent call last)" in out.text else None


# Node and Java: an exception line followed within a few lines by `at frame` lines
THROWN = _regex(r"^(?:Uncaught |Exception in thread \"[^\"]*\" |Caused by: )?"
                r"(?:[\w.$]*(?:Error|Exception)|Error)(?: \[[\w-]+\])?(?::|$)")
FRAME = re.compile(r"^at \S")


def _thrown_with_frames(out):
    if "at " not in out.text:
        return None
    for match in THROWN.finditer(out.text):
        i = out.index(match.start())
        if any(FRAME.match(nxt) for nxt in out.lines[i + 1:i + 7]):
            return out.lines[i]
    return None


# npm prints "npm ERR! code E404" before the line that says what happened: skip the bookkeeping
NPM_NOISE = re.compile(r"^npm (?:ERR!|error):? (?:code |errno |syscall |path |A complete log|"
                       r"Log files were written|\s*$|$)")
NPM_LINE = _regex(r"^npm (?:ERR!|error):? ")


def _npm(out):
    hits = [out.line(m.start()) for m in NPM_LINE.finditer(out.text)]
    return next((ln for ln in hits if not NPM_NOISE.match(ln)), hits[0] if hits else None)


# go's own messages about modules ("go: downloading ..." is progress, not failure)
GO_TOOL = re.compile(r"^go: (?!downloading |finding |added |upgraded |extracting |found )\S")

# (kind, rule): the first rule that finds a line wins, so specific kinds come before generic ones
RULES = (
    # test runners: the test that failed
    ("pytest", _counted(r"^(?:FAILED|ERROR) \S+::|^(?:FAILED|ERROR) \S+\.py\b", "failed", "FAILED ", "ERROR ")),
    ("pytest", _first(r"^E\s{2,}\S|^E\s+(?:assert\b|[\w.]+(?:Error|Exception)\b)", "E ")),
    ("go test", _counted(r"^\s*--- FAIL: \S+", "failed", "--- FAIL: ")),
    ("rust panic", _with_next(r"^thread '[^']*' panicked at", r"panicked at [^\n']*:\d+:\d+:\n", "panicked at")),
    ("cargo test", _counted(r"^test \S+ \.\.\. FAILED$", "failed", " ... FAILED")),
    ("jest", _counted(r"^●\s+(?!Console\b)\S.*", "failed", "●")),
    ("vitest", _counted(r"^(?:FAIL|×|✗)\s+\S+\.(?:[cm]?[jt]sx?)\s+>", "failed", "FAIL", "×", "✗")),
    ("rspec", _counted(r"^rspec \./\S+:\d+ #", "failed", "rspec ./")),
    ("rspec", _first(r"^Failure/Error: ", "Failure/Error: ")),
    # compilers and type checkers: the first located error
    ("go build", _first(r"^\S+\.go:\d+:\d+: \S", ".go:")),
    ("tsc", _first(r"error TS\d+:", "error TS")),
    ("rustc", _with_next(r"^error(?:\[[\w-]+\])?: (?!could not compile|aborting due to)", r"\n\s*--> \S", "error")),
    ("gcc/clang/javac/mypy", _first(r"^\S+?:\d+(?::\d+)?: (?:fatal )?error\b", "error")),
    ("pyright", _first(r"^\S+:\d+:\d+ - error\b", " - error")),
    ("maven", _first(r"^\[ERROR\] \S+\.(?:java|kt|scala):\[?\d+", "[ERROR] ")),
    ("lint", _first(r"^(?:\S+:\d+:\d+: )?[A-Z]{1,4}\d{3,4} \S")),
    ("linker", _first(r"undefined reference to |^ld: |Undefined symbols for architecture",
                      "undefined reference to ", "ld: ", "Undefined symbols")),
    # stack traces
    ("python traceback", _python_traceback),
    ("go panic", _first(r"^panic: |^fatal error: ", "panic: ", "fatal error: ")),
    ("node/java exception", _thrown_with_frames),
    ("ruby exception", _first(r":in [`'][^']*': .+ \(\w+(?:Error|Exception)\)$", ":in ")),
    # containers
    ("docker build", _last(r"^(?:ERROR|error): failed to (?:solve|build)\b", "failed to solve", "failed to build")),
    ("docker build", _first(r"^#\d+ ERROR: ", " ERROR: ")),
    ("docker", _first(r"^Error response from daemon: |^(?:service|container) \"[^\"]+\" .*(?:exited|didn't complete)",
                      "Error response from daemon: ", "service \"", "container \"")),
    # package managers
    ("pnpm", _first(r"ERR_PNPM_\w+", "ERR_PNPM_")),
    ("npm", _npm),
    ("yarn", _first(r"^error (?!Command failed)\S|YN\d{4}: .*\b(?:[Ee]rror|failed)\b", "error ", "YN0")),
    ("pip", _first(r"^ERROR: (?:Could not|No matching|Cannot|Failed|Invalid|Double requirement)", "ERROR: ")),
    ("go mod", _first(GO_TOOL.pattern, "go: ")),
    ("uv", _first(r"^[×✗✘] \S", "×", "✗", "✘")),
    ("rustc", _first(r"^error(?:\[[\w-]+\])?: ", "error")),
    # whatever else says it failed
    ("error", _first(r"^(?!WARN|warn|INFO|info)(?:.*\b(?:error|fatal)(?:\[[\w-]+\])?:|ERROR\b|Error\b|FATAL\b|"
                     r"FAILURE\b|E\d{3,4} )")),
    ("exception", _last(PY_EXCEPTION, "Error", "Exception", "Exit", "Interrupt", "Warning")),
    ("too many errors", _first(r"too many errors", "too many errors")),
    ("failed", _first_said(r"(?i)\b(?:command not found|no such file or directory|permission denied|"
                      r"not found|failed|cannot|can't|unable to|refused|denied)\b")),
    ("pytest summary", _last(r"^=+ .* in [\d.]+s\b.*=+$", " in ")),
)
EXIT_CODE = re.compile(r"^Exit code \d+$")
DECORATION_ONLY = re.compile(r"^[^\w]*$")
# a key line is short; a minified bundle or a base64 blob on one line is not one, and cutting it
# keeps every rule linear in the size of the output
LINE_CHARS = 2000


def clean_lines(text: str) -> list[str]:
    """The non-blank lines of a tool result, escapes and tool_use_error tags removed, stripped."""
    text = lcm.base.text.strip_ansi(TOOL_ERROR_TAGS.sub("\n", str(text)))
    return [ln.strip()[:LINE_CHARS] for ln in text.splitlines() if ln.strip()]


def classify(text: str, noise: frozenset | set = frozenset()) -> tuple[str, str]:
    """(kind, key line) of a failed tool result; kind is "" when no rule matched. Lines in `noise`
    (what the shell prints around every command: a banner, a profile's warning) are never the key
    line, unless nothing else is left."""
    lines = clean_lines(text)
    # a rule of box-drawing characters or dashes frames a banner: it says nothing
    lines = [ln for ln in lines if not DECORATION_ONLY.match(ln)] or lines
    if noise:
        lines = [ln for ln in lines if ln not in noise] or lines
    if not lines:
        return "", "error"
    body = lines[1:] if EXIT_CODE.match(lines[0]) and len(lines) > 1 else lines
    out = Output(body)
    for kind, rule in RULES:
        hit = rule(out)
        if hit:  # the exit code stays with a line it directly introduces
            return kind, (f"{lines[0]}: {hit}" if body is not lines and hit == body[0] else hit)
    if body is not lines:  # Bash's "Exit code 127" alone says little
        return "", f"{lines[0]}: {lines[1]}"
    return "", lines[0]


def key_line(text: str, noise: frozenset | set = frozenset()) -> str:
    """The line of a failed tool result that says what failed (see classify)."""
    return classify(text, noise)[1]


NOISE_EDGE = 20  # lines a banner or a profile's warning prints at either end of an output
NOISE_EDGE_CHARS = 4000


def edge_lines(text: str) -> set[str]:
    """The distinct cleaned lines at the start and end of a tool result, where a shell's banner
    or a login profile's warnings sit."""
    text = str(text)
    if len(text) <= 2 * NOISE_EDGE_CHARS:
        lines = clean_lines(text)
        return set(lines[:NOISE_EDGE] + lines[-NOISE_EDGE:])
    # a long output: only its ends are read (a cut line at either edge is no banner line anyway)
    return set(clean_lines(text[:NOISE_EDGE_CHARS])[:NOISE_EDGE] + clean_lines(text[-NOISE_EDGE_CHARS:])[-NOISE_EDGE:])
