"""Bulk import of many transcripts (lcm_ingest.py --all, a directory): files planned into groups
of about GROUP_BYTES, parsed ahead in child processes into stage files (lines packed, text
compressed), moved into the vault one transaction a group, with checkpoints on a background
thread. One file at a time (the hooks) is lcm.capture.ingest's."""
from __future__ import annotations

import itertools
import os
import sqlite3
import sys
import time

import lcm.base.progress
import lcm.vault.db
import lcm.capture.indexes
import lcm.capture.ingest
import lcm.capture.tokens
import lcm.vault.order
import lcm.vault.pack
import lcm.vault.schema
import lcm.vault.squeeze
import lcm.vault.store
import lcm.base.text
import lcm.capture.transcript
from lcm.base.errors import LcmError
from lcm.vault.db import begin_write

PARSE_PROCESS_MIN_FILES = 8  # fewer files are parsed inline: a worker process is not worth starting
PARSE_PROCESS_MIN_LINES = 5000  # the same for lines read elsewhere (ingest_runs: a bundle)
GROUP_BYTES = 48 << 20  # bulk ingest: unread transcript bytes per transaction (~14k messages)
GROUPS_AHEAD = 2  # groups parsed ahead of the writer (each waits as a stage file)
WAL_LIMIT = 512 << 20  # bulk ingest lets the WAL grow this large before it waits for a checkpoint
FTS_BULK_HASHSIZE = 64 << 20  # FTS5 pending-terms buffer during bulk ingest (one group fits)
FTS_HASHSIZE = 1 << 20  # FTS5's default
FTS_BULK_AUTOMERGE = 16  # FTS5 merges this many segments of a level at once during bulk ingest (its maximum)
FTS_AUTOMERGE = 4  # FTS5's default


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
        if not os.fspath(given).strip():  # "$DIR" of an unset variable: not the working directory's whole tree
            raise LcmError("PATH is empty", "give a transcript file or a directory of them; --all reads ~/.claude/projects")
        path = os.path.abspath(os.path.expanduser(os.fspath(given)))
        if not os.path.isdir(path):
            lcm.capture.transcript.open_transcript(path)[0].close()
            files[path] = None
            continue
        for directory, dirnames, names in os.walk(path):
            dirnames.sort()  # <session>.jsonl before <session>/subagents/: parents first
            # sessions before the agent-*.jsonl beside them (early CLIs): a run finds its call
            for name in sorted(names, key=lambda n: (n.startswith("agent-"), n)):
                if not name.endswith(".jsonl"):
                    continue
                found = os.path.join(directory, name)
                shown = lcm.base.text.safe_text(found)  # a name that is not UTF-8 could not be stored
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

    Files go in groups of about GROUP_BYTES, one transaction each. Parser processes (see
    _parser_pool) turn each group into a stage file while this process stores the one before.
    """
    started = time.perf_counter()
    skipped: list[dict] = []
    files = transcript_files(paths, skipped)
    total = {"files": len(files), "messages_added": 0, "messages_skipped": 0, "malformed_lines": 0,
             "sessions": 0, "seconds": 0.0, "excluded_files": 0, "excluded_lines": 0, "malformed": [],
             "skipped_files": skipped}
    sessions: set[str] = set()
    settings = lcm.capture.ingest.settings()
    own = not conn.in_transaction
    if not own:  # the caller's transaction: no ATTACH inside it, so file by file
        for path in files:
            try:
                batch = lcm.capture.transcript.read_new_lines(path, lcm.capture.ingest.transcript_row(conn, path), *settings)
            except LcmError as exc:
                skipped.append({"path": path, "reason": exc.message})
                continue
            _count(total, sessions, lcm.capture.ingest.write_batch(conn, batch))
        total["files"] -= total["excluded_files"]
        total["sessions"] = len(sessions)
        total["vault_sessions"] = vault_sessions(conn)
        total["seconds"] = round(time.perf_counter() - started, 3)
        return total
    # Until the first group is parsed the writer has nothing to do, and one core is idle: the
    # first group is halved, and this process parses the second half while the parser process
    # parses the first (the writer starts ~0.3 s sooner at 100k messages).
    split = _parser_process(len(files))
    groups, sizes = _plan_groups(conn, files, halve_first=split)
    squeeze = _dictionary(conn, _file_heads(files), settings)
    bar = _progress(len(files), sum(sizes), progress)
    # offsets as of now (read as each group is handed out): a parallel import or a hook may have
    # read these files since they were planned
    work = (([(path, lcm.capture.ingest.transcript_row(conn, path)) for path, _ in group], len(group))
            for group in groups)
    seen = _store_groups(conn, work, _read_file, total, sessions, squeeze, parse_ahead=split,
                         stage_bytes=2 * sum(sorted(sizes)[-(GROUPS_AHEAD + 2):]), bar=bar)
    total["messages_skipped"] = seen - total["messages_added"]
    total["files"] -= total["excluded_files"]
    total["sessions"] = len(sessions)
    total["vault_sessions"] = vault_sessions(conn)
    total["seconds"] = round(time.perf_counter() - started, 3)
    return total


def ingest_runs(conn, runs, lines: int, bar=None) -> dict:
    """Store runs of transcript lines that came another way than their file (a bundle,
    lcm.readers.bundle) as bulk ingest stores files: parsed ahead in parser processes into stage
    files, lines packed and text compressed, a group of about GROUP_BYTES per transaction. `runs`
    yields (path the lines were read from on their machine, [line, ...], how many lines to count
    on `bar` for it); `lines`, about how many lines they hold all told, decides whether parser
    processes are worth starting. No byte offset is kept for those paths
    (lcm.capture.ingest.write_batch from_file=False).
    Returns messages_added, messages_skipped, malformed_lines, sessions (ids)."""
    total = {"messages_added": 0, "messages_skipped": 0, "malformed_lines": 0, "excluded_files": 0,
             "excluded_lines": 0, "malformed": [], "skipped_files": []}
    sessions: set[str] = set()
    split = lines >= PARSE_PROCESS_MIN_LINES and sys.platform.startswith("linux")
    runs, read_ahead = iter(runs), []
    squeeze = _dictionary(conn, _run_heads(runs, read_ahead), lcm.capture.ingest.settings())
    runs = itertools.chain(read_ahead, runs)
    seen = _store_groups(conn, _group_runs(runs, halve_first=split), _read_run, total, sessions, squeeze,
                         parse_ahead=split, stage_bytes=2 * (GROUPS_AHEAD + 2) * GROUP_BYTES, bar=bar, from_file=False)
    return {"messages_added": total["messages_added"], "messages_skipped": seen - total["messages_added"],
            "malformed_lines": total["malformed_lines"], "sessions": sorted(sessions)}


def _group_runs(runs, halve_first: bool):
    """Consecutive runs in groups of at least GROUP_BYTES of lines (with halve_first, the first
    two of half that), as _plan_groups groups files: ([(path, lines), ...], lines to count)."""
    group, count, size, halved = [], 0, 0, 2 if halve_first else 0
    for path, lines, weight in runs:
        if lines:
            group.append((path, lines))
            size += sum(map(len, lines))
        count += weight
        if size >= (GROUP_BYTES // 2 if halved else GROUP_BYTES):
            yield group, count
            group, count, size, halved = [], 0, 0, max(halved - 1, 0)
    if group or count:
        yield group, count


def _read_file(item: tuple, settings: tuple):
    """A transcript's new lines, parsed (the parser's reader for files)."""
    path, known = item
    return lcm.capture.transcript.read_new_lines(path, known, *settings)


def _read_run(item: tuple, settings: tuple):
    """A run of lines read elsewhere from the transcript at `path`, parsed (the parser's reader
    for ingest_runs)."""
    path, lines = item
    batch = lcm.capture.transcript.Batch(path, None)
    lcm.capture.transcript.parse_lines(batch, lines, *settings)
    return batch


def _store_groups(conn, groups, read, total: dict, sessions: set, squeeze: tuple[int, bytes] | None,
                  parse_ahead: bool, stage_bytes: int, bar=None, from_file: bool = True) -> int:
    """Parse each group of `groups` ((items, how many to count on `bar`)), each item with
    `read(item, settings)`, into a stage file, in parser processes when parse_ahead (the second
    group in this one meanwhile): lines packed, text compressed with the dictionary `squeeze`
    ((id, data), see _dictionary). Store it in one transaction, GROUPS_AHEAD groups behind.
    Adds to `total` and `sessions`; returns how many messages the groups held."""
    settings = lcm.capture.ingest.settings()
    # every row so far had its text looked at by packing: so will every row this import adds
    # (compressed here; a refused group's rows are packing's, text and all)
    squeezed = lcm.vault.pack.unsqueezed(conn) == 0
    stage_dir = _stage_dir(stage_bytes)
    # bulk imports revisit the same FTS, uuid-index and b-tree pages constantly: up to 256 MB of
    # page cache keeps them hot (a 1M-message vault's uuid index alone is ~60 MB)
    conn.execute("PRAGMA cache_size = -262144")
    checkpointer = _Checkpointer(conn)
    turns = lcm.vault.db.Turns(conn)
    first_id = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    fts = lcm.vault.schema.fts_enabled(conn)
    from collections import deque
    ahead: deque = deque()
    seen = 0
    try:
        if fts:
            # FTS5 writes its in-memory terms out as a new index segment whenever they pass 1 MB;
            # one segment per group instead means far less merging later (-12% at 200k messages).
            # And it merges segments 4 at a time: a large import rewrote its index once per
            # level of 4; 16 at a time, half as often (-0.5 s of the writer's 5 s at 100k
            # messages). Restored below (the settings are stored in the vault): later writes
            # go on merging 4 at a time.
            _set_fts(conn, FTS_BULK_HASHSIZE, FTS_BULK_AUTOMERGE)
        with (_parser_pool() if parse_ahead else _Inline()) as pool:
            number = 0
            work = iter(groups)
            group = next(work, None)
            while group is not None:
                items, count = group
                stage = os.path.join(stage_dir, f"group-{number}.db")
                submit = _Inline().submit if parse_ahead and number == 1 else pool.submit
                ahead.append((submit(_parse_group, read, items, settings, stage, squeeze), count))
                number += 1
                group = next(work, None)  # the last group handed out: store every one in flight
                while len(ahead) > (GROUPS_AHEAD if group is not None else 0):
                    future, count = ahead.popleft()
                    seen += _store_group(conn, *future.result(), total, sessions, turns, from_file)
                    checkpointer.poke()
                    if bar:
                        bar.update(count)
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        full = _disk_full(conn, exc, first_id)
        if full is not None:
            raise full from None
        raise
    finally:
        if any(r[1] == "lcm_stage" for r in conn.execute("PRAGMA database_list")):
            conn.execute("DETACH DATABASE lcm_stage")
        import shutil
        shutil.rmtree(stage_dir, ignore_errors=True)
        if bar:
            bar.close()
        if fts:
            _set_fts(conn, FTS_HASHSIZE, FTS_AUTOMERGE)
        turns.close()
        checkpointer.close()
        # everything committed into the vault file, the WAL emptied: nothing of the import lives
        # only in a file someone short of space might delete (a reader may hold it back: the WAL
        # then stays valid, and the next checkpoint finishes the work)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error:
            pass
    if lcm.capture.tokens.pending(conn):  # nothing new to import, yet the usage of older lines to read
        with lcm.vault.db.write_lock(conn):
            lcm.capture.tokens.backfill(conn)
    if squeezed and lcm.vault.pack.unsqueezed(conn):
        with lcm.vault.db.write_lock(conn):
            conn.execute("INSERT OR REPLACE INTO vault_meta VALUES ('squeezed_through', (SELECT max(id) FROM messages))")
    conn.execute("PRAGMA cache_size = -2000")  # back to SQLite's default for later writes
    return seen


def _disk_full(conn, exc: BaseException, first_id: int) -> LcmError | None:
    """The error of an import the disk filled up under, saying what it kept: every group
    committed before is whole in the vault file; the group at hand was rolled back."""
    if not isinstance(exc, (sqlite3.Error, OSError)):
        return None
    error = lcm.vault.db.storage_error(exc)
    if error is None or error.cause != "full":
        return None
    try:
        kept = conn.execute("SELECT count(*) FROM messages WHERE id > ?", (first_id,)).fetchone()[0]
    except sqlite3.Error:
        kept = None
    said = ("nothing of this import was stored" if kept == 0 else
            f"{kept} messages from the files before it filled up were stored and kept" if kept else
            "what was committed before it filled up is kept")
    full = LcmError(f"{error.message}; {said}", error.hint + "; the import goes on from where it stopped")
    full.cause = "full"
    return full


def vault_sessions(conn) -> int:
    """The sessions the vault holds: the one count every command prints (status, sessions,
    doctor, ingest). A file's own tally of sessions cannot be it: one transcript may hold lines
    of several sessions (a resumed or forked one), and a file read before adds no row to count."""
    return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]


def _set_fts(conn, hashsize: int, automerge: int) -> None:
    """A write like any other: in turn with the vault's other writers. The derived indexes that
    catch_up fills per group too (lcm.capture.indexes): -30% of their insert time at 100k messages."""
    with lcm.vault.db.write_lock(conn):
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in ("messages_fts", "exchange_fts", "messages_cjk"):
            if table in tables:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', {hashsize})")
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', {automerge})")


def _count(total: dict, sessions: set, one: dict) -> None:
    """Add one file's _write result to the ingest totals."""
    for key in ("messages_added", "messages_skipped", "malformed_lines", "excluded_lines"):
        total[key] += one[key]
    total["excluded_files"] += one["excluded_file"]
    total["malformed"].extend(one["malformed"])
    sessions.update(one["sessions"])


