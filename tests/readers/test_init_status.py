"""lcm_init.py and lcm_status.py: idempotent setup, context usage once per API message,
windows and thresholds, FTS health, and refusals that leave the vault as it was."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys

import pytest

import lcm.vault.db
import lcm.vault.schema
import lcm.capture.bulk
import lcm.capture.ingest
import lcm_init
import lcm.readers.status
import lcm_status
from conftest import SCRIPTS, shared_data
from transcripts import Transcript, coding_session

STATUS_KEYS = {"db", "db_bytes", "sessions", "messages", "summaries", "max_depth", "raw_tokens",
               "context_tokens", "context_window", "threshold", "compaction_recommended", "fts_ok"}


@pytest.fixture(autouse=True)
def in_the_project(monkeypatch):
    """Commands run in the transcripts' project (its newest session is the default one)."""
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", "/home/user/proj")


def call(module, capsys, *argv):
    code = module.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def status_json(capsys, *argv):
    code, out, err = call(lcm_status, capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def ingest(path):
    lcm.capture.bulk.ingest_paths(lcm.vault.db.connect(), [path])


def usage(inp, read=0, create=0, out=0):
    return {"input_tokens": inp, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": create, "output_tokens": out}


# -- init ---------------------------------------------------------------------------------------

def test_init_creates_then_is_idempotent(capsys, vault, monkeypatch):
    monkeypatch.setenv("LCM_SESSION_ID", "sess-42")
    code, out, err = call(lcm_init, capsys, "--json")
    first = json.loads(out)
    assert code == 0 and first == {"db": str(vault), "schema_version": lcm.vault.schema.SCHEMA_VERSION,
                                   "session_id": "sess-42", "created": True}
    assert oct(vault.stat().st_mode & 0o777) == "0o600"
    code, out, _ = call(lcm_init, capsys, "--json")
    assert json.loads(out)["created"] is False
    code, out, _ = call(lcm_init, capsys)
    assert code == 0 and str(vault) in out and "sess-42" in out


def test_init_session_falls_back_to_claude_code_variable(capsys, monkeypatch):
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "cc-7")
    _, out, _ = call(lcm_init, capsys, "--json")
    assert json.loads(out)["session_id"] == "cc-7"
    monkeypatch.delenv("CLAUDE_CODE_SESSION_ID")
    _, out, _ = call(lcm_init, capsys)
    assert "Session: none" in out


def test_init_upgrades_an_older_vault(capsys, vault, monkeypatch):
    with monkeypatch.context() as m:  # a vault as schema 1 made it
        m.setattr(lcm.vault.schema, "MIGRATIONS", lcm.vault.schema.MIGRATIONS[:1])
        m.setattr(lcm.vault.schema, "SCHEMA_VERSION", 1)
        lcm.vault.db.connect().close()
    _, out, _ = call(lcm_init, capsys, "--json")
    assert json.loads(out)["schema_version"] == lcm.vault.schema.SCHEMA_VERSION
    cols = [r[1] for r in sqlite3.connect(vault).execute("PRAGMA table_info(transcripts)")]
    assert "line_count" in cols
    assert sqlite3.connect(vault).execute("SELECT count(*) FROM notes").fetchone()[0] == 0


def test_init_refuses_invalid_setting_and_creates_nothing(capsys, vault, monkeypatch):
    monkeypatch.setenv("LCM_CONTEXT_THRESHOLD", "1.5")
    code, out, err = call(lcm_init, capsys)
    assert code == 1 and out == ""
    assert err.startswith("Error: invalid LCM_CONTEXT_THRESHOLD") and "Hint:" in err
    assert not vault.exists()


def test_init_refuses_newer_vault_unchanged(capsys, vault):
    lcm.vault.db.connect().close()
    conn = sqlite3.connect(vault)
    conn.execute(f"PRAGMA user_version = {lcm.vault.schema.SCHEMA_VERSION + 1}")
    conn.close()
    before = hashlib.sha256(vault.read_bytes()).hexdigest()
    code, _, err = call(lcm_init, capsys)
    assert code == 1 and "newer than this lcm" in err and "Hint:" in err
    assert hashlib.sha256(vault.read_bytes()).hexdigest() == before


# -- status: context figures --------------------------------------------------------------------

def test_context_counts_each_api_message_once(capsys, tmp_path):
    t = Transcript(tmp_path / "projects")
    t.user("go")
    # one API response split over three lines, each repeating the same final usage
    for block in ("thinking", "text", "tool"):
        t.assistant_text(block, msg_id="msg_same", usage=usage(10, 50_000, 2_000, 300))
    t.write()
    ingest(t.path)
    s = status_json(capsys, "--session", t.session_id)
    assert set(s) >= STATUS_KEYS
    assert s["context_tokens"] == 52_310
    assert s["context_window"] == 200_000 and s["threshold"] == 150_000
    assert s["compaction_recommended"] is False


def test_latest_response_wins_and_synthetic_zero_usage_is_skipped(capsys, tmp_path):
    t = Transcript(tmp_path / "projects")
    t.user("go")
    t.assistant_text("old", usage=usage(1, 1000))
    t.assistant_text("new", usage=usage(1, 160_000, 0, 9))
    t.assistant_text("API Error", usage=usage(0))
    t.write()
    ingest(t.path)
    s = status_json(capsys, "--session", t.session_id)
    assert s["context_tokens"] == 160_010 and s["compaction_recommended"] is True


def test_threshold_follows_the_setting(capsys, tmp_path, monkeypatch):
    t = Transcript(tmp_path / "projects")
    t.assistant_text("hi", usage=usage(1, 120_000))
    t.write()
    ingest(t.path)
    assert status_json(capsys)["compaction_recommended"] is False
    monkeypatch.setenv("LCM_CONTEXT_THRESHOLD", "0.5")
    s = status_json(capsys)
    assert s["threshold"] == 100_000 and s["compaction_recommended"] is True


def test_one_million_windows(capsys, tmp_path):
    assert lcm.readers.status.context_window("claude-sonnet-4-5[1m]") == 1_000_000
    assert lcm.readers.status.context_window("claude-opus-4-1") == 200_000
    assert lcm.readers.status.context_window(None) == 200_000
    t = Transcript(tmp_path / "projects")
    t.assistant_text("big", usage=usage(5, 450_000))
    t.write()
    ingest(t.path)
    s = status_json(capsys)
    assert s["context_window"] == 1_000_000 and s["threshold"] == 750_000
    assert s["compaction_recommended"] is False


def test_compaction_newer_than_usage_resets_context(capsys, tmp_path):
    t = coding_session(tmp_path / "projects", turns=1)
    boundary = t.compact_boundary()
    boundary_line = json.loads(t.pending[-1])
    boundary_line["compactMetadata"]["postTokens"] = 4321
    t.pending[-1] = json.dumps(boundary_line)
    t.write()
    ingest(t.path)
    assert status_json(capsys, "--session", boundary["sessionId"])["context_tokens"] == 4321


def test_session_choice_env_then_most_recent(capsys, tmp_path, monkeypatch):
    old = Transcript(tmp_path / "projects", start="2026-01-01T00:00:00Z")
    old.assistant_text("a", usage=usage(1, 1000))
    new = Transcript(tmp_path / "projects", start="2026-02-01T00:00:00Z")
    new.assistant_text("b", usage=usage(1, 2000))
    old.write(), new.write()
    ingest(tmp_path / "projects")
    assert status_json(capsys)["context_tokens"] == 2001
    monkeypatch.setenv("LCM_SESSION_ID", old.session_id)
    assert status_json(capsys)["context_tokens"] == 1001


def test_status_on_real_transcripts(capsys, monkeypatch):
    ingest(shared_data("claude-projects"))
    newest = lcm.vault.db.connect().execute("SELECT project FROM sessions ORDER BY last_at DESC LIMIT 1").fetchone()[0]
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", newest)
    s = status_json(capsys)
    assert s["messages"] == 2855 and s["sessions"] > 10 and s["raw_tokens"] > 0
    assert s["fts_ok"] is True and s["summaries"] == 0 and s["max_depth"] is None
    assert s["db_bytes"] > 0 and isinstance(s["context_tokens"], int)
    code, out, _ = call(lcm_status, capsys)
    assert code == 0 and "2855 messages" in out and len(out.splitlines()) <= 4


def test_fts_damage_is_reported(capsys, tmp_path, vault):
    t = coding_session(tmp_path / "projects", turns=1)
    t.write()
    ingest(t.path)
    conn = sqlite3.connect(vault)
    # tell the index a row held different text than it does: the index no longer matches the content
    row = conn.execute("SELECT id, content FROM messages LIMIT 1").fetchone()
    conn.execute("INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', ?, ?)",
                 (row[0], "unrelated words entirely"))
    conn.commit()
    conn.close()
    assert status_json(capsys)["fts_ok"] is False


# -- status: refusals ---------------------------------------------------------------------------

def test_status_without_vault(capsys, vault):
    code, out, err = call(lcm_status, capsys)
    assert code == 1 and err.startswith("Error: no vault") and "Hint:" in err
    assert not vault.exists()


def test_status_unknown_session(capsys, tmp_path):
    lcm.vault.db.connect().close()
    code, _, err = call(lcm_status, capsys, "--session", "nope")
    assert code == 1 and "no session 'nope'" in err and "Hint:" in err


def test_status_invalid_setting(capsys, monkeypatch):
    lcm.vault.db.connect().close()
    monkeypatch.setenv("LCM_CONTEXT_THRESHOLD", "abc")
    code, _, err = call(lcm_status, capsys)
    assert code == 1 and "LCM_CONTEXT_THRESHOLD" in err


def test_status_newer_vault(capsys, vault):
    lcm.vault.db.connect().close()
    conn = sqlite3.connect(vault)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    code, _, err = call(lcm_status, capsys)
    assert code == 1 and "newer" in err


def test_scripts_run_as_subprocesses(tmp_path):
    env = {**os.environ, "LCM_HOME": str(tmp_path / "lcm")}
    for script in ("lcm_init.py", "lcm_status.py"):
        done = subprocess.run([sys.executable, str(SCRIPTS / script), "--json"], capture_output=True,
                              text=True, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)
    helped = subprocess.run([sys.executable, str(SCRIPTS / "lcm_status.py"), "--help"], capture_output=True, text=True)
    assert "Examples:" in helped.stdout


def test_large_vault_gets_a_quick_fts_check_unless_asked(capsys, tmp_path, vault, monkeypatch):
    t = coding_session(tmp_path / "projects", turns=1)
    t.write()
    ingest(t.path)
    monkeypatch.setattr(lcm.readers.status, "FULL_CHECK_MAX_ROWS", 3)  # this vault now counts as large
    assert status_json(capsys)["fts_ok"] is True
    conn = sqlite3.connect(vault)
    row = conn.execute("SELECT id, content FROM messages LIMIT 1").fetchone()
    conn.execute("INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', ?, ?)",
                 (row[0], "unrelated words entirely"))
    conn.commit()
    assert status_json(capsys, "--check-fts")["fts_ok"] is False  # the full check sees the damage
    conn.execute("DELETE FROM messages_fts_docsize WHERE id = (SELECT max(id) FROM messages_fts_docsize)")
    conn.commit()
    conn.close()
    assert status_json(capsys)["fts_ok"] is False  # the quick check sees a row missing from the index


# -- status: what each figure is, which session, which window -----------------------------------

def test_status_says_which_session_and_why(capsys, tmp_path, monkeypatch):
    old = Transcript(tmp_path / "projects", start="2026-01-01T00:00:00Z")
    old.assistant_text("a", usage=usage(1, 1000))
    new = Transcript(tmp_path / "projects", start="2026-02-01T00:00:00Z")
    new.assistant_text("b", usage=usage(1, 2000))
    old.write(), new.write()
    ingest(tmp_path / "projects")
    code, out, _ = call(lcm_status, capsys)
    assert code == 0 and f"Session {new.session_id}" in out
    assert "the newest session of this project: no current session is set (--session ID picks another)" in out
    monkeypatch.setenv("LCM_SESSION_ID", old.session_id)
    s = status_json(capsys)
    assert s["session_id"] == old.session_id and s["session_reason"] == "the current session ($LCM_SESSION_ID)"
    assert status_json(capsys, "--session", new.session_id)["session_reason"] == "given by --session"


def test_status_explains_both_figures_and_never_sends_claude_code_context_to_lcm_compact(capsys, tmp_path,
                                                                                        monkeypatch):
    """Claude Code's own context is lowered only by /compact: above the threshold the advice is
    /compact, never lcm_compact.py; lcm's own figure is the one lcm_compact.py lowers, and it
    does go down when lcm compacts."""
    import lcm_compact
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "1")
    monkeypatch.setenv("LCM_LLM", "none")
    t = coding_session(tmp_path / "projects", turns=12)
    t.assistant_text("done", usage=usage(1, 180_000))
    t.write()
    ingest(t.path)
    code, out, _ = call(lcm_status, capsys)
    assert code == 0 and "lcm_compact.py (" not in out and "compaction recommended" not in out
    claude_line = next(ln for ln in out.splitlines() if ln.startswith("Claude Code's context:"))
    assert "180001 of 200000 tokens (90%" in claude_line and "run /compact in Claude Code" in claude_line
    lcm_line = next(ln for ln in out.splitlines() if ln.startswith("lcm's view"))
    assert f"lcm_compact.py --session {t.session_id} lowers it" in lcm_line and "not Claude Code's context" in lcm_line
    before = status_json(capsys)
    assert call(lcm_compact, capsys, "--session", t.session_id, "--full")[0] == 0
    after = status_json(capsys)
    assert after["lcm_context_tokens"] < before["lcm_context_tokens"]
    assert after["context_tokens"] == before["context_tokens"] and after["compaction_recommended"] is True


