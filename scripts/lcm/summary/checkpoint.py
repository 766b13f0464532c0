"""Checkpoints: a session's state written as markdown that a later session can resume from.

One format, written and read here: `build` writes it (scripts/lcm_checkpoint.py), `resume`
reads it back against the vault (scripts/lcm_resume.py); hooks and other commands import it.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import sys
import tempfile
from pathlib import Path

import lcm.base.config
import lcm.vault.grants
import lcm.base.mask
import lcm.base.shell
import lcm.base.text
import lcm.capture.transcript
import lcm.summary.worklog
from lcm.base.errors import LcmError

FILE_NAME = ".lcm-checkpoint.md"
MARKER = "lcm-checkpoint:"
FORMAT_VERSION = 1
NARRATIVE_SYSTEM = (
    "You write the hand-over note a developer leaves before stopping work. From the extracted "
    "session state, write at most 150 words: what was being done, where it stands, and the next "
    "step. Only state what the material supports; do not invent file names or results.")


def workspace_root() -> Path:
    return Path(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def foreign_reason(conn, session_id: str) -> str | None:
    """Why the workspace's checkpoint file is not this session's to write, or None when it is:
    the current session ($LCM_SESSION_ID), or one whose directory is the workspace root."""
    current = lcm.base.config.current_session_id()
    if current == session_id:
        return None
    row = conn.execute("SELECT project FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    project = row["project"] if row else None
    root = workspace_root()
    if not current and project and os.path.realpath(project) == os.path.realpath(root):
        return None
    if current:
        return f"session {session_id} is not the current session ({current})"
    return f"session {session_id} belongs to {project or 'another project'}, not {root}"


def catch_up(conn, session_id: str) -> None:
    """Ingest the lines of the live transcript that the hooks have not stored yet."""
    row = conn.execute("SELECT transcript_path FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    path = row and row["transcript_path"]
    if not path or not Path(path).is_file():
        return
    try:
        import lcm.capture.ingest
    except ImportError:
        return
    try:
        lcm.capture.ingest.ingest_file(conn, path)
    except LcmError as exc:  # the stored lines still make a checkpoint
        sys.stderr.write(f"Warning: could not read the newest lines of {path}: {exc.message}\n")


NARRATIVE_SECONDS = 45.0  # a model call of --llm; twice that at worst, then the checkpoint without it


def narrative(conn, session_id: str, body: str) -> str | None:
    """A model-written summary of the state, or None (with a warning) if the model fails."""
    import lcm.base.llm
    try:
        # bounded (one retry of NARRATIVE_SECONDS): a hung API would hold the command past Bash's 2 minutes
        done = lcm.base.llm.complete(NARRATIVE_SYSTEM, [{"role": "user", "content": body[:24000]}], max_tokens=400,
                                model=lcm.base.llm.resolve_model(conn, session_id), timeout=NARRATIVE_SECONDS,
                                max_retries=1)
    except LcmError as exc:
        sys.stderr.write(f"Warning: narrative skipped, the model call failed: {exc.message}\n")
        return None
    return done.text.strip() or None


def build(conn, session_id: str, vault: Path, use_llm: bool) -> tuple[dict, str]:
    session = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    log = lcm.summary.worklog.worklog(conn, session_id)
    top = lcm.summary.worklog.top_summaries(conn, session_id)
    summaries = conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (session_id,)).fetchone()[0]
    meta = {"version": FORMAT_VERSION, "session_id": session_id, "vault": str(vault),
            "project": session["project"], "last_message_id": log["last_message_id"],
            "created_at": lcm.base.config.now_iso()}
    body = lcm.summary.worklog.render(lcm.summary.worklog.sections(log, top))
    story = narrative(conn, session_id, body) if use_llm else None
    head = [
        f"<!-- {MARKER} {json.dumps(meta)} -->",
        f"# lcm checkpoint: {session['title'] or session_id}",
        "",
        f"- Session: `{session_id}` (project {session['project'] or 'unknown'})",
        f"- Written: {meta['created_at']}",
        f"- Vault: {vault} ({log['message_count']} messages in this session, {summaries} summaries,"
        f" last message id {log['last_message_id']})",
        f"- Work seen: {log['request_count']} user requests, {len(log['files_edited'])} files edited,"
        f" {len(log['files_created'])} created, {log['command_count']} commands"
        f" ({log['failed_command_count']} failed), {len(log['open_todos'])} open todos",
    ]
    if story:
        head += ["", "## Narrative (model-written)", story]
    shell = lcm.base.shell
    resume = [
        "## How to resume",
        f"- `{shell.command_line('lcm_resume.py', '--session', session_id)}` rebuilds this state from the vault"
        " and lists what came after it",
        f"- `{shell.command_line('lcm_grep.py', shell.Positional('TERM'), '--session', session_id)}` finds an exact detail",
        f"- `{shell.command_line('lcm_describe.py', shell.Positional('ID'))}` inspects a summary or message id listed above",
        f"- `{shell.command_line('lcm_expand_query.py', '--query', 'TERM', '--prompt', 'QUESTION', '--session', session_id)}`"
        " answers from the original messages",
    ]
    text = "\n".join(head) + "\n\n" + body + "\n\n" + "\n".join(resume) + "\n"
    # the file lands in the project (easy to commit): masked whole, whatever the vault holds; a
    # lone surrogate quoted from a line (output that was not UTF-8) as its escape, for file and vault
    return lcm.base.mask.mask_json({**meta, "title": session["title"], "message_count": log["message_count"],
                               "summary_count": summaries, "narrative": story, "worklog": log,
                               "top_summaries": top}), lcm.base.text.safe_text(lcm.base.mask.mask(text))


def git_exclude_file(directory: Path) -> Path | None:
    """The info/exclude file of the git repository holding `directory`, or None outside one.
    Read from the files git keeps (no git process): `.git` is the git directory, or in a linked
    worktree or submodule a file `gitdir: PATH`; a worktree's git directory names the shared
    one in its `commondir` file, and git reads info/exclude from the shared one."""
    for folder in (directory, *directory.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git / "info" / "exclude"
        if dot_git.is_file():
            try:
                line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                return None
            if not line.startswith("gitdir:"):
                return None
            git_dir = (folder / line[len("gitdir:"):].strip()).resolve()
            common = git_dir / "commondir"
            if common.is_file():
                try:
                    git_dir = (git_dir / common.read_text(encoding="utf-8").strip()).resolve()
                except OSError:
                    return None
            return git_dir / "info" / "exclude"
    return None


def keep_out_of_git(path: Path) -> str | None:
    """Add the checkpoint's file name to its repository's local .git/info/exclude (never to
    .gitignore, which the person commits), so it does not show in `git status`. Returns the
    exclude file changed, or None (not in a repository, already excluded, or not writable:
    the checkpoint is worth more than the tidy status)."""
    exclude = git_exclude_file(path.resolve().parent)
    if exclude is None or not exclude.parent.parent.is_dir():
        return None
    try:
        text = exclude.read_text(encoding="utf-8", errors="replace") if exclude.exists() else ""
        if FILE_NAME in (ln.strip() for ln in text.splitlines()):
            return None
        exclude.parent.mkdir(exist_ok=True)
        with open(exclude, "a", encoding="utf-8") as f:
            if text and not text.endswith("\n"):
                f.write("\n")
            f.write(f"# lcm's checkpoint file (lcm_checkpoint.py), kept out of git status\n{FILE_NAME}\n")
    except OSError:
        return None
    return str(exclude)


def write_atomic(path: Path, text: str) -> str:
    """Write to a temporary file beside `path`; the caller os.replace()s it into place."""
    fd, tmp = tempfile.mkstemp(prefix=".lcm-checkpoint.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return tmp


# ---------------------------------------------------------------------------
# Reading a checkpoint back (lcm_resume.py)
# ---------------------------------------------------------------------------

MARKER_LINE = re.compile(r"^<!--\s*" + re.escape(MARKER) + r"\s*(.*?)\s*-->\s*$")
NEEDED = ("session_id", "vault", "last_message_id", "created_at")
MAX_CHECKPOINT_BYTES = 4 << 20  # a checkpoint is a few KB; this bounds what a wrong path can cost


def parse_checkpoint(text: str, source: str) -> dict:
    """The marker of a checkpoint written by lcm_checkpoint.py; an LcmError for anything else."""
    fix = "resume from the copy the vault keeps with --session ID, or write a fresh one with lcm_checkpoint.py"
    head = text.lstrip("\ufeff").splitlines()[:3]
    match = next((m for m in map(MARKER_LINE.match, head) if m), None)
    if match is None:
        raise LcmError(f"{source} is not an lcm checkpoint (no '<!-- {MARKER} ... -->' line at the top)", fix)
    try:
        meta = json.loads(match.group(1))
    except ValueError:
        raise LcmError(f"{source} is corrupt: its {MARKER} marker is not valid JSON", fix) from None
    if not isinstance(meta, dict) or any(k not in meta for k in NEEDED) \
            or not isinstance(meta.get("last_message_id"), (int, type(None))):
        raise LcmError(f"{source} is corrupt: its {MARKER} marker lacks " + ", ".join(NEEDED), fix)
    if meta.get("version") != FORMAT_VERSION:
        raise LcmError(f"{source} has checkpoint format {meta.get('version')!r}, this lcm reads {FORMAT_VERSION}",
                       "upgrade lcm, or write a fresh checkpoint with lcm_checkpoint.py")
    return meta


def read_checkpoint_file(path: Path) -> str:
    """The text of a checkpoint file: a regular file (a FIFO would block, /dev/zero never end)
    of at most MAX_CHECKPOINT_BYTES."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # opening a FIFO must not wait
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LcmError(f"checkpoint {path} is not a regular file",
                           "pass the path of a .lcm-checkpoint.md file, or --session ID to use the vault's copy")
        data = f.read(MAX_CHECKPOINT_BYTES + 1)
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise LcmError(f"checkpoint {path} is too large to be one (over {MAX_CHECKPOINT_BYTES >> 20} MB)",
                       "pass the path of a .lcm-checkpoint.md file, or --session ID to use the vault's copy")
    return data.decode("utf-8")


