"""Backups nobody plans (lcm_backup.py, the Stop hook), the purge list that outlives the vault,
restore, a disk that fills during an import, and a vault on a read-only mount."""
from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import threading
import time

import pytest

import lcm_backup
import lcm_describe
import lcm_doctor
import lcm_export
import lcm_expand
import lcm_grep
import lcm_ingest
import lcm_purge
import lcm_sessions
import lcm_status
import lcm.care.backup
import lcm.vault.purgelist

from conftest import mount_tmpfs, run
from test_hooks import run_hook, stop
from transcripts import Transcript

WORD = "Quinzelbrack"  # the text a purge forgets: in no other message, in no metadata


def _session(projects, sid, turns=12, word_turn=None):
    t = Transcript(projects, session_id=sid)
    for i in range(turns):
        if i == word_turn:
            t.user(f"the door code of {WORD} house is behind the blue tile")
            call = t.tool_use("Bash", {"command": f"grep -r {WORD} notes/"})
            t.tool_result(call, f"notes/doors.md: {WORD} 4411\n")
        else:
            t.user(f"step {i}: tidy the parser and run the tests")
            t.assistant_text(f"done with step {i}; the parser handles edge cases now")
    t.write()
    return t


@pytest.fixture
def projects(isolated_home):
    return isolated_home / ".claude" / "projects"


@pytest.fixture
def filled(projects, vault, capsys):
    """A vault of two sessions, one holding WORD in a prompt, a tool call and a tool result."""
    _session(projects, "aaaa1111-word-session", word_turn=4)
    _session(projects, "bbbb2222-other-session")
    assert lcm_ingest.main(["--all"]) == 0
    capsys.readouterr()
    return vault


def _lines(projects) -> dict[str, bytes]:
    """Every transcript line by uuid, as the file holds it (without its newline)."""
    out = {}
    for path in projects.rglob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            out[json.loads(line)["uuid"]] = line
    return out


def _stored(vault) -> dict[str, bytes]:
    """Every message's original line, read back the way lcm reads it (packed or plain)."""
    import lcm.vault.db
    import lcm.vault.store
    conn = lcm.vault.db.connect(str(vault), create=False, readonly=True)
    try:
        return {r[0]: bytes(r[1]) for r in conn.execute(f"SELECT uuid, {lcm.vault.store.LINE} FROM messages")}
    finally:
        conn.close()


def _backups(vault) -> list[str]:
    return [b["path"] for b in lcm.care.backup.list_backups(str(vault))]


# ---------------------------------------------------------------------------
# Taking backups
# ---------------------------------------------------------------------------

def test_backup_is_a_verified_private_copy_listed_newest_first(filled, projects, isolated_home, capsys):
    code, out, err = run(capsys, lcm_backup)
    assert code == 0
    assert f"Backed up {len(_lines(projects))} messages" in out and "verified" in out
    path = _backups(filled)[0]
    directory = os.path.dirname(path)
    assert directory == str(isolated_home / ".claude-lcm" / "backups")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert _stored(path) == _stored(filled)
    time.sleep(1.1)  # a later second: a later name
    assert run(capsys, lcm_backup)[0] == 0
    code, out, _ = run(capsys, lcm_backup, "--list", "--json")
    items = json.loads(out)["items"]
    assert len(items) == 2 and items[0]["taken"] > items[1]["taken"]
    assert lcm.care.backup.newest_backup(str(filled)) == items[0]["path"]


def test_backups_stay_within_their_bound(filled, monkeypatch, capsys):
    monkeypatch.setenv("LCM_BACKUP_KEEP", "2")
    made = [lcm.care.backup.backup(str(filled))["path"] for _ in range(4)]
    assert sorted(_backups(filled)) == sorted(made[-2:])
    # a size cap below two copies: only the newest stays (never none)
    size = os.path.getsize(made[-1])
    monkeypatch.setenv("LCM_BACKUP_MAX_MB", str(max(1, (2 * size - 1) >> 20)))
    if 2 * size <= int(os.environ["LCM_BACKUP_MAX_MB"]) << 20:
        pytest.skip(f"a backup of {size} bytes is too small for a whole-MB cap below two copies")
    newest = lcm.care.backup.backup(str(filled))["path"]
    assert _backups(filled) == [newest]
    monkeypatch.setenv("LCM_BACKUP_KEEP", "0")
    code, out, err = run(capsys, lcm_backup)
    assert code == 1 and "LCM_BACKUP_KEEP" in err and _backups(filled) == [newest]


def test_backup_to_another_directory_is_remembered_for_purges(filled, tmp_path, capsys):
    other = tmp_path / "usb" / "lcm"
    code, out, _ = run(capsys, lcm_backup, "--to", other)
    assert code == 0 and str(other) in out
    assert str(other) in lcm.care.backup.places(str(filled))
    code, out, _ = run(capsys, lcm_backup, "--list")
    assert str(other) in out


