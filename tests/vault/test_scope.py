"""One grant check and one session resolver for every command that reads the vault.

Under an expansion grant (LCM_GRANT, set for lcm_expand_query.py's sub-agent) each reading
command shows only what the grant covers and refuses the rest; every command answers "which
session?" by one rule: --session (id or prefix) > the current session > the newest session of
the current project; under a grant, inside the grant.
"""
from __future__ import annotations

import json

import pytest

import lcm.vault.grants
import lcm.vault.resolve
import lcm_checkpoint
import lcm_compact
import lcm_describe
import lcm_expand
import lcm_expand_query
import lcm_export
import lcm_grep
import lcm_purge
import lcm_remember
import lcm_resume
import lcm_sessions
import lcm_status
from conftest import run
from lcm.vault.db import LcmError
from test_describe_expand import compacted_vault


@pytest.fixture
def dag(tmp_path, monkeypatch):
    conn, _paths = compacted_vault(tmp_path, monkeypatch, turns=8, sessions=("s1", "s2"))
    return conn


def leaves(conn, session):
    return [r[0] for r in conn.execute("SELECT id FROM summaries WHERE session_id = ? AND kind = 'leaf'"
                                       " ORDER BY first_message_id", (session,))]


def refused(code, out, err):
    return code == 1 and err.startswith("Error: ") and "Hint: " in err and "s2" not in out


def test_every_reading_command_keeps_to_the_grant(dag, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LCM_SESSION_ID", "s1")
    assert run(capsys, lcm_remember, "a note pinned in s1", "--global")[0] == 0
    monkeypatch.setenv("LCM_SESSION_ID", "s2")
    assert run(capsys, lcm_remember, "a note pinned in s2", "--global")[0] == 0
    monkeypatch.setenv("LCM_GRANT", lcm.vault.grants.create_grant(dag, ["s1"], [], token_cap=100000))
    s2_leaf = leaves(dag, "s2")[0]

    code, out, _ = run(capsys, lcm_sessions, "--json")  # the list holds granted sessions only
    assert code == 0 and [s["id"] for s in json.loads(out)["sessions"]] == ["s1"]
    assert refused(*run(capsys, lcm_sessions, "s2"))
    assert run(capsys, lcm_sessions, "s1")[0] == 0
    assert refused(*run(capsys, lcm_export, "--session", "s2"))
    assert refused(*run(capsys, lcm_export, "--session", "s1", "--unmasked"))
    assert run(capsys, lcm_export, "--session", "s1")[0] == 0
    code, out, _ = run(capsys, lcm_grep, "parser", "--all-sessions", "--json")
    found = json.loads(out)["results"]
    assert code == 0 and found and {r["session_id"] for r in found} == {"s1"}
    assert refused(*run(capsys, lcm_grep, "parser", "--session", "s2"))
    assert refused(*run(capsys, lcm_describe, s2_leaf))
    assert refused(*run(capsys, lcm_describe, "--session", "s2"))
    assert refused(*run(capsys, lcm_expand, s2_leaf))
    assert refused(*run(capsys, lcm_status, "--session", "s2"))
    code, out, _ = run(capsys, lcm_status, "--json")  # the current session (s2) is not the default
    assert code == 0 and json.loads(out)["session_id"] == "s1"
    assert refused(*run(capsys, lcm_resume, "--session", "s2"))
    assert refused(*run(capsys, lcm_checkpoint, "--session", "s2", "--output", "-"))
    code, out, _ = run(capsys, lcm_remember, "--list", "--all", "--json")
    assert code == 0 and [n["content"] for n in json.loads(out)["notes"]] == ["a note pinned in s1"]
    # what changes the vault, or reaches past the grant, is refused outright
    assert refused(*run(capsys, lcm_remember, "another note"))
    assert refused(*run(capsys, lcm_purge, "--session", "s1"))
    assert refused(*run(capsys, lcm_compact, "--session", "s1"))
    assert refused(*run(capsys, lcm_expand_query, "--query", "parser", "--prompt", "which parser?"))
    assert refused(*run(capsys, "lcm_view", "--no-browser"))


def test_a_grant_over_some_ids_never_shows_a_whole_session(dag, capsys, monkeypatch):
    first = leaves(dag, "s1")[0]
    monkeypatch.setenv("LCM_GRANT", lcm.vault.grants.create_grant(dag, ["s1"], [first], token_cap=100000))
    assert refused(*run(capsys, lcm_export, "--session", "s1"))
    assert refused(*run(capsys, lcm_sessions, "s1"))
    assert run(capsys, lcm_describe, first)[0] == 0


def test_grep_under_a_grant_pages_after_scoping(dag, capsys, monkeypatch):
    """Issue 20.4: the grant's scope is part of the query, so --limit 1 finds the in-scope match
    even when better-ranked matches lie outside the granted ids."""
    code, out, _ = run(capsys, lcm_grep, "parser", "--all-sessions", "--limit", "1", "--json")
    top = json.loads(out)["results"][0]["id"]
    for leaf in leaves(dag, "s1"):  # a leaf the best match overall does not lie under
        grant = lcm.vault.grants.create_grant(dag, ["s1"], [leaf], token_cap=100000)
        try:
            lcm.vault.grants.check_scope(dag, grant, top)
        except LcmError:
            break
    else:
        pytest.fail("every leaf of s1 covers the best match")
    monkeypatch.setenv("LCM_GRANT", grant)
    code, out, err = run(capsys, lcm_grep, "parser", "--limit", "1", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["count"] == 1, err
    lcm.vault.grants.check_scope(dag, grant, doc["results"][0]["id"])  # in scope
    code, out, _ = run(capsys, lcm_grep, "parser", "--limit", "1")
    assert code == 0 and "No matches" not in out


# --- the one session rule -----------------------------------------------------------------

def test_the_session_rule(dag, monkeypatch, tmp_path):
    monkeypatch.delenv("LCM_SESSION_ID", raising=False)
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path / "elsewhere"))
    with pytest.raises(LcmError, match="no current session"):
        lcm.vault.resolve.session(dag)  # nothing named, no current session, nothing of this project
    assert lcm.vault.resolve.session(dag, required=False) is None
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", "/home/u/s2")
    assert lcm.vault.resolve.session(dag) == "s2"  # the project's newest session
    monkeypatch.setenv("LCM_SESSION_ID", "s1")
    assert lcm.vault.resolve.session(dag) == "s1"  # the current session comes before the project's
    assert lcm.vault.resolve.session(dag, "s2") == "s2"  # a named one before both
    monkeypatch.setenv("LCM_SESSION_ID", "not-stored-yet")
    with pytest.raises(LcmError, match="not in the vault yet"):
        lcm.vault.resolve.session(dag)
    assert lcm.vault.resolve.session(dag, required=False) is None