def load(conn, checkpoint: str | None, session: str | None) -> tuple[str, str] | None:
    """(text, source) of the checkpoint to resume from, or None when the vault keeps none."""
    if checkpoint:
        path = Path(checkpoint).expanduser()
        try:
            return read_checkpoint_file(path), str(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise LcmError(f"cannot read checkpoint {path}: {getattr(exc, 'strerror', None) or exc}",
                           "check the path, or pass --session ID to use the copy kept in the vault") from None
    if not session:
        path = workspace_root() / FILE_NAME
        if path.is_file():
            return load(conn, str(path), None)
    where, params = ("session_id = ?", (session,)) if session else ("project = ?", (str(workspace_root()),))
    row = conn.execute(f"SELECT id, content FROM checkpoints WHERE {where} ORDER BY id DESC LIMIT 1",
                       params).fetchone()
    if row is None:
        return None
    return row["content"], f"vault checkpoint {row['id']}"


def project_sessions_sql(alias: str = "") -> str:
    """The WHERE clause of a project's sessions: its directory or one below it, as recorded
    (two parameters: the directory, and the directory followed by '/%')."""
    return f"({alias}project = ? OR {alias}project LIKE ?)"


def latest_earlier_session(conn, root: Path) -> str | None:
    """The session of the project at `root` (or below it) that ran last, other than the current
    one: what "continue where we left off" means when no checkpoint was written (imported history
    has none). Dated by its conversation (sessions.last_at), never by when lcm stored it."""
    current = lcm.base.config.current_session_id() or ""
    for directory in dict.fromkeys((str(root), os.path.realpath(str(root)))):
        row = conn.execute(
            f"SELECT session_id FROM sessions WHERE {project_sessions_sql()} AND session_id != ?"
            " AND last_at IS NOT NULL ORDER BY last_at DESC LIMIT 1",
            (directory, directory.rstrip("/") + "/%", current)).fetchone()
        if row is not None:
            return row["session_id"]
    return None


def check_against_vault(conn, meta: dict, source: str, vault: Path) -> list[str]:
    """Refuse a checkpoint whose session the vault lacks; warnings for lesser mismatches."""
    warnings = []
    foreign = Path(meta["vault"]).resolve() != vault
    if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (meta["session_id"],)).fetchone() is None:
        if foreign:
            raise LcmError(f"{source} belongs to another vault ({meta['vault']}); session {meta['session_id']}"
                           f" is not in {vault}", f"pass --db {meta['vault']}, or ingest that session's transcript")
        raise LcmError(f"session {meta['session_id']} of {source} is not in the vault {vault}",
                       "re-import its transcript with lcm_ingest.py --all, or write a new checkpoint")
    if foreign:
        warnings.append(f"the checkpoint was written for vault {meta['vault']}; reading {vault}")
    newest = conn.execute("SELECT max(id) FROM messages WHERE session_id = ?", (meta["session_id"],)).fetchone()[0]
    if meta["last_message_id"] and (newest or 0) < meta["last_message_id"]:
        warnings.append(f"the vault holds fewer messages of this session than the checkpoint saw"
                        f" (last id {newest}, checkpoint {meta['last_message_id']}): was it rebuilt?")
    return warnings


