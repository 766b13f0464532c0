"""One guard opens every vault: `--db` at something that is not an lcm vault (another
application's SQLite database, an empty file, /dev/null, a FIFO, a directory) is refused by every
command with `Error:` and a hint, and left exactly as it was; a command that only reads opens the
vault read-only and never creates, migrates or changes a file."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.vault.schema
from conftest import SCRIPTS
from fake_anthropic import make_fake_claude
from transcripts import coding_session

# every command, with arguments that get it as far as opening the vault; True = it writes
COMMANDS = [
    ("lcm_status", [], False),
    ("lcm_sessions", [], False),
    ("lcm_grep", ["parser"], False),
    ("lcm_export", [], False),
    ("lcm_describe", ["sum_0123456789abcdef"], False),
    ("lcm_expand", ["sum_0123456789abcdef"], False),
    ("lcm_resume", ["--session", "abc"], False),
    ("lcm_remember", ["--list"], False),
    ("lcm_purge", ["--match", "parser"], False),
    ("lcm_doctor", [], False),
    ("lcm_view", ["--no-browser", "--port", "0"], False),
    ("lcm_init", [], True),
    ("lcm_ingest", ["{projects}"], True),
    ("lcm_compact", ["--all"], True),
    ("lcm_checkpoint", ["--vault-only", "--session", "abc"], True),
    ("lcm_remember", ["the deploy key lives in vault"], True),
    ("lcm_remember", ["--forget", "note_0123456789abcdef"], True),
    ("lcm_purge", ["--match", "parser", "--yes"], True),
    ("lcm_doctor", ["--fix"], True),
    ("lcm_expand_query", ["--prompt", "why?", "--summary-ids", "sum_0123456789abcdef"], True),
    ("lcm_llm_map", ["--input", "{items}", "--output", "{out}", "--prompt", "classify"], True),
    ("lcm_agentic_map", ["--input", "{items}", "--output", "{out}", "--prompt", "look"], True),
]
IDS = [f"{name}{'-' + args[0].lstrip('-') if args and name in ('lcm_remember', 'lcm_purge', 'lcm_doctor') else ''}"
       f"{'-yes' if '--yes' in args else ''}{'-fix' if '--fix' in args else ''}" for name, args, _ in COMMANDS]


@pytest.fixture
def workdir(isolated_home, tmp_path, monkeypatch):
    # a model backend for the map commands, which need one before they open the vault
    monkeypatch.setenv("PATH", f"{make_fake_claude(tmp_path / 'bin').dir}:/usr/bin:/bin")
    coding_session(tmp_path / "projects", turns=2).write()
    (tmp_path / "items.jsonl").write_text('{"text": "one"}\n')
    return tmp_path


def _command(workdir, name, args, db) -> list[str]:
    values = {"projects": workdir / "projects", "items": workdir / "items.jsonl", "out": workdir / "out.jsonl"}
    return [sys.executable, str(SCRIPTS / f"{name}.py"), *(a.format(**values) for a in args), "--db", str(db)]


def _run(workdir, name, args, db) -> subprocess.CompletedProcess:
    # a FIFO would block open() until a writer comes: the timeout turns a hang into a failure
    return subprocess.run(_command(workdir, name, args, db), capture_output=True, text=True, timeout=60,
                          cwd=workdir, stdin=subprocess.DEVNULL)


def _foreign(path) -> None:
    """Another application's database, in SQLite's default rollback-journal mode."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, body TEXT)")  # a name lcm also uses
    conn.execute("INSERT INTO contacts VALUES ('Ada', '555-0100')")
    conn.commit()
    conn.close()


def _snapshot(path) -> tuple:
    directory = os.path.dirname(path)
    if os.path.isdir(path):
        return ("dir", sorted(os.listdir(path)), os.stat(path).st_mtime_ns)
    st = os.stat(path)
    data = open(path, "rb").read() if os.path.isfile(path) else None
    return (data, st.st_mtime_ns, st.st_mode, sorted(os.listdir(directory)))


def _target(kind: str, workdir):
    if kind == "devnull":
        return "/dev/null"
    path = workdir / "targets" / kind
    path.parent.mkdir(exist_ok=True)
    if kind == "foreign.sqlite":
        _foreign(path)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    return str(path)


