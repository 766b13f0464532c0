"""Full-text indexes derived from the messages, kept up to date at ingest.

messages_cjk  (trigram) the word runs unicode61 cannot split: a run of Chinese, Japanese or
              Korean text is one unicode61 token, Latin words glued into it included
              (`使用PostgreSQL作为` is one token), so neither a CJK substring nor the Latin word is
              found through messages_fts. Only those runs are indexed, not whole messages, so a
              vault of English work pays nothing and a mixed one pays for its CJK text alone.
exchange_fts  (porter unicode61, contentless) short sliding windows of a conversation: each
              prompt or reply with the EXCHANGE_TURNS - 1 prompts and replies before it (tool
              calls and output left out). A question's words and its answer's words meet in one
              window; lcm.search.rank gives a message the best score of a window it sits in.

Both are filled by `catch_up`, inside the writer's transaction, for messages above the
`indexed_through` mark in vault_meta (ids only grow). Library only.
"""
from __future__ import annotations

import re

import lcm.vault.schema

EXCHANGE_TURNS = 4        # turns per window: a question, its answer, and the turn on either side
TURN_CHARS = 600          # of each turn in a window: the question or the answer is in its opening
# lines, and the cap bounds the index (a long reply would otherwise be indexed four times)
# CJK scripts (kana, CJK ideographs, hangul), as SQLite GLOB ranges and as a Python class
CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
FIRST_CJK = "\u3040"
_cjk_char = None  # re.compile(f"[{CJK_CLASS}]") on first use: compiling the class takes ~2 ms,
# a tenth of a hook's whole budget, and a hook's lines are seldom CJK
WORD = re.compile(r"\w+")


def _cjk():
    global _cjk_char
    if _cjk_char is None:
        _cjk_char = re.compile(f"[{CJK_CLASS}]")
    return _cjk_char


def first_cjk(text: str) -> int:
    """Where text's first CJK character is, or -1. ASCII text (most of it) is known without a
    look (isascii is a flag of the string); until the class is compiled, max() rules out text
    with no character as high as the first CJK one, which spares a hook the compile."""
    if text.isascii() or (_cjk_char is None and max(text) < FIRST_CJK):
        return -1
    m = _cjk().search(text)
    return -1 if m is None else m.start()


def cjk_runs(text: str, at: int = 0) -> str:
    """The word runs of `text` holding CJK, space-separated (`at`: where to start looking, e.g.
    first_cjk's answer). Found from each CJK character out to the run's ends, the next search
    starting where that run ends: one regex for whole runs backtracks on every word (18x
    slower, measured)."""
    char = _cjk()
    runs, end = [], 0
    m = char.search(text, at)
    while m is not None:
        start = m.start()
        while start > end and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1
        word = WORD.match(text, m.start())  # None for a code point of the range that is no letter
        end = word.end() if word else m.end()
        runs.append(text[start:end])
        m = char.search(text, end)
    return " ".join(runs)


