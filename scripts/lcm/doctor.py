"""Health checks of an lcm installation, and the repairs lcm_doctor.py --fix makes.

Each check returns a dict with a `status` ("ok", "warn" or "problem") and its findings. Only a
problem makes lcm_doctor.py exit 1; a warning is advice (a model could upgrade summaries, the
hooks have not run yet). A repair that writes the vault runs only after a backup.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import tempfile
import time

import lcm.compact
import lcm.config
import lcm.db
import lcm.mask
import lcm.schema
import lcm.purge
from lcm.errors import LcmError

HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "PostCompact",
               "SessionEnd")
LOW_DISK_BYTES = 64 << 20     # less free space than this: writes will soon fail
LISTED = 20                   # findings listed per check


def _status(problem: bool, warn: bool = False) -> str:
    return "problem" if problem else "warn" if warn else "ok"


# ---------------------------------------------------------------------------
# The vault
# ---------------------------------------------------------------------------

def integrity(conn) -> dict:
    """PRAGMA integrity_check and the schema version."""
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check(100)")]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    doc = {"result": "ok" if rows == ["ok"] else rows, "schema_version": version,
           "code_schema_version": lcm.schema.SCHEMA_VERSION, "purge_guard": purge_guard(conn)}
    doc["status"] = _status(rows != ["ok"] or version > lcm.schema.SCHEMA_VERSION or not doc["purge_guard"])
    return doc


def purge_guard(conn) -> bool:
    """False when messages were purged but the trigger that keeps them out of the vault is missing."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')")}
    if "purged" not in tables or "messages_purged" in tables:
        return True
    return conn.execute("SELECT 1 FROM purged LIMIT 1").fetchone() is None


def fts(conn) -> dict:
    """Whether each FTS5 index agrees with the text it indexes (FTS5's own integrity-check
    against the content: it re-reads every row)."""
    tables = {}
    for table in lcm.purge.fts_tables(conn):
        try:
            conn.execute(f'INSERT INTO "{table}"("{table}", rank) VALUES (\'integrity-check\', 1)')
            tables[table] = "ok"
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc):
                tables[table] = "not checked (read-only vault)"
            elif "locked" in str(exc) or "busy" in str(exc):  # the check takes the write lock
                tables[table] = "not checked (an import or compaction is writing: run lcm_doctor.py again later)"
            else:
                tables[table] = f"damaged: {exc}"
        except sqlite3.DatabaseError as exc:
            tables[table] = f"damaged: {exc}"
    damaged = [t for t, v in tables.items() if v.startswith("damaged")]
    return {"status": _status(bool(damaged)), "tables": tables, "damaged": damaged,
            "available": bool(tables) or lcm.schema.has_fts5(conn)}


DAG_CHECKS = (
    # (what is wrong, query returning the ids of the summaries at fault)
    ("names a parent that does not list it as a child",
     "SELECT c.id FROM summaries c WHERE c.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM summary_sources s"
     " WHERE s.summary_id = c.parent_id AND s.child_id = c.id)"),
    ("lists a child whose parent is another node (a node with two parents)",
     "SELECT s.summary_id FROM summary_sources s JOIN summaries c ON c.id = s.child_id"
     " WHERE c.parent_id IS NOT s.summary_id"),
    ("is a leaf with summaries as sources, or a condensed node with messages",
     "SELECT p.id FROM summaries p JOIN summary_sources s ON s.summary_id = p.id"
     " WHERE (p.kind = 'leaf') != (s.message_id IS NOT NULL) OR (p.kind = 'leaf') != (p.depth = 0)"),
    ("has a child that is not one depth below it or belongs to another session",
     "SELECT p.id FROM summary_sources s JOIN summaries p ON p.id = s.summary_id JOIN summaries c ON c.id = s.child_id"
     " WHERE c.depth != p.depth - 1 OR c.session_id != p.session_id"),
    ("has no sources",
     "SELECT p.id FROM summaries p WHERE NOT EXISTS (SELECT 1 FROM summary_sources s WHERE s.summary_id = p.id)"),
    ("shares a message with another leaf",
     "SELECT s.summary_id FROM summary_sources s WHERE s.message_id IN (SELECT message_id FROM summary_sources"
     " WHERE message_id IS NOT NULL GROUP BY message_id HAVING count(*) > 1)"),
    ("is a leaf with messages of another session",
     "SELECT s.summary_id FROM summary_sources s JOIN summaries p ON p.id = s.summary_id"
     " JOIN messages m ON m.id = s.message_id WHERE m.session_id != p.session_id"),
    # in conversation order (messages.seq), within the threads the leaf holds (a sub-agent's run
    # may be a leaf of its own, or folded into the main thread's); leaves built on the old ingest
    # order wait for the next lcm_compact.py, which rebuilds them
    ("is a leaf whose messages are not one contiguous run of its session",
     "SELECT leaf.id FROM (SELECT p.id, p.session_id, p.first_message_id AS first, p.last_message_id AS last,"
     " count(*) AS n, min(m.seq) AS lo, max(m.seq) AS hi, sum(m.seq IS NULL) AS unplaced"
     " FROM summaries p JOIN summary_sources s ON s.summary_id = p.id JOIN messages m ON m.id = s.message_id"
     " WHERE p.kind = 'leaf' AND p.built_on != 'ingest' GROUP BY p.id) AS leaf"
     " WHERE leaf.unplaced > 0 OR (SELECT seq FROM messages WHERE id = leaf.first) IS NOT leaf.lo"
     " OR (SELECT seq FROM messages WHERE id = leaf.last) IS NOT leaf.hi OR leaf.n != (SELECT count(*)"
     " FROM messages x WHERE x.session_id = leaf.session_id AND x.seq BETWEEN leaf.lo AND leaf.hi"
     " AND x.thread IN (SELECT t.thread FROM summary_sources ts JOIN messages t ON t.id = ts.message_id"
     " WHERE ts.summary_id = leaf.id))"),
)


