"""Session digests: the lessons of one session in a page, kept in the vault's `digests` table.

A digest says what was done, what was decided, which bugs were found, and what failed (commands
and edits that failed, approaches the person rejected), in markdown. The SessionEnd hook writes
one in the background (`lcm_compact.py --session ID --digest`), so a later session can find it
with lcm_grep.py; `lcm_sessions.py ID` shows it and `lcm_export.py --archive DIR` files it by
date for a person who wants a record outside the vault.

Written by the model when one is available (level 'model'), from an extractive digest of the
session plus its top summaries and last exchanges; deterministically otherwise, or when the model
call fails (level 'extractive'). Masked either way: a digest is printed, exported and searched.
"""
from __future__ import annotations

import os
import sqlite3
import sys

import lcm.base.config
import lcm.vault.db
import lcm.summary.extract
import lcm.base.mask
import lcm.base.text
import lcm.summary.worklog
from lcm.base.errors import LcmError

SECTIONS = ("What was done", "Decisions", "Bugs found", "What failed", "Open questions", "Open at the end")
LIST_CAP = 8        # bullets per section: a digest is read at a glance
LINE_CAP = 220      # characters per bullet
MODEL_INPUT_CHARS = 24_000
RECENT_MESSAGES = 50  # the design's "last ~50 user/assistant messages"
SYSTEM = (
    "You write the archive entry of a finished coding session, for the developer and for later "
    "sessions that search it. From the material, write markdown with exactly these sections, each a "
    "'## ' heading followed by at most 8 short bullets: " + ", ".join(SECTIONS) + ". 'Decisions' are "
    "choices made and why, by the person or the assistant, also those the session acted on without wording "
    "them (a tool, version, design or approach taken over another, something deliberately not done, a "
    "constraint adopted), never an apology, a status line ('X is now working') or a routine step; "
    "'Bugs found' are causes found and fixes that worked; 'What failed' names "
    "the commands, edits and approaches that failed or were rejected, with the error; 'Open questions' are "
    "questions left unanswered when the session ended (not offers to do more). Write '- none' "
    "for an empty section. State only what the material supports; keep file names, commands and "
    "error messages exact. No preamble.")


def _clip(text: str, limit: int = LINE_CAP) -> str:
    return lcm.base.text.one_line(lcm.base.text.strip_ansi(str(text)), limit)


def _bullets(items: list[str]) -> list[str]:
    shown = [f"- {_clip(item)}" for item in items[:LIST_CAP]]
    if len(items) > LIST_CAP:
        shown.append(f"- ... {len(items) - LIST_CAP} more")
    return shown or ["- none"]


def extractive(conn, session_id: str) -> str:
    """The digest built from the vault alone: the session's work log, read deterministically."""
    session = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if session is None:
        raise LcmError(f"session {session_id} is not in the vault", "lcm_sessions.py lists the sessions it holds")
    log = lcm.summary.worklog.worklog(conn, session_id, request_limit=10_000)
    requests = log["user_requests"]
    done = []
    if requests:
        done.append(f"Asked first: {requests[0]['text']}")
        if len(requests) > 1:
            done.append(f"Asked last ({len(requests)} requests in all): {requests[-1]['text']}")
    for verb, files in (("Edited", log["files_edited"]), ("Created", log["files_created"])):
        if files:
            done.append(f"{verb} {len(files)} files: " + ", ".join(files[:10]) + (" ..." if len(files) > 10 else ""))
    if log["command_count"]:
        done.append(f"Ran {log['command_count']} commands, {log['failed_command_count']} failed")
    finished = [t["content"] for t in log["todos"] if t["status"] == "completed"]
    if finished:
        done.append("Completed: " + "; ".join(finished))
    unresolved = {(e["target"], e["error"]) for e in log["unresolved_errors"]}
    failed = []
    for c in log["commands"]:
        if c["failed"]:
            still = " (not fixed later)" if (c["command"], c.get("error", "")) in unresolved else ""
            failed.append(f"`{_clip(c['command'], 100)}`: {c.get('error', '')}{still}")
        elif c.get("denied"):  # the permission settings stopped it: it never ran
            still = " (not fixed later)" if (c["command"], c.get("error", "")) in unresolved else ""
            failed.append(f"`{_clip(c['command'], 100)}` not allowed by the permission settings{still}")
        elif c["rejected"]:
            failed.append(f"`{_clip(c['command'], 100)}` rejected by the user" +
                          (f": {c['error']}" if c.get("error") else ""))
    failed += [f"{e['tool']} {_clip(e['target'], 100)}: {e['error']} (not fixed later)"
               for e in log["unresolved_errors"] if e["tool"] != "Bash"]
    open_items = [f"[{t['status']}] {t['content']}" for t in log["open_todos"]]
    title = session["title"] or (requests[0]["text"] if requests else session_id)
    head = [f"# Session digest: {_clip(title, 120)}",
            f"Session {session_id}, project {session['project'] or 'unknown'}, "
            f"{(session['first_at'] or '?')[:16]} to {(session['last_at'] or '?')[:16]}, "
            f"{log['message_count']} messages (extractive digest)"]
    body = []
    for name, items in zip(SECTIONS, (done, log["decisions"], log.get("findings", []), failed,
                                      log.get("open_questions", []), open_items)):
        body += ["", f"## {name}", *_bullets(items)]
    return lcm.base.mask.mask("\n".join(head + body) + "\n")


