"""Transcript import: every entry stored verbatim, keyed by uuid, read incrementally by byte offset.

The command is scripts/lcm_ingest.py; hooks and other commands import this module.
"""
from __future__ import annotations

import os
import sys
import time

import lcm.config
import lcm.db
import lcm.schema
import lcm.mask
import lcm.indexes
import lcm.order
import lcm.transcript as lt
import lcm.turns
from lcm.errors import LcmError
from lcm.turns import VaultBusy, begin_write, write_lock  # noqa: F401  (VaultBusy: hooks catch it here)

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for annotations only
    from pathlib import Path

PARSE_PROCESS_MIN_FILES = 8  # fewer files are parsed inline: a worker process is not worth starting
GROUP_BYTES = 48 << 20  # bulk ingest: unread transcript bytes per transaction (~14k messages)
GROUPS_AHEAD = 2  # groups parsed ahead of the writer (each waits as a stage file)
WAL_LIMIT = 512 << 20  # bulk ingest lets the WAL grow this large before it waits for a checkpoint
CATCH_UP_BUDGET = 5000  # message ids a hook adds to the derived search indexes beyond its own (a migrated vault)

MESSAGE_COLUMNS = ("uuid, session_id, parent_uuid, type, role, subtype, created_at, cwd, git_branch, model,"
                   " api_message_id, is_sidechain, agent_id, is_meta, content, token_count, raw,"
                   " transcript_path, line_no")
INSERT_MESSAGE = f"INSERT OR IGNORE INTO messages ({MESSAGE_COLUMNS}) VALUES ({','.join('?' * 19)})"
STAGE_MIN_ROWS = 32  # smaller batches (a hook's new turn) insert directly
FTS_BULK_HASHSIZE = 64 << 20  # FTS5 pending-terms buffer during bulk ingest (one group fits)
FTS_HASHSIZE = 1 << 20  # FTS5's default

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
    from pathlib import Path  # here, not at the top: every hook imports this module
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".claude") / "projects"


def _transcript_row(conn, path: str) -> dict | None:
    row = conn.execute("SELECT * FROM transcripts WHERE path = ?", (path,)).fetchone()
    return dict(row) if row is not None else None


def _externalize_large(conn, batch: lt.Batch) -> None:
    """Swap each huge block of a message new to the vault for lcm.files' reference text, in
    batch.rows or, for a batch parsed into a stage file, in the stage."""
    try:
        import lcm.files
    except ImportError:
        return  # large-file storage not installed: the text stays inline
    done: set[str] = set()
    for index, blocks, entry, uuid, sid in batch.large:
        # in the group's stage file, before this batch's own rows (bulk ingest)
        earlier = batch.staged and conn.execute(
            "SELECT 1 FROM lcm_stage.ingest_stage WHERE uuid = ? AND rowid <= ?", (uuid, batch.stage_start)).fetchone()
        if uuid in done or earlier or conn.execute("SELECT 1 FROM messages WHERE uuid = ? UNION ALL SELECT 1"
                                                   " FROM purged WHERE uuid = ?", (uuid, uuid)).fetchone():
            continue  # stored already, or purged (its insert will be refused: no file for it)
        done.add(uuid)
        result = entry.get("toolUseResult")
        file = result.get("file") if isinstance(result, dict) else None
        name = (file.get("filePath") if isinstance(file, dict) else None) or (
            result.get("filePath") if isinstance(result, dict) else None)
        for i, text in enumerate(blocks):
            if len(text) > 4 * lcm.config.get("LCM_LARGE_FILE_THRESHOLD"):
                label = lt.safe_text(name) if isinstance(name, str) else f"{entry['type']} block {i} of {uuid}"
                # the stored copy is searchable text like the rest: masked (the original line keeps the bytes)
                blocks[i] = lcm.files.externalize(conn, session_id=sid, message_uuid=uuid, name=lcm.mask.mask(label),
                                                  content=lcm.mask.mask(text))
        content = lcm.mask.mask(lt.safe_text("\n".join(b for b in blocks if b)))
        if batch.staged:
            conn.execute("UPDATE lcm_stage.ingest_stage SET content = ?, token_count = ? WHERE rowid = ?",
                         (content, lcm.config.estimate_tokens(content), batch.stage_start + index + 1))
        else:
            row = batch.rows[index]
            batch.rows[index] = row[:14] + (content, lcm.config.estimate_tokens(content)) + row[16:]


