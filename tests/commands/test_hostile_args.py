"""Hostile command-line values give `Error: ...` + a hint (exit 1) or argparse's usage error
(exit 2), never a traceback; a closed pipe ends a command quietly; storage failures name their
cause (disk full, read-only, permissions) and never suggest discarding a vault."""
from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading

import pytest

import lcm.vault.db
import lcm_checkpoint
import lcm_grep
import lcm_ingest
import lcm_llm_map
import lcm_resume
from conftest import SCRIPTS, mount_tmpfs
from transcripts import Transcript

HOSTILE = ["", "\udcff", "x" * 60_000, "9223372036854775808", "-9223372036854775809", "-1", "0",
           "2147483648m", "99999999999d", "nan", "inf", "1e400", "'; DROP TABLE messages; --", "%", "(", "\\",
           "0000-00-00", "9999-12-31T99:99"]

# a valid call of each command, to which one hostile option at a time is added
BASE = {
    "lcm_backup": ["--list"],
    "lcm_agentic_map": ["--input", "in.jsonl", "--output", "out.jsonl", "--prompt", "p", "--dry-run"],
    "lcm_checkpoint": ["--session", "s-hostile", "--output", "cp.md"],
    "lcm_compact": ["--session", "s-hostile", "--dry-run"],
    "lcm_describe": ["--session", "s-hostile"],
    "lcm_doctor": [],
    "lcm_expand": ["--offset", "0", "s-hostile"],
    "lcm_expand_query": ["--prompt", "what", "--query", "parser"],
    "lcm_grep": ["parser"],
    "lcm_ingest": ["projects"],
    "lcm_init": [],
    "lcm_llm_map": ["--input", "in.jsonl", "--output", "out.jsonl", "--prompt", "p", "--dry-run"],
    "lcm_purge": ["--session", "s-hostile"],
    "lcm_resume": [],
    "lcm_status": [],
    "lcm_sessions": [],
    "lcm_remember": ["a note about the parser"],
    "lcm_export": ["--session", "s-hostile"],
    "lcm_usage": ["--by", "model"],
    "lcm_view": ["--no-browser", "--json"],  # --json is refused before it would serve
}
SKIP_OPTIONS = {"--db"}  # covered by test_hostile_vault_paths


