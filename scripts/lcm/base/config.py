"""Settings, locations, ids, time and token estimates.

The standard library's os (and math, time) only: the hooks import this on every turn, so
argparse, pathlib and fnmatch are imported inside the functions that need them.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable

from lcm.base.errors import LcmError

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for annotations only
    from pathlib import Path


# ---------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------

MAX_INT_ARG = 2**31 - 1  # bound of integer settings and arguments: far above any real use, and SQLite-safe

def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected 1 or 0")


def _positive_int(raw: str) -> int:
    value = int(raw)
    if not 0 < value <= MAX_INT_ARG:
        raise ValueError(f"expected an integer from 1 to {MAX_INT_ARG}")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if not 0 <= value <= MAX_INT_ARG:
        raise ValueError(f"expected an integer from 0 to {MAX_INT_ARG}")
    return value


def _depth_limit(raw: str) -> int:
    value = int(raw)
    if not -1 <= value <= MAX_INT_ARG:
        raise ValueError(f"expected -1 (no limit) or an integer from 0 to {MAX_INT_ARG}")
    return value


def _fraction(raw: str) -> float:
    value = float(raw)
    if not 0 < value <= 1:
        raise ValueError("expected a number in (0, 1]")
    return value


def _choice(*options: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ValueError("expected one of " + ", ".join(options))
        return value
    return parse


def _text(raw: str) -> str:
    return raw.strip()


def _path_globs(raw: str) -> tuple[str, ...]:
    globs = tuple(os.path.expanduser(g.strip()).rstrip("/") or "/" for g in raw.split(":") if g.strip())
    for glob in globs:
        if not (os.path.isabs(glob) or glob.startswith("*")):
            raise ValueError(f"{glob!r} is not an absolute path glob (e.g. ~/clients/*:/srv/secret)")
    return globs


# name -> (parser, default, meaning). The README's configuration table mirrors this.
SETTINGS: dict[str, tuple[Callable[[str], object], object, str]] = {
    "LCM_CONTEXT_THRESHOLD": (_fraction, 0.75, "fraction of Claude Code's context window above which lcm_status.py suggests /compact"),
    "LCM_CONTEXT_WINDOW": (_non_negative_int, 0, "Claude Code's context window in tokens, for lcm_status.py; 0 = from the model id and the usage seen"),
    "LCM_FRESH_TAIL_COUNT": (_non_negative_int, 32, "newest messages never compacted"),
    "LCM_LEAF_CHUNK_TOKENS": (_positive_int, 20000, "most source tokens in one leaf summary"),
    "LCM_LEAF_MIN_TOKENS": (_positive_int, 2000, "fewest source tokens in a leaf summary (at most LCM_LEAF_CHUNK_TOKENS); a smaller remainder waits"),
    "LCM_LEAF_TARGET_TOKENS": (_positive_int, 1200, "target size of a leaf summary"),
    "LCM_CONDENSED_TARGET_TOKENS": (_positive_int, 2000, "target size of a condensed summary"),
    "LCM_LEAF_MIN_FANOUT": (_positive_int, 4, "adjacent leaf summaries (depth 0) needed to condense them into a depth-1 summary"),
    "LCM_CONDENSED_MIN_FANOUT": (_positive_int, 4, "adjacent condensed summaries of one depth (1 and up) needed to condense them"),
    "LCM_INCREMENTAL_MAX_DEPTH": (_depth_limit, -1, "deepest summary an incremental compaction (hooks, lcm_compact.py without --full) condenses to: 0 = leaves only, -1 = no limit"),
    "LCM_LARGE_FILE_THRESHOLD": (_positive_int, 25000, "content blocks above this many tokens go to $LCM_HOME/files"),
    "LCM_SUMMARY_MODEL": (_text, "", "model for summaries; empty = the session's own model"),
    "LCM_LLM": (_choice("auto", "anthropic", "claude", "none"), "auto", "model backend"),
    "LCM_MAX_SUMMARY_CALLS": (_positive_int, 50, "most model calls one compaction run may make"),
    "LCM_MAX_EXPAND_TOKENS": (_positive_int, 4000, "token cap of an expansion grant"),
    "LCM_INDEX_THINKING": (_bool, True, "index thinking blocks for search"),
    "LCM_INJECT": (_bool, True, "hooks may add context to the session"),
    "LCM_RECALL": (_bool, False, "UserPromptSubmit injects a few recall hits"),
    "LCM_DISABLE": (_bool, False, "every hook is a no-op"),
    "LCM_SUBAGENT": (_bool, False, "set inside lcm's own sub-agents"),
    "LCM_EXCLUDE": (_path_globs, (), "colon-separated path globs: projects never captured, injected or compacted"),
    "LCM_BACKUP": (_bool, True, "the Stop hook takes a verified backup of the vault, detached, once per LCM_BACKUP_INTERVAL_HOURS"),
    "LCM_BACKUP_DIR": (_text, "", "where backups go; empty = $LCM_HOME/backups (put it on another disk to survive this one)"),
    "LCM_BACKUP_INTERVAL_HOURS": (_positive_int, 24, "hours between two automatic backups"),
    "LCM_BACKUP_KEEP": (_positive_int, 3, "newest backups kept per directory (the bound: about this many times the vault)"),
    "LCM_BACKUP_MAX_MB": (_non_negative_int, 0, "fewer backups while they exceed this many MB (the newest always stays); 0 = no size cap"),
}


def get(name: str, environ: dict | None = None):
    """The validated value of an LCM_* setting; an invalid value is an LcmError naming it."""
    parse, default, _meaning = SETTINGS[name]
    env = os.environ if environ is None else environ
    raw = env.get(name)
    if raw is None or (raw.strip() == "" and parse is not _text):
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise LcmError(
            f"invalid {name}={raw!r}: {exc}",
            f"fix or unset {name} (default {default!r})",
        ) from None


def validate_config(environ: dict | None = None) -> None:
    """Check every LCM_* setting at once so a typo fails before any work starts."""
    for name in SETTINGS:
        get(name, environ)


# ---------------------------------------------------------------------------
# Locations, ids, time, tokens
# ---------------------------------------------------------------------------

def home_str() -> str:
    home = os.environ.get("LCM_HOME")
    return os.path.expanduser(home) if home else os.path.join(os.path.expanduser("~"), ".claude-lcm")


def db_path_str(explicit: str | None = None) -> str:
    if explicit:
        return os.path.expanduser(explicit)
    if os.environ.get("LCM_DB"):
        return os.path.expanduser(os.environ["LCM_DB"])
    return os.path.join(home_str(), "lcm.db")


def lcm_home() -> Path:
    from pathlib import Path
    return Path(home_str())


def db_path(explicit: str | None = None) -> Path:
    """--db, else $LCM_DB, else $LCM_HOME/lcm.db, else ~/.claude-lcm/lcm.db."""
    from pathlib import Path
    return Path(db_path_str(explicit))


def files_dir() -> Path:
    return lcm_home() / "files"


def current_session_id() -> str | None:
    for name in ("LCM_SESSION_ID", "CLAUDE_CODE_SESSION_ID"):
        value = os.environ.get(name)
        if value:
            try:
                value.encode("utf-8")  # the environment may hold any bytes; SQLite takes UTF-8 only
            except UnicodeEncodeError:
                raise LcmError(f"{name} is not valid UTF-8", f"unset {name}, or set it to a session id") from None
            return value
    return None


def new_id(prefix: str) -> str:
    """`sum_` / `file_` / `grant_` ... + 16 hex characters."""
    return f"{prefix}_{os.urandom(8).hex()}"


def now_iso() -> str:
    """UTC now as 2026-11-23T09:01:39.123Z, the shape transcripts use."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def estimate_tokens(text: str | None) -> int:
    """About four characters a token: cheap, deterministic, close enough for budgets."""
    return math.ceil(len(text) / 4) if text else 0
