"""LCM_EXCLUDE: the project directories lcm leaves alone (never captured, injected or compacted).

A directory is excluded when it, or a directory above it, matches one of the colon-separated path
globs. Symbolic links are followed on both sides, because they are how an exclusion leaks: Claude
Code records the physical working directory in a transcript (`/data/acme/src`) while the person
wrote the glob through a link (`~/clients/*`, with `~/clients/acme -> /data/acme`), or the other
way round. So a path is compared as given and resolved, against each glob as written, with its
fixed leading directories resolved, and against the resolved directories the glob names on disk
today. Each entry also names a path literally: `pwd` may print a directory holding `[`, `*` or `?`
(`~/work/proj[v2]`), which a glob reads as a character class or a wildcard, so a path equal to an
entry as written (or resolved) matches whatever the glob would say. Ingest asks per transcript line (each line's own `cwd`), so a session that starts outside an
excluded project and moves into it stops being captured at the first line written there.

Stdlib only and cheap: without LCM_EXCLUDE nothing is computed; with it, the globs are expanded
once per process and each distinct cwd is decided once (lines of a transcript share a few).
"""
from __future__ import annotations

import os

_MAGIC = ("*", "?", "[")
_cache: dict = {}  # (LCM_EXCLUDE, home) -> (globs, literal and resolved roots, {path: decision})


def _static_prefix_resolved(glob: str) -> str:
    """`glob` with its leading directories that hold no wildcard resolved through symlinks."""
    parts = glob.split(os.sep)
    fixed = []
    for part in parts:
        if any(c in part for c in _MAGIC):
            break
        fixed.append(part)
    if not fixed or fixed == [""]:
        return glob
    head = os.path.realpath(os.sep.join(fixed) or os.sep)
    rest = parts[len(fixed):]
    return os.path.join(head, *rest) if rest else head


def _rules(raw: str, environ: dict | None):
    key = (raw, os.path.expanduser("~"))  # `~` in a glob means the home of the moment
    rules = _cache.get(key)
    if rules is None:
        import glob as globmod
        import lcm.base.config
        written = lcm.base.config.get("LCM_EXCLUDE", environ)
        globs = tuple(dict.fromkeys([*written, *(_static_prefix_resolved(g) for g in written)]))
        roots = set()
        for pattern in written:  # the entry as a literal path (`proj[v2]`), as written and resolved
            roots.update((os.path.normpath(pattern), os.path.realpath(pattern)))
        for pattern in written:  # the directories the glob names today, resolved
            for found in globmod.glob(pattern):
                if os.path.isdir(found):
                    roots.add(os.path.realpath(found))
        rules = _cache[key] = (globs, frozenset(roots), {})
    return rules


def excluded(path, environ: dict | None = None) -> bool:
    """Whether the directory `path` (a session's cwd), or one above it, is in LCM_EXCLUDE,
    comparing written and resolved forms of both sides (see the module docstring)."""
    env = os.environ if environ is None else environ
    raw = (env.get("LCM_EXCLUDE") or "").strip()
    if not path or not isinstance(path, str) or not raw:
        return False
    globs, roots, decided = _rules(raw, environ)
    known = decided.get(path)
    if known is not None:
        return known
    from fnmatch import fnmatchcase
    given = os.path.abspath(os.path.expanduser(path))
    answer = False
    for candidate in dict.fromkeys((given, os.path.realpath(given))):
        while not answer:
            if candidate in roots or any(fnmatchcase(candidate, g) for g in globs):
                answer = True
            parent = os.path.dirname(candidate)
            if parent == candidate:
                break
            candidate = parent
    decided[path] = answer
    return answer


def line_filter(environ: dict | None = None):
    """`excluded` when LCM_EXCLUDE is set, else None: ingest's per-line check costs nothing then."""
    env = os.environ if environ is None else environ
    return excluded if (env.get("LCM_EXCLUDE") or "").strip() else None
