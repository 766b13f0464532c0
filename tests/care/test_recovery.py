"""A damaged vault has a way back: doctor names the recovery, --fix carries it out (the damaged
file kept aside, one copy at most), every message of the transcripts on disk is searchable
again, and SessionStart still exports LCM_SCRIPTS and tells Claude once."""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3

import pytest

import lcm.vault.schema
import lcm.vault.squeeze
import lcm.vault.store
import lcm_doctor
import lcm_grep
import lcm_ingest
import lcm_remember
from conftest import run, shared_data
from test_hooks import run_hook, session_start, start_env
from transcripts import Transcript, coding_session


def _stored(vault) -> dict[str, bytes]:
    conn = sqlite3.connect(vault)
    lcm.vault.store.install(conn, lcm.vault.schema.SCHEMA_VERSION)  # each line whole, packed or not
    try:
        return {u: bytes(r) for u, r in conn.execute(f"SELECT uuid, {lcm.vault.store.LINE} FROM messages")}
    finally:
        conn.close()


def _copies(vault) -> list[str]:
    """Every file beside the vault that holds a copy of it (backups, files moved aside)."""
    return sorted(p.name for p in vault.parent.iterdir()
                  if re.search(r"\.(backup|damaged)-[0-9TZ]+$", p.name))


def _unsearchable(vault) -> list[str]:
    """uuids of stored messages that full-text search does not find by their longest word."""
    conn = sqlite3.connect(vault)
    lcm.vault.squeeze.install(conn)  # the text as readers see it (a bulk import compresses it)
    missing = []
    try:
        for uuid, mid, content in conn.execute("SELECT uuid, id, lcm_text(content) FROM messages"):
            # whole tokens as unicode61 cuts them (letters and digits; anything else separates)
            words = [w for w in re.findall(r"[^\W_]+", content or "") if w.isascii() and w.isalpha() and len(w) > 3]
            if not words:
                continue
            word = max(words, key=len)
            hits = {r[0] for r in conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?",
                                                (f'"{word}"',))}
            if mid not in hits:
                missing.append(uuid)
    finally:
        conn.close()
    return missing


@pytest.fixture
def filled(isolated_home, vault, capsys):
    """The shared real transcripts in this test's ~/.claude/projects, imported."""
    projects = isolated_home / ".claude" / "projects"
    shutil.copytree(shared_data("claude-projects"), projects)
    assert lcm_ingest.main(["--all", "--json"]) == 0
    capsys.readouterr()
    return projects


