"""lcm_purge.py: the one delete path. A purge leaves no trace of the text, keeps the vault sound,
and no transcript still on disk brings the purged lines back."""
from __future__ import annotations

import json
import sqlite3

import pytest

import lcm_checkpoint
import lcm_compact
import lcm_doctor
import lcm_grep
import lcm_ingest
import lcm_purge
import lcm_remember
from transcripts import Transcript

SECRET = "sk-ant-api03-PurgeMeQx7Zt41Lk9"  # a key: masked in the searchable text, kept in the raw line
PLACE = "Xylophonequokka Close"  # private, not a secret to the masks: indexed for search as it is
TOKEN = "xylophonequokka"  # how the full-text index holds it (lower case)
TAIL = b"phonequokka"  # the index compresses a term's prefix against its neighbour: look for the rest


@pytest.fixture(autouse=True)
def private_stage_dirs(tmp_path, monkeypatch):
    """lcm_doctor looks for dead imports' stage directories here, not in the machine's /dev/shm
    (where other processes' imports come and go)."""
    import lcm.installation
    monkeypatch.setattr(lcm.installation, "stage_parents", lambda: [str(tmp_path)])


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "300")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "200")  # tool results above 800 characters go to files/


def _session(projects, sid, secret_turn=None, turns=24):
    t = Transcript(projects, session_id=sid)
    for i in range(turns):
        if i == secret_turn:
            t.user(f"deploy with the key {SECRET} to the office at {PLACE} please")
            call = t.tool_use("Bash", {"command": f"echo '{PLACE}' && ANTHROPIC_API_KEY={SECRET} ./deploy.sh"})
            t.tool_result(call, f"deployed for {PLACE}; log follows\n" + ("ok line\n" * 150) + f"key used: {SECRET}\n")
        else:
            t.user(f"step {i}: tidy the parser module and run the tests again")
            t.assistant_text(f"done with step {i}; " + "the parser now handles edge cases. " * 8)
    t.write()
    return t


@pytest.fixture
def vault_with_secret(env, isolated_home, vault, capsys):
    projects = isolated_home / ".claude" / "projects"
    _session(projects, "aaaa1111-secret-session", secret_turn=6)
    _session(projects, "bbbb2222-other-session")
    assert lcm_ingest.main(["--all"]) == 0
    for sid in ("aaaa1111-secret-session", "bbbb2222-other-session"):
        assert lcm_compact.main(["--session", sid, "--full"]) == 0
    assert lcm_checkpoint.main(["--session", "aaaa1111-secret-session", "--output", str(isolated_home / "cp.md")]) == 0
    capsys.readouterr()
    return vault


def _db(vault):
    conn = sqlite3.connect(vault)
    conn.row_factory = sqlite3.Row
    return conn


def _traces(vault) -> list[str]:
    """Files of the vault (and lcm's files/) whose bytes still hold the secret."""
    found = []
    for path in [vault, vault.with_name(vault.name + "-wal"), vault.with_name(vault.name + "-shm"),
                 *(vault.parent / "files").glob("*")]:
        if path.exists():
            data = path.read_bytes()
            if SECRET.encode() in data or TAIL in data.lower() or SECRET.lower().encode()[-10:] in data.lower():
                found.append(path.name)
    return found


def _grep_count(capsys, query) -> int:
    capsys.readouterr()
    assert lcm_grep.main([query, "--all-sessions", "--json"]) == 0
    return len(json.loads(capsys.readouterr().out)["results"])


def test_fixture_holds_the_secret_everywhere(vault_with_secret, capsys):
    conn = _db(vault_with_secret)
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] >= 1
    assert conn.execute("SELECT count(*) FROM summaries WHERE depth > 0").fetchone()[0] >= 1
    assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] >= 1
    assert _traces(vault_with_secret)
    assert _grep_count(capsys, TOKEN) >= 1


def test_without_yes_nothing_is_removed(vault_with_secret, capsys):
    before = _db(vault_with_secret).execute("SELECT count(*) FROM messages").fetchone()[0]
    assert lcm_purge.main(["--match", PLACE]) == 0
    out = capsys.readouterr().out
    assert "Would remove 3 messages" in out and "--yes" in out
    assert PLACE not in out  # the dry run's examples blank the text being forgotten
    assert _db(vault_with_secret).execute("SELECT count(*) FROM messages").fetchone()[0] == before
    assert _grep_count(capsys, TOKEN) >= 1


def test_purge_of_a_session_leaves_no_trace(vault_with_secret, isolated_home, capsys):
    other = _db(vault_with_secret).execute(
        "SELECT count(*) FROM messages WHERE session_id = 'bbbb2222-other-session'").fetchone()[0]
    assert lcm_purge.main(["--session", "aaaa1111", "--yes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["removed"] and doc["messages"] == 23 * 2 + 3 and doc["sessions"] == ["aaaa1111-secret-session"]
    conn = _db(vault_with_secret)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM summaries WHERE session_id LIKE 'aaaa%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM checkpoints WHERE session_id LIKE 'aaaa%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM messages WHERE session_id = 'bbbb2222-other-session'"
                        ).fetchone()[0] == other
    conn.close()
    assert _grep_count(capsys, TOKEN) == 0
    assert _grep_count(capsys, "deploy") == 0
    assert _traces(vault_with_secret) == []
    # the transcript is still on disk: neither the next hook's incremental read nor a re-read
    # from the first byte (a lost offset, a copied file) imports the purged lines again
    assert lcm_ingest.main(["--all"]) == 0
    conn = _db(vault_with_secret)
    conn.execute("DELETE FROM transcripts")
    conn.commit()
    conn.close()
    assert lcm_ingest.main(["--all"]) == 0
    assert _grep_count(capsys, TOKEN) == 0
    assert _db(vault_with_secret).execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'"
                                          ).fetchone()[0] == 0
    assert lcm_doctor.main([]) == 0, capsys.readouterr().out