def test_stop_hook_starts_one_backup_detached_and_none_when_off(projects, vault, monkeypatch):
    t = _session(projects, "cccc3333-hook-session")
    monkeypatch.setenv("LCM_BACKUP", "0")
    assert run_hook("stop", stop(t)).returncode == 0
    assert not (vault.parent / "backups").exists()
    monkeypatch.setenv("LCM_BACKUP", "1")
    started = time.monotonic()
    assert run_hook("stop", stop(t)).returncode == 0
    assert run_hook("stop", stop(t)).returncode == 0  # within the interval: no second run
    deadline = time.monotonic() + 30
    while not _backups(vault) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_backups(vault)) == 1, (vault.parent / "lcm.log").read_text() if (vault.parent / "lcm.log").exists() else ""
    assert time.monotonic() - started < 30
    assert set(_stored(_backups(vault)[0])) == set(_lines(projects))
    time.sleep(1.5)
    assert len(_backups(vault)) == 1  # the second Stop started nothing
    os.utime(vault.parent / "backups" / ".started", (0, 0))  # a day later
    assert run_hook("stop", stop(t)).returncode == 0
    deadline = time.monotonic() + 30
    while len(_backups(vault)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_backups(vault)) == 2


@pytest.mark.slow
def test_backup_taken_while_hooks_write_is_consistent(projects, vault, monkeypatch, capsys):
    """Every backup is the vault as of one commit: each transcript's stored byte offset covers
    exactly the lines stored from it, and quick_check is ok."""
    import lcm.capture.ingest
    import lcm.vault.db
    monkeypatch.setenv("LCM_BACKUP_KEEP", "10")
    t = Transcript(projects, session_id="dddd4444-busy-session")
    t.user("start")
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    stop_writing = threading.Event()

    def writer():
        conn = lcm.vault.db.connect(str(vault))
        i = 0
        while not stop_writing.is_set():
            t.user(f"turn {i} " + "padding text " * 50)
            t.assistant_text(f"answer {i}")
            t.write()
            lcm.capture.ingest.ingest_session(conn, str(t.path))
            i += 1
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        made = [lcm.care.backup.backup(str(vault))["path"] for _ in range(5)]
    finally:
        stop_writing.set()
        thread.join()
    lines = t.path.read_bytes()
    for path in made:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        offset = conn.execute("SELECT byte_offset FROM transcripts WHERE path = ?", (str(t.path),)).fetchone()[0]
        uuids = {r[0] for r in conn.execute("SELECT uuid FROM messages")}
        conn.close()
        expected = {json.loads(line)["uuid"] for line in lines[:offset].splitlines()}
        assert uuids == expected


# ---------------------------------------------------------------------------
# Restore, and the purge list that outlives the vault
# ---------------------------------------------------------------------------