@pytest.mark.parametrize("kind", ["foreign.sqlite", "empty", "devnull", "fifo", "directory"])
@pytest.mark.parametrize("name,args,writes", COMMANDS, ids=IDS)
def test_what_is_not_a_vault_is_refused_and_left_as_it_was(workdir, kind, name, args, writes):
    target = _target(kind, workdir)
    before = _snapshot(target)
    proc = _run(workdir, name, args, target)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.startswith("Error: ") and "\nHint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert _snapshot(target) == before
    if kind == "foreign.sqlite":
        assert "not an lcm vault" in proc.stderr
        header = open(target, "rb").read(20)
        assert header[18:20] == b"\x01\x01"  # still a rollback-journal database, not switched to WAL


READERS = [(name, args) for name, args, writes in COMMANDS if not writes]


@pytest.fixture
def vault_file(workdir, vault):
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [workdir / "projects"])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return vault


def _files(directory) -> dict:
    """Every file beside the vault with its bytes and time, but SQLite's empty side files: any reader
    of a WAL database may make an empty -wal and the -shm index (the vault itself is untouched)."""
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in directory.iterdir() if p.is_file()
            and not (p.name.endswith("-shm") or p.name.endswith("-wal") and not p.stat().st_size)}


@pytest.mark.parametrize("name,args", [r for r in READERS if r[0] != "lcm_view"],  # it serves until stopped
                         ids=[i for i, c in zip(IDS, COMMANDS) if not c[2] and c[0] != "lcm_view"])
def test_a_reading_command_changes_no_file(workdir, vault_file, name, args):
    before = _files(vault_file.parent)
    _run(workdir, name, args, vault_file)
    assert _files(vault_file.parent) == before


@pytest.mark.parametrize("name,args", READERS, ids=[i for i, c in zip(IDS, COMMANDS) if not c[2]])
def test_a_reading_command_never_creates_a_vault(workdir, name, args):
    missing = workdir / "nowhere" / "lcm.db"
    proc = _run(workdir, name, args, missing)
    assert proc.returncode == 1 and "no vault at" in proc.stderr and not missing.parent.exists()


def test_a_reader_never_migrates_an_older_vault(workdir, vault_file):
    # the vault as schema 4 left it: every table, index and trigger a later migration made is dropped
    ref = sqlite3.connect(":memory:")
    for step in [s for m in lcm.vault.schema.MIGRATIONS[:4] for s in m] + lcm.vault.schema.FTS_MIGRATION:
        step(ref) if callable(step) else ref.execute(step)
    kept = {r[0] for r in ref.execute("SELECT name FROM sqlite_master")}
    conn = sqlite3.connect(vault_file)
    for kind, name in conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger')"
                                   " AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%fts_%'").fetchall():
        if name not in kept:
            conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    before = _files(vault_file.parent)
    for name, args in READERS:
        if name == "lcm_view":
            continue  # it serves until stopped: test_view covers it
        proc = _run(workdir, name, args, vault_file)
        assert "Traceback" not in proc.stderr, (name, proc.stderr)
        assert _files(vault_file.parent) == before, name
        if proc.returncode == 1 and "older lcm" in proc.stderr:
            assert "lcm_init.py" in proc.stderr  # says which writing command upgrades it
    assert _files(vault_file.parent) == before
    proc = _run(workdir, "lcm_grep", ["parser", "--all-sessions"], vault_file)
    assert proc.returncode == 0 and "parser" in proc.stdout  # grep reads what it can
    assert _run(workdir, "lcm_init", [], vault_file).returncode == 0  # a writer upgrades it
    assert sqlite3.connect(vault_file).execute("PRAGMA user_version").fetchone()[0] == lcm.vault.schema.SCHEMA_VERSION


def test_a_writer_still_creates_and_an_empty_file_at_the_vaults_own_place_is_taken(workdir, vault, capsys):
    import lcm_init
    vault.parent.mkdir(parents=True)
    vault.write_bytes(b"")  # what a creation killed before SQLite wrote its first page leaves
    assert lcm_init.main([]) == 0
    assert sqlite3.connect(vault).execute("PRAGMA user_version").fetchone()[0] == lcm.vault.schema.SCHEMA_VERSION
    fresh = workdir / "fresh" / "lcm.db"
    assert lcm_init.main(["--db", str(fresh)]) == 0 and fresh.stat().st_size > 0