def dag(conn) -> dict:
    """The summary DAG's invariants (design: each node one parent at most, a leaf a contiguous
    run of one session, a condensed node's children one depth below, no message in two leaves)."""
    faults: dict[str, list[str]] = {}
    for what, query in DAG_CHECKS:
        for (sid,) in conn.execute(query):
            faults.setdefault(sid, [])
            if what not in faults[sid]:
                faults[sid].append(what)
    total = conn.execute("SELECT count(*) FROM summaries").fetchone()[0]
    return {"status": _status(bool(faults)), "summaries": total, "broken": len(faults),
            "faults": [{"summary_id": s, "problems": p} for s, p in sorted(faults.items())][:LISTED]}


def fallback_levels(conn, backend: dict) -> dict:
    """Summaries written without a model (extractive by choice, or fallback: the model failed
    during their pass) or cut short (truncated)."""
    counts = dict(conn.execute("SELECT level, count(*) FROM summaries WHERE level IN ('extractive', 'fallback',"
                               " 'truncated') GROUP BY level").fetchall())
    sessions = [r[0] for r in conn.execute(
        "SELECT session_id FROM summaries WHERE level IN ('extractive', 'fallback') GROUP BY session_id"
        " ORDER BY count(*) DESC LIMIT ?", (LISTED,))]
    without = counts.get("extractive", 0) + counts.get("fallback", 0)
    upgradable = without if backend["backend"] not in ("none", None) else 0
    return {"status": _status(False, upgradable > 0 or counts.get("fallback", 0) > 0),
            "extractive": counts.get("extractive", 0), "fallback": counts.get("fallback", 0),
            "fallback_ids": [r["id"] for r in lcm.compact.fallback_summaries(conn, LISTED)],
            "truncated": counts.get("truncated", 0), "upgradable": upgradable, "backend": backend["backend"],
            "sessions": sessions}


def disk(conn) -> dict:
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    return disk_at(path)


def disk_at(path: str) -> dict:
    def size(p):
        try:
            return os.path.getsize(p)
        except OSError:
            return 0
    files_bytes = 0
    for directory, _dirs, names in os.walk(lcm.config.files_dir()):
        files_bytes += sum(size(os.path.join(directory, n)) for n in names)
    try:
        free = shutil.disk_usage(os.path.dirname(path) or ".").free
    except OSError:
        free = None
    vault = size(path)
    doc = {"path": path, "vault_bytes": vault, "wal_bytes": size(path + "-wal"), "files_bytes": files_bytes,
           "free_bytes": free}
    doc["status"] = _status(free is not None and free < LOW_DISK_BYTES, free is not None and free < vault)
    return doc


# ---------------------------------------------------------------------------
# Around the vault: stage files, locks, hooks, the model backend
# ---------------------------------------------------------------------------

def stage_parents() -> list[str]:
    """Where bulk imports make their stage directories (lcm.ingest: /dev/shm, else the temp dir)."""
    return sorted({"/dev/shm", tempfile.gettempdir()})


def stage_dirs() -> list[str]:
    """Stage directories of bulk imports whose process is gone."""
    return sorted(path for parent in stage_parents() for path in lcm.db.stale_stages(parent))


