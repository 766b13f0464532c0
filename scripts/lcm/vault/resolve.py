"""Which session a command means: the one resolver every command uses, with one default rule.

1. A session named on the command line (`--session ID`, or `lcm_sessions.py ID`): that id, or a
   unique prefix of it (8 printed characters are enough). Unknown or ambiguous: an error.
2. Else the current session ($LCM_SESSION_ID, which the SessionStart hook exports, else Claude
   Code's CLAUDE_CODE_SESSION_ID). Set but not stored yet: an error that says to ingest it.
3. Else the newest session of the current project (CLAUDE_PROJECT_DIR, else the working
   directory; compared as written and with symlinks resolved).
4. Else: an error naming what was tried, or None for a command that works without a session.

Under an expansion grant (LCM_GRANT), the answer must lie inside the grant (lcm.vault.grants checks),
and without a named session the default is the grant's own newest session.
"""
from __future__ import annotations

import os

import lcm.base.config
from lcm.base.errors import LcmError

SESSIONS_HINT = 'python3 "$LCM_SCRIPTS/lcm_sessions.py" lists the stored sessions and their ids'


def by_id(conn, text: str) -> str:
    """The stored session id that `text` names: the id itself or a unique prefix of it."""
    text = text.strip()
    if not text:
        raise LcmError("--session is empty", SESSIONS_HINT)
    if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (text,)).fetchone():
        return text
    # a range on the primary key, not LIKE: ids may hold _ and %, and the index does the work
    found = [r[0] for r in conn.execute(
        "SELECT session_id FROM sessions WHERE session_id > ? AND session_id < ? ORDER BY session_id LIMIT 4",
        (text, text + "\U0010ffff"))]
    if len(found) == 1:
        return found[0]
    if not found:
        raise LcmError(f"no session {text!r} in the vault", SESSIONS_HINT)
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    raise LcmError(f"session prefix {text!r} is ambiguous: it starts {shown}",
                   "give more characters of the id; " + SESSIONS_HINT)


def project_dir() -> str:
    """The current project: Claude Code's project directory, else where the command runs."""
    return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


def newest_of_project(conn, project: str | None = None) -> str | None:
    """The most recently active stored session of `project` (default: the current one)."""
    project = project or project_dir()
    spellings = list(dict.fromkeys((project, os.path.abspath(project), os.path.realpath(project))))
    row = conn.execute(
        f"SELECT session_id FROM sessions WHERE project IN ({','.join('?' * len(spellings))})"
        " ORDER BY last_at DESC, session_id LIMIT 1", spellings).fetchone()
    return row[0] if row else None


def session(conn, given: str | None = None, *, required: bool = True, whole: bool = False) -> str | None:
    """The session a command works on, by the rule in the module docstring. Under a grant it
    must lie in the grant (whole=True: all its content must, for export, checkpoint, resume)."""
    import lcm.vault.grants
    scope = lcm.vault.grants.scope(conn)
    sid = _pick(conn, given, scope, required)
    if sid is not None:
        scope.check_session(sid, whole)
    return sid


def _pick(conn, given, scope, required: bool) -> str | None:
    if given is not None:
        return by_id(conn, given)
    current = lcm.base.config.current_session_id()
    if scope.limited and current not in scope.sessions:
        return scope.newest_session()
    if current:
        if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (current,)).fetchone():
            return current
        if not required:
            return None
        raise LcmError(f"the current session {current} is not in the vault yet",
                       "run lcm_ingest.py on its transcript (or --all), or pass --session ID; " + SESSIONS_HINT)
    sid = newest_of_project(conn)
    if sid is None and required:
        raise LcmError(f"no current session ($LCM_SESSION_ID) and no session of {project_dir()} in the vault",
                       "pass --session ID; " + SESSIONS_HINT)
    return sid