def _insert_rows(conn, rows: list[tuple]) -> int:
    if len(rows) < STAGE_MIN_ROWS:
        return conn.executemany(INSERT_MESSAGE, rows).rowcount if rows else 0
    _stage(conn, rows)
    return _flush(conn)


def _stage(conn, rows: list[tuple]) -> None:
    """Queue message rows in a temp table; _flush moves them into `messages`.

    FTS5 flushes its pending index data at every statement boundary inside a trigger, so one
    INSERT per row (executemany) writes one tiny index segment per message and then merges them,
    which cost 2-3x everything else together. Rows staged here move with a single
    INSERT ... SELECT, and the trigger indexes the whole batch in one go.
    """
    conn.execute(f"CREATE TABLE IF NOT EXISTS temp.ingest_stage ({MESSAGE_COLUMNS})")
    conn.executemany(f"INSERT INTO temp.ingest_stage VALUES ({','.join('?' * 19)})", rows)


def _flush(conn, bulk: bool = False, rows: tuple[int, int] | None = None) -> int:
    """Move the staged rows (temp.ingest_stage, or with bulk=True the stage file attached as
    lcm_stage; only its rows start+1 .. start+count with rows=(start, count)) into `messages`
    in staging order; returns how many were new.

    bulk=True (inside the group's transaction) indexes the new rows for full-text
    search with one INSERT ... SELECT instead of the per-row trigger: about 30% less writer time
    on a large import. The trigger is dropped and recreated inside the same transaction, so no
    other connection ever sees the vault without it. The stage file is deleted whole afterwards;
    otherwise the stage is emptied here.
    """
    schema = "lcm_stage" if bulk else "temp"
    where = f" WHERE rowid > {rows[0]} AND rowid <= {rows[0] + rows[1]}" if rows else ""
    insert = (f"INSERT OR IGNORE INTO main.messages ({MESSAGE_COLUMNS}) SELECT {MESSAGE_COLUMNS}"
              f" FROM {schema}.ingest_stage{where} ORDER BY rowid")
    trigger = conn.execute("SELECT sql FROM main.sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_ai'"
                           ).fetchone() if bulk else None
    if trigger is None:
        added = conn.execute(insert).rowcount
    else:
        last = conn.execute("SELECT coalesce(max(id), 0) FROM main.messages").fetchone()[0]
        conn.execute("DROP TRIGGER main.messages_fts_ai")
        added = conn.execute(insert).rowcount
        # ids only grow and nothing is deleted: the rows just added are exactly those above `last`
        conn.execute("INSERT INTO messages_fts(rowid, content) SELECT id, content FROM main.messages WHERE id > ?",
                     (last,))
        conn.execute(trigger[0])
    if not bulk:
        conn.execute(f"DELETE FROM {schema}.ingest_stage")
    return added