def lock_files() -> tuple[list[str], list[str]]:
    """(held, idle) lock files under $LCM_HOME/locks. A lock is an flock the OS releases when its
    holder dies, so an idle file is only litter."""
    directory = lcm.config.lcm_home() / "locks"
    held, idle = [], []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return held, idle
    for name in names:
        path = str(directory / name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            idle.append(path)
        except BlockingIOError:
            held.append(path)
        finally:
            os.close(fd)
    return held, idle


def stale() -> dict:
    dirs = stage_dirs()
    held, idle = lock_files()
    return {"status": _status(bool(dirs)), "stage_dirs": dirs, "locks_held": held, "locks_idle": idle}


def _claude_dir() -> str:
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return os.path.expanduser(base) if base else os.path.join(os.path.expanduser("~"), ".claude")


def hooks_installed() -> list[str]:
    """Where Claude Code would find lcm's hooks: an enabled lcm plugin, a skills-directory
    clone, or hook commands in settings.json that run lcm's hook scripts."""
    where = []
    root = _claude_dir()
    settings = os.path.join(root, "settings.json")
    try:
        with open(settings, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {}
    if isinstance(data, dict):
        enabled = data.get("enabledPlugins")
        if isinstance(enabled, dict):
            where += [f"plugin {name} (enabled in {settings})" for name, on in enabled.items()
                      if on is True and name.split("@")[0] == "lcm"]
        if "session_start.py" in json.dumps(data.get("hooks", {})):
            where.append(f"hook commands in {settings}")
    skills = os.path.join(root, "skills")
    for name in sorted(os.listdir(skills)) if os.path.isdir(skills) else []:
        clone = os.path.join(skills, name)
        if os.path.isfile(os.path.join(clone, "hooks", "hooks.json")) and os.path.isfile(
                os.path.join(clone, "scripts", "lcm_grep.py")):
            where.append(f"skills-directory plugin {clone}")
    return where


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def hooks(conn) -> dict:
    """Installed? And when did each event last run (stamps the hooks leave), and last fail (lcm.log)?"""
    home = lcm.config.lcm_home()
    last_run = {}
    for event in HOOK_EVENTS:
        try:
            last_run[event] = _iso(os.path.getmtime(home / "last-run" / event))
        except OSError:
            last_run[event] = None
    last_error = {}
    try:
        with open(home / "lcm.log", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(" ", 3)
                if len(parts) == 4 and parts[1] in HOOK_EVENTS and "error:" in parts[3]:
                    last_error[parts[1]] = f"{parts[0]} {parts[3].strip()}"[:300]
    except OSError:
        pass
    last_ingest = conn.execute("SELECT max(updated_at) FROM transcripts").fetchone()[0] if conn else None
    where = hooks_installed()
    ran = any(last_run.values())
    doc = {"installed": where, "last_run": last_run, "last_error": last_error, "last_ingest": last_ingest}
    doc["status"] = _status(False, not where or not ran or bool(last_error))
    return doc


def backend() -> dict:
    """The model backend lcm would use now (as lcm_llm picks it, from this environment) and why."""
    import lcm.llm
    try:
        chosen = lcm.llm.resolve_backend()
        choice = lcm.config.get("LCM_LLM")
    except LcmError as exc:
        return {"status": "problem", "backend": None, "reason": exc.message, "hint": exc.hint}
    key = bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))
    sdk = lcm.llm.sdk_available()
    cli = lcm.llm.claude_executable()
    facts = (f"API key {'set' if key else 'not set'}, anthropic SDK {'installed' if sdk else 'not installed'}, "
             f"claude CLI {cli or 'not on PATH'}")
    problem = ((chosen == "anthropic" and not (key and sdk)) or (chosen == "claude" and not cli))
    how = "LCM_LLM" if choice != "auto" else "LCM_LLM=auto picked it"
    doc = {"backend": chosen, "reason": f"{how}; {facts}", "status": _status(problem, chosen == "none")}
    if problem:
        doc["hint"] = lcm.llm.NO_BACKEND_HINT
    elif chosen == "none":
        doc["hint"] = "summaries stay extractive until a model is available: " + lcm.llm.NO_BACKEND_HINT.replace(
            ", or set LCM_LLM=none for extractive summaries without a model", "")
    return doc


# ---------------------------------------------------------------------------
# Repairs (after backup())
# ---------------------------------------------------------------------------

def backup(conn, path: str) -> str:
    """A consistent copy of the vault beside it (SQLite's backup API), mode 0600; returns its path."""
    need = os.path.getsize(path) + (os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0)
    free = shutil.disk_usage(os.path.dirname(path) or ".").free
    if free < need + LOW_DISK_BYTES:
        raise LcmError(f"not enough free space beside {path} for a backup ({need >> 20} MB needed,"
                       f" {free >> 20} MB free)", "free some space on that disk, then run lcm_doctor.py --fix again")
    target = f"{path}.backup-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600))
    dest = sqlite3.connect(target)
    try:
        conn.backup(dest)
    finally:
        dest.close()
    return target


def copy_file(path: str) -> str:
    """A byte copy of a vault SQLite cannot open (and of its -wal), beside it."""
    target = f"{path}.backup-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    for suffix in ("", "-wal"):
        if os.path.exists(path + suffix):
            shutil.copyfile(path + suffix, target + suffix)
            os.chmod(target + suffix, 0o600)
    return target


def rebuild_fts(conn, tables: list[str]) -> None:
    import lcm.indexes  # the indexes derived from the messages are remade by their own module
    with lcm.db.transaction(conn):
        for table in tables:
            if table not in lcm.indexes.DERIVED:
                conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'rebuild\')')
        if set(tables) & set(lcm.indexes.DERIVED):
            lcm.indexes.rebuild(conn)


