"""lcm_doctor.py: checks a vault and its installation, and repairs what it can after a backup."""
from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys

import pytest

import lcm.care.doctor
import lcm.base.mask
import lcm.care.installation
import lcm.vault.db
import lcm_compact
import lcm_doctor
import lcm_grep
import lcm_ingest
import lcm_status
from conftest import ROOT, SCRIPTS, mount_tmpfs, run, shared_data
from transcripts import Transcript
from conftest import one_transcript, run


@pytest.fixture
def stage_root(tmp_path, monkeypatch):
    """Where the doctor looks for import stage directories: private to the test (the machine's
    /dev/shm may hold other processes' directories)."""
    root = tmp_path / "shm"
    root.mkdir()
    monkeypatch.setattr(lcm.care.installation, "stage_parents", lambda: [str(root)])
    return root


@pytest.fixture
def healthy(isolated_home, vault, stage_root, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "300")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    t = Transcript(isolated_home / ".claude" / "projects", session_id="doc-session")
    for i in range(20):
        t.user(f"step {i}: make the importer faster")
        t.assistant_text(f"step {i} done; " + "profiling showed the parser dominates. " * 8)
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    assert lcm_compact.main(["--session", "doc-session", "--full"]) == 0
    capsys.readouterr()
    return vault


def _doctor(capsys, *argv) -> tuple[int, dict]:
    code = lcm_doctor.main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_healthy_vault(healthy, capsys):
    code, doc = _doctor(capsys)
    assert code == 0 and doc["integrity"] == "ok" and doc["problems"] == 0
    for key in ("schema", "fts", "dag", "stale", "fallback", "hooks", "backend", "disk"):
        assert doc[key]["status"] in ("ok", "warn"), (key, doc[key])
    assert doc["dag"]["summaries"] >= 3 and doc["dag"]["broken"] == 0
    assert doc["fallback"]["extractive"] >= 3  # LCM_LLM=none wrote them
    assert doc["backend"]["backend"] == "none" and "LCM_LLM" in doc["backend"]["reason"]
    assert doc["disk"]["vault_bytes"] > 0 and doc["disk"]["free_bytes"] > 0
    assert doc["backup"] is None
    assert lcm_doctor.main([]) == 0
    out = capsys.readouterr().out
    assert "Healthy." in out and "integrity: ok" in out


def test_doctor_help_says_the_exit_status(capsys):
    with pytest.raises(SystemExit):
        lcm_doctor.main(["--help"])
    assert "1 when a problem is found" in " ".join(capsys.readouterr().out.split())