def _write(conn, batch: lt.Batch, patience: float | None = None) -> dict:
    """Store a parsed batch (one transaction unless the caller holds one); returns its counts.

    A batch whose rows bulk ingest put in a stage file has none here: _store_group moves and
    counts them. patience: see begin_write.
    """
    row = batch.row
    result = {"path": batch.path, "session_id": batch.msg_sid, "messages_added": 0, "messages_skipped": 0,
              "malformed_lines": 0, "malformed": [], "excluded_lines": batch.excluded, "version": batch.version,
              # read from its start and every conversation line was in LCM_EXCLUDE: not counted in `files`
              "excluded_file": bool(batch.excluded) and not (batch.offset or batch.rows or batch.staged),
              "sessions": [row["session_id"]] if row and row["session_id"] else []}
    if batch.unchanged:
        return result
    with write_lock(conn, patience):
        if batch.large:
            _externalize_large(conn, batch)
        conn.execute("SAVEPOINT message_rows")
        try:
            added = _insert_rows(conn, batch.rows)
        except UnicodeEncodeError:  # a lone surrogate in some row's content (lt.safe_text)
            conn.execute("ROLLBACK TO message_rows")
            batch.rows = [lt.safe_row(r) for r in batch.rows]
            added = _insert_rows(conn, batch.rows)
        conn.execute("RELEASE message_rows")
        if batch.agent_calls:
            lcm.order.store_calls(conn, batch.agent_calls)
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
        # another process (a hook, a second import) may have read further while we parsed: our
        # duplicate rows were ignored, and its offset must not move back to ours
        now = conn.execute("SELECT byte_offset FROM transcripts WHERE path = ?", (batch.path,)).fetchone()
        overtaken = now is not None and now[0] > end and (row is None or now[0] != row["byte_offset"])
        if not overtaken:
            conn.execute(UPSERT_TRANSCRIPT, (batch.path, batch.msg_sid, batch.agent_id, end, end,
                                             batch.head_hash, batch.malformed_before + len(batch.malformed),
                                             batch.line_no, lcm.config.now_iso()))
        touched = {sid for sid, s in batch.sessions.items() if s.messages}
        if batch.leaf_titles:
            conn.executemany("INSERT OR IGNORE INTO leaf_titles (leaf_uuid, title) VALUES (?, ?)", batch.leaf_titles)
        if not batch.staged and (added or batch.agent_calls):  # staged rows: after _store_group's flush
            lcm.order.place_threads(conn, touched, recheck=bool(batch.agent_calls))
        if added and not batch.staged:  # a hook's few lines: a bounded share of any backlog too
            lcm.indexes.catch_up(conn, budget=CATCH_UP_BUDGET)
        if not batch.staged and (added or batch.leaf_titles):
            place_leaf_titles(conn)
    result.update(messages_added=added, messages_skipped=len(batch.rows) - added,
                  malformed_lines=len(batch.malformed), malformed=batch.malformed,
                  sessions=sorted(touched | set(result["sessions"])))
    return result


def place_leaf_titles(conn) -> None:
    """Title each session that now holds the leaf of a waiting summary line (table leaf_titles),
    unless it has a title already (its own ai-title or custom title outranks these), and forget
    those lines. A summary line may come before its leaf: it waits here until the leaf is stored.
    Costs one indexed probe when nothing waits (a hook's common case)."""
    if conn.execute("SELECT 1 FROM leaf_titles LIMIT 1").fetchone() is None:
        return
    for sql in lcm.schema.PLACE_LEAF_TITLES:
        conn.execute(sql)


def _settings() -> tuple[bool, int]:
    # estimate_tokens is ceil(chars / 4), so "more tokens than the threshold" = more than 4x chars
    return lcm.config.get("LCM_INDEX_THINKING"), 4 * lcm.config.get("LCM_LARGE_FILE_THRESHOLD")


def ingest_file(conn, path, patience: float | None = None) -> dict:
    """Store the new complete lines of one transcript; returns this file's counts.

    Keys: path, session_id, messages_added, messages_skipped, malformed_lines,
    malformed ([{path, line}]), sessions (ids seen). patience: see begin_write.
    """
    path = os.path.abspath(os.fspath(path))
    return _write(conn, lt.read_new_lines(path, _transcript_row(conn, path), *_settings()), patience)