class Budget:
    """Collects lines while the text stays under a token budget (lcm.base.config.estimate_tokens)."""

    NOTE = "- ... {} more not shown (raise --max-tokens, or read the checkpoint file)"

    def __init__(self, max_tokens: int, reserve: int):
        self.chars = max_tokens * 4 - reserve
        self.lines: list[str] = []
        self.skipped: list[str] = []

    def add(self, line: str) -> bool:
        if len(line) + 1 > self.chars:
            return False
        self.lines.append(line)
        self.chars -= len(line) + 1
        return True

    def block(self, heading: str, lines: list[str]) -> None:
        """A section, cut with a note when the budget ends; skipped whole if not even one line fits."""
        if not lines:
            return
        if len(heading) + len(lines[0]) + 6 > self.chars:
            self.skipped.append(heading.split(" (")[0])
            return
        self.add("")
        self.add(f"## {heading}")
        note = len(self.NOTE) + 4
        for i, line in enumerate(lines):
            room = len(line) + 1 + (0 if i == len(lines) - 1 else note)
            if i > 0 and room > self.chars:
                self.add(self.NOTE.format(len(lines) - i))
                return
            self.add(line)


def drill_further(session_id: str) -> list[str]:
    """The footer of a resume: runnable commands, one a line, to go past the brief (find a
    detail; answer a question from the original messages)."""
    shell = lcm.base.shell
    return ["", "## Drill further",
            "- " + shell.command_line("lcm_grep.py", shell.Positional("TERM"), "--session", session_id),
            "- " + shell.command_line("lcm_expand_query.py", "--query", "TERM", "--prompt", "QUESTION",
                                      "--session", session_id)]


