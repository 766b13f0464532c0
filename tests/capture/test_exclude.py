"""LCM_EXCLUDE: sessions of a matching project are never captured, injected or compacted, by the
hooks or by lcm_ingest.py --all (which says how many transcripts it skipped)."""
from __future__ import annotations

import json
import os
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lcm.base.config
import lcm.capture.exclude
import lcm.vault.db
import lcm_compact
import lcm_ingest
import lcm_remember
from lcm.base.errors import LcmError
from test_hooks import run_hook, session_start, start_env, stop
from transcripts import Transcript, coding_session
from conftest import run




@pytest.fixture
def client(tmp_path):
    """A project kept out of lcm, with a session on disk and a sub-agent of it."""
    path = tmp_path / "clients" / "acme"
    path.mkdir(parents=True)
    t = coding_session(tmp_path / "config" / "projects", turns=3, cwd=str(path / "src"))
    agent = Transcript(tmp_path / "config" / "projects", agent_id="a1", parent=t, cwd=str(path / "src"))
    agent.user("look around")
    t.write(), agent.write()
    return path, t


@pytest.fixture
def own(tmp_path):
    path = tmp_path / "mine"
    path.mkdir()
    t = coding_session(tmp_path / "config" / "projects", turns=3, cwd=str(path))
    t.write()
    return path, t


# every stored line, packed or plain (the bulk import packs them as it stores them)
LINES = "SELECT lcm_line(raw, block_id, block_pos) FROM messages"


def messages(vault, session_id=None) -> int:
    if not vault.exists():
        return 0
    sql, params = "SELECT count(*) FROM messages", ()
    if session_id:
        sql, params = sql + " WHERE session_id = ?", (session_id,)
    return sqlite3.connect(vault).execute(sql, params).fetchone()[0]


def test_stop_hook_in_an_excluded_project_stores_nothing(client, own, tmp_path, vault):
    (path, t), (mine, o) = client, own
    env = {"LCM_EXCLUDE": f"/nowhere/*:{tmp_path}/clients/*", "CLAUDE_PROJECT_DIR": str(path)}
    assert run_hook("stop", stop(t), env).returncode == 0
    assert messages(vault, t.session_id) == 0
    assert run_hook("stop", stop(o), {"LCM_EXCLUDE": f"{tmp_path}/clients/*"}).returncode == 0
    assert messages(vault, o.session_id) == 21  # the other project is captured as before


def test_session_start_in_an_excluded_project_injects_nothing(capsys, client, tmp_path, vault):
    path, t = client
    run(capsys, lcm_remember, "--global", "a note for every project")
    (path / ".lcm-checkpoint.md").write_text("# checkpoint\n")
    env_file = tmp_path / "env" / "hook.sh"
    proc = run_hook("session_start", session_start(t), start_env(env_file, path, LCM_EXCLUDE=str(path)))
    assert proc.returncode == 0 and proc.stdout == ""
    assert messages(vault, t.session_id) == 0
    assert "LCM_SCRIPTS" in env_file.read_text()  # the commands still work in that session
    proc = run_hook("session_start", session_start(t), start_env(env_file, path))
    assert "a note for every project" in proc.stdout  # without the exclusion, as usual


def test_ingest_all_skips_excluded_transcripts_and_says_so(capsys, client, own, tmp_path, monkeypatch, vault):
    (path, t), (mine, o) = client, own
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("LCM_EXCLUDE", "~/nothing:" + str(path))
    code, out, err = run(capsys, lcm_ingest, "--all", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["excluded_files"] == 2 and doc["files"] == 1
    assert messages(vault, t.session_id) == 0 and messages(vault, o.session_id) == 21
    code, out, _ = run(capsys, lcm_ingest, "--all")
    assert code == 0 and "skipped 2 transcripts of projects in LCM_EXCLUDE" in out
    monkeypatch.delenv("LCM_EXCLUDE")
    run(capsys, lcm_ingest, "--all")
    assert messages(vault, t.session_id) == 22


def test_compaction_skips_excluded_projects(capsys, client, own, monkeypatch, vault):
    (path, t), (mine, o) = client, own
    run(capsys, lcm_ingest, t.path, o.path)
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "100")
    monkeypatch.setenv("LCM_EXCLUDE", str(path))
    code, out, err = run(capsys, lcm_compact, "--all", "--json")
    assert code == 0, err
    conn = sqlite3.connect(vault)
    assert conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (t.session_id,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (o.session_id,)).fetchone()[0] > 0
    code, _, err = run(capsys, lcm_compact, "--session", t.session_id)
    assert code == 1 and "LCM_EXCLUDE" in err