def ingest_session(conn, transcript_path, patience: float | None = None) -> dict:
    """ingest_file for a session's main transcript and each of its subagent transcripts
    (`<session>/subagents/agent-*.jsonl`, or for CLIs up to 2.0 `agent-*.jsonl` beside the
    session file), so lines a sub-agent wrote after its own hook ran are caught by the next hook
    of the main session. Returns ingest_paths-style totals; a subagent file that cannot be read
    (a FIFO, vanished) is listed in skipped_files.

    With patience (hooks), VaultBusy when another writer holds the vault longer than that: the
    lines stay unread, and the next call stores them (the byte offset did not move).
    """
    path = os.path.abspath(os.fspath(transcript_path))
    total = {"files": 1, "messages_added": 0, "messages_skipped": 0, "malformed_lines": 0,
             "excluded_lines": 0, "malformed": [], "skipped_files": []}
    deadline = None if patience is None else time.monotonic() + patience

    def one(p: str) -> dict:
        result = ingest_file(conn, p, None if deadline is None else max(deadline - time.monotonic(), 0.05))
        for key in ("messages_added", "messages_skipped", "malformed_lines", "excluded_lines"):
            total[key] += result[key]
        total["malformed"] += result["malformed"]
        return result

    main = one(path)
    paths = []
    subagents = os.path.join(path[:-6] if path.endswith(".jsonl") else path, "subagents")
    if os.path.isdir(subagents):
        paths += sorted(os.path.join(subagents, n) for n in os.listdir(subagents)
                        if n.startswith("agent-") and n.endswith(".jsonl"))
    if _older_layout(main) and os.path.basename(os.path.dirname(path)) != "subagents":
        paths += [p for p in changed_agents_beside(conn, path) if p != path]
    total["files"] += len(paths)
    for p in paths:
        try:
            one(p)
        except LcmError as exc:
            if isinstance(exc, VaultBusy):
                raise
            total["skipped_files"].append({"path": p, "reason": exc.message})
    return total


def _older_layout(result: dict) -> bool:
    """Whether the new lines just read come from a CLI that kept sub-agent transcripts beside
    the session file (up to 2.0; from 2.1 they live in `<session>/subagents/`). A turn with no
    new line says nothing: its agents' lines are complete before the turn's own (a Task result
    comes after the agent's last line), so the next turn's hook finds them."""
    if not result.get("messages_added") and not result.get("messages_skipped"):
        return False
    version = result.get("version")
    try:
        return tuple(int(part) for part in version.split(".")[:2]) < (2, 1)
    except (AttributeError, ValueError):
        return True  # no version, or one we cannot read: look, it costs a directory listing


def changed_agents_beside(conn, path: str) -> list[str]:
    """The older layout's sub-agent transcripts (`agent-*.jsonl` beside the session file) that
    are new or changed since the vault read them. Their lines name their own session, so one
    that belongs to another session of the project is stored there, which is right too.

    Cheap enough for every hook: one directory listing, one range query on `transcripts` and a
    stat per agent file; an unchanged file is never opened.
    """
    directory = os.path.dirname(path)
    try:
        with os.scandir(directory) as it:
            agents = [e for e in it if e.name.startswith("agent-") and e.name.endswith(".jsonl")]
    except OSError:
        return []
    if not agents:
        return []
    prefix = os.path.join(directory, "agent-")
    known = dict(conn.execute("SELECT path, size FROM transcripts WHERE path >= ? AND path < ?",
                              (prefix, prefix + "\U0010ffff")).fetchall())
    changed = []
    for entry in agents:
        try:
            if entry.is_file() and known.get(entry.path) != entry.stat().st_size:  # a FIFO is never opened
                changed.append(entry.path)
        except OSError:
            continue  # vanished meanwhile
    return sorted(changed)


