"""Which line of a failed tool result says what failed: named rules per kind of failure.

A failed command prints hundreds of lines of progress, warnings and stack frames around the one
line a reader needs. Each rule below names a kind of failure (a compiler, a test runner, a package
manager, a container build, a language's stack trace) and finds its line; the first rule that
matches wins, most specific first. Everything else falls to generic rules (a line saying error,
failed, fatal), then a test run's closing summary, then the first line. ANSI colour and cursor
codes are removed first: terminal output is full of them, and they belong in no summary.
Stdlib only.
"""
from __future__ import annotations

import re

# CSI sequences (colours, cursor moves), OSC sequences (titles, hyperlinks) and the remaining
# two-character escapes; a lone carriage return (progress bars redrawing a line) becomes a newline
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")
TOOL_ERROR_TAGS = re.compile(r"</?tool_use_error>")


def strip_ansi(text: str) -> str:
    """text without terminal escape codes (colours, cursor moves, hyperlinks)."""
    if "\x1b" not in text and "\x9b" not in text and "\r" not in text:
        return text
    return ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


def _first(pattern: str, flags: int = 0):
    regex = re.compile(pattern, flags)
    return lambda lines: next((ln for ln in lines if regex.search(ln)), None)


def _last(pattern: str, flags: int = 0):
    regex = re.compile(pattern, flags)
    return lambda lines: next((ln for ln in reversed(lines) if regex.search(ln)), None)


def _counted(pattern: str, noun: str):
    """The first matching line, saying how many more matched (several failing tests)."""
    regex = re.compile(pattern)

    def rule(lines):
        hits = [ln for ln in lines if regex.search(ln)]
        if not hits:
            return None
        return hits[0] + (f" (+{len(hits) - 1} more {noun})" if len(hits) > 1 else "")
    return rule


def _with_next(pattern: str, when: str):
    """The first matching line, joined to the next one when the match ends as `when` says (Rust
    puts a panic's message, and rustc an error's location, on the following line)."""
    regex, tail = re.compile(pattern), re.compile(when)

    def rule(lines):
        for i, ln in enumerate(lines):
            if regex.search(ln):
                if i + 1 < len(lines) and tail.search(ln + "\n" + lines[i + 1]):
                    return f"{ln} {lines[i + 1]}"
                return ln
        return None
    return rule


# Python: the exception line that closes a traceback (the last one: chained exceptions end there)
PY_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b:?")


def _python_traceback(lines):
    if not any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        return None
    return next((ln for ln in reversed(lines) if PY_EXCEPTION.match(ln)), None)


# Node and Java: an exception line followed within a few lines by `at frame` lines
THROWN = re.compile(r"^(?:Uncaught |Exception in thread \"[^\"]*\" |Caused by: )?"
                    r"(?:[\w.$]*(?:Error|Exception)|Error)(?: \[[\w-]+\])?(?::|$)")
FRAME = re.compile(r"^at \S")


def _thrown_with_frames(lines):
    for i, ln in enumerate(lines):
        if THROWN.match(ln) and any(FRAME.match(nxt) for nxt in lines[i + 1:i + 7]):
            return ln
    return None


# npm prints "npm ERR! code E404" before the line that says what happened: skip the bookkeeping
NPM_NOISE = re.compile(r"^npm (?:ERR!|error):? (?:code |errno |syscall |path |A complete log|"
                       r"Log files were written|\s*$|$)")
NPM_LINE = re.compile(r"^npm (?:ERR!|error):? ")


def _npm(lines):
    hits = [ln for ln in lines if NPM_LINE.match(ln)]
    return next((ln for ln in hits if not NPM_NOISE.match(ln)), hits[0] if hits else None)


# go's own messages about modules ("go: downloading ..." is progress, not failure)
GO_TOOL = re.compile(r"^go: (?!downloading |finding |added |upgraded |extracting |found )\S")

