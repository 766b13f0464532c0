"""What every lcm hook shares: read the payload, find the scripts, ingest, detach, fail open.

A hook must never break or slow the session, so:
- `run_hook` catches everything; a failure becomes one line in $LCM_HOME/lcm.log and exit 0;
- LCM_DISABLE=1 turns every hook into a no-op before anything is imported;
- only the standard library is used, and as little of it as possible (hooks run on every turn:
  hooks.json starts them with `python3 -S`, and heavy modules load only on the paths that use them);
- slow work (model calls) runs in a detached process that outlives the hook.
"""
from __future__ import annotations

import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG_MAX_BYTES = 1_000_000
HOOK_BUDGET = 1.0  # seconds from the hook's start after which it stops waiting for the vault
IMPORTED = time.monotonic()
_event = "-"  # the running hook's event (run_hook sets it), for detached work's log lines
COMPACT_TIME_BUDGET = 300  # seconds a detached compaction may start new summaries for
PACK_TIME_BUDGET = 60  # seconds a detached packing run may start new batches for (a manual run waits for it)


def scripts_dir() -> str:
    """The plugin's scripts/: from CLAUDE_PLUGIN_ROOT, else the repo this hook file lives in."""
    root = os.environ.get("CLAUDE_PLUGIN_ROOT")
    if root and os.path.isfile(os.path.join(root, "scripts", "lcm", "db.py")):
        return os.path.join(os.path.abspath(root), "scripts")
    return os.path.join(REPO, "scripts")


def setup_path() -> None:
    path = scripts_dir()
    if path not in sys.path:
        sys.path.insert(0, path)


def flag(name: str) -> bool:
    """A boolean LCM_* setting, read by lcm.base.config (which names a bad value in its error)."""
    import lcm.base.config
    return bool(lcm.base.config.get(name))


def lcm_home() -> str:
    import lcm.base.config
    return lcm.base.config.home_str()


def log(event: str, payload: dict | None, message: str) -> None:
    """One line in $LCM_HOME/lcm.log, masked (lcm.base.mask): a session id, a transcript path or an
    error's text may hold a key, and the log is a sink like any other. If even writing fails, the
    same masked line goes to stderr (Claude Code's debug log). Hooks log only when something went
    wrong, so the mask's import is paid on those runs alone."""
    session = (payload or {}).get("session_id") if isinstance(payload, dict) else None
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    line = f"{stamp} {event} session={session or '-'} {' '.join(str(message).split())}\n"
    try:
        setup_path()
        import lcm.base.mask
        line = lcm.base.mask.mask(line)
    except Exception as exc:  # noqa: BLE001 - no mask, no text: the line says only that it was withheld
        line = f"{stamp} {event} (text withheld: masking failed: {type(exc).__name__})\n"
    try:
        home = lcm_home()
        os.makedirs(home, mode=0o700, exist_ok=True)
        path = os.path.join(home, "lcm.log")
        try:
            if os.path.getsize(path) > LOG_MAX_BYTES:
                os.replace(path, path + ".1")  # keep one old log; the log never grows without bound
        except OSError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        sys.stderr.write("lcm: " + line)


class Skip(Exception):
    """A hook that cannot do its job for an ordinary reason (say, no transcript yet): logged, exit 0."""


NOTES: list[str] = []


def note(message: str) -> None:
    """Something worth one log line that did not stop the hook; all notes share one line."""
    NOTES.append(message)


def read_payload() -> dict:
    data = sys.stdin.buffer.read()
    try:
        payload = json.loads(data)
    except ValueError:  # includes bytes that are not UTF-8
        raise Skip(f"stdin is not a JSON hook payload ({len(data)} bytes)") from None
    if not isinstance(payload, dict):
        raise Skip(f"stdin is JSON but not an object ({type(payload).__name__})")
    return payload


def run_hook(event: str, handler, when_excluded=None) -> int:
    """Parse stdin, call handler(payload); print what it returns; never fail the session.

    handler returns None (no output), a str (printed as plain text) or a dict (printed as JSON).
    In a project of LCM_EXCLUDE, when_excluded(payload) runs instead (nothing, by default).
    """
    import gc
    gc.freeze()  # start-up's objects live until exit: the collector need not walk them (lcm.cli.freeze_imports)
    global _event
    _event = event
    payload = None
    try:
        setup_path()
        if flag("LCM_DISABLE"):
            return 0
        payload = read_payload()
        if excluded(payload):
            handler = when_excluded or (lambda _payload: None)
        out = handler(payload)
        if isinstance(out, dict):
            sys.stdout.write(json.dumps(out) + "\n")
        elif out:
            import lcm.base.mask
            sys.stdout.write(lcm.base.mask.mask(out).rstrip("\n") + "\n")
        sys.stdout.flush()
    except Skip as exc:
        NOTES.append(f"skipped: {exc}")
    except BaseException as exc:  # noqa: BLE001 - failing open is the contract
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        hint = getattr(exc, "hint", None)
        NOTES.append(f"error: {type(exc).__name__}: {message}" + (f" (hint: {hint})" if hint else ""))
    close_all()
    stamp(event)
    if NOTES:
        log(event, payload, "; ".join(NOTES))
    return 0