def transcript_files(paths, skipped: list | None = None) -> list[str]:
    """Expand files and directories (recursively, *.jsonl) into readable transcript files.

    Every path given is checked before anything is written, so a typo changes nothing. A file
    found inside a directory that is no regular file (a dangling symlink, a FIFO) is left out,
    and listed in `skipped` ({path, reason}) when given: one odd file never stops the import.
    The reason names the file.
    """
    import stat
    files: dict[str, None] = {}
    for given in paths:
        path = os.path.abspath(os.path.expanduser(os.fspath(given)))
        if not os.path.isdir(path):
            lt.open_transcript(path)[0].close()
            files[path] = None
            continue
        for directory, dirnames, names in os.walk(path):
            dirnames.sort()  # <session>.jsonl before <session>/subagents/: parents first
            # sessions before the agent-*.jsonl beside them (early CLIs): a run finds its call
            for name in sorted(names, key=lambda n: (n.startswith("agent-"), n)):
                if not name.endswith(".jsonl"):
                    continue
                found = os.path.join(directory, name)
                shown = lt.safe_text(found)  # a name that is not UTF-8 could not be stored
                try:
                    regular = stat.S_ISREG(os.stat(found).st_mode) and shown == found
                    reason = f"not a regular file: {shown}" if shown == found else f"file name is not UTF-8: {shown}"
                except OSError as exc:
                    regular = False
                    reason = (f"dangling symlink: {shown}" if os.path.islink(found)
                              else f"cannot read {shown}: {exc.strerror}")
                if regular:
                    files[found] = None
                elif skipped is not None:
                    skipped.append({"path": shown, "reason": reason})
    return list(files)


def ingest_paths(conn, paths, progress: bool = False) -> dict:
    """Ingest transcript files and directories; returns the --json document.

    Files go in groups of about GROUP_BYTES, one transaction each. A parser process (see
    _parser_pool) turns each group into a stage file while this process stores the one before.
    """
    started = time.perf_counter()
    skipped: list[dict] = []
    files = transcript_files(paths, skipped)
    total = {"files": len(files), "messages_added": 0, "messages_skipped": 0, "malformed_lines": 0,
             "sessions": 0, "seconds": 0.0, "excluded_files": 0, "excluded_lines": 0, "malformed": [],
             "skipped_files": skipped}
    sessions: set[str] = set()
    settings = _settings()
    own = not conn.in_transaction
    if not own:  # the caller's transaction: no ATTACH inside it, so file by file
        for path in files:
            try:
                batch = lt.read_new_lines(path, _transcript_row(conn, path), *settings)
            except LcmError as exc:
                skipped.append({"path": path, "reason": exc.message})
                continue
            _count(total, sessions, _write(conn, batch))
        total["files"] -= total["excluded_files"]
        total["sessions"] = len(sessions)
        total["seconds"] = round(time.perf_counter() - started, 3)
        return total
    groups, sizes = _plan_groups(conn, files)
    bar = _progress(len(files), sum(sizes), progress)
    stage_dir = _stage_dir(sizes)
    # bulk imports revisit the same FTS, uuid-index and b-tree pages constantly: up to 256 MB of
    # page cache keeps them hot (a 1M-message vault's uuid index alone is ~60 MB)
    conn.execute("PRAGMA cache_size = -262144")
    checkpointer = _Checkpointer(conn)
    turns = lcm.turns.Turns(conn)
    fts = lcm.schema.fts_enabled(conn)
    from collections import deque
    ahead: deque = deque()
    seen = 0
    try:
        if fts:
            # FTS5 writes its in-memory terms out as a new index segment whenever they pass 1 MB;
            # one segment per group instead means far less merging later (-12% at 200k messages).
            # Restored below: the setting is stored in the vault.
            _set_fts_hashsize(conn, FTS_BULK_HASHSIZE)
        with _parser_pool(len(files)) as pool:
            for number, group in enumerate(groups):
                stage = os.path.join(stage_dir, f"group-{number}.db")
                # offsets as of now: a parallel import or a hook may have read these files since
                group = [(path, _transcript_row(conn, path)) for path, _ in group]
                ahead.append((pool.submit(_parse_group, group, settings, stage), len(group)))
                while len(ahead) > (GROUPS_AHEAD if number < len(groups) - 1 else 0):
                    future, count = ahead.popleft()
                    seen += _store_group(conn, *future.result(), total, sessions, turns)
                    checkpointer.poke()
                    if bar:
                        bar.update(count)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        if any(r[1] == "lcm_stage" for r in conn.execute("PRAGMA database_list")):
            conn.execute("DETACH DATABASE lcm_stage")
        import shutil
        shutil.rmtree(stage_dir, ignore_errors=True)
        if bar:
            bar.close()
        if fts:
            _set_fts_hashsize(conn, FTS_HASHSIZE)
        turns.close()
        checkpointer.close()
    total["messages_skipped"] = seen - total["messages_added"]
    total["files"] -= total["excluded_files"]
    conn.execute("PRAGMA cache_size = -2000")  # back to SQLite's default for later writes
    total["sessions"] = len(sessions)
    total["seconds"] = round(time.perf_counter() - started, 3)
    return total