@pytest.mark.parametrize("raw", ["relative/dir", "/ok:also-relative"])
def test_invalid_exclude_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv("LCM_EXCLUDE", raw)
    with pytest.raises(LcmError) as exc:
        lcm.base.config.validate_config()
    assert "LCM_EXCLUDE" in exc.value.message and "LCM_EXCLUDE" in exc.value.hint


def test_exclude_matches_the_directory_and_below(monkeypatch):
    monkeypatch.setenv("LCM_EXCLUDE", "/work/clients/*:~/secret")
    home = os.path.expanduser("~")
    assert lcm.capture.exclude.excluded("/work/clients/acme") and lcm.capture.exclude.excluded("/work/clients/acme/src/deep")
    assert lcm.capture.exclude.excluded(f"{home}/secret/x") and lcm.capture.exclude.excluded(f"{home}/secret")
    assert not lcm.capture.exclude.excluded("/work/clientsX") and not lcm.capture.exclude.excluded(f"{home}/secretive")
    assert not lcm.capture.exclude.excluded(None) and not lcm.capture.exclude.excluded("")
    monkeypatch.delenv("LCM_EXCLUDE")
    assert not lcm.capture.exclude.excluded("/work/clients/acme")


# --- symlinks and sessions that move (issue 18.3) ------------------------------------------

@pytest.fixture
def linked(tmp_path):
    """/data/acme (real) and clients/acme -> ../data/acme (the person's view of it)."""
    real = tmp_path / "data" / "acme"
    (real / "src").mkdir(parents=True)
    (tmp_path / "clients").mkdir()
    (tmp_path / "clients" / "acme").symlink_to(real, target_is_directory=True)
    return tmp_path / "clients" / "acme", real


@pytest.mark.parametrize("glob_side, cwd_side", [("link", "real"), ("real", "link"), ("link", "link")])
def test_a_symlinked_project_is_excluded_from_either_side(linked, tmp_path, vault, glob_side, cwd_side):
    link, real = linked
    glob = str(tmp_path / "clients" / "*") if glob_side == "link" else str(real)
    cwd = real if cwd_side == "real" else link  # Claude Code records the physical path
    t = coding_session(tmp_path / "config" / "projects", turns=2, cwd=str(cwd / "src"))
    t.write()
    assert run_hook("stop", stop(t), {"LCM_EXCLUDE": glob}).returncode == 0
    assert messages(vault, t.session_id) == 0


def test_a_session_that_moves_into_an_excluded_project_stops_being_captured(capsys, linked, tmp_path,
                                                                             monkeypatch, vault):
    link, real = linked
    outside = tmp_path / "mine"
    outside.mkdir()
    t = Transcript(tmp_path / "config" / "projects", cwd=str(outside))
    t.user("start somewhere harmless")
    t.assistant_text("ok, in the harmless project")
    t.cwd = str(real / "src")  # `cd` into the client's tree: Claude Code records the new cwd per line
    t.user("now read the CLIENTSECRET config")
    t.assistant_text("the CLIENTSECRET config says hello")
    t.write()
    excluded = {"LCM_EXCLUDE": str(tmp_path / "clients" / "*")}
    payload = dict(stop(t), cwd=str(outside))  # the hook's payload may still name the start
    assert run_hook("stop", payload, excluded).returncode == 0
    assert messages(vault, t.session_id) == 2
    raw = b"".join(bytes(r[0]) for r in lcm.vault.db.connect(str(vault)).execute(LINES))
    assert b"CLIENTSECRET" not in raw
    # the bulk path (a parser process for 8+ files) decides per line too
    for i in range(8):
        coding_session(tmp_path / "config" / "projects", turns=1, cwd=str(outside / f"p{i}")).write()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("LCM_EXCLUDE", excluded["LCM_EXCLUDE"])
    code, out, err = run(capsys, lcm_ingest, "--all", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["excluded_lines"] == 2 and doc["excluded_files"] == 0
    raw = b"".join(bytes(r[0]) for r in lcm.vault.db.connect(str(vault)).execute(LINES))
    assert b"CLIENTSECRET" not in raw and messages(vault) == 2 + 8 * 7
    monkeypatch.delenv("LCM_EXCLUDE")  # lifting the exclusion imports what it held back
    run(capsys, lcm_ingest, "--all")
    assert messages(vault, t.session_id) == 4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(0, 3), glob_via_link=st.booleans(), cwd_via_link=st.booleans(),
       wildcard=st.sampled_from(["none", "star", "question"]), trailing_slash=st.booleans(),
       dotted=st.booleans())