def _plan_groups(conn, files: list[str], halve_first: bool = False) -> tuple[list[list[tuple]], list[int]]:
    """Consecutive files in groups of at least GROUP_BYTES unread bytes (the last may be
    smaller; with halve_first, the first two of half that): ([[(path, its transcripts row or
    None), ...], ...], unread bytes of each group)."""
    groups, sizes, current, size = [], [], [], 0
    for i, path in enumerate(files):
        known = lcm.capture.ingest.transcript_row(conn, path)
        try:
            size += max(os.path.getsize(path) - (known["byte_offset"] if known else 0), 0)
        except OSError:
            pass  # vanished or unreadable: the parser reports it
        current.append((path, known))
        if size >= (GROUP_BYTES // 2 if halve_first and len(groups) < 2 else GROUP_BYTES) or i == len(files) - 1:
            groups.append(current)
            sizes.append(size)
            current, size = [], 0
    return groups, sizes


def _stage_dir(need: int) -> str:
    """A new private (0700) directory for the stage files, which hold transcript lines.

    RAM-backed /dev/shm when it has room for the `need` bytes of the largest groups in flight
    (a stage file is ~1.4x its transcripts): a stage file lives for seconds, and writing it to
    disk first cost a quarter of a large import's time. Else the system's temp directory.
    """
    import tempfile
    prefix = f"{lcm.vault.db.STAGE_PREFIX}{os.getpid()}-"
    try:
        shm = os.statvfs("/dev/shm")  # stale stages there went at connect (lcm.vault.db.remove_stale_stages)
        if shm.f_bavail * shm.f_frsize > need + (256 << 20):
            return tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
    except OSError:
        pass  # no /dev/shm (macOS, Windows) or not usable
    lcm.vault.db.remove_stale_stages(tempfile.gettempdir())
    return tempfile.mkdtemp(prefix=prefix)


SAMPLE_FILES = 24  # files the dictionary's sample comes from, spread over the import
SAMPLE_HEAD = 512 << 10  # bytes read from each (~0.3 s of parsing in all, before the import starts)
SAMPLE_AHEAD = 48 << 20  # a bundle's runs read ahead for the sample at most (held until stored)


def _file_heads(files: list[str]):
    """(path, its head's whole lines) of SAMPLE_FILES files spread over `files` (all over the
    tree, not just its first project): the dictionary's sample."""
    step = max(len(files) // SAMPLE_FILES, 1)
    for path in files[::step]:
        try:
            with open(path, "rb") as f:
                yield path, f.read(SAMPLE_HEAD).split(b"\n")[:-1]
        except OSError:
            continue  # the import reports it


def _run_heads(runs, read_ahead: list):
    """(path, the head of its lines) of the first runs of `runs` (a bundle is one stream: its
    first runs are the sample), each run taken appended to `read_ahead`, for the import to
    store first; at most SAMPLE_AHEAD bytes of lines read ahead."""
    size = 0
    for run in runs:
        read_ahead.append(run)
        head, taken = [], 0
        for line in run[1]:
            if taken + len(line) > SAMPLE_HEAD:
                break
            head.append(line)
            taken += len(line)
        yield run[0], head
        size += sum(map(len, run[1]))
        if size >= SAMPLE_AHEAD:
            return


def _dictionary(conn, heads, settings: tuple) -> tuple[int, bytes] | None:
    """(id, data) of the dictionary the import compresses text with: the vault's, else one
    built now from `heads` ((path, lines), read until they give lcm.vault.squeeze.SAMPLE_ROWS
    texts) and stored at once, in its own short transaction: the rows that name it come later.
    None when the sample has no text to learn from."""
    found = lcm.vault.squeeze.encoder(conn)
    if found is not None:
        return found.dict_id, found.data
    texts: list[str] = []
    for path, lines in heads:
        batch = lcm.capture.transcript.Batch(path, None)
        lcm.capture.transcript.parse_lines(batch, lines, *settings)
        texts += [(r[1], r[14]) for r in batch.rows if isinstance(r[14], str) and len(r[14]) >= lcm.vault.squeeze.MIN_BYTES]
        if len(texts) >= lcm.vault.squeeze.SAMPLE_ROWS:
            break
    data = lcm.vault.squeeze.build_dictionary(texts[:lcm.vault.squeeze.SAMPLE_ROWS])
    if not data:
        return None
    with lcm.vault.db.write_lock(conn):
        dict_id = lcm.vault.squeeze.store_dictionary(conn, data, min(len(texts), lcm.vault.squeeze.SAMPLE_ROWS))
    return dict_id, data


STAGE_BLOCKS = """CREATE TABLE stage_blocks (
    no INTEGER PRIMARY KEY,             -- the stage's own numbering (lcm.capture.ingest._flush_bulk)
    session_id TEXT, transcript_path TEXT,
    first_row INTEGER, last_row INTEGER, -- ingest_stage rowids of its first and last line
    line_count INTEGER, line_bytes INTEGER, data BLOB)"""


def _pack_batch(db, batch, start: int) -> list[tuple]:
    """In the parser process: a file's lines (to be staged from rowid start+1) packed into
    blocks (lcm.vault.store's format, by session, at most lcm.vault.pack.BLOCK_BYTES each), so
    the first import leaves no line plain and no packing to do. Returns each row's (stub,
    block_no, block_pos)."""
    lines = [lcm.vault.store.as_bytes(row[16]) for row in batch.rows]
    blocks = lcm.vault.pack.cut_blocks((row[1], len(line), (start + j + 1, line))
                                       for j, (row, line) in enumerate(zip(batch.rows, lines)))
    first_no = (db.execute("SELECT coalesce(max(no), 0) FROM stage_blocks").fetchone()[0]) + 1
    places: list = [None] * len(batch.rows)
    for no, members in enumerate(blocks, first_no):
        lines = [m[1] for m in members]
        db.execute("INSERT INTO stage_blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (no, batch.rows[members[0][0] - start - 1][1], batch.path, members[0][0], members[-1][0], len(lines),
                    sum(map(len, lines)), lcm.vault.store.encode_block(lines)))
        for pos, (rowid, line) in enumerate(members):
            places[rowid - start - 1] = (lcm.vault.store.stub(line), no, pos)
    return places


def _parse_group(read, group: list[tuple], settings: tuple, stage: str,
                 squeeze: tuple[int, bytes] | None = None) -> tuple[list, str | None]:
    """Parse a group's transcripts (in the parser process; each item of `group` with
    `read(item, settings)`) and write their message rows to the stage file `stage`, so the
    writer moves them with one INSERT ... SELECT instead of receiving and binding each row itself:
    each file's lines packed into blocks, and each row's text compressed with the dictionary
    `squeeze` ((id, data)) when given.

    Returns (per file one Batch, rows moved out, or {path, reason} when it could not be read;
    the stage path or None when no file had a new message). An error that stops the import
    travels as a tuple (message, hint): its hint would not survive the trip back from a worker
    process as an exception.
    """
    import sqlite3
    out: list = []
    staged = 0
    db = None
    encoder = lcm.vault.squeeze.Encoder(*squeeze) if squeeze else None
    try:
        for item in group:
            if _PARENT is not None and os.getppid() != _PARENT:
                os._exit(1)  # the import is gone: nobody will read what we parse
            try:
                batch = read(item, settings)
            except LcmError as exc:  # vanished, unreadable, swapped for a FIFO: skipped, reported
                out.append({"path": item[0], "reason": exc.message})
                continue
            if batch.rows:
                if db is None:
                    # a scratch file: no journal, no fsync (a crash loses nothing stored), and pages
                    # that hold a whole line more often than 4 KB ones (-3% of the parser's time)
                    db = sqlite3.connect(stage, isolation_level=None)
                    db.execute(f"PRAGMA page_size = {lcm.vault.schema.PAGE_SIZE}")
                    db.execute("PRAGMA journal_mode = OFF")
                    db.execute("PRAGMA synchronous = OFF")
                    db.execute(f"CREATE TABLE ingest_stage ({lcm.capture.ingest.STAGE_COLUMNS})")
                    db.execute(STAGE_BLOCKS)
                    db.execute("BEGIN")
                places = _pack_batch(db, batch, staged)
                try:
                    db.executemany(f"INSERT INTO ingest_stage VALUES ({','.join('?' * 23)})",
                                   _squeezed(batch.rows, encoder, places))
                except UnicodeEncodeError:  # a lone surrogate in some row's content (lcm.base.text.safe_text)
                    db.execute("DELETE FROM ingest_stage WHERE rowid > ?", (staged,))
                    batch.rows = [lcm.capture.transcript.safe_row(r) for r in batch.rows]
                    db.executemany(f"INSERT INTO ingest_stage VALUES ({','.join('?' * 23)})",
                                   _squeezed(batch.rows, encoder, places))
                batch.stage_start, batch.staged = staged, len(batch.rows)
                staged += len(batch.rows)
                _derive(batch)
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


def _squeezed(rows, encoder, places):
    """Stage rows: the text compressed, the plain text beside it for the full-text index, and
    where the line sits among the stage's blocks; `raw` is the stub the row will keep, the line
    itself is in its block only (a copy would be a second gigabyte written and read per 300,000
    messages)."""
    for r, place in zip(rows, places):
        stored = encoder.row(r[4], r[13], r[15], r[14]) if encoder is not None else r[14]
        yield r[:14] + (stored, r[15], place[0]) + r[17:] + (None if stored is r[14] else r[14],) + place


def _derive(batch) -> None:
    """What the derived indexes take from each staged row's text, by its index in the batch: its
    CJK runs, and the opening of each row that may be a prompt or a reply (its exchange windows'
    text). Found here, in the parser process, the writer need not read the text back to index
    it (lcm.capture.indexes.Found)."""
    first_cjk, may_talk, opening = lcm.capture.indexes.first_cjk, lcm.capture.indexes.may_talk, lcm.capture.indexes.opening
    for j, row in enumerate(batch.rows):
        text = row[14]
        at = first_cjk(text)
        if at >= 0:
            batch.cjk[j] = lcm.capture.indexes.cjk_runs(text, at)
        if may_talk(row[4], row[13], row[15], text, row[16]):
            batch.talk[j] = opening(text)


def _place_found(conn, batch, before: int, added: int, found) -> None:
    """Put the parser's findings about a batch's staged rows (_derive) under the ids they were
    stored with: the ids above `before`, in staging order, when none was refused (a uuid stored
    already, or purged); else matched by uuid (the first staged row of a uuid is the one stored)."""
    if added == batch.staged:
        found.runs.update((before + 1 + j, runs) for j, runs in batch.cjk.items())
        found.openings.update((before + 1 + j, text) for j, text in batch.talk.items())
        return
    first: dict = {}
    for j, uuid in conn.execute("SELECT rowid - ? - 1, uuid FROM lcm_stage.ingest_stage WHERE rowid > ? AND"
                                " rowid <= ?", (batch.stage_start, batch.stage_start, batch.stage_start + batch.staged)):
        first.setdefault(uuid, j)
    ids = {first[uuid]: rowid for rowid, uuid in conn.execute("SELECT id, uuid FROM messages WHERE id > ?", (before,))}
    found.runs.update((ids[j], runs) for j, runs in batch.cjk.items() if j in ids)
    found.openings.update((ids[j], text) for j, text in batch.talk.items() if j in ids)


def _store_group(conn, batches: list, stage: str | None, total: dict, sessions: set, turns: lcm.vault.db.Turns,
                 from_file: bool = True) -> int:
    """Write one parsed group in one transaction; returns how many messages it held.

    A file's rows, offset and session rows commit together; when a hook knocks (see lcm.vault.db.Turns),
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
        seen, flushed, recheck, found = 0, set(), False, None
        for batch in batches:
            if not batch.unchanged and not conn.in_transaction:
                begin_write(conn, turns=turns)
                # ids above this are the rows this transaction moves in from the stage
                found = lcm.capture.indexes.Found(conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0])
            _count(total, sessions, lcm.capture.ingest.write_batch(conn, batch, from_file=from_file))
            if batch.staged:
                before = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
                added = lcm.capture.ingest.flush_staged(conn, bulk=True, rows=(batch.stage_start, batch.staged))
                lcm.capture.tokens.store(conn, batch.usage)
                total["messages_added"] += added
                _place_found(conn, batch, before, added, found)  # after write_batch: it may externalise a text
                flushed.update(sid for sid in batch.sessions if sid)
                found.sessions.update(flushed)
            recheck = recheck or bool(batch.agent_calls)
            seen += batch.staged
            if conn.in_transaction and turns.knocking():
                _commit_placed(conn, flushed, recheck, found)
                flushed, recheck = set(), False
        if conn.in_transaction:
            _commit_placed(conn, flushed, recheck, found)
    finally:
        if stage:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.execute("DETACH DATABASE lcm_stage")
            os.remove(stage)
    return seen


def _commit_placed(conn, flushed: set, recheck: bool, found) -> None:
    """Place the sub-agent runs of the sessions whose staged rows were moved in (lcm.vault.order), then
    commit: no reader sees a message without its place."""
    if flushed:
        lcm.vault.order.place_threads(conn, flushed, recheck=recheck)
    lcm.capture.indexes.catch_up(conn, found=found)  # the search indexes derived from the messages (lcm/capture/indexes.py)
    lcm.capture.tokens.backfill(conn)  # a vault from before the usage table: read once, by the first import
    lcm.capture.ingest.place_leaf_titles(conn)
    lcm.vault.db.commit(conn)  # room for its checkpoint reserved first: nothing committed stays only in the WAL


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


def _parser_process(files: int) -> bool:
    """Whether transcripts are parsed in a forked process (else inline, in this one)."""
    # fork is cheap and needs nothing importable; only Linux forks safely (macOS system libraries
    # may crash in a forked child)
    return files >= PARSE_PROCESS_MIN_FILES and sys.platform.startswith("linux")


PARSERS = 2  # parser processes: packing lines and compressing text made the parser the slower side
#              (one parser: the writer idled ~60% of a 300k import; with two both cores stay busy)


def _parser_pool():
    """Where transcripts are parsed during bulk ingest (when _parser_process says so): forked
    worker processes (PARSERS), so JSON parsing, packing and compressing run on every core while
    this process inserts and FTS-indexes (a thread would fight the indexing for the GIL and was
    slower than no thread at all)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    return ProcessPoolExecutor(max_workers=PARSERS, mp_context=multiprocessing.get_context("fork"),
                               initializer=_die_with_parent, initargs=(os.getpid(),))


def _progress(files: int, unread: int, wanted: bool):
    """A bar (in files) on stderr for long imports (50 MB unread) on a terminal, else None."""
    if not wanted or unread < 50_000_000:
        return None
    return lcm.base.progress.bar(files, "ingest", "file")
