"""Resume work: rebuild the state a checkpoint recorded, checked against the vault, in a bounded text.

Reads .lcm-checkpoint.md at the workspace root ($CLAUDE_PROJECT_DIR, else the current
directory), or --checkpoint PATH, or the newest checkpoint the vault keeps for --session ID.
The state (latest requests, open todos, files edited, errors, commands) is re-read from the
vault up to the checkpoint's last message; messages stored after it are summarised with a
warning. The output stays under --max-tokens and ends with the commands that drill further.

Usage:
  python3 scripts/lcm_resume.py [--checkpoint PATH | --session ID] [--max-tokens N] [--json]

Examples:
  python3 "$LCM_SCRIPTS/lcm_resume.py"
  python3 "$LCM_SCRIPTS/lcm_resume.py" --session 7acd37a8-... --max-tokens 1000
  python3 "$LCM_SCRIPTS/lcm_resume.py" --checkpoint ../other/.lcm-checkpoint.md --json
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import lcm.cli
import lcm.config
import lcm.db
import lcm.resolve
import lcm.grants
import lcm.mask
import lcm.text
import lcm.worklog
from lcm.checkpoint import FILE_NAME, FORMAT_VERSION, MARKER, workspace_root
from lcm.errors import LcmError

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


def load(conn, checkpoint: str | None, session: str | None) -> tuple[str, str]:
    """(text, source) of the checkpoint to resume from."""
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
        raise LcmError(f"no checkpoint found for {'session ' + session if session else workspace_root()}",
                       "write one with lcm_checkpoint.py before ending a session, or pass --checkpoint PATH")
    return row["content"], f"vault checkpoint {row['id']}"


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
    """Collects lines while the text stays under a token budget (lcm.config.estimate_tokens)."""

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


def reconstruct(conn, meta: dict, source: str, text: str, warnings: list[str], max_tokens: int) -> dict:
    sid, last = meta["session_id"], meta["last_message_id"]
    state = lcm.worklog.worklog(conn, sid, upto_id=last)
    newer = lcm.worklog.worklog(conn, sid, after_id=last or 0)
    top = lcm.worklog.top_summaries(conn, sid)
    title = conn.execute("SELECT title FROM sessions WHERE session_id = ?", (sid,)).fetchone()["title"]
    story = re.search(r"^## Narrative \(model-written\)\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    footer = ["", '## Drill further (scripts in "$LCM_SCRIPTS")',
              f'- lcm_grep.py "TERM" --session {sid} | lcm_describe.py ID | '
              'lcm_expand_query.py --prompt "QUESTION" --query "TERM"']
    # the footer, and a line naming the sections left out, are always printed
    out = Budget(max_tokens, reserve=sum(len(ln) + 1 for ln in footer) + 100)
    out.add(f"# Resuming session {sid}" + (f": {lcm.text.one_line(title, 80)}" if title else ""))
    out.add(f"From {source}, written {meta['created_at']}; state as of message id {last} "
            f"({state['message_count']} messages).")
    for warning in warnings:
        out.add(f"WARNING: {warning}")
    if newer["message_count"]:
        out.add(f"WARNING: the vault holds {newer['message_count']} newer messages of this session than the checkpoint.")
        out.block("Since the checkpoint", [f"- request: {lcm.text.one_line(r['text'], 300)} ({r['uuid']})"
                                           for r in reversed(newer["user_requests"])]
                  + [f"- edited: {f}" for f in newer["files_edited"] + newer["files_created"]]
                  + [f"- todo [{t['status']}] {t['content']}" for t in newer["open_todos"]])
    secs = lcm.worklog.sections(state, top, list_cap=10, text_cap=300)
    for heading, lines in secs[:5]:
        out.block(heading, lines)
    if story:
        out.block("Narrative (model-written, from the checkpoint)", story.group(1).strip().splitlines())
    for heading, lines in secs[5:]:
        out.block(heading, lines)
    if out.skipped:
        footer[0:0] = ["", lcm.text.one_line(f"Not shown for space: {', '.join(out.skipped)} (raise --max-tokens).", 98)]
    rendered = "\n".join(out.lines + footer) + "\n"
    return {"session_id": sid, "title": title, "checkpoint": {**meta, "source": source},
            "warnings": warnings, "state": state, "newer": newer, "top_summaries": top,
            "text": rendered, "tokens": lcm.config.estimate_tokens(rendered)}


def _main(argv):
    p = lcm.cli.parser(__doc__)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--checkpoint", metavar="PATH", help=f"checkpoint file (default: {FILE_NAME} at the workspace root)")
    which.add_argument("--session", metavar="ID", help="resume from the newest checkpoint the vault keeps for this session")
    p.add_argument("--max-tokens", type=lcm.cli.int_arg(1), default=2000, metavar="N", help="bound of the reconstruction (default 2000)")
    args = p.parse_args(argv)
    if args.max_tokens < 200:
        p.error("--max-tokens must be at least 200")
    conn = lcm.db.connect(args.db, create=False, readonly=True)
    session = lcm.resolve.session(conn, args.session, whole=True) if args.session else None
    text, source = load(conn, args.checkpoint, session)
    meta = parse_checkpoint(text, source)
    if meta.get("session_id") and not session:  # a checkpoint file names its session: the grant must cover it
        lcm.grants.scope(conn).check_session(meta["session_id"], whole=True)
    warnings = check_against_vault(conn, meta, source, lcm.config.db_path(args.db).resolve())
    # a checkpoint written before masking, or edited by hand, may hold secrets: masked before use
    result = lcm.mask.mask_json(reconstruct(conn, meta, source, lcm.mask.mask(text), warnings, args.max_tokens))
    if args.json:
        lcm.cli.print_json(result)
    else:
        sys.stdout.write(result["text"])
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())
