"""Transcript import: every entry stored verbatim, keyed by uuid, read incrementally by byte offset.

The command is scripts/lcm_ingest.py; hooks and other commands import this module.
"""
from __future__ import annotations

import os
import time

import lcm.base.config
import lcm.vault.db
import lcm.vault.schema
import lcm.vault.squeeze
import lcm.base.mask
import lcm.capture.indexes
import lcm.capture.tokens
import lcm.vault.order
import lcm.base.text
import lcm.capture.transcript
from lcm.base.errors import LcmError
from lcm.vault.db import VaultBusy, write_lock

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for annotations only
    from pathlib import Path

CATCH_UP_BUDGET = 5000  # message ids a hook adds to the derived search indexes beyond its own (a migrated vault)

MESSAGE_COLUMNS = ("uuid, session_id, parent_uuid, type, role, subtype, created_at, cwd, git_branch, model,"
                   " api_message_id, is_sidechain, agent_id, is_meta, content, token_count, raw,"
                   " transcript_path, line_no")
INSERT_MESSAGE = f"INSERT OR IGNORE INTO messages ({MESSAGE_COLUMNS}) VALUES ({','.join('?' * 19)})"
STAGE_MIN_ROWS = 32  # smaller batches (a hook's new turn) insert directly
# a bulk import's stage file has these too (lcm.capture.bulk._parse_group): `plain`, the text of a
# row whose `content` is compressed (what the full-text index takes); `stub`, block_no and
# block_pos, where its line sits among the stage's blocks (lcm_stage.stage_blocks), when packed
# (its `raw` is then the stub: the line is in the block only)
STAGE_COLUMNS = MESSAGE_COLUMNS + ", plain, stub, block_no, block_pos"

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


def transcript_row(conn, path: str) -> dict | None:
    row = conn.execute("SELECT * FROM transcripts WHERE path = ?", (path,)).fetchone()
    return dict(row) if row is not None else None


def _externalize_large(conn, batch: lcm.capture.transcript.Batch) -> None:
    """Swap each huge block of a message new to the vault for lcm.capture.files' reference text, in
    batch.rows or, for a batch parsed into a stage file, in the stage."""
    try:
        import lcm.capture.files
    except ImportError:
        return  # large-file storage not installed: the text stays inline
    done: set[str] = set()
    encoder = lcm.vault.squeeze.encoder(conn) if batch.staged else None
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
            if len(text) > 4 * lcm.base.config.get("LCM_LARGE_FILE_THRESHOLD"):
                label = lcm.base.text.safe_text(name) if isinstance(name, str) else f"{entry['type']} block {i} of {uuid}"
                # the stored copy is searchable text like the rest: masked (the original line keeps the bytes)
                blocks[i] = lcm.capture.files.externalize(conn, session_id=sid, message_uuid=uuid, name=lcm.base.mask.mask(label),
                                                  content=lcm.base.mask.mask(text))
        content = lcm.base.mask.mask(lcm.base.text.safe_text("\n".join(b for b in blocks if b)))
        if batch.staged:
            rowid, tokens = batch.stage_start + index + 1, lcm.base.config.estimate_tokens(content)
            role, is_meta = conn.execute("SELECT role, is_meta FROM lcm_stage.ingest_stage WHERE rowid = ?",
                                         (rowid,)).fetchone()
            stored = encoder.row(role, is_meta, tokens, content) if encoder is not None else content
            conn.execute("UPDATE lcm_stage.ingest_stage SET content = ?, token_count = ?, plain = ? WHERE rowid = ?",
                         (stored, tokens, None if stored is content else content, rowid))
            at = lcm.capture.indexes.first_cjk(content)  # the parser's findings were about the text before
            batch.cjk[index] = lcm.capture.indexes.cjk_runs(content, at) if at >= 0 else ""
            batch.talk[index] = lcm.capture.indexes.opening(content)
        else:
            row = batch.rows[index]
            batch.rows[index] = row[:14] + (content, lcm.base.config.estimate_tokens(content)) + row[16:]