@pytest.mark.slow  # a whole rebuild of a damaged vault
def test_truncated_vault_is_rebuilt_from_the_transcripts_on_disk(filled, vault, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    before = _stored(vault)
    assert len(before) > 1000 and not _unsearchable(vault)  # the check itself holds on the intact vault
    note = run(capsys, lcm_remember, "the staging box is called quokka")
    assert note[0] == 0
    # a transcript deleted since it was stored: its messages live only in the vault
    gone = next(p for p in sorted(filled.rglob("*.jsonl")) if "subagents" not in str(p))
    gone_lines = {json.loads(line).get("uuid") for line in gone.read_text().splitlines() if line.strip()}
    gone.unlink()
    conn = sqlite3.connect(vault)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(vault, "r+b") as f:
        f.truncate(os.path.getsize(vault) // 2)
    damaged = vault.read_bytes()

    code, out, err = run(capsys, lcm_grep, "parser")
    assert code == 1 and "Traceback" not in err and "lcm_doctor.py" in err

    code, out, err = run(capsys, lcm_doctor)
    assert code == 1, err
    assert not err, err
    assert "--fix builds a new vault from the transcripts" in out and "kept aside" in out
    assert "cannot bring back" in out and "summaries" in out
    assert vault.read_bytes() == damaged and _copies(vault) == []  # examining changed nothing

    code, out, _ = run(capsys, lcm_doctor, "--fix")
    assert code == 0, out
    assert "Recovered:" in out and "Healthy." in out
    copies = _copies(vault)
    assert len(copies) == 1 and (vault.parent / copies[0]).read_bytes() == damaged  # kept, not copied twice
    after = _stored(vault)
    expected = {u: raw for u, raw in before.items() if u not in gone_lines}
    assert {u: after.get(u) for u in expected} == expected  # byte for byte
    assert not _unsearchable(vault)
    code, out, _ = run(capsys, lcm_grep, "parser", "--all-sessions")
    assert code == 0 and out.strip()

    code, out, _ = run(capsys, lcm_doctor, "--fix")  # a second run has nothing to do and copies nothing
    assert code == 0 and "Healthy." in out and _copies(vault) == copies


@pytest.mark.parametrize("damage", ["header", "truncate"])
def test_doctor_names_what_cannot_come_back(isolated_home, vault, damage, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")  # a logged-out `claude` on PATH (CI's) would be a problem of its own
    projects = isolated_home / ".claude" / "projects"
    t = coding_session(projects, turns=6, session_id="kept-session")
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    assert run(capsys, lcm_remember, "deploys go through the blue pipeline")[0] == 0
    conn = sqlite3.connect(vault)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(vault.read_bytes())
    if damage == "header":
        data[:16] = b"\0" * 16
    else:
        data = data[:8192]
    vault.write_bytes(bytes(data))

    code, doc = _doctor_json(capsys)
    assert code == 1 and doc["damage"] and doc["recovery"]
    lost = " ".join(doc["recovery"]["lost"])
    assert "summaries" in lost and "notes" in lost and "deleted" in lost
    code, doc = _doctor_json(capsys, "--fix")
    assert code == 0 and doc["recovery"]["moved_to"]
    assert len(_copies(vault)) == 1
    assert sorted(_stored(vault)) == sorted(e["uuid"] for e in t.entries if "uuid" in e)


def test_a_purged_message_stays_out_when_the_purge_list_can_still_be_read(isolated_home, vault, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    projects = isolated_home / ".claude" / "projects"
    t = Transcript(projects, session_id="purge-session")
    t.user("the old password was hunter2zebra")
    t.assistant_text("noted")
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    import lcm_purge
    assert run(capsys, lcm_purge, "--match", "hunter2zebra", "--yes")[0] == 0
    conn = sqlite3.connect(vault)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    conn.close()
    # damage the messages table's page: the schema and the purged list stay readable
    with open(vault, "r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\xff" * page)
    code, doc = _doctor_json(capsys, "--fix")
    assert code == 0 and doc["recovery"]["purged_kept"] == 1
    assert not any(b"hunter2zebra" in raw for raw in _stored(vault).values())


def _doctor_json(capsys, *argv):
    code, out, _ = run(capsys, lcm_doctor, *argv, "--json")
    return code, json.loads(out)


def test_session_start_on_a_damaged_vault_exports_and_tells_claude_once(isolated_home, vault, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    t = coding_session(tmp_path / "projects", turns=3, cwd=str(project))
    t.write()
    vault.parent.mkdir(parents=True, exist_ok=True)
    vault.write_bytes(b"SQLite format 3\0" + b"\x13" * 5000)  # a broken header page
    env_file = tmp_path / "session-env" / "sessionstart-hook-0.sh"
    env = start_env(env_file, project)
    first = run_hook("session_start", session_start(t), env)
    assert first.returncode == 0 and first.stderr == ""
    assert "LCM_SCRIPTS=" in env_file.read_text()
    context = json.loads(first.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "lcm_doctor.py" in context and "nothing of this session is being stored" in context
    again = run_hook("session_start", session_start(t, source="resume"), env)
    assert again.returncode == 0 and again.stdout.strip() == ""  # once per session
    other = coding_session(tmp_path / "projects", turns=1, cwd=str(project))
    other.write()
    assert "lcm_doctor.py" in run_hook("session_start", session_start(other), env).stdout


# -- recovery is atomic under SIGKILL ----------------------------------------------------------

def _damaged_vault(isolated_home, vault, sessions: int = 6) -> set[str]:
    """A vault of a few sessions, cut to its first pages (SQLite cannot read it); returns the
    uuids the transcripts on disk hold."""
    projects = isolated_home / ".claude" / "projects"
    expected = set()
    for i in range(sessions):
        t = coding_session(projects, turns=12, session_id=f"kill-{i:02d}", cwd=f"/home/user/p{i % 2}")
        t.write()
        expected |= {e["uuid"] for e in t.entries if "uuid" in e}
    assert lcm_ingest.main(["--all"]) == 0
    conn = sqlite3.connect(vault)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(vault, "r+b") as f:
        f.truncate(8192)
    return expected


def _state(vault) -> str:
    """'damaged' (the damaged vault still in place) or 'complete'; fails on anything else: no
    vault at the path, or a vault missing messages."""
    import lcm.vault.db
    from lcm.base.errors import LcmError
    assert vault.exists(), "no vault at the vault path"
    try:
        conn = lcm.vault.db.connect(str(vault), readonly=True)
    except LcmError as exc:
        assert getattr(exc, "cause", None) == "corrupt", exc.message
        return "damaged"
    try:
        return "complete:%d" % conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    finally:
        conn.close()


def _fix_in_child(die_at: int | None, counter_file) -> int:
    """lcm_doctor.py --fix in a forked process that dies abruptly (os._exit: no cleanup, as under
    SIGKILL) just before its `die_at`-th file-system step (link, rename, replace, remove);
    None: it runs to the end and writes how many steps it took to counter_file."""
    import lcm.care.recovery
    pid = os.fork()
    if pid == 0:  # the child
        steps = [0]
        real = {name: getattr(os, name) for name in ("link", "rename", "replace", "remove")}

        def step(name):
            def call(*args, **kwargs):
                steps[0] += 1
                if die_at is not None and steps[0] == die_at:
                    os._exit(137)
                return real[name](*args, **kwargs)
            return call
        for name in real:
            setattr(lcm.care.recovery.os, name, step(name))
        code = 1
        try:
            code = lcm_doctor.main(["--fix"])
        finally:
            if die_at is None:
                counter_file.write_text(str(steps[0]))
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.slow
def test_a_kill_at_any_step_of_the_recovery_leaves_a_vault_and_the_next_fix_completes_it(
        isolated_home, vault, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    expected = _damaged_vault(isolated_home, vault)
    damaged = vault.read_bytes()
    counter = tmp_path / "steps"
    assert _fix_in_child(None, counter) == 0
    steps = int(counter.read_text())
    assert steps >= 10 and _state(vault) == f"complete:{len(expected)}"
    for die_at in range(1, steps + 1):
        for p in vault.parent.iterdir():  # the damaged vault again, nothing beside it
            if p.name.startswith("lcm.db"):
                p.unlink()
        vault.write_bytes(damaged)
        assert _fix_in_child(die_at, counter) == 137
        assert _state(vault) in ("damaged", f"complete:{len(expected)}"), die_at
        half = sorted(p.name for p in vault.parent.iterdir() if ".new-" in p.name)
        if half:  # what the killed run left is named
            code, doc = _doctor_json(capsys)
            assert sorted(os.path.basename(p) for p in doc["leftovers"]["stale"]) == half, die_at
        code, out, _ = run(capsys, lcm_doctor, "--fix")
        assert code == 0, (die_at, out)
        assert set(_stored(vault)) == expected, die_at
        assert not [p.name for p in vault.parent.iterdir() if ".new-" in p.name], die_at  # leftovers cleaned
        assert len(_copies(vault)) <= 2, die_at


@pytest.mark.slow
def test_sigkill_of_doctor_fix_at_many_times_leaves_a_usable_vault(isolated_home, vault, tmp_path, monkeypatch, capsys):
    import subprocess
    import sys
    import time
    from conftest import SCRIPTS
    monkeypatch.setenv("LCM_LLM", "none")
    expected = _damaged_vault(isolated_home, vault, sessions=12)
    damaged = vault.read_bytes()
    env = dict(os.environ)

    def start():
        return subprocess.Popen([sys.executable, str(SCRIPTS / "lcm_doctor.py"), "--fix"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    began = time.monotonic()
    assert start().wait() == 0
    whole = time.monotonic() - began
    assert _state(vault) == f"complete:{len(expected)}"
    seen = set()
    for k in range(1, 13):
        for p in vault.parent.iterdir():
            if p.name.startswith("lcm.db"):
                p.unlink()
        vault.write_bytes(damaged)
        proc = start()
        time.sleep(whole * k / 12)
        proc.kill()
        proc.wait()
        state = _state(vault)
        seen.add(state)
        assert state in ("damaged", f"complete:{len(expected)}"), k
        code, out, _ = run(capsys, lcm_doctor, "--fix")
        assert code == 0, (k, out)
        assert set(_stored(vault)) == expected, k
        assert not [p.name for p in vault.parent.iterdir() if ".new-" in p.name], k
    assert "damaged" in seen  # some kills landed before the new vault was in place


# -- life after deletion: the vault is the only copy ----------------------------------------

@pytest.mark.slow
def test_after_claude_code_deletes_every_transcript_the_vault_stands_alone(filled, vault, monkeypatch, capsys):
    """Claude Code's cleanupPeriodDays deletes the transcripts: everything still reads from the
    vault alone, every original line byte for byte, and doctor says healthy and offers no
    rebuild from transcripts that are gone."""
    import lcm.vault.db
    import lcm.vault.pack
    import lcm_checkpoint
    import lcm_describe
    import lcm_expand
    import lcm_export
    import lcm_purge
    import lcm_resume
    import lcm_sessions
    monkeypatch.setenv("LCM_LLM", "none")
    conn = lcm.vault.db.connect(str(vault))
    lcm.vault.pack.pack(conn, everything=True)  # as the hooks' packing leaves it
    lines = {r[0]: bytes(r[1]) for r in conn.execute(f"SELECT uuid, {lcm.vault.store.LINE} FROM messages")}
    sessions = [r[0] for r in conn.execute("SELECT session_id FROM sessions ORDER BY session_id")]
    conn.close()
    assert run(capsys, lcm_checkpoint, "--session", sessions[0], "--vault-only")[0] == 0
    shutil.rmtree(filled)  # every transcript, as cleanupPeriodDays would

    code, out, _ = run(capsys, lcm_grep, "parser", "--all-sessions")
    assert code == 0 and out.strip()
    for uuid, line in lines.items():
        code, out, err = run(capsys, lcm_expand, uuid, "--raw", "--unmasked")
        assert code == 0 and out.encode("utf-8", "surrogateescape") == line + b"\n", (uuid, err)
    some = next(iter(lines))
    assert run(capsys, lcm_describe, some)[0] == 0
    for sid in sessions:
        code, out, _ = run(capsys, lcm_export, "--session", sid, "--format", "jsonl", "--unmasked")
        assert code == 0 and out.encode() == b"".join(
            lines[u] + b"\n" for u in _session_uuids(vault, sid)), sid
        assert run(capsys, lcm_export, "--session", sid)[0] == 0
        assert run(capsys, lcm_sessions, sid)[0] == 0
    assert run(capsys, lcm_sessions)[0] == 0
    code, out, err = run(capsys, lcm_resume, "--session", sessions[0])
    assert code == 0 and out.strip(), err
    _viewer_shows(vault, sessions[0])

    code, doc = _doctor_json(capsys)
    assert code == 0 and doc["problems"] == 0 and not doc["recovery"], doc
    code, out, _ = run(capsys, lcm_doctor)
    assert code == 0 and "Healthy." in out and "rebuild" not in out.lower() and "transcripts under" not in out
    code, out, err = run(capsys, lcm_purge, "--session", sessions[-1], "--yes")
    assert code == 0, err
    assert sessions[-1] not in {r[0] for r in sqlite3.connect(vault).execute("SELECT session_id FROM sessions")}
    code, out, _ = run(capsys, lcm_doctor)
    assert code == 0 and "Healthy." in out


def _session_uuids(vault, sid: str) -> list[str]:
    conn = sqlite3.connect(vault)
    try:
        return [r[0] for r in conn.execute("SELECT uuid FROM messages WHERE session_id = ? ORDER BY id", (sid,))]
    finally:
        conn.close()


def _viewer_shows(vault, sid: str) -> None:
    import http.client
    from lcm.view.server import Viewer
    server = Viewer(str(vault))
    server.start()
    try:
        for path in ("", f"s/{sid}"):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            conn.request("GET", server.root + path, headers={"Host": f"127.0.0.1:{server.port}"})
            response = conn.getresponse()
            body = response.read()
            conn.close()
            assert response.status == 200, (path, body[:300])
    finally:
        server.shutdown()
        server.server_close()


# -- backups (lcm.care.backup) and the purge list kept beside the vault ----------------------------

def _take_backup(vault) -> str:
    """A backup as the Stop hook takes one (lcm.care.backup.backup): verified, in $LCM_HOME/backups."""
    import lcm.care.backup
    return lcm.care.backup.backup(str(vault))["path"]


def test_after_deletion_a_truncated_vault_comes_back_from_the_backup_and_purges_hold(
        isolated_home, vault, tmp_path, monkeypatch, capsys):
    import lcm_purge
    monkeypatch.setenv("LCM_LLM", "none")
    projects = isolated_home / ".claude" / "projects"
    sessions = [coding_session(projects, turns=6, session_id=f"only-{i}") for i in range(3)]
    for t in sessions:
        t.write()
    assert lcm_ingest.main(["--all"]) == 0
    before_purge = sessions[0].entries[1]["uuid"]
    assert run(capsys, lcm_purge, "--message", before_purge, "--yes")[0] == 0
    _take_backup(vault)
    after_backup = sessions[1].entries[2]["uuid"]  # purged after the backup was taken
    assert run(capsys, lcm_purge, "--message", after_backup, "--yes")[0] == 0  # reaches the backup too
    stored = _stored(vault)
    shutil.rmtree(projects)  # cleanupPeriodDays: the vault and its backup are all there is
    conn = sqlite3.connect(vault)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(vault, "r+b") as f:
        f.truncate(os.path.getsize(vault) * 9 // 10)

    code, out, _ = run(capsys, lcm_doctor)
    assert code == 1 and "from the backup" in out and "transcripts under" in out
    code, doc = _doctor_json(capsys, "--fix")
    assert code == 0, doc
    assert doc["recovery"]["source"] == "backup"
    after = _stored(vault)
    assert after == stored  # every message back byte for byte, and neither purged one
    assert before_purge not in after and after_backup not in after


def test_a_damaged_block_whose_transcript_is_gone_comes_back_from_the_backup(
        isolated_home, vault, tmp_path, monkeypatch, capsys):
    import lcm.vault.db
    import lcm.vault.pack
    from test_damaged_block import _flip, _raw
    monkeypatch.setenv("LCM_LLM", "none")
    projects = isolated_home / ".claude" / "projects"
    t = coding_session(projects, turns=6, session_id="blocky-1")
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    conn = lcm.vault.db.connect(str(vault))
    lcm.vault.pack.pack(conn, everything=True)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    _take_backup(vault)
    before = _raw(vault)
    t.path.unlink()
    _flip(vault, t.session_id)
    code, out, _ = run(capsys, lcm_doctor, "--fix")
    assert code == 0 and "from the backup" in out, out
    assert _raw(vault) == before


def test_a_header_damaged_vault_rebuilt_from_transcripts_keeps_purges_from_the_list_beside_it(
        isolated_home, vault, monkeypatch, capsys):
    """The damaged file's own purge list is unreadable (its header is gone): the list kept beside
    the vault still keeps every purged message out of the rebuild."""
    import lcm_purge
    monkeypatch.setenv("LCM_LLM", "none")
    projects = isolated_home / ".claude" / "projects"
    t = Transcript(projects, session_id="purge-beside")
    t.user("the staging password is zebra-quokka-17")
    t.assistant_text("noted, I will not repeat it")
    t.user("now fix the parser")
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    assert run(capsys, lcm_purge, "--match", "zebra-quokka-17", "--yes")[0] == 0  # onto the list beside it
    conn = sqlite3.connect(vault)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(vault.read_bytes())
    data[:100] = b"\0" * 100
    vault.write_bytes(bytes(data))
    code, doc = _doctor_json(capsys, "--fix")
    assert code == 0 and doc["recovery"]["source"] == "transcripts"
    stored = _stored(vault)
    assert t.entries[0]["uuid"] not in stored and t.entries[2]["uuid"] in stored
    assert not any(b"zebra-quokka-17" in raw for raw in stored.values())
