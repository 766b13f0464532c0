"""Import Claude Code transcripts into the lcm vault: every message verbatim, incrementally.

Usage:
  python3 scripts/lcm_ingest.py PATH... [--json] [--db PATH]
  python3 scripts/lcm_ingest.py --all [--json] [--db PATH]

PATH is a transcript (.jsonl) or a directory searched recursively for *.jsonl. --all reads
every transcript under $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects. Each user,
assistant and system entry is stored with its original line byte for byte, deduplicated on
its uuid; a re-run reads only the bytes added since the last one. Malformed lines are
reported (file:line on stderr) and skipped, never fatal.

Examples:
  python3 "$LCM_SCRIPTS/lcm_ingest.py" --all
  python3 "$LCM_SCRIPTS/lcm_ingest.py" ~/.claude/projects/-home-me-proj --json
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import lcm_db
import lcm_transcript as lt
from lcm_db import LcmError

HEAD_BYTES = 4096  # the first line (up to this many bytes) identifies a file across runs
MALFORMED_SHOWN = 20  # malformed lines listed in text mode before "... N more"
PARSE_AHEAD = 2  # files parsed ahead of the writer during bulk ingest (bounds memory)

MESSAGE_COLUMNS = ("uuid, session_id, parent_uuid, type, role, subtype, created_at, cwd, git_branch, model,"
                   " api_message_id, is_sidechain, agent_id, is_meta, content, token_count, raw,"
                   " transcript_path, line_no")
INSERT_MESSAGE = f"INSERT OR IGNORE INTO messages ({MESSAGE_COLUMNS}) VALUES ({','.join('?' * 19)})"
STAGE_MIN_ROWS = 32  # smaller batches (a hook's new turn) insert directly

UPSERT_SESSION = """INSERT INTO sessions (session_id, project, title, transcript_path, model, first_at, last_at)
    VALUES (:sid, :project, :title, :path, :model, :first, :last)
    ON CONFLICT(session_id) DO UPDATE SET
      project = coalesce(sessions.project, excluded.project),
      -- a legacy summary line only fills a missing title; ai/custom titles replace it
      title = CASE WHEN excluded.title IS NULL THEN sessions.title
                   WHEN :title_rank = 0 THEN coalesce(sessions.title, excluded.title)
                   ELSE excluded.title END,
      transcript_path = CASE WHEN :own_file THEN excluded.transcript_path
                             ELSE coalesce(sessions.transcript_path, excluded.transcript_path) END,
      model = coalesce(excluded.model, sessions.model),
      first_at = CASE WHEN sessions.first_at IS NULL OR excluded.first_at < sessions.first_at
                      THEN excluded.first_at ELSE sessions.first_at END,
      last_at = CASE WHEN sessions.last_at IS NULL OR excluded.last_at > sessions.last_at
                     THEN excluded.last_at ELSE sessions.last_at END"""

UPSERT_TRANSCRIPT = """INSERT INTO transcripts (path, session_id, agent_id, byte_offset, size, head_hash,
    malformed_lines, line_count, updated_at) VALUES (?,?,?,?,?,?,?,?,?)
    ON CONFLICT(path) DO UPDATE SET session_id = excluded.session_id, agent_id = excluded.agent_id,
      byte_offset = excluded.byte_offset, size = excluded.size, head_hash = excluded.head_hash,
      malformed_lines = excluded.malformed_lines, line_count = excluded.line_count,
      updated_at = excluded.updated_at"""


def projects_root() -> Path:
    """Where Claude Code keeps transcripts: $CLAUDE_CONFIG_DIR/projects or ~/.claude/projects."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".claude") / "projects"


def _head_hash(head: bytes) -> str:
    cut = head.find(b"\n")
    return hashlib.sha1(head if cut < 0 else head[:cut]).hexdigest()