def _digest_lines(conn, session_id: str) -> list[str]:
    """The body of the session's stored digest (without its heading lines), or []."""
    try:
        row = conn.execute("SELECT text FROM digests WHERE session_id = ?", (session_id,)).fetchone()
    except sqlite3.OperationalError:  # a vault from before digests
        return []
    if row is None:
        return []
    lines = row["text"].strip().splitlines()
    body = lines[2:] if lines and lines[0].startswith("# ") else lines
    return [ln for ln in body if ln.strip()]


def reconstruct(conn, meta: dict, source: str, text: str, warnings: list[str], max_tokens: int,
                brief: bool = False) -> dict:
    """The resume text. brief: no checkpoint exists; the whole session is read from the vault
    (its digest, if stored, then its work log) and nothing counts as "newer"."""
    sid, last = meta["session_id"], meta["last_message_id"]
    state = lcm.summary.worklog.worklog(conn, sid, upto_id=last)
    newer = lcm.summary.worklog.worklog(conn, sid, after_id=last or 0) if not brief else \
        lcm.summary.worklog.worklog(conn, sid, upto_id=0)
    top = lcm.summary.worklog.top_summaries(conn, sid)
    title = conn.execute("SELECT title FROM sessions WHERE session_id = ?", (sid,)).fetchone()["title"]
    story = re.search(r"^## Narrative \(model-written\)\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    footer = drill_further(sid)
    # the footer, and a line naming the sections left out, are always printed
    out = Budget(max_tokens, reserve=sum(len(ln) + 1 for ln in footer) + 100)
    out.add(f"# Resuming session {sid}" + (f": {lcm.base.text.one_line(title, 80)}" if title else ""))
    if brief:
        out.add(f"No checkpoint was written for it: this is {source}, read from the vault"
                f" ({state['message_count']} messages, last active {meta['created_at'][:16].replace('T', ' ')}).")
    else:
        out.add(f"From {source}, written {meta['created_at']}; state as of message id {last} "
                f"({state['message_count']} messages).")
    for warning in warnings:
        out.add(f"WARNING: {warning}")
    if newer["message_count"]:
        out.add(f"WARNING: the vault holds {newer['message_count']} newer messages of this session than the checkpoint.")
        out.block("Since the checkpoint", [f"- request: {lcm.base.text.one_line(r['text'], 300)} ({r['uuid']})"
                                           for r in reversed(newer["user_requests"])]
                  + [f"- edited: {f}" for f in newer["files_edited"] + newer["files_created"]]
                  + [f"- todo [{t['status']}] {t['content']}" for t in newer["open_todos"]])
    secs = lcm.summary.worklog.sections(state, top, list_cap=10, text_cap=300)
    for heading, lines in secs[:5]:
        out.block(heading, lines)
    digest = _digest_lines(conn, sid) if brief else []
    if digest:
        out.block("Digest of the session (stored when it ended)", digest)
    if story:
        out.block("Narrative (model-written, from the checkpoint)", story.group(1).strip().splitlines())
    for heading, lines in secs[5:]:
        out.block(heading, lines)
    if out.skipped:
        footer[0:0] = ["", lcm.base.text.one_line(f"Not shown for space: {', '.join(out.skipped)} (raise --max-tokens).", 98)]
    rendered = "\n".join(out.lines + footer) + "\n"
    return {"session_id": sid, "title": title, "checkpoint": {**meta, "source": source} if not brief else None,
            "brief": source if brief else None,
            "warnings": warnings, "state": state, "newer": newer, "top_summaries": top,
            "text": rendered, "tokens": lcm.base.config.estimate_tokens(rendered)}


def resume(conn, checkpoint: str | None, session: str | None, vault: Path, max_tokens: int) -> dict:
    """The state a checkpoint recorded, re-read from the vault within max_tokens: the one call
    of lcm_resume.py. checkpoint: a file (default: the workspace's, else the vault's newest of
    the workspace's project); session: the vault's newest checkpoint of that session. Without
    any checkpoint (imported history has none), the brief of that session, or of the project's
    latest earlier session, read from the vault."""
    loaded = load(conn, checkpoint, session)
    if loaded is None:
        return lcm.base.mask.mask_json(session_brief(conn, session, vault, max_tokens))
    text, source = loaded
    meta = parse_checkpoint(text, source)
    if meta.get("session_id") and not session:  # a checkpoint file names its session: the grant must cover it
        lcm.vault.grants.scope(conn).check_session(meta["session_id"], whole=True)
    warnings = check_against_vault(conn, meta, source, vault)
    # a checkpoint written before masking, or edited by hand, may hold secrets: masked before use
    return lcm.base.mask.mask_json(reconstruct(conn, meta, source, lcm.base.mask.mask(text), warnings, max_tokens))


def session_brief(conn, session: str | None, vault: Path, max_tokens: int) -> dict:
    """Resume without a checkpoint: `session`, else the workspace project's latest earlier session."""
    root = workspace_root()
    sid = session or latest_earlier_session(conn, root)
    if sid is None:
        raise LcmError(f"no checkpoint and no earlier session of {root} in the vault",
                       f"{lcm.base.shell.SESSIONS_HINT}; resume one with lcm_resume.py --session ID,"
                       " or import past sessions with lcm_ingest.py --all")
    lcm.vault.grants.scope(conn).check_session(sid, whole=True)
    row = conn.execute("SELECT last_at FROM sessions WHERE session_id = ?", (sid,)).fetchone()
    meta = {"session_id": sid, "last_message_id": None, "vault": str(vault),
            "created_at": (row and row["last_at"]) or ""}
    source = f"the brief of session {sid}" if session else f"the brief of this project's latest session ({sid})"
    return reconstruct(conn, meta, source, "", [], max_tokens, brief=True)