def _set_fts_hashsize(conn, size: int) -> None:
    """A write like any other: in turn with the vault's other writers."""
    begin_write(conn)
    try:
        conn.execute(f"INSERT INTO messages_fts(messages_fts, rank) VALUES ('hashsize', {size})")
    finally:
        conn.execute("COMMIT")


def _count(total: dict, sessions: set, one: dict) -> None:
    """Add one file's _write result to the ingest totals."""
    for key in ("messages_added", "messages_skipped", "malformed_lines", "excluded_lines"):
        total[key] += one[key]
    total["excluded_files"] += one["excluded_file"]
    total["malformed"].extend(one["malformed"])
    sessions.update(one["sessions"])


def _plan_groups(conn, files: list[str]) -> tuple[list[list[tuple]], list[int]]:
    """Consecutive files in groups of at least GROUP_BYTES unread bytes (the last may be
    smaller): ([[(path, its transcripts row or None), ...], ...], unread bytes of each group)."""
    groups, sizes, current, size = [], [], [], 0
    for i, path in enumerate(files):
        known = _transcript_row(conn, path)
        try:
            size += max(os.path.getsize(path) - (known["byte_offset"] if known else 0), 0)
        except OSError:
            pass  # vanished or unreadable: the parser reports it
        current.append((path, known))
        if size >= GROUP_BYTES or i == len(files) - 1:
            groups.append(current)
            sizes.append(size)
            current, size = [], 0
    return groups, sizes


def _stage_dir(sizes: list[int]) -> str:
    """A new private (0700) directory for the stage files, which hold transcript lines.

    RAM-backed /dev/shm when it has room for the largest groups in flight: a stage file lives
    for seconds, and writing it to disk first cost a quarter of a large import's time. Else the
    system's temp directory.
    """
    import tempfile
    prefix = f"{lcm.db.STAGE_PREFIX}{os.getpid()}-"
    need = 2 * sum(sorted(sizes)[-(GROUPS_AHEAD + 2):])  # a stage file is ~1.4x its transcripts
    try:
        shm = os.statvfs("/dev/shm")  # stale stages there went at connect (lcm.db.remove_stale_stages)
        if shm.f_bavail * shm.f_frsize > need + (256 << 20):
            return tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
    except OSError:
        pass  # no /dev/shm (macOS, Windows) or not usable
    lcm.db.remove_stale_stages(tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=prefix)


