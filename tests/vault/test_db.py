"""lcm.db: vault location, settings validation, migrations, permissions, errors."""
from __future__ import annotations

import sqlite3

import pytest

import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.vault.schema
from lcm.base.errors import LcmError


def test_vault_location_precedence(tmp_path, monkeypatch, isolated_home):
    assert lcm.base.config.db_path() == isolated_home / ".claude-lcm" / "lcm.db"
    monkeypatch.delenv("LCM_HOME")
    assert lcm.base.config.db_path() == isolated_home / ".claude-lcm" / "lcm.db"
    monkeypatch.setenv("LCM_HOME", str(tmp_path / "h"))
    assert lcm.base.config.db_path() == tmp_path / "h" / "lcm.db"
    assert lcm.base.config.files_dir() == tmp_path / "h" / "files"
    monkeypatch.setenv("LCM_DB", str(tmp_path / "x.db"))
    assert lcm.base.config.db_path() == tmp_path / "x.db"
    assert lcm.base.config.db_path(str(tmp_path / "y.db")) == tmp_path / "y.db"


@pytest.mark.parametrize("name,raw", [
    ("LCM_CONTEXT_THRESHOLD", "0"), ("LCM_CONTEXT_THRESHOLD", "high"), ("LCM_FRESH_TAIL_COUNT", "-1"),
    ("LCM_LEAF_CHUNK_TOKENS", "0"), ("LCM_LARGE_FILE_THRESHOLD", "1e3"), ("LCM_LLM", "gpt"),
    ("LCM_INDEX_THINKING", "maybe"),
])
def test_invalid_settings_name_the_variable(monkeypatch, name, raw):
    monkeypatch.setenv(name, raw)
    with pytest.raises(LcmError) as exc:
        lcm.base.config.validate_config()
    assert name in exc.value.message and name in exc.value.hint


def test_settings_parse_and_default(monkeypatch):
    assert lcm.base.config.get("LCM_CONTEXT_THRESHOLD") == 0.75
    monkeypatch.setenv("LCM_CONTEXT_THRESHOLD", "0.5")
    monkeypatch.setenv("LCM_INDEX_THINKING", "off")
    monkeypatch.setenv("LCM_LLM", " None ")
    assert lcm.base.config.get("LCM_CONTEXT_THRESHOLD") == 0.5
    assert lcm.base.config.get("LCM_INDEX_THINKING") is False
    assert lcm.base.config.get("LCM_LLM") == "none"
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "")
    assert lcm.base.config.get("LCM_FRESH_TAIL_COUNT") == 32


def test_connect_creates_private_vault_and_migrates_once(vault):
    conn = lcm.vault.db.connect()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == lcm.vault.schema.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert vault.stat().st_mode & 0o777 == 0o600
    assert vault.parent.stat().st_mode & 0o777 == 0o700
    assert lcm.vault.schema.migrate(conn) == 0
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"sessions", "transcripts", "messages", "summaries", "summary_sources", "files"} <= tables


def test_missing_vault_refused_without_create(vault):
    with pytest.raises(LcmError) as exc:
        lcm.vault.db.connect(create=False)
    assert "no vault" in exc.value.message and exc.value.hint
    assert not vault.exists()


def test_newer_schema_refused_even_read_only(vault):
    lcm.vault.db.connect().close()
    raw = sqlite3.connect(vault)
    raw.execute(f"PRAGMA user_version = {lcm.vault.schema.SCHEMA_VERSION + 1}")
    raw.close()
    for kwargs in ({}, {"readonly": True}):
        with pytest.raises(LcmError) as exc:
            lcm.vault.db.connect(**kwargs)
        assert "newer" in exc.value.message and "upgrade lcm" in exc.value.hint


def test_not_a_database_is_a_clear_error(vault):
    vault.parent.mkdir(parents=True)
    vault.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LcmError) as exc:
        lcm.vault.db.connect()
    assert str(vault) in exc.value.message


def test_transaction_rolls_back_on_error():
    conn = lcm.vault.db.connect()
    with pytest.raises(RuntimeError):
        with lcm.vault.db.transaction(conn):
            conn.execute("INSERT INTO sessions (session_id) VALUES ('s')")
            raise RuntimeError("boom")
    assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


def test_ids_tokens_time():
    assert lcm.base.config.new_id("sum").startswith("sum_") and len(lcm.base.config.new_id("sum")) == 20
    assert lcm.base.config.new_id("file") != lcm.base.config.new_id("file")
    assert lcm.base.config.estimate_tokens("") == 0 and lcm.base.config.estimate_tokens("abcde") == 2
    assert lcm.base.config.now_iso().endswith("Z")


def test_run_turns_errors_into_exit_one(capsys):
    def failing(argv):
        raise LcmError("it broke", "do the other thing")
    assert lcm.cli.run(failing, []) == 1
    assert capsys.readouterr().err == "Error: it broke\nHint: do the other thing\n"


def test_current_session_id(monkeypatch):
    assert lcm.base.config.current_session_id() is None
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "b")
    assert lcm.base.config.current_session_id() == "b"
    monkeypatch.setenv("LCM_SESSION_ID", "a")
    assert lcm.base.config.current_session_id() == "a"


def test_uncreatable_vault_is_a_clear_error(tmp_path, monkeypatch):
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")  # a file where a directory should be: fails even for root
    monkeypatch.setenv("LCM_DB", str(blocker / "sub" / "v.db"))
    with pytest.raises(LcmError) as exc:
        lcm.vault.db.connect()
    assert "cannot create vault" in exc.value.message and exc.value.hint


def _schema(path) -> dict:
    """Every table's columns (name, type, not null, default, primary key) and every index's,
    trigger's and view's SQL, whitespace folded: what a query or a write can tell apart."""
    conn = sqlite3.connect(path)
    found = {}
    for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"):
        if kind == "table":
            found[(kind, name)] = [tuple(c)[1:] for c in conn.execute(f'PRAGMA table_info("{name}")')]
        else:
            found[(kind, name)] = " ".join((sql or "").split())
    conn.close()
    return found


def test_a_vault_migrated_from_the_first_schema_equals_a_fresh_one(tmp_path, monkeypatch):
    """Every migration in order leads where a new vault starts: same tables and columns, same
    indexes, triggers and full-text tables, same schema version."""
    old = tmp_path / "old.db"
    with monkeypatch.context() as m:  # a vault as the first release made it
        m.setattr(lcm.vault.schema, "MIGRATIONS", lcm.vault.schema.MIGRATIONS[:1])
        m.setattr(lcm.vault.schema, "SCHEMA_VERSION", 1)
        lcm.vault.db.connect(str(old)).close()
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone()[0] == 1
    lcm.vault.db.connect(str(old)).close()  # every later migration, as an upgrade runs them
    fresh = tmp_path / "fresh.db"
    lcm.vault.db.connect(str(fresh)).close()
    old_schema, fresh_schema = _schema(old), _schema(fresh)
    assert sorted(old_schema) == sorted(fresh_schema)
    for key in fresh_schema:
        if key[0] == "table":  # ALTER TABLE appends columns: compare them as a set
            assert sorted(old_schema[key]) == sorted(fresh_schema[key]), key
        else:
            assert old_schema[key] == fresh_schema[key], key
    for path in (old, fresh):
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == lcm.vault.schema.SCHEMA_VERSION