def _table(conn, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _mark(conn, key: str) -> int | None:
    row = conn.execute("SELECT value FROM vault_meta WHERE key = ?", (key,)).fetchone() \
        if _table(conn, "vault_meta") else None
    return None if row is None else row[0]


class Found:
    """What bulk ingest's parser found in the rows that one transaction moves in (the ids above
    `since`), so that catch_up need not read their text back: the CJK runs of each (an id
    absent holds none), the opening (`opening`) of each that may be a prompt or a reply, and
    the sessions they belong to. Which rows are prompts and replies, the index messages_talk
    says; a talk row without an opening here is read from the vault."""
    __slots__ = ("since", "runs", "openings", "sessions")

    def __init__(self, since: int):
        self.since = since
        self.runs: dict[int, str] = {}
        self.openings: dict[int, str] = {}
        self.sessions: set[str] = set()


def opening(text: str) -> str:
    """A turn's part of a window: what substr(content, 1, TURN_CHARS) gives, which ends at a NUL."""
    head = text[:TURN_CHARS]
    return head.partition("\x00")[0] if "\x00" in head else head


def may_talk(role, is_meta, token_count, content: str, raw) -> bool:
    """schema.TALK_WHERE in Python, for bulk ingest's parser, which hands the writer openings of
    the rows it holds: a row it wrongly keeps costs a little memory, one it wrongly drops a read
    of its text (messages_talk decides which rows are talk)."""
    if is_meta or token_count <= 0:
        return False
    if role == "user":
        return b"tool_use_id" not in raw
    if role != "assistant":
        return False
    space = content.find(" ", 0, 80)  # a tool call's flat text is `Name {input}`
    return space < 0 or not content.startswith("{", space + 1)


def catch_up(conn, budget: int | None = None, found: Found | None = None) -> None:
    """Index what was stored since the last call (inside the caller's transaction): the messages
    above the `indexed_through` mark (at most `budget` ids of them, so that a hook meeting a
    vault just migrated pays a bounded share of its backfill), and new externalised files.

    found (bulk ingest): what its parser found in the messages above id found.since, whose
    text is then not read back here."""
    # which tables exist and both marks in two queries: every Stop hook runs this
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN"
                                         " ('vault_meta', 'files_fts', 'messages_cjk', 'exchange_fts')")}
    marks = dict(conn.execute("SELECT key, value FROM vault_meta WHERE key IN ('files_indexed_through',"
                              " 'indexed_through')").fetchall()) if "vault_meta" in tables else {}
    files_mark = marks.get("files_indexed_through")
    if files_mark is not None and "files_fts" in tables:
        new = conn.execute("SELECT rowid, path FROM files WHERE rowid > ? ORDER BY rowid", (files_mark,)).fetchall()
        for rowid, path in new:
            text = _read(path)
            if text is not None:
                index_file(conn, rowid, text)
        if new:
            conn.execute("UPDATE vault_meta SET value = ? WHERE key = 'files_indexed_through'", (new[-1][0],))
    mark = marks.get("indexed_through")
    if mark is None:
        return  # a vault without these indexes (no FTS5, or not migrated yet)
    top = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    if budget is not None:
        top = min(top, mark + budget)
    if top <= mark:
        return
    if "messages_cjk" in tables:
        # the test in Python: SQLite's GLOB over a character class is ~7x slower (measured). SQL
        # passes on only the text that is not ASCII (more bytes than characters; a NUL, which
        # ends length(), lets its text through too), so most rows never become Python strings.
        since = found.since if found is not None else top
        # text that is not all ASCII (a compressed row cannot say without decoding: it is read)
        rows = conn.execute("SELECT id, lcm_text(content) FROM messages WHERE id > ? AND id <= ? AND CASE WHEN"
                            " typeof(content) = 'blob' THEN 1 ELSE length(CAST(content AS BLOB)) != length(content) END",
                            (mark, min(since, top)))
        conn.executemany("INSERT INTO messages_cjk(rowid, runs) VALUES (?, ?)", [
            (rowid, cjk_runs(content, at)) for rowid, content in rows for at in (first_cjk(content),) if at >= 0])
        if found is not None and top > since:
            conn.executemany("INSERT INTO messages_cjk(rowid, runs) VALUES (?, ?)", sorted(
                (rowid, runs) for rowid, runs in found.runs.items() if max(mark, since) < rowid <= top and runs))
    if "exchange_fts" in tables:
        conn.executemany("INSERT INTO exchange_fts(rowid, text) VALUES (?, ?)", list(_windows(conn, mark, top, found)))
    conn.execute("UPDATE vault_meta SET value = ? WHERE key = 'indexed_through'", (top,))


def _windows(conn, mark: int, top: int, found: Found | None = None):
    """(id of a window's last turn, the window's text) for each prompt or reply in (mark, top]."""
    talk = ("SELECT id, session_id, agent_id, substr(lcm_text(content), 1, ?) FROM messages INDEXED BY messages_talk"
            f" WHERE {lcm.vault.schema.talk_where(conn)}")
    recent: dict = {}  # (session, thread) -> its last turns
    upto = top if found is None else min(found.since, top)
    rows = conn.execute(f"SELECT id, session_id, agent_id, substr(lcm_text(content), 1, ?) FROM messages"
                        f" WHERE id > ? AND id <= ? AND {lcm.vault.schema.talk_where(conn)} ORDER BY id",
                        (TURN_CHARS, mark, upto)).fetchall() if upto > mark else []
    if found is not None and top > found.since:
        rows += _found_talk(conn, max(mark, found.since), top, found)
    for rowid, sid, agent, text in rows:
        key = (sid, agent)
        turns = recent.get(key)
        if turns is None:  # the turns before the mark, for the first windows of this thread
            before = conn.execute(talk + " AND session_id = ? AND id <= ? AND agent_id IS ? ORDER BY id DESC LIMIT ?",
                                  (TURN_CHARS, sid, mark, agent, EXCHANGE_TURNS - 1)).fetchall()
            turns = [r[3] for r in reversed(before)]
        turns = (turns + [text])[-EXCHANGE_TURNS:]
        recent[key] = turns
        yield rowid, "\n".join(turns)


def _found_talk(conn, low: int, top: int, found: Found) -> list[tuple]:
    """(id, session, thread, opening) of the prompts and replies in (low, top], all in found's
    sessions: which rows they are from messages_talk's entries (a few index pages, where
    evaluating TALK_WHERE reads each row's whole original line), their openings from found."""
    talk: list = []
    query = (f"SELECT id, session_id, agent_id FROM messages INDEXED BY messages_talk WHERE {lcm.vault.schema.talk_where(conn)}"
             " AND session_id = ? AND id > ? AND id <= ?")
    for sid in found.sessions:
        talk += map(tuple, conn.execute(query, (sid, low, top)))
    talk.sort()
    openings = found.openings
    unknown = [row[0] for row in talk if row[0] not in openings]
    read = {}
    for i in range(0, len(unknown), 500):
        chunk = unknown[i:i + 500]
        read.update(map(tuple, conn.execute(f"SELECT id, substr(lcm_text(content), 1, ?) FROM messages WHERE id IN"
                                            f" ({','.join('?' * len(chunk))})", (TURN_CHARS, *chunk))))
    return [(rowid, sid, agent, openings[rowid] if rowid in openings else read[rowid]) for rowid, sid, agent in talk]