def _parse_group(group: list[tuple], settings: tuple, stage: str) -> tuple[list, str | None]:
    """Parse a group's transcripts (in the parser process) and write their message rows to the
    stage file `stage`, so the writer moves them with one INSERT ... SELECT instead of receiving
    and binding each row itself.

    Returns (per file one Batch, rows moved out, or {path, reason} when it could not be read;
    the stage path or None when no file had a new message). An error that stops the import
    travels as a tuple (message, hint): its hint would not survive the trip back from a worker
    process as an exception.
    """
    import sqlite3
    out: list = []
    staged = 0
    db = None
    try:
        for path, known in group:
            if _PARENT is not None and os.getppid() != _PARENT:
                os._exit(1)  # the import is gone: nobody will read what we parse
            try:
                batch = lt.read_new_lines(path, known, *settings)
            except LcmError as exc:  # vanished, unreadable, swapped for a FIFO: skipped, reported
                out.append({"path": path, "reason": exc.message})
                continue
            if batch.rows:
                if db is None:
                    # a scratch file: no journal, no fsync (a crash loses nothing stored)
                    db = sqlite3.connect(stage, isolation_level=None)
                    db.execute("PRAGMA journal_mode = OFF")
                    db.execute("PRAGMA synchronous = OFF")
                    db.execute(f"CREATE TABLE ingest_stage ({MESSAGE_COLUMNS})")
                    db.execute("BEGIN")
                try:
                    db.executemany(f"INSERT INTO ingest_stage VALUES ({','.join('?' * 19)})", batch.rows)
                except UnicodeEncodeError:  # a lone surrogate in some row's content (lt.safe_text)
                    db.execute("DELETE FROM ingest_stage WHERE rowid > ?", (staged,))
                    batch.rows = [lt.safe_row(r) for r in batch.rows]
                    db.executemany(f"INSERT INTO ingest_stage VALUES ({','.join('?' * 19)})", batch.rows)
                batch.stage_start, batch.staged = staged, len(batch.rows)
                staged += len(batch.rows)
                batch.rows = []
            out.append(batch)
        if db is not None:
            db.execute("COMMIT")
    except sqlite3.Error as exc:  # a full /dev/shm or temp directory, most likely
        out.append((f"cannot write the import's stage file {stage}: {exc}",
                    "free some space there (or point TMPDIR elsewhere) and run the import again: "
                    "what it stored so far is kept, and it goes on from there"))
    finally:
        if db is not None:
            db.close()
    return out, stage if staged else None


def _store_group(conn, batches: list, stage: str | None, total: dict, sessions: set, turns: lcm.turns.Turns) -> int:
    """Write one parsed group in one transaction; returns how many messages it held.

    A file's rows, offset and session rows commit together; when a hook knocks (see lcm.turns.Turns),
    the transaction ends after the file at hand and the hook gets its turn before the next.
    Otherwise the FTS index gets one flush and one segment per group."""
    for batch in batches:
        if isinstance(batch, tuple):  # an LcmError from the parser: the import stops here
            raise LcmError(*batch)
    total["skipped_files"] += [b for b in batches if isinstance(b, dict)]
    batches = [b for b in batches if not isinstance(b, dict)]
    if stage:
        conn.execute("ATTACH DATABASE ? AS lcm_stage", (stage,))
    try:
        seen, flushed, recheck = 0, set(), False
        for batch in batches:
            if not batch.unchanged and not conn.in_transaction:
                begin_write(conn, turns=turns)
            _count(total, sessions, _write(conn, batch))
            if batch.staged:
                total["messages_added"] += _flush(conn, bulk=True, rows=(batch.stage_start, batch.staged))
                flushed.update(sid for sid in batch.sessions if sid)
            recheck = recheck or bool(batch.agent_calls)
            seen += batch.staged
            if conn.in_transaction and turns.knocking():
                _commit_placed(conn, flushed, recheck)
                flushed, recheck = set(), False
        if conn.in_transaction:
            _commit_placed(conn, flushed, recheck)
    finally:
        if stage:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.execute("DETACH DATABASE lcm_stage")
            os.remove(stage)
    return seen


def _commit_placed(conn, flushed: set, recheck: bool) -> None:
    """Place the sub-agent runs of the sessions whose staged rows were moved in (lcm.order), then
    commit: no reader sees a message without its place."""
    if flushed:
        lcm.order.place_threads(conn, flushed, recheck=recheck)
    lcm.indexes.catch_up(conn)  # the search indexes derived from the messages (lcm/indexes.py)
    place_leaf_titles(conn)
    conn.execute("COMMIT")