def test_broken_fts_index_is_found_and_fixed_after_a_backup(healthy, capsys):
    conn = sqlite3.connect(healthy)
    # text changed behind the index's back (as a write without its trigger would)
    conn.execute("UPDATE messages SET content = 'zanzibar quokka' WHERE id = 3")
    conn.commit()
    conn.close()
    code, doc = _doctor(capsys)
    assert code == 1 and doc["fts"]["status"] == "problem" and doc["fts"]["damaged"] == ["messages_fts"]
    assert lcm_doctor.main([]) == 1
    assert "lcm_doctor.py --fix" in capsys.readouterr().out
    code, doc = _doctor(capsys, "--fix")
    assert code == 0, doc
    assert doc["fts"]["status"] == "ok" and any("full-text" in f for f in doc["fixed"])
    backup = doc["backup"]
    assert backup and os.path.dirname(backup) == str(healthy.parent) and os.path.exists(backup)
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    copy = sqlite3.connect(backup)
    assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert copy.execute("SELECT count(*) FROM messages").fetchone()[0] == 40
    copy.close()
    assert lcm_grep.main(["quokka", "--all-sessions", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["type"] == "message"


def test_stale_stage_directories_are_found_and_removed(healthy, stage_root, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = stage_root / f"lcm-ingest-{dead.pid}-x1y2"
    stale.mkdir()
    (stale / "group-0.db").write_bytes(b"stage rows")
    live = stage_root / f"lcm-ingest-{os.getpid()}-a1b2"  # a running import's: left alone
    live.mkdir()
    code, doc = _doctor(capsys)
    assert code == 1 and doc["stale"]["status"] == "problem" and doc["stale"]["stage_dirs"] == [str(stale)]
    code, doc = _doctor(capsys, "--fix")
    assert code == 0 and not stale.exists() and live.exists()
    assert doc["backup"] is None  # nothing in the vault changed, so no backup was needed


def test_idle_lock_files_are_litter_not_a_problem(healthy, capsys):
    locks = healthy.parent / "locks"
    locks.mkdir(exist_ok=True)
    (locks / "compact-abc.lock").write_text("")
    code, doc = _doctor(capsys)
    assert code == 0 and str(locks / "compact-abc.lock") in doc["stale"]["locks_idle"]
    assert _doctor(capsys, "--fix")[0] == 0
    assert not (locks / "compact-abc.lock").exists()


def test_broken_dag_is_found_and_rebuilt(healthy, capsys):
    conn = sqlite3.connect(healthy)
    leaves = [r[0] for r in conn.execute("SELECT id FROM summaries WHERE kind = 'leaf' ORDER BY first_message_id")]
    # a leaf that claims a parent which does not list it: two trees would both cover its messages
    other = conn.execute("SELECT id FROM summaries WHERE kind = 'condensed' AND id NOT IN"
                         " (SELECT summary_id FROM summary_sources WHERE child_id = ?)", (leaves[-1],)).fetchone()
    conn.execute("UPDATE summaries SET parent_id = ? WHERE id = ?", (other[0], leaves[-1]))
    conn.commit()
    conn.close()
    code, doc = _doctor(capsys)
    assert code == 1 and doc["dag"]["broken"] >= 1
    assert any(f["summary_id"] == leaves[-1] for f in doc["dag"]["faults"])
    code, doc = _doctor(capsys, "--fix")
    assert code == 0 and doc["backup"] and doc["dag"]["broken"] == 0
    assert lcm_compact.main(["--session", "doc-session", "--full"]) == 0
    capsys.readouterr()
    assert _doctor(capsys)[0] == 0


def test_hooks_installed_and_last_run(healthy, isolated_home, capsys):
    code, doc = _doctor(capsys)
    assert doc["hooks"]["installed"] == [] and doc["hooks"]["status"] == "warn"
    settings = isolated_home / ".claude" / "settings.json"
    settings.write_text(json.dumps({"enabledPlugins": {"lcm@lcm-tools": True}}))
    transcript = next((isolated_home / ".claude" / "projects").rglob("doc-session.jsonl"))
    payload = json.dumps({"session_id": "doc-session", "transcript_path": str(transcript),
                          "hook_event_name": "Stop", "cwd": str(isolated_home)})
    env = {k: v for k, v in os.environ.items()}
    subprocess.run([sys.executable, "-S", str(ROOT / "hooks" / "stop.py")], input=payload, text=True, env=env,
                   check=True, timeout=60)
    code, doc = _doctor(capsys)
    assert doc["hooks"]["installed"] and "lcm@lcm-tools" in doc["hooks"]["installed"][0]
    assert doc["hooks"]["last_run"]["Stop"] is not None and doc["hooks"]["last_run"]["SessionEnd"] is None
    assert doc["hooks"]["status"] == "ok"


def test_a_damaged_vault_points_to_the_doctor(isolated_home, vault, stage_root, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")  # a logged-out `claude` on PATH (CI's) would be a problem of its own
    vault.parent.mkdir(parents=True)
    vault.write_bytes(b"this is not a database at all" * 200)
    assert lcm_status.main([]) == 1
    err = capsys.readouterr().err
    assert "lcm_doctor.py" in err and "move it aside" not in err and "rebuild" not in err
    code, doc = _doctor(capsys)
    assert code == 1 and doc["integrity"] != "ok" and doc["recovery"]
    # nothing to rebuild it from (no backup, no transcript): --fix puts no empty vault in its place
    code, doc = _doctor(capsys, "--fix")
    assert code == 1 and doc["recovery"]["source"] is None and "nothing to rebuild" in " ".join(doc["not_fixed"])
    assert vault.read_bytes() == b"this is not a database at all" * 200
    code, out, _ = run(capsys, lcm_doctor)
    assert code == 1 and "nothing to rebuild it from" in out and "--fix builds" not in out
    # a transcript on disk: the vault is rebuilt from it, the damaged file kept aside
    t = Transcript(isolated_home / ".claude" / "projects", session_id="after-damage")
    t.user("a new session after the damage")
    t.write()
    code, doc = _doctor(capsys, "--fix")
    assert code == 0 and open(doc["recovery"]["moved_to"], "rb").read() == b"this is not a database at all" * 200


def test_a_db_path_that_names_no_vault_is_an_error(isolated_home, tmp_path, capsys):
    assert lcm_doctor.main(["--db", str(tmp_path / "typo.db")]) == 1     # (no --db: see test_doctor_truth)
    assert "no vault" in capsys.readouterr().err


def test_read_only_vault_is_checked_and_named(isolated_home, stage_root, tmp_path, monkeypatch, capsys):
    ro = tmp_path / "ro"
    mount_tmpfs(ro, "8m")
    try:
        monkeypatch.setenv("LCM_DB", str(ro / "lcm.db"))
        subprocess.run([sys.executable, str(SCRIPTS / "lcm_init.py")], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        code, doc = _doctor(capsys)
        assert code == 1 and "read-only" in doc["access"] and "not damaged" in doc["access"]
        assert doc["integrity"] == "ok" and doc["dag"]["status"] == "ok"  # still read and checked
        assert lcm_doctor.main([]) == 1
        assert "--fix" not in capsys.readouterr().out  # nothing --fix could do about it
    finally:
        subprocess.run(["umount", "-l", str(ro)])


def test_real_sessions_with_sub_agents_keep_the_dag_rules(isolated_home, stage_root, monkeypatch, capsys):
    """Leaves of real transcripts (sub-agent runs folded into the main thread or on their own)
    pass the contiguity rule in conversation order."""
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "3000")
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "500")
    assert lcm_ingest.main([str(shared_data("claude-projects"))]) == 0
    assert lcm_compact.main(["--all", "--full"]) == 0
    capsys.readouterr()
    code, doc = _doctor(capsys)
    assert doc["dag"]["summaries"] > 50 and doc["dag"]["broken"] == 0, doc["dag"]
    assert code == 0


def test_a_bad_redact_pattern_is_reported_and_remask_masks_what_was_stored_before(
        isolated_home, vault, stage_root, monkeypatch, capsys):
    """A redact.txt pattern that cannot be used is a warning (it masks nothing), and --remask
    masks text the vault stored before a pattern existed, after a backup."""
    t = Transcript(isolated_home / ".claude" / "projects", session_id="remask-session")
    t.user("the staging box is zorblax-4471, keep it between us")
    t.user("the deploy notes, again: the staging box is zorblax-4471, keep it between us.\n" * 8)  # stored compressed
    t.write()
    other = Transcript(isolated_home / ".claude" / "projects", session_id="remask-other")  # a dictionary's lines
    other.user("the deploy notes, again: the staging box is zorblax-4471, keep it between us.\n" * 8)  # need two sessions
    other.write()
    assert lcm_ingest.main(["--all"]) == 0
    capsys.readouterr()
    redact = isolated_home / ".claude-lcm" / "redact.txt"
    redact.write_text("zorblax-\\d+\n(unclosed\n")
    code, doc = _doctor(capsys)
    assert doc["masking"]["status"] == "warn" and "redact.txt line 2" in " ".join(doc["masking"]["redact_problems"])

    stored = lambda: lcm.vault.db.connect(str(vault), readonly=True).execute(  # noqa: E731
        "SELECT group_concat(lcm_text(content)) FROM messages").fetchone()[0]
    assert lcm.vault.db.connect(str(vault), readonly=True).execute(
        "SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0] == 2
    assert "zorblax-4471" in stored()  # stored before the pattern existed
    code, doc = _doctor(capsys, "--remask")
    assert doc["backup"] and os.path.exists(doc["backup"])
    assert "masked the stored text again" in " ".join(doc["fixed"])
    assert "zorblax-4471" not in stored()
    assert all(b"zorblax-4471" not in bytes(r[0]) for r in sqlite3.connect(vault).execute("SELECT data FROM zdicts"))
    assert lcm_grep.main(["zorblax", "--all-sessions", "--json"]) == 0
    assert "zorblax-4471" not in capsys.readouterr().out
    code, doc = _doctor(capsys, "--remask")  # a second run changes nothing
    assert "nothing needed it" in " ".join(doc["fixed"])


def test_text_stored_under_older_masking_rules_is_masked_on_output_until_remask(
        isolated_home, vault, stage_root, monkeypatch, capsys):
    """A vault from before this version's rules (`pass` as a secret's name): its messages are
    masked again whenever shown, doctor counts them and names --remask, which masks them in place."""
    t = Transcript(isolated_home / ".claude" / "projects", session_id="older-rules")
    t.user("the smtp relay login is SMTP_PASS=quokka-Relay-77 on the staging box")
    t.write()
    with monkeypatch.context() as m:  # stored as the rules before `pass` left it
        m.setattr(lcm.base.mask, "mask", lambda text: text)
        m.setattr(lcm.base.mask, "mask_json", lambda value: value)
        assert lcm_ingest.main(["--all"]) == 0
    conn = sqlite3.connect(vault)
    with conn:  # the vault as version 13 left it, its messages counted as masked when stored
        conn.execute("UPDATE vault_meta SET value = 1 WHERE key = 'masked_from_message'")
        conn.execute("PRAGMA user_version = 13")
    conn.close()
    for _ in ("read-only, before the migration", "after a writer migrated the vault"):
        assert lcm_grep.main(["smtp relay staging", "--all-sessions", "--json"]) == 0
        out = capsys.readouterr().out
        assert "quokka-Relay-77" not in out and "[secret:password:" in out
        assert lcm_ingest.main(["--all"]) == 0
        capsys.readouterr()
    code, doc = _doctor(capsys)
    assert doc["masking"]["status"] == "warn" and doc["masking"]["stored_before_rules"] == 1
    assert lcm_doctor.main([]) in (0, 1)
    assert "--remask masks them in place" in capsys.readouterr().out
    code, doc = _doctor(capsys, "--remask")
    assert "quokka-Relay-77" not in sqlite3.connect(vault).execute("SELECT content FROM messages").fetchone()[0]
    code, doc = _doctor(capsys)
    assert doc["masking"]["status"] == "ok" and doc["masking"]["stored_before_rules"] == 0


@pytest.mark.parametrize("odd", ["a#b", "q?x", "p%41c"])
def test_doctor_reads_a_vault_in_a_directory_named_with_uri_characters(capsys, isolated_home, monkeypatch, tmp_path, odd):
    """SQLite reads `file:` URIs: a `#`, `?` or `%` in the vault's path, unquoted, names another
    file (`/x/a#b/lcm.db` opens `/x/a`). Every command must act on the vault itself and create
    nothing beside its directory, the read-only checks of lcm_doctor.py and purge --regex included."""
    home = tmp_path / odd
    monkeypatch.setenv("LCM_HOME", str(home))
    monkeypatch.setenv("LCM_LLM", "none")  # the model backend is not what this checks (CI's claude is logged out)
    one_transcript(isolated_home, "hello world unique-word-42")
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    import sqlite3
    stored = sqlite3.connect(home / "lcm.db").execute("SELECT count(*) FROM messages").fetchone()[0]
    assert stored == 1, "ingest wrote somewhere else"
    code, out, err = run(capsys, "lcm_doctor")
    assert code == 0, out + err
    code, out, err = run(capsys, "lcm_status")
    assert code == 0 and "1 messages" in out.replace("1 message,", "1 messages,"), out + err
    code, out, err = run(capsys, "lcm_purge", "--match", "unique-word-4[0-9]", "--regex")
    assert code == 0 and "Would remove 1 message" in out, out + err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["home", odd]), "a file was made beside the vault's directory"
