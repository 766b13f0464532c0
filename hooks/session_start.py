"""SessionStart: open (create or upgrade) the vault, export LCM_* to the session's Bash tool,
ingest the transcript, and re-inject context after a compaction, or the checkpoint pointer and the
project's pinned notes on start. In an LCM_EXCLUDE project it only exports the variables.
"""
from __future__ import annotations

import os
import stat

import hooklib
from hooklib import note

EVENT = "SessionStart"
# additionalContext above 10,000 characters is moved to a file by Claude Code: stay well under
CONTEXT_CHARS = 6000
DRILL_DOWN = (
    "The summaries above stand in for older messages of this session; every original message is "
    "still in the lcm vault. To get details back: "
    'python3 "$LCM_SCRIPTS/lcm_grep.py" "WORDS" to search, '
    'python3 "$LCM_SCRIPTS/lcm_describe.py" SUMMARY_ID to inspect a summary, '
    'python3 "$LCM_SCRIPTS/lcm_expand_query.py" --summary-ids SUMMARY_ID --prompt "QUESTION" to answer from the originals '
    "(the expand command, which prints whole originals, is for sub-agents; the lcm skill has the details)."
)
OUR_EXPORTS = ("LCM_SCRIPTS", "LCM_SESSION_ID", "LCM_DB")


def env_value(value: str) -> bytes:
    """One bash word on one line, whatever the value holds. Printable ASCII goes in single quotes;
    anything else in ANSI-C quotes with every byte outside printable ASCII as a \\xHH escape, so the
    file holds no newline, no Unicode line separator (U+2028, U+0085, ...) and no byte a reader
    could split on: each value comes back byte for byte (its UTF-8), never as a command."""
    data = value.encode("utf-8", "surrogatepass")
    if all(0x20 <= b < 0x7f for b in data):
        return b"'" + data.replace(b"'", b"'\"'\"'") + b"'"  # as shlex.quote, without its import
    escaped = b"".join(b"\\" + bytes([b]) if b in b"\\'" else bytes([b]) if 0x20 <= b < 0x7f
                       else b"\\x%02x" % b for b in data)
    return b"$'" + escaped + b"'"


def write_env_file(path: str, values: dict[str, str]) -> None:
    """Put one `export NAME=value` per variable in the env file, replacing our earlier lines.

    Claude Code reuses the file across startup -> resume -> compact of one session, so a plain
    append would stack duplicates. The file is read and written as bytes, split on b"\\n" alone
    (as bash reads it): the lines of other tools stay byte for byte, whatever they hold. A value
    bash cannot hold (a NUL) is not exported. The file keeps its mode, and a symlink stays a
    symlink: the new text replaces its target.
    """
    path = os.path.realpath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        old, mode = b"", 0o600
    else:
        if not stat.S_ISREG(st.st_mode):  # a FIFO would hang the hook, a device never end
            note(f"CLAUDE_ENV_FILE is not a regular file, left alone: {path}")
            return
        with open(path, "rb") as f:
            old = f.read()
        mode = st.st_mode & 0o7777
    ours = tuple(f"export {name}=".encode() for name in OUR_EXPORTS)
    lines = old.split(b"\n")
    kept = [line for line in (lines[:-1] if lines[-1] == b"" else lines) if not line.startswith(ours)]
    kept += [f"export {name}=".encode() + env_value(value) for name, value in values.items() if "\0" not in value]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.lcm-{os.getpid()}"
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(b"\n".join(kept) + b"\n")
    os.replace(tmp, path)


def checkpoint_pointer(conn, payload: dict) -> str | None:
    """One line naming what continues this project's earlier work, and how to resume it: its
    latest checkpoint in the vault, else (imported history has no checkpoint) its latest earlier
    session, whose brief lcm_resume.py reads from the vault."""
    project = hooklib.project_dir(payload)
    sid = payload.get("session_id") or ""
    row = conn.execute("SELECT id, session_id, created_at FROM checkpoints WHERE project = ? AND session_id != ?"
                       " ORDER BY id DESC LIMIT 1", (project, sid)).fetchone()
    if row is not None:
        return (f"lcm: the vault keeps a checkpoint of earlier work on this project (checkpoint {row['id']} of"
                f" session {row['session_id']}, written {(row['created_at'] or '')[:16].replace('T', ' ')} UTC)."
                f' If the task continues that work, run python3 "$LCM_SCRIPTS/lcm_resume.py" --session'
                f" {row['session_id']} to restore the working state (goals, decisions, open files, next steps)"
                " before starting.")
    row = conn.execute("SELECT session_id, title, last_at FROM sessions WHERE (project = ? OR project LIKE ?)"
                       " AND session_id != ? AND last_at IS NOT NULL ORDER BY last_at DESC LIMIT 1",
                       (project, project.rstrip("/") + "/%", sid)).fetchone()
    if row is None:
        return None
    import lcm.base.mask  # a title is the person's words: masked like everything injected
    title = lcm.base.mask.mask(" ".join(str(row["title"] or "").split())[:80])
    return (f"lcm: the vault holds earlier sessions of this project; the latest is session {row['session_id']}"
            + (f' ("{title}")' if title else "")
            + f", last active {(row['last_at'] or '')[:16].replace('T', ' ')} UTC."
            f' If the task continues that work, run python3 "$LCM_SCRIPTS/lcm_resume.py" --session'
            f" {row['session_id']} for its brief (requests, files, decisions, open todos, errors) before starting.")