class _Checkpointer:
    """Copies committed pages from the WAL into the vault file on a thread of its own.

    SQLite's automatic checkpoint runs inside the writer's COMMIT; during a large import that was
    about a third of the writer's time (every page is copied a second time, then fsynced). As
    SQLite's WAL documentation suggests, bulk ingest turns it off and checkpoints on another
    thread with its own connection: SQLite releases the GIL, so the copy overlaps the next
    group's inserts. PASSIVE never blocks the writer; a checkpoint that fails or falls behind
    only leaves frames for the next one. Started at the first commit, after the parser process
    has been forked (forking a process that runs threads is unsafe).
    """

    def __init__(self, conn):
        self.conn = conn
        self.path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
        wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        self.thread = None
        self.usable = bool(self.path) and wal
        self.page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        self.frames = 0  # WAL frames the last checkpoint saw (the WAL's length in pages)
        # without the thread: checkpoint every ~64 MB of WAL instead of 4 MB (fewer fsyncs)
        conn.execute(f"PRAGMA wal_autocheckpoint = {0 if self.usable else 16384}")

    def poke(self) -> None:
        """A group was committed: checkpoint it (in the background)."""
        if not self.usable:
            return
        if self.thread is None:
            import threading
            self.wake, self.idle, self.done = threading.Event(), threading.Event(), False
            self.thread = threading.Thread(target=self._run, name="lcm-checkpoint", daemon=True)
            self.thread.start()
        self.idle.clear()
        self.wake.set()
        # The WAL restarts from its beginning only if a write transaction starts after a complete
        # checkpoint, which never happens while checkpoints trail the writer: past WAL_LIMIT,
        # wait for this one, so the WAL is reused instead of growing as large as the import.
        if self.frames * self.page_size > WAL_LIMIT:
            self.idle.wait()
            self.frames = 0  # all checkpointed: the writer's next transaction restarts the WAL

    def _run(self) -> None:
        import sqlite3
        conn = None
        try:
            conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
            while True:
                self.wake.wait()
                self.wake.clear()
                self.frames = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0][1]  # all: no open statement
                if not self.wake.is_set():
                    self.idle.set()
                if self.done:
                    return
        except sqlite3.Error:
            pass  # the writer's autocheckpoint, restored by close(), catches up later
        finally:
            self.usable = False  # no more pokes: nothing would answer them
            self.idle.set()
            if conn is not None:
                conn.close()

    def close(self) -> None:
        """Wait for a last checkpoint of everything committed, then restore SQLite's default."""
        if self.thread is not None:
            self.done = True
            self.wake.set()
            self.thread.join()
        self.conn.execute("PRAGMA wal_autocheckpoint = 1000")


class _Inline:
    """An executor that runs each call at once (the fallback of _parser_pool)."""

    class _Done:
        def __init__(self, value):
            self.value = value

        def result(self):
            return self.value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def submit(self, fn, *args):
        return self._Done(fn(*args))


_PARENT: int | None = None  # in the parser process: the import's pid


def _die_with_parent(parent: int) -> None:
    """Start of the parser process: die with the import, even when it is SIGKILLed, instead of
    waiting on its pipe forever with the vault open (Linux: PR_SET_PDEATHSIG; elsewhere
    _parse_group notices the new parent before each file)."""
    global _PARENT
    _PARENT = parent
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def _parser_pool(files: int):
    """Where transcripts are parsed during bulk ingest: one forked worker process, so JSON
    parsing runs on another core while this process inserts and FTS-indexes (a thread would
    fight the indexing for the GIL and was slower than no thread at all). Inline off Linux or
    when there is too little to gain."""
    import multiprocessing
    # fork is cheap and needs nothing importable; only Linux forks safely (macOS system libraries
    # may crash in a forked child)
    if files < PARSE_PROCESS_MIN_FILES or not sys.platform.startswith("linux"):
        return _Inline()
    from concurrent.futures import ProcessPoolExecutor
    return ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                               initializer=_die_with_parent, initargs=(os.getpid(),))


def _progress(files: int, unread: int, wanted: bool):
    """A tqdm bar (in files) on stderr for long imports (50 MB unread) on a terminal, else None."""
    if not wanted or unread < 50_000_000 or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=files, desc="ingest", unit="file", file=sys.stderr)