def test_exclusion_holds_over_path_shapes(tmp_path_factory, depth, glob_via_link, cwd_via_link, wildcard,
                                          trailing_slash, dotted):
    """Whatever way the glob and the cwd spell the project (through a link or not, a wildcard,
    a trailing slash, `..` in the cwd, a subdirectory), it is excluded and its sibling is not."""
    base = tmp_path_factory.mktemp("shapes")
    real = base / "vol" / "clients" / "acme"
    sibling = base / "vol" / "clients" / "other"
    sub = real.joinpath(*[f"d{i}" for i in range(depth)])
    sub.mkdir(parents=True)
    sibling.mkdir()
    (base / "home").mkdir()
    (base / "home" / "clients").symlink_to(base / "vol" / "clients", target_is_directory=True)
    root = (base / "home" / "clients") if glob_via_link else (base / "vol" / "clients")
    name = {"none": "acme", "star": "*", "question": "ac?e"}[wildcard]
    glob = str(root / name) + ("/" if trailing_slash else "")
    cwd_root = (base / "home" / "clients" / "acme") if cwd_via_link else real
    cwd = str(cwd_root.joinpath(*[f"d{i}" for i in range(depth)]))
    if dotted:
        cwd = str(cwd_root / ".." / "acme") + cwd[len(str(cwd_root)):]
    env = {"LCM_EXCLUDE": glob}
    assert lcm.capture.exclude.excluded(cwd, env)
    assert lcm.capture.exclude.excluded(cwd, env)  # decided once per process, the same answer again
    assert not lcm.capture.exclude.excluded(str(sibling), env) or wildcard == "star"
    assert not lcm.capture.exclude.excluded(str(base / "vol" / "clientsX"), env)


@pytest.mark.parametrize("name", ["proj[v2]", "proj*", "what?", "[x]-[y]"])
def test_a_path_as_pwd_prints_it_is_excluded_even_with_glob_characters(tmp_path, vault, monkeypatch, name):
    """`LCM_EXCLUDE=$(pwd)` in `proj[v2]`: fnmatch alone reads `[v2]` as one character of v or 2 and
    never matches the directory; the entry also names the path literally."""
    project = tmp_path / "work" / name
    (project / "src").mkdir(parents=True)
    monkeypatch.setenv("LCM_EXCLUDE", str(project))
    assert lcm.capture.exclude.excluded(str(project)) and lcm.capture.exclude.excluded(str(project / "src"))
    assert not lcm.capture.exclude.excluded(str(tmp_path / "work" / "other"))  # (as a glob it may match more)
    t = coding_session(tmp_path / "config" / "projects", turns=2, cwd=str(project / "src"))
    t.write()
    other = coding_session(tmp_path / "config" / "projects", turns=2, cwd=str(tmp_path / "work"))
    other.write()
    env = {"LCM_EXCLUDE": str(project), "CLAUDE_PROJECT_DIR": str(project)}
    assert run_hook("stop", stop(t), env).returncode == 0
    assert messages(vault, t.session_id) == 0
    assert run_hook("stop", stop(other), {"LCM_EXCLUDE": str(project)}).returncode == 0
    assert messages(vault, other.session_id) > 0  # its parent directory is captured as before
