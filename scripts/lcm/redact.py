"""$LCM_HOME/redact.txt: the person's own patterns of what to mask, one regular expression a
line (`#` for comments). lcm.mask applies them; lcm_doctor.py reports the lines it cannot use."""
from __future__ import annotations

import os

import lcm.config


def path() -> str:
    return os.path.join(lcm.config.home_str(), "redact.txt")


def read() -> list[tuple[int, object, str | None]]:
    """(line number, compiled pattern or None, error or None) for each pattern line of redact.txt."""
    try:
        with open(path(), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    import re
    out = []
    for number, line in enumerate(lines, 1):
        source = line.strip()
        if not source or source.startswith("#"):
            continue
        try:
            pattern = re.compile(source)
        # a line is often the secret itself, typed as a pattern: reported by its number, never shown
        except (re.error, RecursionError, OverflowError) as exc:
            out.append((number, None, f"invalid regular expression ({getattr(exc, 'msg', None) or type(exc).__name__}"
                                      + (f" at position {exc.pos}" if getattr(exc, "pos", None) is not None else "") + ")"))
            continue
        if pattern.fullmatch(""):
            out.append((number, None, "the pattern matches the empty string"))
            continue
        out.append((number, pattern, None))
    return out


def problems() -> list[str]:
    """What is wrong in redact.txt, one message per bad line (for lcm_doctor.py)."""
    return [f"{path()} line {n}: {error}" for n, _p, error in read() if error]