@pytest.fixture
def workdir(isolated_home, tmp_path, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.chdir(tmp_path)
    t = Transcript(tmp_path / "projects", session_id="s-hostile")
    for i in range(6):
        t.user(f"step {i}: fix the parser")
        t.assistant_text("done " * 20)
    t.write()
    (tmp_path / "in.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    assert lcm_ingest.main([str(tmp_path / "projects")]) == 0
    return tmp_path


def _options(module) -> list[str]:
    """The options of a command that take a free value (not a fixed choice), from its --help."""
    proc = subprocess.run([sys.executable, str(SCRIPTS / f"{module}.py"), "--help"], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200"})
    return sorted({m for m in re.findall(r"(--[a-z-]+) [A-Z]", proc.stdout)} - SKIP_OPTIONS)


def _call(module, argv, capsys) -> tuple[int, str]:
    main = importlib.import_module(module).main
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("module", sorted(BASE))
def test_every_option_survives_hostile_values(module, workdir, capsys):
    code, err = _call(module, BASE[module], capsys)
    assert code in (0, 1), (module, err)
    failures = []
    for option in _options(module):
        for value in HOSTILE:
            argv = [*BASE[module], option, value]
            try:
                code, err = _call(module, argv, capsys)
            except Exception as exc:  # noqa: BLE001 - a traceback is what this test hunts
                failures.append(f"{module} {option} {value[:20]!r}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            if code not in (0, 1, 2) or (code == 1 and not err.startswith("Error: ")):
                failures.append(f"{module} {option} {value[:20]!r}: exit {code}: {err[:200]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("module", ["lcm_status", "lcm_grep", "lcm_doctor", "lcm_purge", "lcm_init", "lcm_ingest"])
def test_hostile_vault_paths(module, workdir, capsys):
    not_a_vault = workdir / "notes.txt"
    not_a_vault.write_text("not a database " * 100)
    extra = {"lcm_grep": ["parser"], "lcm_purge": ["--match", "parser"], "lcm_ingest": ["projects"]}.get(module, [])
    failures = []
    for value in ["", "\udcff", "x" * 60_000, str(workdir), str(not_a_vault), str(workdir / "no" / "such" / "dir.db")]:
        code, err = _call(module, ["--db", value, *extra], capsys)
        # lcm_doctor's exit 1 may be its report of a damaged vault (on stdout)
        if code not in (0, 1, 2) or (code == 1 and not err.startswith("Error: ") and module != "lcm_doctor") \
                or "Traceback" in err:
            failures.append(f"{module} --db {value[:30]!r}: exit {code}: {err[:200]}")
        if "move it aside" in err:
            failures.append(f"{module} --db {value[:30]!r}: suggests discarding: {err[:200]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("module, argv", [
    ("lcm_grep", ["--all-sessions"]), ("lcm_grep", ["--mode", "regex"]), ("lcm_grep", ["--mode", "full_text"]),
    ("lcm_describe", []), ("lcm_expand", []), ("lcm_ingest", []), ("lcm_expand_query", ["--prompt", "p", "--query"]),
])
def test_hostile_positional_values(module, argv, workdir, capsys):
    failures = []
    for value in HOSTILE:
        try:
            code, err = _call(module, [*argv, value], capsys)
        except Exception as exc:  # noqa: BLE001 - a traceback is what this test hunts
            failures.append(f"{module} {value[:20]!r}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if code not in (0, 1, 2) or (code == 1 and not err.startswith("Error: ")):
            failures.append(f"{module} {value[:20]!r}: exit {code}: {err[:200]}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("argv", [
    ["--mode", "regex", ""], ["parser", "--since", "2147483648m"], ["parser", "--before", "99999999999d"],
    ["parser", "--limit", "9223372036854775808"], ["parser", "--session", "\udcff"],
    ["parser", "--project", "p" * 60_000], ["parser", "--offset", "9223372036854775808"],
])
def test_grep_hostile_arguments(argv, workdir, capsys):
    code, err = _call("lcm_grep", argv, capsys)
    assert code in (0, 1, 2) and "Traceback" not in err
    if code == 1:
        assert err.startswith("Error: ") and "Hint: " in err


def test_limit_is_at_most_200(workdir, capsys):
    code, err = _call("lcm_grep", ["parser", "--limit", "201"], capsys)
    assert code == 2 and "200" in err
    assert _call("lcm_grep", ["parser", "--limit", "200"], capsys)[0] == 0


def test_invalid_utf8_argument_is_an_error(workdir, capsys):
    code, err = _call("lcm_status", ["--session", "\udcff"], capsys)
    assert code == 1 and "not valid UTF-8" in err


@pytest.mark.parametrize("module, argv", [("lcm_grep", ["parser"]), ("lcm_status", []), ("lcm_describe", []),
                                          ("lcm_checkpoint", ["--output", "cp.md"])])
def test_invalid_utf8_session_variable_is_an_error(module, argv, workdir, monkeypatch, capsys):
    monkeypatch.setenv("LCM_SESSION_ID", "\udcff")
    code, err = _call(module, argv, capsys)
    assert code == 1 and "LCM_SESSION_ID is not valid UTF-8" in err


def test_checkpoint_output_a_directory(workdir, capsys):
    code, err = _call("lcm_checkpoint", ["--session", "s-hostile", "--output", str(workdir)], capsys)
    assert code == 1 and err.startswith("Error: ") and "directory" in err


def test_llm_map_deeply_nested_line(workdir, capsys):
    (workdir / "deep.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, err = _call("lcm_llm_map", ["--input", "deep.jsonl", "--output", "o.jsonl", "--prompt", "p",
                                      "--dry-run"], capsys)
    assert code == 1 and err.startswith("Error: ") and "deep.jsonl" in err


def test_resume_refuses_dev_zero_and_a_fifo(workdir, capsys):
    code, err = _call("lcm_resume", ["--checkpoint", "/dev/zero"], capsys)
    assert code == 1 and "not a regular file" in err
    fifo = workdir / "pipe"
    os.mkfifo(fifo)
    result = {}
    thread = threading.Thread(target=lambda: result.update(r=_call("lcm_resume", ["--checkpoint", str(fifo)], capsys)),
                              daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():  # unblock the reader so the test process can end, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("lcm_resume.py hung on a FIFO")
    assert result["r"][0] == 1 and "not a regular file" in result["r"][1]


def test_resume_caps_the_read(workdir, capsys):
    big = workdir / "big.md"
    with open(big, "wb") as f:
        f.truncate(200 << 20)  # 200 MB, sparse
    code, err = _call("lcm_resume", ["--checkpoint", str(big)], capsys)
    assert code == 1 and "too large" in err


def test_closed_pipe_is_quiet(workdir):
    env = {**os.environ, "LCM_LLM": "none"}
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "lcm_grep.py"), "parser", "--all-sessions", "--limit", "200"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # like `| head` that has already exited
    err = proc.stderr.read().decode()
    proc.wait(60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err


# ---------------------------------------------------------------------------
# Storage failures: the hint names the cause and never suggests discarding the vault
# ---------------------------------------------------------------------------

DISCARD = re.compile(r"move it aside|rebuild|delete|remove", re.IGNORECASE)


def test_full_disk_names_the_cause(workdir, tmp_path, monkeypatch, capsys):
    small = tmp_path / "small"
    mount_tmpfs(small, "4m")  # an empty vault and its WAL while it is made take about 2.4 MB
    try:
        monkeypatch.setenv("LCM_DB", str(small / "lcm.db"))
        assert lcm_ingest.main([str(workdir / "projects")]) == 0  # the vault fits; the next import does not
        t = Transcript(tmp_path / "big", session_id="s-big")
        for i in range(600):
            t.user(f"message {i} " + os.urandom(2000).hex())
        t.write()
        code, err = _call("lcm_ingest", [str(tmp_path / "big")], capsys)
        assert code == 1 and err.startswith("Error: ") and "is full" in err, err
        assert "free some space" in err and not DISCARD.search(err)
    finally:
        subprocess.run(["umount", "-l", str(small)])


def test_a_vault_that_does_not_fit_is_not_made_at_all(workdir, tmp_path, monkeypatch, capsys):
    """A disk too small for even the empty vault: "full", and no cut-off file that every later
    command would call damaged."""
    small = tmp_path / "tiny"
    mount_tmpfs(small, "2m")
    try:
        monkeypatch.setenv("LCM_DB", str(small / "lcm.db"))
        code, err = _call("lcm_ingest", [str(workdir / "projects")], capsys)
        assert code == 1 and "is full" in err and "damaged" not in err.split("Hint:")[0], err
        assert not any(small.iterdir()), sorted(p.name for p in small.iterdir())
    finally:
        subprocess.run(["umount", "-l", str(small)])


def test_read_only_vault_names_the_cause(workdir, tmp_path, monkeypatch, capsys):
    ro = tmp_path / "ro"
    mount_tmpfs(ro, "8m")
    try:
        monkeypatch.setenv("LCM_DB", str(ro / "lcm.db"))
        # in another process: the filesystem cannot turn read-only while this one holds files open
        subprocess.run([sys.executable, str(SCRIPTS / "lcm_ingest.py"), str(workdir / "projects")], check=True,
                       capture_output=True)
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        t = Transcript(workdir / "projects", session_id="s-hostile-2")
        t.user("one more")
        t.write()
        code, err = _call("lcm_ingest", [str(workdir / "projects")], capsys)
        assert code == 1 and "read-only" in err, err
        assert not DISCARD.search(err)
    finally:
        subprocess.run(["umount", "-l", str(ro)])


def test_permission_denied_names_the_cause(workdir, tmp_path, capsys):
    # root ignores file modes: run the command as an unprivileged user on a vault it may not open
    if os.geteuid() != 0:
        pytest.skip("needs root to start a process as another user")
    import pwd
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    import tempfile
    shared = tempfile.mkdtemp(prefix="lcm-perm-")
    try:
        os.chmod(shared, 0o755)
        vault = os.path.join(shared, "lcm.db")
        conn = lcm.vault.db.connect(vault)
        conn.close()
        os.chmod(vault, 0o600)  # root's, unreadable for nobody
        env = {"PATH": os.environ["PATH"], "HOME": shared, "LCM_HOME": shared, "LCM_DB": vault}
        for python in (sys.executable, "/usr/bin/python3"):  # the first that nobody may run
            try:
                proc = subprocess.run([python, str(SCRIPTS / "lcm_status.py")], capture_output=True, text=True,
                                      env=env, user=nobody.pw_uid, group=nobody.pw_gid, cwd=shared)
                break
            except (PermissionError, FileNotFoundError):
                continue
        else:
            pytest.skip("user nobody cannot run a python3 here")
        if "Permission denied" in proc.stderr and "lcm_status.py" in proc.stderr:
            pytest.skip("user nobody cannot read this checkout")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "permission" in proc.stderr.lower() or "cannot be opened" in proc.stderr, proc.stderr
        assert not DISCARD.search(proc.stderr)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_storage_error_hints():
    cases = {
        sqlite3.OperationalError("database or disk is full"): "free some space",
        sqlite3.OperationalError("attempt to write a readonly database"): "writable",
        sqlite3.DatabaseError("file is not a database"): "lcm_doctor.py",
        sqlite3.DatabaseError("database disk image is malformed"): "lcm_doctor.py",
        OSError(28, "No space left on device"): "free some space",
        OSError(30, "Read-only file system"): "writable",
        OSError(13, "Permission denied"): "owner and mode",
    }
    for exc, hint in cases.items():
        error = lcm.vault.db.storage_error(exc, "/v/lcm.db")
        assert error is not None and hint in error.hint, (exc, error and error.hint)
        assert not DISCARD.search(error.message + error.hint)
    assert lcm.vault.db.storage_error(ValueError("x")) is None


def test_checkpoint_to_a_full_disk_names_the_cause(workdir, tmp_path, capsys):
    full = tmp_path / "full"
    mount_tmpfs(full, "64k")
    try:
        with open(full / "filler", "wb") as f:
            try:
                f.write(b"x" * (1 << 20))
            except OSError:
                pass
        code, err = _call("lcm_checkpoint", ["--session", "s-hostile", "--output", str(full / "cp.md")], capsys)
        assert code == 1 and "is full" in err and "free some space" in err, err
        assert "vault" not in err  # the checkpoint file's disk, not the vault's
    finally:
        subprocess.run(["umount", "-l", str(full)])


def test_every_command_is_swept():
    commands = {p.stem for p in SCRIPTS.glob("lcm_*.py")}
    assert commands == set(BASE), f"add a valid call to BASE for: {sorted(commands - set(BASE))}"