def exit_now(code: int) -> None:
    """End the hook process without Python's teardown (freeing every module and object one by one,
    ~2 ms of a 25 ms hook): run_hook has closed the vault, written the log and printed the
    output; stdout and stderr are flushed here. For a hook's __main__ only, never in-process."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # Claude Code stopped reading: nothing to tell it
    os._exit(code)


_CONNS: list = []  # the vault connections this hook opened (connect), closed before it exits


def close_all() -> None:
    """Close the hook's vault connections. A connection is never freed by itself (lcm.vault.store's
    line reader refers back to it), and one left open at exit skips SQLite's checkpoint at close:
    the WAL then stays behind and grows, and every later hook, as the vault's first opener, reads
    all of it to rebuild the WAL index (30 ms for a 50 MB WAL, measured)."""
    while _CONNS:
        try:
            _CONNS.pop().close()
        except Exception as exc:  # noqa: BLE001 - a close that fails costs nothing stored
            note(f"closing the vault failed: {exc}")


def stamp(event: str) -> None:
    """Touch $LCM_HOME/last-run/<event>: lcm_doctor.py reports when each hook last ran from its
    time. One utime call (microseconds), where a log line per run would crowd out the errors."""
    path = os.path.join(lcm_home(), "last-run", event)
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            pass
    except OSError:
        pass


# ---------------------------------------------------------------------------
# The work hooks share
# ---------------------------------------------------------------------------

def excluded(payload: dict) -> bool:
    """Whether the session's project (its cwd, or Claude Code's project directory) is in LCM_EXCLUDE:
    such a session is never captured, injected or compacted."""
    if not (os.environ.get("LCM_EXCLUDE") or "").strip():
        return False
    import lcm.capture.exclude
    return any(lcm.capture.exclude.excluded(path) for path in (payload.get("cwd"), os.environ.get("CLAUDE_PROJECT_DIR"))
               if isinstance(path, str))


def session_id(payload: dict) -> str:
    sid = payload.get("session_id")
    if not sid or not isinstance(sid, str):
        raise Skip("payload has no session_id")
    return sid


def write_patience() -> float:
    """How long this hook may still wait for the vault's write lock: what is left of
    HOOK_BUDGET since the process started (on a loaded machine Python's own start takes a
    good part of it), at least 0.1 s."""
    try:
        with open("/proc/self/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22: start, in ticks since boot
        elapsed = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError, IndexError):  # not Linux
        elapsed = -1.0
    if not 0 <= elapsed < 60:  # no /proc, or clocks that disagree (a suspend): since our import
        elapsed = time.monotonic() - IMPORTED
    return max(HOOK_BUDGET - elapsed, 0.1)


def connect():
    import lcm.vault.db
    import lcm.base.errors
    # any write of a hook waits about a second for another writer at most, not lcm.vault.db's 10 s:
    # an upgrade's migration in another process too (this turn's lines wait for the next hook)
    try:
        conn = lcm.vault.db.connect(patience=write_patience())
    except lcm.base.errors.LcmError as exc:
        if getattr(exc, "cause", None) == "busy":
            raise Skip(f"{exc.message}; the next hook stores this turn's lines") from None
        raise
    _CONNS.append(conn)
    conn.execute(f"PRAGMA busy_timeout = {int(write_patience() * 1000)}")
    return conn


def ingest(conn, path) -> dict:
    """Incremental ingest of one transcript and its `<session>/subagents/agent-*.jsonl`;
    Skip when it does not exist (yet). A sub-agent's last lines can land after its own
    SubagentStop hook ran; the main session's next hook catches them.

    While another writer (a bulk import, a compaction) holds the vault past write_patience(),
    the hook gives way: Skip, and the next hook stores these lines too.
    """
    if not path or not isinstance(path, str):
        raise Skip("payload has no transcript path")
    if not os.path.isfile(path):
        raise Skip(f"transcript {path} does not exist (yet)")
    import lcm.capture.ingest
    try:
        # the turn's token counts: read by the detached packing run (lcm.capture.tokens.later)
        result = lcm.capture.ingest.ingest_session(conn, path, patience=write_patience(), usage_later=True)
    except lcm.vault.db.VaultBusy as exc:  # lcm.vault.db is loaded: connect() imported it
        raise Skip(f"{exc.message}; {exc.hint}") from None
    for bad in result["skipped_files"]:
        note(f"file skipped: {bad['reason']}")
    return result


def try_ingest(conn, path) -> dict | None:
    """Ingest, noting why it was skipped instead of raising (for hooks with more to do)."""
    try:
        return ingest(conn, path)
    except Skip as exc:
        note(f"ingest skipped: {exc}")
    return None


def project_dir(payload: dict) -> str:
    return os.environ.get("CLAUDE_PROJECT_DIR") or payload.get("cwd") or os.getcwd()


def detach(script: str, args: list[str], payload: dict) -> None:
    """Start scripts/<script> in its own session, stdio closed, so it outlives the hook; it
    runs under run_detached, which logs its failure.

    Runs without -S: the model backend may need site-packages (the anthropic SDK). Its cwd is
    the project when that still exists, else the home directory.
    """
    import subprocess
    sid = payload.get("session_id") if isinstance(payload.get("session_id"), str) else ""
    env = dict(os.environ)
    env["LCM_SESSION_ID"] = sid
    project = project_dir(payload)
    env.setdefault("CLAUDE_PROJECT_DIR", project)
    cwd = project if isinstance(project, str) and os.path.isdir(project) else (
        os.path.expanduser("~") if os.path.isdir(os.path.expanduser("~")) else "/")
    subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "detached", _event, sid, script, *args],
        cwd=cwd, env=env, start_new_session=True, close_fds=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def run_detached(event: str, sid: str, script: str, args: list[str]) -> int:
    """Run scripts/<script> as detached work: its failure (exit status, `Error:`/`Hint:` text or
    exception) or its `Warning:` becomes one line in lcm.log, since nobody sees its stderr."""
    import io
    import runpy
    setup_path()
    captured = io.StringIO()
    sys.stderr, sys.argv = captured, [script, *args]
    code = 0
    try:
        runpy.run_path(os.path.join(scripts_dir(), script), run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException as exc:  # noqa: BLE001 - reported in the log, the only place anyone looks
        code = 1
        captured.write(f"{type(exc).__name__}: {exc}")
    finally:
        sys.stderr = sys.__stderr__
    text = captured.getvalue().strip()
    # a compaction whose model failed succeeds (fallback summaries) but says why on stderr
    if code or "Warning:" in text:
        outcome = f"failed (exit {code})" if code else "finished with a warning"
        log(event, {"session_id": sid}, f"detached {script} {' '.join(args)} {outcome}: " + text[-2000:])
    return code


def start_compaction(conn, sid: str, payload: dict) -> None:
    """Detach `lcm_compact.py --session SID` when due and no compaction of the session is running.

    The running one holds the session lock; starting another would only queue behind it.
    """
    import lcm.vault.order
    # the cheap half of the due check first (lcm.capture.ingest loaded lcm.vault.order already): on most turns
    # nothing is due, and the hook never loads lcm.summary.dag and its imports (~0.7 ms)
    if lcm.vault.order.due_hint(conn, sid) is None:
        return
    import lcm.summary.dag
    if not lcm.summary.dag.compaction_due(conn, sid):
        return
    from lcm.base.errors import LcmError
    try:
        with lcm.summary.dag.session_lock(sid, blocking=False):
            pass
    except LcmError:
        return
    # one run drains the backlog, within the spend guard and this budget; the next turn resumes
    detach("lcm_compact.py", ["--session", sid, "--time-budget", str(COMPACT_TIME_BUDGET)], payload)


def start_packing(conn, payload: dict) -> None:
    """Detach `lcm_compact.py --pack` when enough lines wait plain (lcm.vault.pack.due: an index count)
    or the usage of lines stored before the usage table waits to be read (lcm.capture.tokens.pending:
    one lookup), and no packing run holds its lock; the hook itself never compresses or reads them."""
    import lcm.capture.tokens
    import lcm.vault.pack
    if (lcm.vault.pack.due(conn) or lcm.capture.tokens.pending(conn)) and not lcm.vault.pack.running(conn):
        detach("lcm_compact.py", ["--pack", "--time-budget", str(PACK_TIME_BUDGET)], payload)


def start_backup(payload: dict) -> None:
    """Detach `lcm_backup.py --auto` when the last automatic backup started
    LCM_BACKUP_INTERVAL_HOURS ago or more (one stat(); LCM_BACKUP=0: never). The start is
    recorded first, so the next hooks do not start another; the backup itself takes its lock."""
    import lcm.care.backup
    if lcm.care.backup.due():
        try:
            lcm.care.backup.mark_started()
        except OSError as exc:  # the backup directory cannot be made: said once per Stop, in the log
            note(f"automatic backup not started: {exc}")
            return
        detach("lcm_backup.py", ["--auto"], payload)


def context_output(event: str, text: str) -> dict:
    """Text injected into the session's context, secrets masked (lcm.base.mask)."""
    import lcm.base.mask
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": lcm.base.mask.mask(text)}}


if __name__ == "__main__" and sys.argv[1:2] == ["detached"]:
    # `hooklib.py detached EVENT SESSION SCRIPT ARGS...`, started by detach()
    raise SystemExit(run_detached(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]))