def _open(path: str):
    """Open a transcript for reading, or raise an LcmError that says why not."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise LcmError(f"no such transcript: {path}", "check the path; transcripts live under ~/.claude/projects") from None
    except OSError as exc:
        raise LcmError(f"cannot read {path}: {exc.strerror}", "check the path and its permissions") from None
    if not os.path.isfile(path):  # a FIFO or device would block or never end
        raise LcmError(f"not a regular file: {path}", "pass a transcript .jsonl file or a directory of them")
    try:
        return open(path, "rb"), st
    except OSError as exc:
        raise LcmError(f"cannot read {path}: {exc.strerror}", "check the file's permissions") from None


class _Session:
    """What one batch of lines says about one session."""
    __slots__ = ("project", "first", "last", "model", "title", "title_rank", "messages")

    def __init__(self):
        self.project = self.first = self.last = self.model = self.title = None
        self.title_rank = -1
        self.messages = 0


class _Batch:
    """The new lines of one transcript, parsed without touching the vault (so bulk ingest can
    parse the next file in a worker thread while SQLite indexes this one)."""

    def __init__(self, path: str, row: dict | None):
        self.path, self.row = path, row
        self.offset = self.line_no = self.malformed_before = self.consumed = 0
        self.head_hash = None
        self.unchanged = False
        self.rows: list[tuple] = []
        self.large: list[tuple] = []  # (row index, blocks, entry) with a block over the threshold
        self.malformed: list[dict] = []
        self.compactions: list[tuple] = []
        self.sessions: dict[str | None, _Session] = {}
        self.msg_sid = row["session_id"] if row else None  # session of the file's first message
        self.guess_sid, self.agent_id, self.is_agent_file = lt.describe_path(path)


def _transcript_row(conn, path: str) -> dict | None:
    row = conn.execute("SELECT * FROM transcripts WHERE path = ?", (path,)).fetchone()
    return dict(row) if row is not None else None


def _read(path: str, row: dict | None, index_thinking: bool, max_chars: int) -> _Batch:
    """Read and parse the bytes of `path` not consumed yet (whole lines only)."""
    batch = _Batch(path, row)
    f, st = _open(path)
    with f:
        batch.head_hash = _head_hash(f.read(HEAD_BYTES))
        if row is not None and st.st_size >= row["size"] and row["head_hash"] == batch.head_hash:
            batch.offset, batch.line_no = row["byte_offset"], row["line_count"]
            batch.malformed_before = row["malformed_lines"]
        # else: new, shrunk or replaced: read from the start (uuid dedup keeps this safe)
        if row is not None and batch.offset == st.st_size == row["byte_offset"] and batch.offset > 0:
            batch.unchanged = True  # nothing new: no write at all (the hook's common case)
            return batch
        f.seek(max(batch.offset - 1, 0))
        data = f.read()
    if batch.offset > 0:
        # the byte before offset tells whether the last consumed line had its newline yet
        continued, data = data[:1] != b"\n", data[1:]
        if continued:  # we took an unterminated final line last time; skip to its end
            cut = data.find(b"\n")
            skip = len(data) if cut < 0 else cut + 1
            batch.offset, data = batch.offset + skip, data[skip:]
    lines = data.split(b"\n")
    tail = lines.pop()  # bytes after the last newline: a line still being written
    batch.consumed = len(data) - len(tail)
    if tail.strip():
        # a complete JSON object cannot be a strict prefix of a longer one, so an unterminated
        # final line that parses is whole (files that simply lack the trailing newline)
        try:
            if isinstance(json.loads(tail), dict):
                lines.append(tail)
                batch.consumed = len(data)
        except (ValueError, RecursionError):
            pass
    _parse(batch, lines, index_thinking, max_chars)
    return batch


def _parse(batch: _Batch, lines: list[bytes], index_thinking: bool, max_chars: int) -> None:
    path, rows, sessions, line_no = batch.path, batch.rows, batch.sessions, batch.line_no
    file_sid = batch.msg_sid if batch.is_agent_file and batch.msg_sid else batch.guess_sid
    fallback_sid = batch.guess_sid or os.path.basename(path)
    loads, text_or_none, estimate = json.loads, lt.text_or_none, lcm_db.estimate_tokens
    for line in lines:
        line_no += 1
        try:
            entry = loads(line)
        except (ValueError, RecursionError):
            if line.strip():
                batch.malformed.append({"path": path, "line": line_no})
            continue
        if type(entry) is not dict:
            continue  # valid JSON but not an entry: nothing to keep
        kind = entry.get("type")
        sid = entry.get("sessionId")
        if not isinstance(sid, str) or not sid:
            sid = None
        elif file_sid is None:
            file_sid = sid
        if kind not in lt.CONVERSATION_TYPES:
            title = lt.title_of(entry)
            if title is not None:  # no sessionId (legacy summary): the file's session, decided later
                s = sessions.setdefault(sid, _Session())
                if title[0] >= s.title_rank:
                    s.title_rank, s.title = title
            continue
        uuid = entry.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            continue
        sid = sid or file_sid or fallback_sid
        blocks = lt.entry_blocks(entry, index_thinking)
        if any(len(b) > max_chars for b in blocks):
            batch.large.append((len(rows), blocks, entry))
        content = "\n".join(b for b in blocks if b)
        role, subtype, model, msg_id = lt.message_fields(entry)
        sidechain = entry.get("isSidechain") is True
        created = text_or_none(entry.get("timestamp"))
        rows.append((uuid, sid, text_or_none(entry.get("parentUuid")), kind, role, subtype, created,
                     text_or_none(entry.get("cwd")), text_or_none(entry.get("gitBranch")), model, msg_id,
                     sidechain, text_or_none(entry.get("agentId")) or batch.agent_id,
                     entry.get("isMeta") is True, content, estimate(content), line, path, line_no))
        s = sessions.get(sid) or sessions.setdefault(sid, _Session())
        s.messages += 1
        if batch.msg_sid is None:
            batch.msg_sid = sid
        if s.project is None:
            s.project = text_or_none(entry.get("cwd"))
        if created:
            if s.first is None or created < s.first:
                s.first = created
            if s.last is None or created > s.last:
                s.last = created
        if model and not sidechain and not model.startswith("<"):  # skip "<synthetic>"
            s.model = model
        if subtype == "compact_boundary":
            meta = entry.get("compactMetadata") if isinstance(entry.get("compactMetadata"), dict) else {}
            batch.compactions.append((sid, uuid, text_or_none(meta.get("trigger")), meta.get("preTokens"),
                                      meta.get("postTokens"), created))
    batch.line_no = line_no
    orphan = sessions.pop(None, None)
    if orphan is not None and (batch.msg_sid or file_sid):
        s = sessions.setdefault(batch.msg_sid or file_sid, _Session())
        if orphan.title_rank >= s.title_rank:
            s.title_rank, s.title = orphan.title_rank, orphan.title


def _externalize_large(conn, batch: _Batch) -> None:
    """Swap each huge block of a message new to the vault for lcm_files' reference text."""
    try:
        import lcm_files
    except ImportError:
        return  # large-file storage not installed: the text stays inline
    done: set[str] = set()
    for index, blocks, entry in batch.large:
        row = batch.rows[index]
        uuid, sid = row[0], row[1]
        if uuid in done or conn.execute("SELECT 1 FROM messages WHERE uuid = ?", (uuid,)).fetchone():
            continue
        done.add(uuid)
        result = entry.get("toolUseResult")
        file = result.get("file") if isinstance(result, dict) else None
        name = (file.get("filePath") if isinstance(file, dict) else None) or (
            result.get("filePath") if isinstance(result, dict) else None)
        for i, text in enumerate(blocks):
            if len(text) > 4 * lcm_db.config("LCM_LARGE_FILE_THRESHOLD"):
                label = name if isinstance(name, str) else f"{entry['type']} block {i} of {uuid}"
                blocks[i] = lcm_files.externalize(conn, session_id=sid, message_uuid=uuid, name=label, content=text)
        content = "\n".join(b for b in blocks if b)
        batch.rows[index] = row[:14] + (content, lcm_db.estimate_tokens(content)) + row[16:]