def _insert_rows(conn, rows: list[tuple]) -> int:
    if not rows:
        return 0
    if len(rows) < STAGE_MIN_ROWS:
        # one statement, so the full-text index takes the turn as one segment, as from the stage:
        # executemany made one per row and merged them every few turns (Stop, bench/hooks.py's turn
        # of 4 lines: 23 WAL frames to checkpoint where it wrote 23-29, and no merge of 16 segments)
        more = f",({','.join('?' * 19)})" * (len(rows) - 1)
        return conn.execute(INSERT_MESSAGE + more, [value for row in rows for value in row]).rowcount
    _stage(conn, rows)
    return flush_staged(conn)


def _stage(conn, rows: list[tuple]) -> None:
    """Queue message rows in a temp table; _flush moves them into `messages`.

    FTS5 flushes its pending index data at every statement boundary inside a trigger, so one
    INSERT per row (executemany) writes one tiny index segment per message and then merges them,
    which cost 2-3x everything else together. Rows staged here move with a single
    INSERT ... SELECT, and the trigger indexes the whole batch in one go.
    """
    conn.execute(f"CREATE TABLE IF NOT EXISTS temp.ingest_stage ({MESSAGE_COLUMNS})")
    conn.executemany(f"INSERT INTO temp.ingest_stage VALUES ({','.join('?' * 19)})", rows)


def flush_staged(conn, bulk: bool = False, rows: tuple[int, int] | None = None) -> int:
    """Move the staged rows (temp.ingest_stage, or with bulk=True the stage file attached as
    lcm_stage; only its rows start+1 .. start+count with rows=(start, count)) into `messages`
    in staging order; returns how many were new.

    bulk=True (inside the group's transaction) indexes the new rows for full-text
    search with one INSERT ... SELECT instead of the per-row trigger: about 30% less writer time
    on a large import. The trigger is dropped and recreated inside the same transaction, so no
    other connection ever sees the vault without it. The stage file is deleted whole afterwards;
    otherwise the stage is emptied here.
    """
    if bulk and rows:
        return _flush_bulk(conn, *rows)
    schema = "lcm_stage" if bulk else "temp"
    where = f" WHERE rowid > {rows[0]} AND rowid <= {rows[0] + rows[1]}" if rows else ""
    insert = (f"INSERT OR IGNORE INTO main.messages ({MESSAGE_COLUMNS}) SELECT {MESSAGE_COLUMNS}"
              f" FROM {schema}.ingest_stage{where} ORDER BY rowid")
    added = conn.execute(insert).rowcount
    if not bulk:
        conn.execute(f"DELETE FROM {schema}.ingest_stage")
    return added


# the stage's columns as they go into `messages`: a packed line leaves its stub, and its path
# lives in its block (lcm.vault.store.pack_rows)
_BULK_SELECT = MESSAGE_COLUMNS.replace(" raw,", " coalesce(stub, raw),").replace(
    " transcript_path,", " CASE WHEN stub IS NULL THEN transcript_path END,")