def test_restore_gives_back_every_message_byte_for_byte(filled, projects, capsys):
    backup = lcm.care.backup.backup(str(filled))["path"]
    with open(filled, "r+b") as f:  # damage: the vault cut to a tenth
        f.truncate(os.path.getsize(filled) // 10)
    original = _lines(projects)
    for p in list(projects.rglob("*.jsonl")):  # and the transcripts deleted, as cleanupPeriodDays does
        p.unlink()
    done = lcm.care.backup.restore(backup, str(filled))
    assert done["replaced"] and os.path.exists(done["replaced"])
    assert _stored(filled) == original
    assert stat.S_IMODE(os.stat(filled).st_mode) == 0o600
    code, out, _ = run(capsys, lcm_grep, "blue tile", "--all-sessions")
    assert code == 0 and "aaaa1111" in out


def test_restore_from_a_damaged_backup_leaves_the_vault_as_it_was(filled, capsys):
    backup = lcm.care.backup.backup(str(filled))["path"]
    with open(backup, "r+b") as f:
        f.truncate(os.path.getsize(backup) // 3)
    before = filled.read_bytes()
    with pytest.raises(lcm.care.backup.LcmError) as caught:
        lcm.care.backup.restore(backup, str(filled))
    assert str(backup) in caught.value.message and caught.value.hint
    assert filled.read_bytes() == before
    assert sorted(p.name for p in filled.parent.iterdir() if ".restore-" in p.name) == []


def test_a_purge_before_or_after_the_backup_stays_purged_after_restore(filled, projects, capsys):
    lines = _lines(projects)
    first = next(u for u, line in lines.items() if WORD.encode() in line)
    assert run(capsys, lcm_purge, "--message", first, "--yes")[0] == 0
    backup = lcm.care.backup.backup(str(filled))["path"]  # taken after the first purge
    code, out, _ = run(capsys, lcm_purge, "--match", WORD, "--yes")  # the rest, after the backup
    assert code == 0 and "Rewrote 1 backup" in out
    gone = {u for u, line in lines.items() if WORD.encode() in line}
    os.remove(filled)
    lcm.care.backup.restore(backup, str(filled))
    assert set(_stored(filled)) == set(lines) - gone
    assert run(capsys, lcm_ingest, "--all")[0] == 0  # the transcripts still hold them
    assert set(_stored(filled)) == set(lines) - gone


def test_a_rebuilt_vault_never_takes_a_purged_message_back(filled, projects, capsys):
    lines = _lines(projects)
    assert run(capsys, lcm_purge, "--match", WORD, "--yes")[0] == 0
    gone = {u for u, line in lines.items() if WORD.encode() in line}
    assert gone and lcm.care.backup.purged_uuids(str(filled)) == gone
    for suffix in ("", "-wal", "-shm"):  # the vault file is lost; its purge list is not
        if os.path.exists(f"{filled}{suffix}"):
            os.remove(f"{filled}{suffix}")
    assert set(lcm.vault.purgelist.read(str(filled))) == gone
    assert run(capsys, lcm_ingest, "--all")[0] == 0
    assert set(_stored(filled)) == set(lines) - gone
    assert lcm.care.backup.purged_uuids(str(filled)) == gone


def test_purge_leaves_no_byte_of_the_word_in_any_backup_or_purge_list(filled, tmp_path, isolated_home, capsys):
    other = tmp_path / "usb"
    lcm.care.backup.backup(str(filled))
    lcm.care.backup.backup(str(filled), str(other))
    files = [*_backups(filled)]
    assert len(files) == 2 and all(WORD.encode() in open(p, "rb").read() for p in files)
    # and the copies lcm leaves beside the vault: doctor --fix's before a repair, a restore's old file
    beside = [f"{filled}.backup-20260101-000000", f"{filled}.replaced-20260102-000000"]
    for copy in beside:
        source = sqlite3.connect(str(filled))
        target = sqlite3.connect(copy)
        source.backup(target)
        target.close()
        source.close()
    files += beside
    code, out, _ = run(capsys, lcm_purge, "--match", WORD, "--hidden", "--yes")
    assert code == 0 and "Rewrote 4 backups" in out and "delete it yourself" not in out
    home = isolated_home / ".claude-lcm"
    every = [*_backups(filled), *home.rglob("*"), *other.rglob("*")]
    assert set(files) <= set(map(str, every))
    needles = (WORD.encode(), WORD.lower().encode(), WORD[3:].lower().encode())  # the index holds terms lower case
    holding = [str(p) for p in every if os.path.isfile(p) and any(n in open(p, "rb").read().lower() for n in needles)]
    assert holding == []
    purge_list = open(lcm.vault.purgelist.path_for(str(filled)), "rb").read()
    assert purge_list and WORD.encode() not in purge_list
    assert stat.S_IMODE(os.stat(lcm.vault.purgelist.path_for(str(filled))).st_mode) == 0o600
    for path in _backups(filled):  # each backup holds the purge list in its own table, uuids only
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        assert {r[0] for r in conn.execute("SELECT uuid FROM purged")} == set(lcm.vault.purgelist.read(str(filled)))
        conn.close()


# ---------------------------------------------------------------------------
# After cleanupPeriodDays; a full disk; a read-only mount
# ---------------------------------------------------------------------------

def test_status_and_sessions_count_the_sessions_only_the_vault_holds(filled, projects, capsys):
    code, out, _ = run(capsys, lcm_status)
    assert code == 0 and "only in the vault" not in out
    next(projects.rglob("aaaa1111-word-session.jsonl")).unlink()
    code, out, _ = run(capsys, lcm_status, "--json")
    assert json.loads(out)["only_in_vault"] == 1
    code, out, _ = run(capsys, lcm_sessions)
    assert "1 of 2 sessions exist only in the vault now" in out and "cleanupPeriodDays" in out
    assert [line for line in out.splitlines() if line.startswith("aaaa1111")][0].count("only in the vault") == 1


def _sqlite_state(path) -> tuple[str, int, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return (conn.execute("PRAGMA quick_check").fetchone()[0], conn.execute("SELECT count(*) FROM messages").fetchone()[0],
                conn.execute("SELECT count(*) FROM transcripts").fetchone()[0])
    finally:
        conn.close()


def test_an_import_the_disk_fills_keeps_what_fitted_and_nothing_only_in_the_wal(projects, tmp_path, monkeypatch, capsys):
    import lcm.capture.bulk
    for n in range(30):
        t = Transcript(projects, session_id=f"eeee{n:04d}-full-disk")
        for i in range(40):
            t.user(f"turn {i} of {n}: " + os.urandom(600).hex())  # incompressible, so the disk fills
            t.assistant_text(f"answer {i}")
        t.write()
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "6m")
    try:
        monkeypatch.setenv("LCM_HOME", str(disk))
        monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 256 << 10)  # many groups: commit per group
        code, out, err = run(capsys, lcm_ingest, "--all")
        assert code == 1 and "Traceback" not in err
        assert "Error: " in err and "is full" in err and "Hint: free some space" in err
        kept = int(err.split(" messages from the files before it filled up")[0].rsplit(" ", 1)[1])
        vault = disk / "lcm.db"
        assert not os.path.exists(f"{vault}-wal") or os.path.getsize(f"{vault}-wal") == 0
        check, messages, _ = _sqlite_state(vault)
        assert check == "ok" and messages == kept > 0
        # what was stored is whole: each file's offset covers exactly its stored lines
        conn = sqlite3.connect(f"file:{vault}?mode=ro", uri=True)
        for path, offset in conn.execute("SELECT path, byte_offset FROM transcripts"):
            want = {json.loads(line)["uuid"] for line in open(path, "rb").read()[:offset].splitlines()}
            got = {r[0] for r in conn.execute("SELECT m.uuid FROM messages m WHERE m.session_id ="
                                               " (SELECT session_id FROM transcripts WHERE path = ?)", (path,))}
            assert got == want
        conn.close()
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_an_import_too_large_for_the_disk_says_nothing_was_stored(projects, tmp_path, monkeypatch, capsys):
    t = Transcript(projects, session_id="ffff0000-one-group")
    for i in range(5000):
        t.user(f"turn {i}: " + os.urandom(600).hex())
    t.write()
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "5m")
    try:
        monkeypatch.setenv("LCM_HOME", str(disk))
        code, out, err = run(capsys, lcm_ingest, "--all")
        assert code == 1 and "nothing of this import was stored" in err and "Traceback" not in err
        if (disk / "lcm.db").exists():
            assert _sqlite_state(disk / "lcm.db")[:2] == ("ok", 0)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_every_reading_command_works_on_a_read_only_mount(filled, projects, tmp_path, monkeypatch, capsys):
    disk = tmp_path / "snapshot"
    mount_tmpfs(disk, "16m")
    try:
        import shutil
        shutil.copy(filled, disk / "lcm.db")
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        monkeypatch.setenv("LCM_DB", str(disk / "lcm.db"))
        code, out, err = run(capsys, lcm_grep, "blue tile", "--all-sessions", "--json")
        assert code == 0
        hit = json.loads(out)["results"][0]
        assert run(capsys, lcm_sessions)[0] == 0
        code, out, err = run(capsys, lcm_sessions, "aaaa1111")
        assert code == 0 and "aaaa1111-word-session" in out
        code, out, err = run(capsys, lcm_export, "--session", "aaaa1111", "--format", "jsonl")
        assert code == 0 and WORD in out
        code, out, err = run(capsys, lcm_expand, hit["uuid"] if "uuid" in hit else hit["id"], "--raw")
        assert code == 0 and "blue tile" in out
        code, out, err = run(capsys, lcm_describe, "--session", "aaaa1111")
        assert code == 0
        code, out, err = run(capsys, lcm_status)
        assert code == 0 and f"{len(_lines(projects))} messages" in out
        code, out, err = run(capsys, lcm_doctor, "--json")
        assert json.loads(out)["integrity"] == "ok"
        assert sorted(os.listdir(disk)) == ["lcm.db"]  # nothing written, not even a -shm
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_read_only_snapshot_with_changes_in_its_wal_names_the_way_out(filled, tmp_path, monkeypatch, capsys):
    """A snapshot taken while lcm wrote: the -wal holds changes, and SQLite cannot read them
    without writing a -shm. Refused with the copy to make, never read without them."""
    import shutil
    disk = tmp_path / "snapshot"
    mount_tmpfs(disk, "16m")
    try:
        writer = sqlite3.connect(filled, isolation_level=None)
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("INSERT INTO vault_meta VALUES ('snapshot_probe', 1)")
        for suffix in ("", "-wal"):
            shutil.copy(f"{filled}{suffix}", disk / f"lcm.db{suffix}")
        writer.close()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        code, out, err = run(capsys, lcm_grep, "blue tile", "--all-sessions", "--db", disk / "lcm.db")
        assert code == 1 and "Traceback" not in err
        assert "-wal holds changes" in err and f"cp {disk}/lcm.db {disk}/lcm.db-wal" in err
        copy = tmp_path / "copy"
        copy.mkdir()
        for suffix in ("", "-wal"):
            shutil.copy(disk / f"lcm.db{suffix}", copy / f"lcm.db{suffix}")
        code, out, err = run(capsys, lcm_grep, "blue tile", "--all-sessions", "--db", copy / "lcm.db")
        assert code == 0 and "aaaa1111" in out
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