def compact_context(conn, sid: str) -> str:
    try:
        import lcm.summary.dag
    except ImportError:
        note("lcm/summary/dag.py is missing: only the drill-down pointer injected after compaction")
        body = ""
    else:
        body = lcm.summary.dag.render_context(conn, sid, max_chars=CONTEXT_CHARS).strip()
    if not body:
        return ("lcm: this session was compacted. Its full history stays in the lcm vault. " + DRILL_DOWN)
    return ("lcm: active context of this session after compaction (summaries with their ids):\n"
            + body + "\n\n" + DRILL_DOWN)


def startup_context(conn, payload: dict, pointer: str | None) -> str | None:
    """What a new, resumed or cleared session starts with: the checkpoint pointer (one part,
    kept whole) and the notes pinned for its project, newest first, within lcm.search.notes.INJECT_CHARS."""
    import lcm.search.notes
    return lcm.search.notes.context_text(conn, hooklib.project_dir(payload), pointer)


def export_env(payload: dict) -> None:
    """LCM_SCRIPTS, LCM_SESSION_ID and LCM_DB for the session's Bash tool."""
    import lcm.base.config
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if env_file:
        write_env_file(env_file, {
            "LCM_SCRIPTS": hooklib.scripts_dir(),
            "LCM_SESSION_ID": hooklib.session_id(payload),
            "LCM_DB": str(lcm.base.config.db_path().resolve()),
        })
    else:
        note("CLAUDE_ENV_FILE is not set: LCM_SCRIPTS not exported to the Bash tool")


def vault_unusable(payload: dict, exc) -> dict | None:
    """Tell Claude, once per session, that the vault cannot be opened and what to run: the hooks
    store nothing until it is recovered, and only lcm.log would say so otherwise."""
    note(f"vault unusable: {exc.message}")
    told = os.path.join(hooklib.lcm_home(), "last-run", "vault-unusable-told")
    sid = hooklib.session_id(payload)
    try:
        with open(told, encoding="utf-8") as f:
            seen = f.read().splitlines()
    except OSError:
        seen = []
    if sid in seen or not hooklib.flag("LCM_INJECT"):
        return None
    try:
        os.makedirs(os.path.dirname(told), mode=0o700, exist_ok=True)
        with open(told, "w", encoding="utf-8") as f:
            f.write("\n".join((seen + [sid])[-100:]) + "\n")
    except OSError:
        return None  # better silent than the same notice at every start
    return hooklib.context_output(EVENT, (
        f"lcm: the lcm vault cannot be used ({exc.message}), so nothing of this session is being stored or"
        ' searchable. Tell the user, and offer to run python3 "$LCM_SCRIPTS/lcm_doctor.py": it says what is'
        " wrong and how to recover (for a damaged vault, `--fix` moves the file aside and rebuilds the vault"
        " from the transcripts still on disk)."))


def handle(payload: dict):
    sid = hooklib.session_id(payload)
    if not hooklib.flag("LCM_SUBAGENT"):
        export_env(payload)  # first: the commands stay usable even when the vault cannot be opened
    from lcm.base.errors import LcmError
    try:
        conn = hooklib.connect()
    except LcmError as exc:
        if hooklib.flag("LCM_SUBAGENT") or getattr(exc, "cause", None) == "busy":
            raise
        return vault_unusable(payload, exc)
    if hooklib.flag("LCM_SUBAGENT"):
        hooklib.try_ingest(conn, payload.get("transcript_path"))
        return None
    hooklib.try_ingest(conn, payload.get("transcript_path"))
    if not hooklib.flag("LCM_INJECT"):
        return None
    source = payload.get("source")
    if source == "compact":
        text = compact_context(conn, sid)
    elif source in ("startup", "resume", "clear"):
        text = startup_context(conn, payload, checkpoint_pointer(conn, payload))
    elif source == "fork":
        text = checkpoint_pointer(conn, payload)
    else:
        text = None
    return hooklib.context_output(EVENT, text) if text else None


if __name__ == "__main__":
    # in an LCM_EXCLUDE project only the commands are made available: nothing stored or injected
    hooklib.exit_now(hooklib.run_hook(EVENT, handle, when_excluded=export_env))