def test_context_window_from_the_setting_the_model_id_or_the_usage(capsys, tmp_path, monkeypatch):
    t = Transcript(tmp_path / "projects")
    t.assistant_text("hi", usage=usage(1, 150_000))
    t.write()
    ingest(t.path)
    s = status_json(capsys)
    assert (s["context_window"], s["compaction_recommended"]) == (200_000, True)
    assert s["context_window_source"].startswith("default")
    monkeypatch.setenv("LCM_CONTEXT_WINDOW", "1000000")
    s = status_json(capsys)
    assert (s["context_window"], s["threshold"], s["compaction_recommended"]) == (1_000_000, 750_000, False)
    assert s["context_window_source"] == "LCM_CONTEXT_WINDOW"
    code, out, _ = call(lcm_status, capsys)
    assert "150001 of 1000000 tokens (15%; window from LCM_CONTEXT_WINDOW)" in out
    monkeypatch.delenv("LCM_CONTEXT_WINDOW")
    assert lcm.readers.status.window_and_source("claude-opus-4-6[1m]") == (1_000_000, "model id claude-opus-4-6[1m]")
    assert lcm.readers.status.window_and_source("claude-opus-4-6", 300_000) == (1_000_000, "300000 tokens seen in use")
    monkeypatch.setenv("LCM_CONTEXT_WINDOW", "a lot")
    code, _, err = call(lcm_status, capsys)
    assert code == 1 and "LCM_CONTEXT_WINDOW" in err


def test_status_right_after_an_import_does_not_send_you_to_import_again(capsys, tmp_path, monkeypatch):
    """Outside any session, in a directory none of the imported sessions ran in, status said
    "Session: none yet (run ... ingest --all)", the import just done."""
    t = coding_session(tmp_path / "projects", turns=1, cwd="/home/user/elsewhere")
    t.write()
    monkeypatch.chdir(tmp_path)
    code, out, _ = call(lcm_status, capsys)          # no vault yet
    assert code == 1
    monkeypatch.setenv("LCM_LLM", "none")
    lcm.vault.db.connect()
    code, out, _ = call(lcm_status, capsys)          # an empty vault: nothing stored yet
    assert code == 0 and "Session: none yet" in out and "lcm_ingest.py --all" in out
    ingest(t.path)
    code, out, _ = call(lcm_status, capsys)
    line = next(ln for ln in out.splitlines() if ln.startswith("Session"))
    assert code == 0 and "none here" in line and "lcm_ingest.py" not in line
    assert "lcm_sessions.py lists the stored sessions" in line