def _insert_messages(conn, rows: list[tuple]) -> int:
    """INSERT OR IGNORE the rows; returns how many were new.

    FTS5 flushes its pending index data at every statement boundary inside a trigger, so one
    INSERT per row (executemany) makes one tiny index segment per message and then merges them,
    which was 2-3x slower than everything else together. Staging a batch in a temp table and
    moving it with a single INSERT ... SELECT lets the trigger index the whole batch at once.
    """
    if len(rows) < STAGE_MIN_ROWS:
        return conn.executemany(INSERT_MESSAGE, rows).rowcount if rows else 0
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS ingest_stage ({MESSAGE_COLUMNS})")
    conn.executemany(f"INSERT INTO ingest_stage VALUES ({','.join('?' * 19)})", rows)
    added = conn.execute(f"INSERT OR IGNORE INTO messages ({MESSAGE_COLUMNS}) SELECT {MESSAGE_COLUMNS}"
                         " FROM ingest_stage ORDER BY rowid").rowcount
    conn.execute("DELETE FROM ingest_stage")
    return added


def _write(conn, batch: _Batch) -> dict:
    """Store a parsed batch in one transaction; returns this file's counts."""
    row = batch.row
    result = {"path": batch.path, "session_id": batch.msg_sid, "messages_added": 0, "messages_skipped": 0,
              "malformed_lines": 0, "malformed": [],
              "sessions": [row["session_id"]] if row and row["session_id"] else []}
    if batch.unchanged:
        return result
    with _write_lock(conn):
        if batch.large:
            _externalize_large(conn, batch)
        added = _insert_messages(conn, batch.rows)
        if batch.compactions:
            conn.executemany("INSERT OR IGNORE INTO compactions (session_id, source, uuid, trigger, pre_tokens,"
                             " post_tokens, created_at) VALUES (?, 'transcript', ?, ?, ?, ?, ?)", batch.compactions)
        for sid, s in batch.sessions.items():
            if not s.messages:  # a title line alone never creates a session
                if s.title is not None:
                    conn.execute("UPDATE sessions SET title = ? WHERE session_id = ? AND (? > 0 OR title IS NULL)",
                                 (s.title, sid, s.title_rank))
                continue
            conn.execute(UPSERT_SESSION, {
                "sid": sid, "project": s.project, "title": s.title, "title_rank": s.title_rank,
                "path": None if batch.is_agent_file else batch.path,
                "own_file": not batch.is_agent_file and sid == batch.guess_sid,
                "model": s.model, "first": s.first, "last": s.last})
        end = batch.offset + batch.consumed
        conn.execute(UPSERT_TRANSCRIPT, (batch.path, batch.msg_sid, batch.agent_id, end, end, batch.head_hash,
                                         batch.malformed_before + len(batch.malformed), batch.line_no,
                                         lcm_db.now_iso()))
    touched = {sid for sid, s in batch.sessions.items() if s.messages}
    result.update(messages_added=added, messages_skipped=len(batch.rows) - added,
                  malformed_lines=len(batch.malformed), malformed=batch.malformed,
                  sessions=sorted(touched | set(result["sessions"])))
    return result


