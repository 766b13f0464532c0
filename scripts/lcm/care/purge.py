"""Forgetting: the one path that deletes messages from the vault.

--match compares the text a person sees (line_text: message text, thinking, tool input and
output; with --hidden also the tool data Claude Code keeps unseen), never a line's metadata, and finds every other stored copy too: summaries, checkpoints,
pinned notes, session titles, map runs' prompts and answers, session digests and lcm.log lines.

A purge removes the chosen messages (their rows, raw lines and full-text entries), every summary
built on them and that summary's ancestors (their other children become parentless again and
their other messages uncovered, so the next lcm_compact.py summarises what remains), their
externalised files, the checkpoints that may quote them, and the compaction records of their
boundary lines. Each purged uuid is remembered in `purged`, and a trigger on `messages` refuses
it, so a transcript still on disk never brings the line back; it is written first to the purge
list beside the vault (lcm.vault.purgelist), which outlives the vault file. The delete runs with
secure_delete on, the full-text indexes are merged (old segments hold the deleted terms), and
the WAL is checkpointed and truncated: no copy stays in the vault's free pages or its -wal.
"""
from __future__ import annotations

import os
import re
import sqlite3

import lcm.base.config
import lcm.summary.dag
import lcm.vault.db
import lcm.capture.indexes
import lcm.vault.purgelist
import lcm.vault.resolve
import lcm.vault.schema
import lcm.vault.squeeze
import lcm.vault.store
from lcm.base.errors import LcmError

# the externalised files of the messages in temp.purge_messages
FILES_OF_PURGE = "message_uuid IN (SELECT uuid FROM messages WHERE id IN (SELECT id FROM temp.purge_messages))"
EXAMPLES = 5  # messages shown by a dry run
PREVIEW_CHARS = 80
REGEX_SECONDS = 2.0  # longest a --regex may spend on one text before it is refused (a sound
                     # pattern reads a megabyte in milliseconds; nested repetition never ends)
LOG_NAMES = ("lcm.log", "lcm.log.1")  # the hooks' log and the one rotated copy it keeps


class Selection:
    """What one purge would remove; filled by select(), carried out by purge()."""

    def __init__(self, what: str):
        self.what = what                   # human description of the criterion
        self.message_ids: list[int] = []
        self.sessions: set[str] = set()    # sessions with a purged message
        self.whole_sessions: set[str] = set()  # sessions purged entirely (--session)
        self.matched = False               # chosen by --match: the hits below come from _scan
        self.summaries: list[str] = []     # summaries whose own text matches
        self.checkpoints: list[int] = []
        self.notes: list[str] = []
        self.titles: list[str] = []        # sessions whose stored title matches
        self.leaf_titles: list[str] = []   # leafUuids of waiting titles that match
        self.map_runs: list[str] = []      # lcm_llm_map / agentic_map runs whose prompt matches
        self.map_items: list[tuple] = []   # (run_id, item_index) whose stored answer matches
        self.dictionary_hit = None          # test(line) of a text dictionary line holding the match
        self.digests: list[str] = []       # session digests (table digests, where present)
        self.log_lines: dict[str, list[int]] = {}  # lcm.log file name -> matching line numbers
        self.previews: dict[int, str] = {}  # message id -> preview with the text blanked
        self.hidden_only: list[int] = []   # messages holding the text only in hidden tool data (kept)
        self.checked_by_text = 0           # messages in damaged blocks, matched on their searchable text only


# ---------------------------------------------------------------------------
# What a person sees: the one place a purge reads stored lines
# ---------------------------------------------------------------------------