# (kind, rule): the first rule that finds a line wins, so specific kinds come before generic ones
RULES = (
    # test runners: the test that failed
    ("pytest", _counted(r"^(?:FAILED|ERROR) \S+::|^(?:FAILED|ERROR) \S+\.py\b", "failed")),
    ("pytest", _first(r"^E\s{2,}\S|^E\s+(?:assert\b|[\w.]+(?:Error|Exception)\b)")),
    ("go test", _counted(r"^\s*--- FAIL: \S+", "failed")),
    ("rust panic", _with_next(r"^thread '[^']*' panicked at", r"panicked at [^\n']*:\d+:\d+:\n")),
    ("cargo test", _counted(r"^test \S+ \.\.\. FAILED$", "failed")),
    ("jest", _counted(r"^●\s+(?!Console\b)\S.*", "failed")),
    ("vitest", _counted(r"^(?:FAIL|×|✗)\s+\S+\.(?:[cm]?[jt]sx?)\s+>", "failed")),
    ("rspec", _counted(r"^rspec \./\S+:\d+ #", "failed")),
    ("rspec", _first(r"^Failure/Error: ")),
    # compilers and type checkers: the first located error
    ("go build", _first(r"^\S+\.go:\d+:\d+: \S")),
    ("tsc", _first(r"\berror TS\d+:")),
    ("rustc", _with_next(r"^error(?:\[[\w-]+\])?: (?!could not compile|aborting due to)", r"\n\s*--> \S")),
    ("gcc/clang/javac/mypy", _first(r"^\S+?:\d+(?::\d+)?: (?:fatal )?error\b")),
    ("pyright", _first(r"^\S+:\d+:\d+ - error\b")),
    ("maven", _first(r"^\[ERROR\] \S+\.(?:java|kt|scala):\[?\d+")),
    ("lint", _first(r"^(?:\S+:\d+:\d+: )?[A-Z]{1,4}\d{3,4} \S")),
    ("linker", _first(r"undefined reference to |^ld: |Undefined symbols for architecture")),
    # stack traces
    ("python traceback", _python_traceback),
    ("go panic", _first(r"^panic: |^fatal error: ")),
    ("node/java exception", _thrown_with_frames),
    ("ruby exception", _first(r":in [`'][^']*': .+ \(\w+(?:Error|Exception)\)$")),
    # containers
    ("docker build", _last(r"^(?:ERROR|error): failed to (?:solve|build)\b")),
    ("docker build", _first(r"^#\d+ ERROR: ")),
    ("docker", _first(r"^Error response from daemon: |^(?:service|container) \"[^\"]+\" .*(?:exited|didn't complete)")),
    # package managers
    ("pnpm", _first(r"\bERR_PNPM_\w+")),
    ("npm", _npm),
    ("yarn", _first(r"^error (?!Command failed)\S|\bYN\d{4}: .*\b(?:[Ee]rror|failed)\b")),
    ("pip", _first(r"^ERROR: (?:Could not|No matching|Cannot|Failed|Invalid|Double requirement)")),
    ("go mod", _first(GO_TOOL.pattern)),
    ("uv", _first(r"^[×✗✘] \S")),
    ("rustc", _first(r"^error(?:\[[\w-]+\])?: ")),
    # whatever else says it failed
    ("error", _first(r"^(?!WARN|warn|INFO|info)(?:.*\b(?:error|fatal)(?:\[[\w-]+\])?:|ERROR\b|Error\b|FATAL\b|"
                     r"FAILURE\b|E\d{3,4} )")),
    ("exception", _last(PY_EXCEPTION.pattern)),
    ("too many errors", _first(r"too many errors")),
    ("failed", _first(r"(?i)\b(?:command not found|no such file or directory|permission denied|"
                      r"not found|failed|cannot|can't|unable to|refused|denied)\b")),
    ("pytest summary", _last(r"^=+ .* in [\d.]+s\b.*=+$")),
)
EXIT_CODE = re.compile(r"^Exit code \d+$")
# a key line is short; a minified bundle or a base64 blob on one line is not one, and cutting it
# keeps every rule linear in the size of the output
LINE_CHARS = 2000


def clean_lines(text: str) -> list[str]:
    """The non-blank lines of a tool result, escapes and tool_use_error tags removed, stripped."""
    text = strip_ansi(TOOL_ERROR_TAGS.sub("\n", str(text)))
    return [ln.strip()[:LINE_CHARS] for ln in text.splitlines() if ln.strip()]


def classify(text: str) -> tuple[str, str]:
    """(kind, key line) of a failed tool result; kind is "" when no rule matched."""
    lines = clean_lines(text)
    if not lines:
        return "", "error"
    body = lines[1:] if EXIT_CODE.match(lines[0]) and len(lines) > 1 else lines
    for kind, rule in RULES:
        hit = rule(body)
        if hit:  # the exit code stays with a line it directly introduces
            return kind, (f"{lines[0]}: {hit}" if body is not lines and hit == body[0] else hit)
    if body is not lines:  # Bash's "Exit code 127" alone says little
        return "", f"{lines[0]}: {lines[1]}"
    return "", lines[0]


def key_line(text: str) -> str:
    """The line of a failed tool result that says what failed."""
    return classify(text)[1]