def _settings() -> tuple[bool, int]:
    # estimate_tokens is ceil(chars / 4), so "more tokens than the threshold" = more than 4x chars
    return lcm_db.config("LCM_INDEX_THINKING"), 4 * lcm_db.config("LCM_LARGE_FILE_THRESHOLD")


def ingest_file(conn, path) -> dict:
    """Store the new complete lines of one transcript; returns this file's counts.

    Keys: path, session_id, messages_added, messages_skipped, malformed_lines,
    malformed ([{path, line}]), sessions (ids seen).
    """
    path = os.path.abspath(os.fspath(path))
    return _write(conn, _read(path, _transcript_row(conn, path), *_settings()))


class _write_lock:
    """BEGIN IMMEDIATE ... COMMIT, unless the caller already holds a transaction."""

    def __init__(self, conn):
        self.conn, self.own = conn, not conn.in_transaction

    def __enter__(self):
        if self.own:
            self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb):
        if self.own:
            self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


def transcript_files(paths) -> list[str]:
    """Expand files and directories (recursively, *.jsonl) into readable transcript files.

    Every path is checked before anything is written, so a typo changes nothing.
    """
    files: dict[str, None] = {}
    for given in paths:
        path = os.path.abspath(os.path.expanduser(os.fspath(given)))
        if os.path.isdir(path):
            for directory, dirnames, names in os.walk(path):
                dirnames.sort()  # <session>.jsonl before <session>/subagents/: parents first
                for name in sorted(names):
                    if name.endswith(".jsonl"):
                        files[os.path.join(directory, name)] = None
        else:
            files[path] = None
    for path in files:
        _open(path)[0].close()
    return list(files)