def _thread_turns(conn, sid: str, agent) -> list[tuple[int, str]]:
    """[(id, opening of its text)] of every prompt and reply of one thread, in order."""
    return conn.execute(f"SELECT id, substr(lcm_text(content), 1, ?) FROM messages INDEXED BY messages_talk WHERE"
                        f" {lcm.vault.schema.talk_where(conn)} AND session_id = ? AND agent_id IS ? ORDER BY id",
                        (TURN_CHARS, sid, agent)).fetchall()


def forget(conn, ids: list[int]) -> list[int]:
    """Take every window holding one of the messages `ids` out of exchange_fts, before those
    messages are deleted or rewritten (a contentless index is told the exact text it indexed,
    rebuilt here from the messages as they still are). Returns the ends of those windows that
    are not among `ids`: `reindex` gives them their new windows afterwards."""
    if not ids or not _table(conn, "exchange_fts"):
        return []
    doomed, ends = set(ids), []
    threads = set()
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        threads.update(conn.execute(f"SELECT DISTINCT session_id, agent_id FROM messages WHERE id IN"
                                    f" ({','.join('?' * len(chunk))})", chunk).fetchall())
    mark = conn.execute("SELECT value FROM vault_meta WHERE key = 'indexed_through'").fetchone()[0]
    for sid, agent in threads:
        turns = _thread_turns(conn, sid, agent)
        for i, (rowid, _) in enumerate(turns):
            if rowid > mark or not any(t[0] in doomed for t in turns[max(0, i - EXCHANGE_TURNS + 1):i + 1]):
                continue
            text = "\n".join(t[1] for t in turns[max(0, i - EXCHANGE_TURNS + 1):i + 1])
            conn.execute("INSERT INTO exchange_fts(exchange_fts, rowid, text) VALUES ('delete', ?, ?)", (rowid, text))
            if rowid not in doomed:
                ends.append(rowid)
    return ends


def reindex(conn, ends: list[int]) -> None:
    """Index anew the windows ending at `ends` (after `forget` and the change)."""
    for rowid in ends:
        own = conn.execute("SELECT session_id, agent_id FROM messages WHERE id = ?", (rowid,)).fetchone()
        if own is None:
            continue
        before = conn.execute(f"SELECT substr(lcm_text(content), 1, ?) FROM messages INDEXED BY messages_talk WHERE"
                              f" {lcm.vault.schema.talk_where(conn)} AND session_id = ? AND agent_id IS ? AND id <= ?"
                              f" ORDER BY id DESC LIMIT ?", (TURN_CHARS, *own, rowid, EXCHANGE_TURNS)).fetchall()
        conn.execute("INSERT INTO exchange_fts(rowid, text) VALUES (?, ?)",
                     (rowid, "\n".join(r[0] for r in reversed(before))))


DERIVED = ("messages_cjk", "exchange_fts", "files_fts")  # FTS5's own 'rebuild' cannot remake these


def rebuild(conn) -> None:
    """Every index of this module from scratch, inside the caller's transaction (after the
    messages' text was rewritten, e.g. masked anew, or an index was found damaged)."""
    if not _table(conn, "exchange_fts"):
        return
    conn.execute("INSERT INTO exchange_fts(exchange_fts) VALUES ('delete-all')")
    if _table(conn, "messages_cjk"):
        conn.execute("DELETE FROM messages_cjk")
    conn.execute("UPDATE vault_meta SET value = 0 WHERE key = 'indexed_through'")
    if _table(conn, "files_fts"):
        conn.execute("INSERT INTO files_fts(files_fts) VALUES ('delete-all')")
        conn.execute("UPDATE vault_meta SET value = 0 WHERE key = 'files_indexed_through'")
    catch_up(conn)


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None  # a file removed by hand: its outline in `files` is still searchable


def index_file(conn, rowid: int, text: str) -> None:
    """Index an externalised block's text under its `files` rowid (inside the caller's write)."""
    conn.execute("INSERT INTO files_fts(rowid, text) VALUES (?, ?)", (rowid, text))


def forget_files(conn, rowids: list[int]) -> None:
    """Take externalised blocks out of files_fts before their `files` rows go. A contentless index
    is told the text it indexed, read back from disk; if a file is gone, the index is rebuilt
    from the files that remain."""
    if not rowids or not _table(conn, "files_fts"):
        return
    doomed = set(rowids)
    paths = dict(conn.execute("SELECT rowid, path FROM files").fetchall())
    texts = {rowid: _read(paths.get(rowid, "")) for rowid in doomed}
    if all(t is not None for t in texts.values()):
        conn.executemany("INSERT INTO files_fts(files_fts, rowid, text) VALUES ('delete', ?, ?)", texts.items())
        return
    conn.execute("INSERT INTO files_fts(files_fts) VALUES ('delete-all')")
    for rowid, path in paths.items():
        text = None if rowid in doomed or rowid > (_mark(conn, "files_indexed_through") or 0) else _read(path)
        if text is not None:
            index_file(conn, rowid, text)