def drop_broken_summaries(conn, ids: list[str]) -> int:
    """Delete summaries that break the DAG's rules, with their ancestors; the next lcm_compact.py
    summarises their messages again. Returns how many were deleted."""
    with lcm.db.transaction(conn):
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS purge_summaries (id TEXT PRIMARY KEY)")
        conn.execute("DELETE FROM temp.purge_summaries")
        conn.executemany("INSERT OR IGNORE INTO temp.purge_summaries VALUES (?)", ((i,) for i in ids))
        lcm.purge.add_ancestors(conn)
        return lcm.purge.drop_summaries(conn)


def remove_stale(doc: dict) -> list[str]:
    """Delete dead imports' stage directories and idle lock files; returns what went."""
    removed = []
    for path in doc["stage_dirs"]:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    for path in doc["locks_idle"]:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # still idle: nobody waits on this file
            os.remove(path)
            removed.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def remask_content(conn, batch: int = 2000) -> dict:
    """Mask the stored text of a vault filled before masking (or before a new redact.txt
    pattern): messages, summaries and pinned notes (their full-text indexes kept in step),
    checkpoints, stored file explorations and session titles. The original lines in messages.raw are not touched.

    Returns {table: rows changed}. Running it again changes nothing.
    """
    lcm.mask.reload_user_patterns()  # this often runs because a pattern was just added to redact.txt
    changed = {}
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, column, index in (("messages", "content", "messages_fts"), ("summaries", "content", "summaries_fts"),
                                 ("notes", "content", "notes_fts"), ("checkpoints", "content", None),
                                 ("files", "exploration", None), ("sessions", "title", None)):
        if table not in tables:
            continue  # a vault from before that table (notes)
        index = index if index in tables else None
        count, last = 0, -1 << 63
        while True:
            with lcm.db.transaction(conn):
                rows = conn.execute(f"SELECT rowid, {column} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?",
                                    (last, batch)).fetchall()
                for rowid, old in rows:
                    new = lcm.mask.mask(old)
                    if new is old or new == old:
                        continue
                    if index:  # external-content FTS: the old text out, the new in
                        conn.execute(f"INSERT INTO {index}({index}, rowid, content) VALUES ('delete', ?, ?)",
                                     (rowid, old))
                    if table in ("messages", "summaries"):
                        conn.execute(f"UPDATE {table} SET {column} = ?, token_count = ? WHERE rowid = ?",
                                     (new, lcm.config.estimate_tokens(new), rowid))
                    else:
                        conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (new, rowid))
                    if index:
                        conn.execute(f"INSERT INTO {index}(rowid, content) VALUES (?, ?)", (rowid, new))
                    count += 1
            if len(rows) < batch:
                break
            last = rows[-1][0]
        changed[table] = count
    if changed.get("messages"):  # the search indexes derived from the old text, made anew
        from lcm import indexes
        with lcm.db.transaction(conn):
            indexes.rebuild(conn)
    if "vault_meta" in tables:  # every message's text is masked now: output need not mask it again
        with lcm.db.transaction(conn):
            conn.execute("UPDATE vault_meta SET value = (SELECT coalesce(max(id), 0) + 1 FROM messages)"
                         " WHERE key = 'masked_from_message'")
    return changed
