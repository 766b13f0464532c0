"""Expansion grants: scope, token cap, expiry and revocation, enforced by lcm.readers.expand via LCM_GRANT."""
from __future__ import annotations

import json

import pytest

import lcm.base.config
import lcm_describe
import lcm.readers.expand
import lcm_expand
import lcm.vault.grants
from lcm.base.errors import LcmError
from test_describe_expand import compacted_vault
from conftest import run


@pytest.fixture
def dag(tmp_path, monkeypatch):
    conn, _paths = compacted_vault(tmp_path, monkeypatch, turns=8, sessions=("s1", "s2"))
    return conn




def top(conn, session):
    return conn.execute("SELECT id FROM summaries WHERE session_id = ? AND parent_id IS NULL"
                        " ORDER BY depth DESC", (session,)).fetchone()[0]


def test_expand_in_scope_charges_tokens(dag, capsys, monkeypatch):
    grant = lcm.vault.grants.create_grant(dag, ["s1"], [], token_cap=100000)
    monkeypatch.setenv("LCM_GRANT", grant)
    node = top(dag, "s1")
    doc = json.loads(run(capsys, lcm_expand, node, "--json")[1])
    used = dag.execute("SELECT tokens_used FROM grants WHERE id = ?", (grant,)).fetchone()[0]
    assert doc["count"] >= 1 and used == doc["tokens"] > 0


def test_other_session_under_grant_is_refused(dag, capsys, monkeypatch):
    monkeypatch.setenv("LCM_GRANT", lcm.vault.grants.create_grant(dag, ["s1"], [], token_cap=100000))
    other = top(dag, "s2")
    for module in (lcm_expand, lcm_describe):
        code, out, err = run(capsys, module, other)
        assert code == 1 and out == "" and f"Error: {other} is outside grant" in err and "session s2" in err
        assert "Hint: " in err and "lcm_expand_query.py" in err
    code, _out, err = run(capsys, lcm_describe, "--session", "s2")
    assert code == 1 and "outside grant" in err


def test_node_scope_covers_descendants_only(dag, monkeypatch):
    node = top(dag, "s1")
    child, sibling_leaf = dag.execute(
        "SELECT s.child_id, (SELECT id FROM summaries WHERE session_id='s1' AND kind='leaf'"
        " AND parent_id IS NULL) FROM summary_sources s WHERE s.summary_id = ? ORDER BY ord", (node,)).fetchone()
    grant = lcm.vault.grants.create_grant(dag, ["s1"], [child], token_cap=100000)
    assert lcm.vault.grants.check_and_charge(dag, grant, child, 10) == 10
    leaf_below = lcm.readers.expand.expand_to_messages(dag, child)[0]["uuid"]
    assert lcm.vault.grants.check_and_charge(dag, grant, leaf_below, 10) == 10  # a message under it
    with pytest.raises(LcmError, match="outside grant"):
        lcm.vault.grants.check_and_charge(dag, grant, node, 10)  # its parent is not in scope
    if sibling_leaf:
        with pytest.raises(LcmError, match="outside grant"):
            lcm.vault.grants.check_and_charge(dag, grant, sibling_leaf, 10)


def test_cap_limits_output_then_refuses(dag, capsys, monkeypatch):
    grant = lcm.vault.grants.create_grant(dag, ["s1"], [], token_cap=150)
    monkeypatch.setenv("LCM_GRANT", grant)
    node = top(dag, "s1")
    doc = json.loads(run(capsys, lcm_expand, node, "--full", "--json")[1])
    assert doc["tokens"] <= 150 and doc["has_more"]
    while True:
        code, _out, err = run(capsys, lcm_expand, node, "--full", "--json", "--offset", "1")
        if code:
            break
    assert code == 1 and "has used its 150 tokens" in err and "Hint:" in err
    assert dag.execute("SELECT tokens_used FROM grants WHERE id = ?", (grant,)).fetchone()[0] == 150


def test_expired_revoked_unknown_grants(dag, capsys, monkeypatch):
    node = top(dag, "s1")
    expired = lcm.vault.grants.create_grant(dag, ["s1"], [], token_cap=1000)
    dag.execute("UPDATE grants SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", (expired,))
    revoked = lcm.vault.grants.create_grant(dag, ["s1"], [], token_cap=1000)
    lcm.vault.grants.revoke_grant(dag, revoked)
    for grant, words in ((expired, "expired"), (revoked, "revoked"), ("grant_0000000000000000", "unknown grant")):
        monkeypatch.setenv("LCM_GRANT", grant)
        code, out, err = run(capsys, lcm_expand, node)
        assert code == 1 and out == "" and words in err and "Hint:" in err


def test_create_grant_validates(dag):
    with pytest.raises(LcmError):
        lcm.vault.grants.create_grant(dag, [], [], token_cap=10)
    with pytest.raises(LcmError):
        lcm.vault.grants.create_grant(dag, ["s1"], [], token_cap=0)
    grant = lcm.vault.grants.create_grant(dag, ["s1"], ["sum_x"], token_cap=5, ttl_seconds=60)
    row = dag.execute("SELECT * FROM grants WHERE id = ?", (grant,)).fetchone()
    assert json.loads(row["node_ids"]) == ["sum_x"] and row["expires_at"] > lcm.base.config.now_iso()