def ingest_paths(conn, paths, progress: bool = False) -> dict:
    """Ingest transcript files and directories; returns the --json document."""
    started = time.perf_counter()
    files = transcript_files(paths)
    # bulk imports revisit the same FTS and index pages constantly: a 64 MB page cache keeps them hot
    conn.execute("PRAGMA cache_size = -65536")
    # checkpoint every ~64 MB of WAL instead of 4 MB: pages rewritten many times (FTS segments,
    # indexes) are copied back once, and the fsync that each checkpoint costs is paid 16x less often
    conn.execute("PRAGMA wal_autocheckpoint = 16384")
    total = {"files": len(files), "messages_added": 0, "messages_skipped": 0, "malformed_lines": 0,
             "sessions": 0, "seconds": 0.0, "malformed": []}
    sessions: set[str] = set()
    settings = _settings()
    # SQLite releases the GIL while it inserts and FTS-indexes, so a worker thread parses the
    # next files meanwhile: on two cores the JSON work mostly hides behind the indexing
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor
    ahead: deque = deque()

    def write_ready(keep: int) -> None:
        while len(ahead) > keep:
            one = _write(conn, ahead.popleft().result())
            for key in ("messages_added", "messages_skipped", "malformed_lines"):
                total[key] += one[key]
            total["malformed"].extend(one["malformed"])
            sessions.update(one["sessions"])

    with ThreadPoolExecutor(max_workers=1) as pool:
        for path in _progress(files, progress):
            ahead.append(pool.submit(_read, path, _transcript_row(conn, path), *settings))
            write_ready(PARSE_AHEAD)
        write_ready(0)
    conn.execute("PRAGMA wal_autocheckpoint = 1000")  # back to SQLite's default for later writes
    total["sessions"] = len(sessions)
    total["seconds"] = round(time.perf_counter() - started, 3)
    return total


def _progress(files: list[str], wanted: bool):
    """A tqdm bar on stderr for long imports on a terminal; the plain list otherwise."""
    if not wanted or not sys.stderr.isatty():
        return files
    try:
        size = sum(os.path.getsize(p) for p in files)
        if size < 50_000_000:
            return files
        from tqdm import tqdm
    except (ImportError, OSError):
        return files
    return tqdm(files, desc="ingest", unit="file", file=sys.stderr)


def _main(argv):
    p = lcm_db.parser(__doc__)
    p.add_argument("paths", nargs="*", metavar="PATH", help="transcript files or directories")
    p.add_argument("--all", action="store_true", help="every transcript under ~/.claude/projects")
    args = p.parse_args(argv)
    if not args.paths and not args.all:
        p.error("give transcript paths or --all")
    lcm_db.validate_config()
    paths = list(args.paths)
    root = projects_root()
    if args.all:
        if root.is_dir():
            paths.append(root)
        else:
            sys.stderr.write(f"No transcripts yet under {root}\n")
    transcript_files(paths)  # refuse a bad path before the vault is even created
    conn = lcm_db.connect(args.db)
    result = ingest_paths(conn, paths, progress=not args.json)
    if args.json:
        lcm_db.print_json(result)
        return 0
    for bad in result["malformed"][:MALFORMED_SHOWN]:
        sys.stderr.write(f"malformed line skipped: {bad['path']}:{bad['line']}\n")
    if len(result["malformed"]) > MALFORMED_SHOWN:
        sys.stderr.write(f"... {len(result['malformed']) - MALFORMED_SHOWN} more (--json lists them all)\n")
    note = f"; {result['malformed_lines']} malformed lines skipped" if result["malformed_lines"] else ""
    print(f"{result['messages_added']} new messages ({result['messages_skipped']} already stored) from "
          f"{result['files']} files, {result['sessions']} sessions in {result['seconds']}s{note}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm_db.run(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