def test_purge_by_match_rebuilds_the_dag_from_what_remains(vault_with_secret, capsys):
    conn = _db(vault_with_secret)
    total = conn.execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'").fetchone()[0]
    untouched = conn.execute("SELECT count(*) FROM summaries WHERE session_id LIKE 'bbbb%'").fetchone()[0]
    conn.close()
    assert lcm_purge.main(["--match", PLACE, "--yes"]) == 0
    assert "Removed 3 messages of 1 session" in capsys.readouterr().out
    conn = _db(vault_with_secret)
    assert conn.execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'").fetchone()[0] == total - 3
    assert conn.execute("SELECT count(*) FROM summaries WHERE session_id LIKE 'bbbb%'").fetchone()[0] == untouched
    conn.close()
    assert _traces(vault_with_secret) == []
    assert lcm_doctor.main([]) == 0, capsys.readouterr().out
    # the next compaction covers every remaining message again
    assert lcm_compact.main(["--session", "aaaa1111-secret-session", "--full"]) == 0
    conn = _db(vault_with_secret)
    uncovered = conn.execute(
        "SELECT count(*) FROM messages m WHERE session_id LIKE 'aaaa%' AND NOT EXISTS"
        " (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id)").fetchone()[0]
    assert uncovered <= 2  # the fresh tail
    assert lcm_doctor.main([]) == 0, capsys.readouterr().out
    assert _grep_count(capsys, "parser") >= 1


def test_purge_one_message_by_uuid(vault_with_secret, capsys):
    conn = _db(vault_with_secret)
    uuid = conn.execute("SELECT uuid FROM messages WHERE content LIKE 'deploy with the key%'").fetchone()[0]
    assert lcm_purge.main(["--message", uuid]) == 0 and "Would remove 1 message " in capsys.readouterr().out
    conn.close()
    assert lcm_purge.main(["--message", uuid, "--yes"]) == 0
    conn = _db(vault_with_secret)
    assert conn.execute("SELECT count(*) FROM messages WHERE uuid = ?", (uuid,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM purged WHERE uuid = ?", (uuid,)).fetchone()[0] == 1
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("argv, message", [
    (["--session", "zzzz"], "no session"),
    (["--session", ""], "--session is empty"),
    (["--message", "not-a-uuid"], "no message"),
    (["--match", "x" * 0], "non-empty"),
    (["--match", ".*", "--regex"], "matches empty text"),
    (["--match", "(", "--regex"], "invalid regular expression"),
])
def test_bad_criteria_are_errors(vault_with_secret, capsys, argv, message):
    assert lcm_purge.main(argv + ["--yes"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and message in err and "Hint: " in err


def test_ambiguous_session_prefix(vault_with_secret, isolated_home, capsys):
    _session(isolated_home / ".claude" / "projects", "aaaa9999-third-session", turns=2)
    assert lcm_ingest.main(["--all"]) == 0
    assert lcm_purge.main(["--session", "aaaa", "--yes"]) == 1
    assert "ambiguous" in capsys.readouterr().err
    assert lcm_purge.main(["--session", "aaaa1111"]) == 0


def test_one_criterion_is_required(vault_with_secret, capsys):
    with pytest.raises(SystemExit) as exc:
        lcm_purge.main(["--yes"])
    assert exc.value.code == 2


def test_doctor_restores_a_lost_purge_guard(vault_with_secret, capsys):
    assert lcm_purge.main(["--match", SECRET, "--yes"]) == 0
    conn = _db(vault_with_secret)
    conn.execute("DROP TRIGGER messages_purged")
    conn.commit()
    conn.close()
    assert lcm_doctor.main([]) == 1
    assert "purged messages" in capsys.readouterr().out
    assert lcm_doctor.main(["--fix"]) == 0
    conn = _db(vault_with_secret)
    conn.execute("DELETE FROM transcripts")
    conn.commit()
    conn.close()
    assert lcm_ingest.main(["--all"]) == 0
    assert _grep_count(capsys, TOKEN) == 0


def test_match_also_forgets_pinned_notes(vault_with_secret, capsys):
    assert lcm_remember.main([f"the office is at {PLACE}", "--global"]) == 0
    assert lcm_remember.main(["keep this note", "--global"]) == 0
    assert lcm_purge.main(["--match", PLACE, "--yes"]) == 0
    assert "1 pinned note" in capsys.readouterr().out
    notes = [r[0] for r in _db(vault_with_secret).execute("SELECT content FROM notes")]
    assert notes == ["keep this note"]
    assert _traces(vault_with_secret) == []


def test_regex_match(vault_with_secret, capsys):
    assert lcm_purge.main(["--match", r"Xylophone\w+ Clo[s]e", "--regex", "--yes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["messages"] == 3 and doc["checkpoints"] >= 0
    assert _traces(vault_with_secret) == []
    assert _db(vault_with_secret).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