def _flush_bulk(conn, start: int, count: int) -> int:
    """flush_staged of a bulk import's stage rows start+1 .. start+count: the rows with their
    lines already packed into the stage's blocks and their text compressed (by the parser
    process), the blocks, and their full-text entries from the plain text (no decoding).

    Ids only grow and nothing else writes meanwhile: when every row is new, the k-th staged row
    gets id last+k, which is how blocks and index entries find their rows. When some were
    refused (stored already, purged, or a uuid twice), the stage's blocks are dropped (no block
    holds a line whose row is not stored) and the new rows' lines are packed again without them
    (_pack_accepted)."""
    where = f"rowid > {start} AND rowid <= {start + count}"
    last = conn.execute("SELECT coalesce(max(id), 0) FROM main.messages").fetchone()[0]
    seq = conn.execute("SELECT coalesce(max(id), 0) FROM main.blocks").fetchone()[0]
    seq = max(seq, (conn.execute("SELECT seq FROM main.sqlite_sequence WHERE name = 'blocks'").fetchone() or (0,))[0])
    first_no = conn.execute(f"SELECT min(block_no) FROM lcm_stage.ingest_stage WHERE {where}").fetchone()[0] or 1
    shift = seq + 1 - first_no  # block_no -> blocks.id
    trigger = conn.execute("SELECT sql FROM main.sqlite_master WHERE type = 'trigger' AND name = 'messages_fts_ai'"
                           ).fetchone()
    if trigger is not None:
        conn.execute("DROP TRIGGER main.messages_fts_ai")
    added = conn.execute(f"INSERT OR IGNORE INTO main.messages ({MESSAGE_COLUMNS}, block_id, block_pos) SELECT"
                         f" {_BULK_SELECT}, block_no + {shift}, block_pos FROM lcm_stage.ingest_stage WHERE {where}"
                         f" ORDER BY rowid").rowcount
    if added == count:
        conn.execute(f"INSERT INTO main.blocks (id, session_id, transcript_path, first_id, last_id, line_count,"
                     f" line_bytes, data) SELECT no + {shift}, session_id, transcript_path, first_row - {start} + {last},"
                     f" last_row - {start} + {last}, line_count, line_bytes, data FROM lcm_stage.stage_blocks"
                     f" WHERE first_row > {start} AND first_row <= {start + count} ORDER BY no")
        if trigger is not None:
            conn.execute(f"INSERT INTO messages_fts(rowid, content) SELECT rowid - {start} + {last},"
                         f" coalesce(plain, content) FROM lcm_stage.ingest_stage WHERE {where}")
    else:
        _pack_accepted(conn, where, last)
        if trigger is not None:
            conn.execute("INSERT INTO messages_fts(rowid, content) SELECT id, lcm_text(content) FROM main.messages"
                         " WHERE id > ?", (last,))
    if trigger is not None:
        conn.execute(trigger[0])
    return added


def _pack_accepted(conn, where: str, last: int) -> None:
    """After a bulk flush that refused some staged rows (stored already, purged, or a uuid twice:
    a resumed session's file repeats the lines of the one before): the stage's blocks also hold
    the refused rows' lines, so the new rows' lines go into blocks of their own here, by file and
    session as the parser packs them. A first import then leaves no line plain and no free page
    behind (the rows were written with their stubs). Lines the stage left plain stay plain."""
    import lcm.vault.pack
    import lcm.vault.store
    lines: dict = {}
    blocks_: dict = {}  # a stage block's lines: the stage keeps a packed line there only
    for uuid, raw, path, no, pos in conn.execute(f"SELECT uuid, raw, transcript_path, block_no, block_pos"
                                                 f" FROM lcm_stage.ingest_stage WHERE {where} ORDER BY rowid"):
        if uuid in lines:
            continue  # a uuid staged twice is stored as first staged
        if no is not None:
            if no not in blocks_:
                blocks_[no] = lcm.vault.store.decode_block(conn.execute(
                    "SELECT data FROM lcm_stage.stage_blocks WHERE no = ?", (no,)).fetchone()[0])
            raw = blocks_[no][pos]
        lines[uuid] = (raw, path)
    stored = conn.execute("SELECT id, uuid, session_id FROM main.messages WHERE id > ? AND block_id IS NOT NULL"
                          " ORDER BY id", (last,)).fetchall()
    for rows in lcm.vault.pack.cut_blocks(((path, sid), len(raw), (mid, sid, path, raw))
                                          for mid, uuid, sid in stored for raw, path in (lines[uuid],)):
        lcm.vault.store.pack_rows(conn, rows)