def _strings(value, out: list[str]) -> None:
    """Every string value inside a JSON value (not its keys: they are field names)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _block_text(block, out: list[str]) -> None:
    if isinstance(block, str):
        out.append(block)
        return
    if not isinstance(block, dict):
        return
    kind = block.get("type")
    if kind in ("tool_use", "server_tool_use"):
        _strings(block.get("input"), out)
    elif kind in ("tool_result", "web_search_tool_result"):
        content = block.get("content")
        for inner in content if isinstance(content, list) else [content]:
            _block_text(inner, out)
    else:
        for key in ("text", "thinking", "title"):
            if isinstance(block.get(key), str):
                out.append(block[key])


def line_text(raw) -> tuple[str, str]:
    """(visible, hidden) text of one stored transcript line.

    visible: what a person sees of it: the message's text, thinking, tool inputs and tool
    results. hidden: tool data Claude Code keeps beside a result but does not show (its
    `toolUseResult`: an edited file's earlier contents, a todo list). Neither holds metadata such
    as gitBranch, cwd, ids or field names, so `--match main` cannot pick every message of a
    session on branch main. `raw` is the original line (lcm.vault.store.LINE): a change to how lines are
    stored changes only here.
    """
    import lcm.capture.transcript
    try:
        entry = lcm.capture.transcript.loads(bytes(raw))
    except (ValueError, RecursionError):
        return "", ""
    if not isinstance(entry, dict):
        return "", ""
    visible: list[str] = []
    hidden: list[str] = []
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else message
    if content is None and message is None:
        content = entry.get("content")  # system lines keep their text at the top level
    try:
        for block in content if isinstance(content, list) else [content]:
            _block_text(block, visible)
        _strings(entry.get("toolUseResult"), hidden)
    except RecursionError:
        pass
    return "\n".join(visible), "\n".join(hidden)


# ---------------------------------------------------------------------------
# Finding every stored copy of the text
# ---------------------------------------------------------------------------

def _json_forms(literal: str) -> list[bytes]:
    """How `literal` can appear inside a JSON line: as is, and escaped (quotes, newlines,
    non-ASCII as \\uXXXX): a cheap SQL filter before line_text decides."""
    import json
    forms = [literal, json.dumps(literal, ensure_ascii=False)[1:-1], json.dumps(literal)[1:-1]]
    return list(dict.fromkeys(f.encode("utf-8", "surrogatepass") for f in forms))


def _has_table(conn, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _scan(conn, home: str, literal: str | None = None, pattern: re.Pattern | None = None, beat=None) -> dict:
    """Every stored text that holds `literal` (SQL narrows the rows first) or that `pattern`
    matches: {kind: ids}. `beat` (a shared counter) ticks once per text, so the process running
    a --regex can tell a slow pattern from a large vault."""
    def found(text) -> bool:
        if pattern is None:
            return literal in text
        # a hit is a non-empty match: `\b` or a lookahead alone names no text, only places
        return any(m.end() > m.start() for m in pattern.finditer(text))

    def hit(text) -> bool:
        if beat is not None:
            beat.value += 1
        return isinstance(text, str) and found(text)

    def rows(table, key, columns):
        cols = ", ".join(columns)
        where = " OR ".join(f"instr({c}, ?) > 0" for c in columns) if literal is not None else "1"
        sql = f"SELECT {key}, {cols} FROM {table} WHERE {where}"
        return conn.execute(sql, [literal] * len(columns) if literal is not None else [])

    def candidates(unreadable: list[int]):
        # the lines of damaged blocks cannot be read: those messages are left to the check below
        ids = ",".join(map(str, unreadable))
        # (CASE: SQLite may evaluate a WHERE's terms in any order, a CASE's branches only as needed)
        line = f"CASE WHEN block_id IN ({ids}) THEN NULL ELSE {lcm.vault.store.LINE} END" if unreadable else \
            lcm.vault.store.LINE
        skip = f" AND (block_id IS NULL OR block_id NOT IN ({ids}))" if unreadable else ""
        if literal is None:
            return conn.execute(f"SELECT id, {line} FROM messages WHERE 1{skip} ORDER BY id")
        forms = _json_forms(literal)
        where = " OR ".join([f"instr({line}, ?) > 0"] * len(forms) + ["instr(lcm_text(content), ?) > 0"])
        return conn.execute(f"SELECT id, {line} FROM messages WHERE ({where}){skip} ORDER BY id", [*forms, literal])

    unreadable: list[int] = []
    for attempt in (0, 1):
        messages, hidden_only = [], []
        try:
            for mid, raw in candidates(unreadable):
                visible, hidden = line_text(raw)
                if hit(visible):
                    messages.append(mid)
                elif hit(hidden):
                    hidden_only.append(mid)
            break
        except sqlite3.OperationalError as exc:
            if attempt or lcm.vault.store.function_error(exc) is None:
                raise
            unreadable = lcm.vault.store.damaged_block_ids(conn)
    checked_by_text = 0
    if unreadable:  # a message whose line cannot be read is matched on its searchable text
        for mid, content in conn.execute(f"SELECT id, lcm_text(content) FROM messages WHERE block_id IN"
                                         f" ({','.join(map(str, unreadable))}) ORDER BY id"):
            checked_by_text += 1
            if hit(content):
                messages.append(mid)
        messages.sort()
    doc = {
        "messages": messages,
        "hidden_only": hidden_only,
        "checked_by_text": checked_by_text,
        # a summary goes when its text or an earlier text of it (summary_versions) holds the match
        "summaries": sorted({r[0] for r in rows("summaries", "id", ["content"]) if hit(r[1])} | (
            {r[0] for r in rows("summary_versions", "summary_id", ["content"]) if hit(r[1])}
            if _has_table(conn, "summary_versions") else set())),
        "checkpoints": [r[0] for r in rows("checkpoints", "id", ["content"]) if hit(r[1])],
        "notes": [r[0] for r in rows("notes", "id", ["content"]) if hit(r[1])],
        "titles": [r[0] for r in rows("sessions", "session_id", ["title"]) if hit(r[1])],
        # a title waiting for its session (lcm.capture.ingest.place_leaf_titles)
        "leaf_titles": ([r[0] for r in rows("leaf_titles", "leaf_uuid", ["title"]) if hit(r[1])]
                        if _has_table(conn, "leaf_titles") else []),
        "map_runs": [r[0] for r in rows("map_runs", "id", ["prompt", "schema", "options"]) if any(map(hit, r[1:]))],
        "map_items": [(r[0], r[1]) for r in conn.execute(
            "SELECT run_id, item_index, result, error FROM map_items" + (
                " WHERE instr(result, ?) > 0 OR instr(error, ?) > 0" if literal is not None else ""),
            [literal, literal] if literal is not None else []) if hit(r[2]) or hit(r[3])],
        "digests": ([r[0] for r in rows("digests", "session_id", ["text"]) if hit(r[1])]
                    if _has_table(conn, "digests") else []),
        "log_lines": {},
    }
    for name in LOG_NAMES:
        try:
            with open(os.path.join(home, name), encoding="utf-8", errors="surrogateescape") as f:
                lines = [i for i, line in enumerate(f) if hit(line)]
        except OSError:
            continue
        if lines:
            doc["log_lines"][name] = lines
    doc["previews"] = {}
    shown = sorted(messages + hidden_only)[:EXAMPLES]  # a dry run's examples, with or without --hidden
    for mid, content in conn.execute(f"SELECT id, lcm_text(content) FROM messages WHERE id IN ({','.join('?' * len(shown))})",
                                     shown):
        doc["previews"][mid] = _preview(content, literal, pattern)
    return doc


def _scan_child(pipe, beat, db: str, home: str, source: str, flags: int) -> None:
    """Body of the process that runs a --regex over the vault (see _scan_regex)."""
    import sqlite3
    try:
        pattern = re.compile(source, flags)
        conn = sqlite3.connect(lcm.vault.db.file_uri(db, "mode=ro"), uri=True)  # quoted: a # in the path is not a fragment
        lcm.vault.store.install(conn, lcm.vault.schema.SCHEMA_VERSION)  # packed lines read through lcm_line() here too
        lcm.vault.squeeze.install(conn)  # and compressed text through lcm_text()
        pipe.send(("ok", _scan(conn, home, pattern=pattern, beat=beat)))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent, without the pattern
        pipe.send(("error", type(exc).__name__))
    finally:
        pipe.close()


def _scan_regex(conn, home: str, pattern: re.Pattern) -> dict:
    """_scan with a regular expression, in a process of its own that is stopped when one text
    takes longer than REGEX_SECONDS: Python's re cannot be interrupted, and a pattern with
    nested repetition ((a+)+$) would otherwise hang the command for ever."""
    import multiprocessing
    import sys
    import time
    db = conn.execute("PRAGMA database_list").fetchone()[2]
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    beat = ctx.Value("q", 0, lock=False)
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_scan_child, args=(send, beat, db, home, pattern.pattern, pattern.flags), daemon=True)
    proc.start()
    send.close()
    seen, since = -1, time.monotonic()
    try:
        while not receive.poll(0.02):
            if not proc.is_alive() and not receive.poll(0):
                raise LcmError("the regular expression search stopped unexpectedly",
                               "try again; if it repeats, use --match without --regex")
            if beat.value != seen:
                seen, since = beat.value, time.monotonic()
            elif time.monotonic() - since > REGEX_SECONDS:
                raise LcmError(f"the regular expression took over {REGEX_SECONDS:g} s on one stored text,"
                               " so it was stopped and nothing was removed",
                               "simplify it: nested repetition such as (a+)+ or (.*)* can take for ever;"
                               " or give the plain text with --match and no --regex")
        status, doc = receive.recv()
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receive.close()
    if status != "ok":
        raise LcmError(f"the regular expression search failed ({doc})", "use --match without --regex")
    return doc


def select(conn, *, session: str | None = None, message: str | None = None, match: str | None = None,
           regex: bool = False, hidden: bool = False) -> Selection:
    """The messages one criterion names (exactly one of session, message, match). With match,
    a message holding the text only in hidden tool data (see line_text) is chosen with
    hidden=True, else counted in `hidden_only`."""
    if session is not None:
        sid = lcm.vault.resolve.by_id(conn, session)
        sel = Selection(f"session {sid}")
        sel.message_ids = [r[0] for r in conn.execute("SELECT id FROM messages WHERE session_id = ? ORDER BY id",
                                                      (sid,))]
        sel.whole_sessions.add(sid)
    elif message is not None:
        row = conn.execute("SELECT id FROM messages WHERE uuid = ?", (message,)).fetchone()
        if row is None:
            raise LcmError(f"no message {message!r} in the vault",
                           "a message is addressed by its transcript uuid, as lcm_grep.py prints it")
        sel = Selection(f"message {message}")
        sel.message_ids = [row[0]]
    else:
        if not match:
            raise LcmError("--match needs a non-empty pattern", "give the text to forget")
        # the pattern itself is never echoed, not even in an error: it is often the secret
        sel = Selection("messages matching the given regular expression" if regex else
                        "messages containing the given text")
        home = str(lcm.base.config.lcm_home())
        if regex:
            try:
                pattern = re.compile(match)
            except re.error as exc:
                raise LcmError(f"invalid regular expression ({exc.msg} at position {exc.pos})",
                               "escape special characters, or drop --regex to match the text as given") from None
            if pattern.search(""):
                raise LcmError("the regular expression matches empty text, so every message",
                               "make it match the text to forget, e.g. sk-ant-[A-Za-z0-9_-]+")
            hits = _scan_regex(conn, home, pattern)
        else:
            hits = _scan(conn, home, literal=match)
        sel.matched = True
        # a text dictionary (lcm.vault.squeeze) is built from frequent lines: one may hold it
        sel.dictionary_hit = (lambda line: pattern.search(line) is not None) if regex else (lambda line: match in line)
        sel.message_ids = sorted(hits["messages"] + hits["hidden_only"]) if hidden else hits["messages"]
        sel.hidden_only = [] if hidden else hits["hidden_only"]
        sel.checked_by_text = hits["checked_by_text"]
        for key in ("summaries", "checkpoints", "notes", "titles", "leaf_titles", "map_runs", "map_items", "digests",
                    "log_lines", "previews"):
            setattr(sel, key, hits[key])
    for chunk in _chunks(sel.message_ids):
        sel.sessions.update(r[0] for r in conn.execute(
            f"SELECT DISTINCT session_id FROM messages WHERE id IN ({','.join('?' * len(chunk))})", chunk))
    return sel


def _chunks(ids: list, size: int = 500):
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


def _load_temp(conn, sel: Selection) -> None:
    """temp.purge_messages (ids) and temp.purge_summaries (the summaries to drop)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS purge_messages (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS purge_summaries (id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.purge_messages")
    conn.execute("DELETE FROM temp.purge_summaries")
    conn.executemany("INSERT INTO temp.purge_messages VALUES (?)", ((i,) for i in sel.message_ids))
    conn.execute("INSERT OR IGNORE INTO temp.purge_summaries SELECT DISTINCT summary_id FROM summary_sources"
                 " WHERE message_id IN (SELECT id FROM temp.purge_messages)")
    if sel.whole_sessions:
        conn.executemany("INSERT OR IGNORE INTO temp.purge_summaries SELECT id FROM summaries WHERE session_id = ?",
                         ((s,) for s in sel.whole_sessions))
    # a summary may quote the text even if its messages were phrased otherwise
    conn.executemany("INSERT OR IGNORE INTO temp.purge_summaries VALUES (?)", ((i,) for i in sel.summaries))
    add_ancestors(conn)


def add_ancestors(conn) -> None:
    """Grow temp.purge_summaries by the parents of its summaries, up to the roots."""
    while conn.execute("INSERT OR IGNORE INTO temp.purge_summaries SELECT parent_id FROM summaries"
                       " WHERE id IN (SELECT id FROM temp.purge_summaries) AND parent_id IS NOT NULL").rowcount:
        pass


def drop_summaries(conn) -> int:
    """Delete the summaries in temp.purge_summaries (ancestors included by the caller); their
    children that stay become parentless, their messages uncovered. Inside the caller's
    transaction. Returns how many were deleted."""
    conn.execute("UPDATE summaries SET parent_id = NULL WHERE parent_id IN (SELECT id FROM temp.purge_summaries)"
                 " AND id NOT IN (SELECT id FROM temp.purge_summaries)")
    conn.execute("DELETE FROM summary_sources WHERE summary_id IN (SELECT id FROM temp.purge_summaries)")
    return conn.execute("DELETE FROM summaries WHERE id IN (SELECT id FROM temp.purge_summaries)").rowcount


def _doomed_checkpoints(conn, sel: Selection) -> list:
    """(id, path) of the checkpoints that may quote the purged messages: those of a purged
    session, those containing the --match text, and for one message those of its session
    written after it."""
    if sel.matched:
        rows = []
        for chunk in _chunks(sel.checkpoints):
            rows += conn.execute(f"SELECT id, path FROM checkpoints WHERE id IN ({','.join('?' * len(chunk))})",
                                 chunk).fetchall()
        return rows
    if sel.whole_sessions:
        where, args = "session_id = ?", [next(iter(sel.whole_sessions))]
    else:
        where, args = ("session_id = ? AND (last_message_id IS NULL OR last_message_id >= ?)",
                       [next(iter(sel.sessions), ""), min(sel.message_ids, default=0)])
    return conn.execute(f"SELECT id, path FROM checkpoints WHERE {where}", args).fetchall()


def _doomed_digests(conn, sel: Selection) -> list[str]:
    """Sessions whose digest (lcm_sessions.py ID) goes: it may quote what is purged."""
    if not _has_table(conn, "digests"):
        return []
    return sorted(set(sel.digests) | sel.whole_sessions | (set() if sel.matched else sel.sessions))


def plan(conn, sel: Selection) -> dict:
    """What a purge of `sel` removes: the dry run's document (counts and a few examples)."""
    _load_temp(conn, sel)
    examples = []
    for *row, mid in conn.execute("SELECT m.uuid, m.session_id, m.role, m.created_at, lcm_text(m.content), m.id FROM messages m"
                                  " JOIN temp.purge_messages p ON p.id = m.id ORDER BY m.id LIMIT ?", (EXAMPLES,)):
        examples.append({"uuid": row[0], "session_id": row[1], "role": row[2], "created_at": row[3],
                         "preview": sel.previews.get(mid) or _preview(row[4], None, None)})
    files = conn.execute(f"SELECT count(*) FROM files WHERE {FILES_OF_PURGE}").fetchone()[0]
    checkpoints = _doomed_checkpoints(conn, sel)
    return {
        "what": sel.what,
        "messages": len(sel.message_ids),
        "sessions": sorted(sel.sessions),
        "summaries": conn.execute("SELECT count(*) FROM temp.purge_summaries").fetchone()[0],
        "files": files,
        "checkpoints": len(checkpoints),
        "notes": len(sel.notes),
        "titles": len(sel.titles) + len(sel.leaf_titles),
        "hidden_only": len(sel.hidden_only),
        "checked_by_text": sel.checked_by_text,
        "map_items": len(sel.map_runs) + len(sel.map_items),
        "log_lines": sum(map(len, sel.log_lines.values())),
        "checkpoint_files": sorted({r[1] for r in checkpoints if r[1] and os.path.isfile(r[1])}),
        "examples": examples,
    }


def _preview(text: str, literal: str | None, pattern: re.Pattern | None) -> str:
    """A short look at a message, with the purged text itself blanked."""
    if literal is not None:
        text = text.replace(literal, "[purged text]")
    elif pattern is not None:
        text = pattern.sub("[purged text]", text)
    try:
        import lcm.base.mask  # the secret masking of every printed text, where present
        text = lcm.base.mask.mask(text)
    except ImportError:
        pass
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 3] + "..."


def _locks(sessions: set[str]):
    """Hold every affected session's compaction lock (a running compaction would write a summary
    of messages being deleted)."""
    import contextlib
    import lcm.summary.compact
    stack = contextlib.ExitStack()
    try:
        for sid in sorted(sessions):
            stack.enter_context(lcm.summary.dag.session_lock(sid, blocking=False))
    except BaseException:
        stack.close()
        raise
    return stack


def purge(conn, sel: Selection) -> dict:
    """Carry out a purge (see the module docstring); returns plan()'s document plus what was done."""
    with _locks(sel.sessions):
        # overwrite deleted content with zeros instead of leaving it in free space
        conn.execute("PRAGMA secure_delete = ON")
        with lcm.vault.db.transaction(conn):
            doc = plan(conn, sel)
            checkpoints = _doomed_checkpoints(conn, sel)
            doomed = conn.execute("SELECT uuid, session_id FROM messages WHERE id IN (SELECT id FROM temp.purge_messages)").fetchall()
            uuids = [r[0] for r in doomed]
            now = lcm.base.config.now_iso()
            # the list beside the vault first: it outlives the vault file (lcm.vault.purgelist)
            lcm.vault.purgelist.append(vault_path(conn), uuids)
            conn.execute(lcm.vault.schema.PURGED_TRIGGER)
            # the session too: a bundle of that session carries its purges (lcm.readers.bundle)
            conn.executemany("INSERT OR IGNORE INTO purged (uuid, purged_at, session_id) VALUES (?, ?, ?)",
                             ((u, now, sid) for u, sid in doomed))
            dropped = drop_summaries(conn)
            files = conn.execute(f"SELECT id, path FROM files WHERE {FILES_OF_PURGE}").fetchall()
            lcm.capture.indexes.forget_files(conn, [r[0] for r in conn.execute(
                f"SELECT rowid FROM files WHERE {FILES_OF_PURGE}")])
            conn.executemany("DELETE FROM files WHERE id = ?", ((r[0],) for r in files))
            conn.executemany("DELETE FROM checkpoints WHERE id = ?", ((r[0],) for r in checkpoints))
            notes = sel.notes
            conn.executemany("DELETE FROM notes WHERE id = ?", ((i,) for i in notes))
            # a title names the session in every list: it goes, and the first prompt left stands in
            conn.executemany("UPDATE sessions SET title = NULL WHERE session_id = ?", ((s,) for s in sel.titles))
            for leaf in sel.leaf_titles:
                conn.execute("DELETE FROM leaf_titles WHERE leaf_uuid = ?", (leaf,))
            conn.executemany("DELETE FROM map_items WHERE run_id = ? AND item_index = ?", sel.map_items)
            for run in sel.map_runs:  # a run's prompt is in every item's request: the whole run goes
                conn.execute("DELETE FROM map_items WHERE run_id = ?", (run,))
                conn.execute("DELETE FROM map_runs WHERE id = ?", (run,))
            for sid in _doomed_digests(conn, sel):
                conn.execute("DELETE FROM digests WHERE session_id = ?", (sid,))
            conn.executemany("DELETE FROM compactions WHERE uuid = ?", ((u,) for u in uuids))
            conn.executemany("DELETE FROM agent_calls WHERE call_uuid = ?", ((u,) for u in uuids))
            for sid in sel.whole_sessions:
                for table in ("compactions", "agent_calls", "threads"):
                    conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (sid,))
            # the exchange windows (lcm.capture.indexes) hold their text until told exactly what to forget
            purged = [r[0] for r in conn.execute("SELECT id FROM temp.purge_messages")]
            rewindow = lcm.capture.indexes.forget(conn, purged)
            # a packed line's block is rewritten without it: no compressed copy survives
            lines = lcm.vault.store.remove_lines(conn, purged)
            conn.execute("DELETE FROM messages WHERE id IN (SELECT id FROM temp.purge_messages)")
            doc["dictionaries_replaced"] = _clean_dictionaries(conn, sel)
            lcm.capture.indexes.reindex(conn, rewindow)
            for sid in sel.sessions:  # a session with nothing left is forgotten too
                conn.execute("DELETE FROM sessions WHERE session_id = ? AND NOT EXISTS"
                             " (SELECT 1 FROM messages WHERE session_id = ?)", (sid, sid))
            # FTS5 keeps a deleted row's terms in its old segments until they are merged
            if uuids or dropped or notes or sel.titles or sel.leaf_titles or sel.map_runs or sel.map_items:
                for table in fts_tables(conn):
                    conn.execute(f"INSERT INTO \"{table}\"(\"{table}\") VALUES ('optimize')")
        # a damaged block went whole: the removed lines in it, and its other messages (unreadable already)
        doc["unreadable"] = lines["unreadable"]
        doc["unreadable_kept"] = len(lines["others"])
        doc["files_removed"] = _remove_files(conn, [r[1] for r in files])
        doc["log_lines_removed"] = _forget_log_lines(str(lcm.base.config.lcm_home()), sel.log_lines)
        doc["wal_emptied"] = _empty_wal(conn)
    doc["backups"] = backups_beside(conn)
    return doc


def vault_path(conn) -> str:
    """The file of the vault `conn` has open."""
    return conn.execute("PRAGMA database_list").fetchone()[2]


def _clean_dictionaries(conn, sel: Selection) -> int:
    """Replace each text dictionary holding the matched text by one without those lines (every
    row compressed with it is compressed again); returns how many were replaced."""
    if sel.dictionary_hit is None or not _has_table(conn, "zdicts"):
        return 0
    hit = sel.dictionary_hit
    doomed = [r[0] for r in conn.execute("SELECT id, data FROM zdicts")
              if any(hit(line) for line in bytes(r[1]).decode("utf-8", "surrogatepass").split("\n"))]
    for dict_id in doomed:
        lcm.vault.squeeze.replace_dictionary(conn, dict_id, lambda line: not hit(line))
    return len(doomed)


def fts_tables(conn) -> list[str]:
    """Every FTS5 table of the vault."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")]


def _remove_files(conn, paths: list[str]) -> int:
    """Delete externalised contents no remaining `files` row points to."""
    removed = 0
    for path in sorted(set(paths)):
        if conn.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone():
            continue  # the same content (same hash) kept for another message
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def _forget_log_lines(home: str, lines: dict[str, list[int]]) -> int:
    """Rewrite lcm.log (and its rotated copy) without the matching lines; returns how many went.
    The new file replaces the old one atomically with the same 0600 mode; a line a hook appends
    meanwhile may be lost with it, never a line of the purge's."""
    removed = 0
    for name, numbers in lines.items():
        path, drop = os.path.join(home, name), set(numbers)
        try:
            with open(path, "rb") as f:
                kept = [line for i, line in enumerate(f) if i not in drop]
        except OSError:
            continue
        tmp = path + ".purge"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.writelines(kept)
        os.replace(tmp, path)
        removed += len(drop)
    return removed


def _empty_wal(conn) -> bool:
    """Copy the WAL into the vault and truncate it to zero bytes: the WAL still holds the page
    images from before the delete. False when another connection kept it from finishing."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        return True
    busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return busy == 0


# whole copies of the vault lcm leaves beside it: lcm_doctor.py --fix's copy before it repairs,
# the file a restore replaced, the damaged file a recovery moved aside
COPY_MARKS = (".backup-", ".replaced-", ".damaged-")


def copies_beside(path: str) -> list[str]:
    """The copies of the vault at `path` that lie beside it (COPY_MARKS): they hold whatever was
    purged after they were made (lcm.care.backup rewrites them after a purge)."""
    directory, name = os.path.split(path)
    try:
        return sorted(os.path.join(directory, n) for n in os.listdir(directory or ".")
                      if n.startswith(tuple(name + mark for mark in COPY_MARKS))
                      and not n.endswith(("-wal", "-shm", "-journal")))
    except OSError:
        return []


def backups_beside(conn) -> list[str]:
    """copies_beside the vault `conn` has open."""
    return copies_beside(conn.execute("PRAGMA database_list").fetchone()[2])