def test_the_project_is_compared_through_symlinks(dag, monkeypatch, tmp_path):
    monkeypatch.delenv("LCM_SESSION_ID", raising=False)
    dag.execute("UPDATE sessions SET project = ? WHERE session_id = 's2'", (str(tmp_path / "real"),))
    dag.commit()
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(tmp_path / "link"))
    assert lcm.vault.resolve.session(dag) == "s2"


@pytest.mark.parametrize("given, error", [("s", "ambiguous"), ("zz", "no session"), ("  ", "is empty")])
def test_named_sessions_are_ids_or_unique_prefixes(dag, given, error):
    assert lcm.vault.resolve.by_id(dag, "s1") == "s1"
    with pytest.raises(LcmError, match=error):
        lcm.vault.resolve.by_id(dag, given)


def test_every_command_with_a_session_uses_the_one_resolver():
    """No command answers "which session?" on its own: none reads LCM_SESSION_ID or matches a
    prefix itself, and the old helpers are gone."""
    from pathlib import Path
    scripts = Path(__file__).resolve().parents[2] / "scripts"
    for path in [*scripts.glob("lcm_*.py"), *(scripts / "lcm").glob("*.py")]:
        text = path.read_text()
        assert "def resolve_session" not in text, path.name
        assert "session_id > ? AND session_id < ?" not in text or path.name == "resolve.py", path.name
        if path.name.startswith("lcm_"):
            assert "current_session_id()" not in text or path.name in ("lcm_init.py", "lcm_remember.py"), path.name