def write_batch(conn, batch: lcm.capture.transcript.Batch, patience: float | None = None,
                from_file: bool = True, usage_later: bool = False) -> dict:
    """Store a parsed batch (one transaction unless the caller holds one); returns its counts.

    A batch whose rows bulk ingest put in a stage file has none here: _store_group moves and
    counts them. patience: see begin_write. from_file=False: lines that came another way (a
    bundle, lcm.readers.bundle) under the path of the transcript they were read from on another
    machine: no byte offset is kept for that path, and a session's own transcript stays as it was.
    usage_later (hooks): the lines' token counts are read later (lcm.capture.tokens.later).
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
        if usage_later and batch.usage and not batch.staged:
            lcm.capture.tokens.later(conn)
        conn.execute("SAVEPOINT message_rows")
        try:
            added = _insert_rows(conn, batch.rows)
        except UnicodeEncodeError:  # a lone surrogate in some row's content (lcm.base.text.safe_text)
            conn.execute("ROLLBACK TO message_rows")
            batch.rows = [lcm.capture.transcript.safe_row(r) for r in batch.rows]
            added = _insert_rows(conn, batch.rows)
        conn.execute("RELEASE message_rows")
        if not batch.staged and not usage_later:  # staged rows: after _store_group's flush
            lcm.capture.tokens.store(conn, batch.usage)
        if batch.agent_calls:
            lcm.vault.order.store_calls(conn, batch.agent_calls)
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
                "path": None if batch.is_agent_file or not from_file else batch.path,
                "own_file": from_file and not batch.is_agent_file and sid == batch.guess_sid,
                "model": s.model, "first": s.first, "last": s.last})
        end = batch.offset + batch.consumed
        # another process (a hook, a second import) may have read further while we parsed: our
        # duplicate rows were ignored, and its offset must not move back to ours
        now = conn.execute("SELECT byte_offset FROM transcripts WHERE path = ?", (batch.path,)).fetchone()
        overtaken = now is not None and now[0] > end and (row is None or now[0] != row["byte_offset"])
        if not overtaken and from_file:
            conn.execute(UPSERT_TRANSCRIPT, (batch.path, batch.msg_sid, batch.agent_id, end, end,
                                             batch.head_hash, batch.malformed_before + len(batch.malformed),
                                             batch.line_no, lcm.base.config.now_iso()))
        touched = {sid for sid, s in batch.sessions.items() if s.messages}
        if batch.leaf_titles:
            conn.executemany("INSERT OR IGNORE INTO leaf_titles (leaf_uuid, title) VALUES (?, ?)", batch.leaf_titles)
        if not batch.staged and (added or batch.agent_calls):  # staged rows: after _store_group's flush
            lcm.vault.order.place_threads(conn, touched, recheck=bool(batch.agent_calls))
        if added and not batch.staged:  # a hook's few lines: a bounded share of any backlog too
            lcm.capture.indexes.catch_up(conn, budget=CATCH_UP_BUDGET)
            # (not the usage of lines stored before the usage table: reading it costs a hook ~140 ms
            # a turn on a converted 1M-message vault; the detached packing run reads it instead)
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
    for sql in lcm.vault.schema.PLACE_LEAF_TITLES:
        conn.execute(sql)


def settings() -> tuple[bool, int]:
    # estimate_tokens is ceil(chars / 4), so "more tokens than the threshold" = more than 4x chars
    return lcm.base.config.get("LCM_INDEX_THINKING"), 4 * lcm.base.config.get("LCM_LARGE_FILE_THRESHOLD")


def ingest_file(conn, path, patience: float | None = None, usage_later: bool = False) -> dict:
    """Store the new complete lines of one transcript; returns this file's counts.

    Keys: path, session_id, messages_added, messages_skipped, malformed_lines,
    malformed ([{path, line}]), sessions (ids seen). patience: see begin_write; usage_later: write_batch.
    """
    path = os.path.abspath(os.fspath(path))
    return write_batch(conn, lcm.capture.transcript.read_new_lines(path, transcript_row(conn, path), *settings()), patience,
                       usage_later=usage_later)


def ingest_session(conn, transcript_path, patience: float | None = None, usage_later: bool = False) -> dict:
    """ingest_file for a session's main transcript and each of its subagent transcripts
    (`<session>/subagents/agent-*.jsonl`, or for CLIs up to 2.0 `agent-*.jsonl` beside the
    session file), so lines a sub-agent wrote after its own hook ran are caught by the next hook
    of the main session. Returns ingest_paths-style totals; a subagent file that cannot be read
    (a FIFO, vanished) is listed in skipped_files.

    With patience (hooks), VaultBusy when another writer holds the vault longer than that: the
    lines stay unread, and the next call stores them (the byte offset did not move). usage_later:
    see write_batch.
    """
    path = os.path.abspath(os.fspath(transcript_path))
    total = {"files": 1, "messages_added": 0, "messages_skipped": 0, "malformed_lines": 0,
             "excluded_lines": 0, "malformed": [], "skipped_files": []}
    deadline = None if patience is None else time.monotonic() + patience

    def one(p: str) -> dict:
        result = ingest_file(conn, p, None if deadline is None else max(deadline - time.monotonic(), 0.05), usage_later)
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
