"""Several writers on one vault, and processes killed mid-way: imports in parallel all finish
(or say `Error:` with a hint), a hook never waits long for the write lock and catches up later,
a killed import leaves no process and no stage files behind, and after SIGKILLs at random points
the vault is intact and the next run exact."""
from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
from conftest import SCRIPTS
from transcripts import coding_session

ROOT = Path(__file__).resolve().parents[2]
# an import as `lcm_ingest.py` runs it, with small groups (many transactions) and the parser process
# even for a few files, as a large tree would have
IMPORT = ("import sys; sys.path.insert(0, {scripts!r}); import lcm.capture.ingest, lcm_ingest; "
          "lcm.capture.bulk.GROUP_BYTES = {group}; lcm.capture.bulk.PARSE_PROCESS_MIN_FILES = 1; "
          "sys.exit(lcm_ingest.main(sys.argv[1:]))")


def start_import(corpus, vault, group: int = 1 << 20, *extra) -> subprocess.Popen:
    code = IMPORT.format(scripts=str(SCRIPTS), group=group)
    return subprocess.Popen([sys.executable, "-c", code, str(corpus), "--db", str(vault), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, set[str]]:
    """A synthetic projects tree of 3,000 messages, and the uuids it holds."""
    out = tmp_path_factory.mktemp("corpus") / "projects"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gen_corpus.py"), "--messages", "3000", "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    uuids = set()
    for path in out.rglob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            entry = json.loads(line)
            if entry.get("type") in ("user", "assistant", "system") and entry.get("uuid"):
                uuids.add(entry["uuid"])
    assert len(uuids) == 3000
    return out, uuids


def vault_state(vault) -> tuple[list[str], str]:
    if not os.path.exists(vault):
        return [], "ok"  # killed before the vault was linked into place (connecting would make an empty file)
    conn = sqlite3.connect(vault, timeout=30)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages'").fetchone() is None:
            return [], integrity  # killed before it was created
        return [r[0] for r in conn.execute("SELECT uuid FROM messages")], integrity
    finally:
        conn.close()


def children(pid: int) -> list[int]:
    """Processes whose parent is pid (from /proc)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(name))
    return found


def alive(pid: int) -> bool:
    """Running (a zombie whose new parent has not reaped it yet does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stage_dirs(pid: int) -> list[str]:
    import tempfile
    found = []
    for parent in ("/dev/shm", tempfile.gettempdir()):
        if os.path.isdir(parent):
            found += [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(f"lcm-ingest-{pid}-")]
    return found


def stop_payload(t) -> str:
    return json.dumps({"session_id": t.session_id, "transcript_path": str(t.path), "cwd": t.cwd,
                       "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "ok"})


def run_stop_hook(t, vault) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(ROOT), "LCM_DB": str(vault)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-S", str(ROOT / "hooks" / "stop.py")], input=stop_payload(t), text=True,
                          capture_output=True, env=env, timeout=60)
    return time.monotonic() - started, done


def log_text() -> str:
    path = Path(os.environ["LCM_HOME"]) / "lcm.log"
    return path.read_text() if path.exists() else ""


# -- parallel writers ---------------------------------------------------------------------------

@pytest.mark.slow  # waits out another writer's hold on the vault
def test_parallel_imports_and_a_live_session_store_every_message_once(corpus, tmp_path):
    """The stress test in small (bench/stress.py runs it at 6 x 150,000 messages)."""
    tree, uuids = corpus
    vault = tmp_path / "vault.db"
    lcm.vault.db.connect(str(vault)).close()
    live = coding_session(tmp_path / "live-projects", turns=1, cwd=str(tmp_path))
    live.write()
    imports = [start_import(tree, vault) for _ in range(3)]
    hooks = []
    while any(p.poll() is None for p in imports):
        live.user(f"turn {len(hooks)}")
        live.assistant_text("ok")
        live.write()
        hooks.append(run_stop_hook(live, vault))
        time.sleep(0.05)
    for p in imports:
        out, err = p.communicate()
        assert p.returncode == 0, err
        assert "Traceback" not in err
    assert all(done.returncode == 0 for _, done in hooks)
    wall, done = run_stop_hook(live, vault)
    assert done.returncode == 0
    stored, integrity = vault_state(vault)
    assert integrity == "ok"
    assert len(stored) == len(set(stored))
    assert set(stored) == uuids | {e["uuid"] for e in live.entries}


def test_a_hook_gives_way_to_a_long_write_and_the_next_hook_catches_up(tmp_path):
    """While another writer holds the vault (a bulk import's transaction), the Stop hook waits
    about a second at most, leaves its lines for the next hook and says so in the log."""
    vault = tmp_path / "vault.db"
    t = coding_session(tmp_path / "projects", turns=2, cwd=str(tmp_path))
    t.write()
    assert run_stop_hook(t, vault)[1].returncode == 0
    t.user("a turn written while an import holds the vault")
    t.write()
    holder = sqlite3.connect(vault, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        wall, done = run_stop_hook(t, vault)
        assert done.returncode == 0 and done.stdout == ""
        assert wall < 5  # it used to wait 10 s, then fail
        assert "busy" in log_text().splitlines()[-1]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(vault_state(vault)[0]) == len(t.entries) - 1
    run_stop_hook(t, vault)
    stored, integrity = vault_state(vault)
    assert sorted(stored) == sorted(e["uuid"] for e in t.entries) and integrity == "ok"
    conn = sqlite3.connect(vault)
    assert conn.execute("SELECT byte_offset FROM transcripts WHERE path = ?", (str(t.path),)).fetchone()[0] \
        == t.path.stat().st_size


@pytest.mark.slow  # waits out another writer's hold on the vault
def test_an_import_that_cannot_get_the_vault_says_error_with_a_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lcm.vault.db, "WRITE_WAIT_SECONDS", 1.0)
    coding_session(tmp_path / "projects", turns=2).write()
    vault = tmp_path / "vault.db"
    lcm.vault.db.connect(str(vault)).close()
    holder = sqlite3.connect(vault, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    import lcm_ingest
    try:
        code = lcm_ingest.main([str(tmp_path / "projects"), "--db", str(vault)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("Error: ") and "\nHint: " in err and "another" in err


@pytest.mark.slow  # waits out another writer's hold on the vault
def test_an_import_waits_its_turn_behind_another_writer(tmp_path):
    """Longer than one attempt's busy timeout: the import keeps waiting, then finishes."""
    t = coding_session(tmp_path / "projects", turns=2)
    t.write()
    vault = tmp_path / "vault.db"
    lcm.vault.db.connect(str(vault)).close()
    holder = sqlite3.connect(vault, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(2.0, lambda: (holder.execute("ROLLBACK"), holder.close()))
    release.start()
    proc = start_import(tmp_path / "projects", vault)
    out, err = proc.communicate(timeout=60)
    release.join()
    assert proc.returncode == 0, err
    assert len(vault_state(vault)[0]) == len(t.entries)


# -- killed processes -----------------------------------------------------------------------------

def wait_for_stage(proc) -> list[int]:
    """Wait until the import has its parser process and a stage file; returns the parser's pid."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        kids = children(proc.pid)
        if kids and any(os.listdir(d) for d in stage_dirs(proc.pid)):
            return kids
        time.sleep(0.005)
    pytest.fail("the import finished before it had a parser process and a stage file")


def test_a_killed_import_leaves_no_parser_and_the_next_command_removes_its_stage(corpus, tmp_path):
    tree, uuids = corpus
    vault = tmp_path / "vault.db"
    proc = start_import(tree, vault, 200_000)
    parsers = wait_for_stage(proc)
    stages = stage_dirs(proc.pid)
    proc.kill()
    proc.communicate()
    deadline = time.monotonic() + 10
    while any(alive(p) for p in parsers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in parsers)
    assert stages  # the import had its stage (whether it outlives the kill until the next command
    # depends on other lcm processes on the machine: any of them clears a dead import's stage)
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_status.py"), "--db", str(vault)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not any(os.path.exists(d) for d in stages)


def timed(cmd, **kw) -> float:
    started = time.monotonic()
    subprocess.run(cmd, check=True, capture_output=True, **kw)
    return time.monotonic() - started


def kill_at_random(cmd, within: float, rng, **kw) -> bool:
    """Start cmd, SIGKILL it at a random point within `within` seconds; True if it was still
    running. Its children must die with it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    time.sleep(rng.uniform(0.05, within))
    kids = children(proc.pid)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while any(alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(k) for k in kids)
    return proc.returncode == -signal.SIGKILL


def covered(vault, session) -> set[str]:
    """uuids of the session's messages that some leaf summary covers."""
    conn = sqlite3.connect(vault)
    try:
        return {r[0] for r in conn.execute("SELECT m.uuid FROM summary_sources s JOIN messages m ON m.id = s.message_id"
                                           " WHERE m.session_id = ?", (session,))}
    finally:
        conn.close()


@pytest.mark.slow  # a kill loop
def test_kill_loop_of_imports_and_compactions(corpus, tmp_path):
    """SIGKILL of lcm_ingest.py and lcm_compact.py at random points, 32 times (twice in a row
    each cycle): no process left, integrity ok after every kill, the next run exact."""
    tree, uuids = corpus
    rng = random.Random(11)
    code = IMPORT.format(scripts=str(SCRIPTS), group=300_000)
    env = {**os.environ, "LCM_LLM": "none", "LCM_LEAF_CHUNK_TOKENS": "1000", "LCM_FRESH_TAIL_COUNT": "8"}
    imports_killed = compactions_killed = 0
    for cycle in range(8):
        vault = tmp_path / f"vault-{cycle}.db"
        ingest = [sys.executable, "-c", code, str(tree), "--db", str(vault)]
        clean = timed([sys.executable, "-c", code, str(tree), "--db", str(tmp_path / f"clean-{cycle}.db")])
        for _ in range(2):
            imports_killed += kill_at_random(ingest, clean, rng)
            assert vault_state(vault)[1] == "ok"
        subprocess.run(ingest, check=True, capture_output=True)
        stored, integrity = vault_state(vault)
        assert integrity == "ok" and len(stored) == len(set(stored)) and set(stored) == uuids

        conn = sqlite3.connect(vault)
        session = conn.execute("SELECT session_id FROM messages GROUP BY session_id ORDER BY count(*) DESC"
                               ).fetchone()[0]
        conn.close()
        compact = [sys.executable, str(SCRIPTS / "lcm_compact.py"), "--session", session, "--full"]
        clean = timed(compact + ["--db", str(tmp_path / f"clean-{cycle}.db")], env=env)
        for _ in range(2):
            compactions_killed += kill_at_random(compact + ["--db", str(vault)], clean, rng, env=env)
            assert vault_state(vault)[1] == "ok"
        done = subprocess.run(compact + ["--db", str(vault), "--json"], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        # the same messages summarised as by a run nobody killed (on a vault nobody killed)
        assert covered(vault, session) == covered(tmp_path / f"clean-{cycle}.db", session) != set()
        again = subprocess.run(compact + ["--db", str(vault), "--json"], env=env, capture_output=True, text=True)
        assert json.loads(again.stdout)["created"] == []
        assert vault_state(vault)[1] == "ok"
    print(f"killed mid-way: {imports_killed} imports, {compactions_killed} compactions")
    assert imports_killed >= 5 and compactions_killed >= 5 and imports_killed + compactions_killed >= 16