def _material(conn, session_id: str, draft: str) -> str:
    """What the model reads: the extractive digest, the top summaries, the last exchanges."""
    parts = ["<extractive_digest>", draft, "</extractive_digest>"]
    for s in lcm.summary.worklog.top_summaries(conn, session_id, limit=8):
        row = conn.execute("SELECT content FROM summaries WHERE id = ?", (s["id"],)).fetchone()
        parts += [f"<summary id=\"{s['id']}\">", _clip(row["content"], 3000), "</summary>"]
    rows = conn.execute(
        "SELECT role, lcm_text(content) AS content FROM messages WHERE session_id = ? AND role IN ('user', 'assistant')"
        " AND is_sidechain = 0 AND content != '' ORDER BY seq DESC LIMIT ?",
        (session_id, RECENT_MESSAGES)).fetchall()
    parts += ["<last_messages>"] + [f"[{r['role']}] {_clip(r['content'], 600)}" for r in reversed(rows)]
    parts.append("</last_messages>")
    return lcm.base.text.strip_ansi("\n".join(parts))[:MODEL_INPUT_CHARS]


def model_written(conn, session_id: str, draft: str) -> str | None:
    """The digest written by the model, or None (a warning on stderr) when no model answers."""
    import lcm.base.llm
    if lcm.base.llm.resolve_backend() == "none":
        return None
    try:
        done = lcm.base.llm.complete(SYSTEM, _material(conn, session_id, draft), max_tokens=900,
                                model=lcm.base.llm.resolve_model(conn, session_id))
    except LcmError as exc:
        sys.stderr.write(f"Warning: the digest is extractive, the model call failed: {exc.message}\n")
        return None
    text = lcm.base.text.strip_ansi(done.text).strip()
    if not text:
        return None
    head = draft.split("\n", 2)
    # the heading and the session line stay lcm's own: the model need not know the id
    return lcm.base.mask.mask("\n".join(head[:2]).replace("(extractive digest)", "(model-written digest)")
                         + "\n\n" + text + "\n")


def write(conn, session_id: str, use_model: bool = True) -> dict:
    """Write (or rewrite) the session's digest; {"session_id", "level", "text", "created_at"}."""
    draft = extractive(conn, session_id)
    text = model_written(conn, session_id, draft) if use_model else None
    digest = {"session_id": session_id, "level": "model" if text else "extractive", "text": text or draft,
              "created_at": lcm.base.config.now_iso()}
    with lcm.vault.db.transaction(conn):
        conn.execute("INSERT INTO digests (session_id, text, level, created_at) VALUES (?, ?, ?, ?)"
                     " ON CONFLICT(session_id) DO UPDATE SET text = excluded.text, level = excluded.level,"
                     " created_at = excluded.created_at",
                     (session_id, digest["text"], digest["level"], digest["created_at"]))
    return digest


ARCHIVE_MARK = "<!-- lcm-digest session={} -->"


def archive(conn, session_id: str, directory: str) -> dict:
    """Append the session's digest to DIR/YYYY-MM-DD.md (the day its session last ran), the
    memory design's dated archive: append-only, one entry per session, so a second run adds
    nothing. Uses the stored digest, else an extractive one made now (and not stored)."""
    digest = get(conn, session_id) or {"session_id": session_id, "level": "extractive",
                                       "text": extractive(conn, session_id), "created_at": lcm.base.config.now_iso()}
    row = conn.execute("SELECT last_at FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    day = ((row and row["last_at"]) or digest["created_at"])[:10]
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise LcmError(f"--archive {directory} is not a directory lcm can create ({exc.strerror or exc})",
                       "pass a directory you can write, e.g. --archive ~/notes/sessions") from None
    path = os.path.join(os.path.abspath(directory), f"{day}.md")
    mark = ARCHIVE_MARK.format(session_id)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            present = mark in f.read()
    except FileNotFoundError:
        present = False
    except OSError as exc:
        raise LcmError(f"cannot read {path}: {exc.strerror}", "check its permissions, or pass another --archive DIR") from None
    if not present:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # it holds a session's story
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                if f.tell() == 0:
                    f.write(f"# Session archive, {day}\n")
                f.write(f"\n{mark}\n{lcm.base.mask.mask(digest['text']).rstrip()}\n")
        except OSError as exc:
            raise LcmError(f"cannot write {path}: {exc.strerror}", "check the free space and permissions") from None
    return {"session_id": session_id, "archive": path, "written": not present, "level": digest["level"]}


def get(conn, session_id: str) -> dict | None:
    """The stored digest of a session, or None (also on a vault from before digests existed)."""
    try:
        row = conn.execute("SELECT session_id, text, level, created_at FROM digests WHERE session_id = ?",
                           (session_id,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return dict(row) if row else None

