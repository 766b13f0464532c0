"""The delegation guard: a sub-agent may start another only when it names what it hands off and keeps."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import lcm.vault.db
import lcm_expand_query
import lcm.base.guard
from conftest import run, SCRIPTS
from lcm.base.errors import LcmError

SCOPE = ["--delegated-scope", "find the retry constant in the March sessions",
         "--kept-work", "I edit config.py with the answer"]




def test_root_agent_is_never_refused():
    for args in [(None, None), ("", ""), ("x", None)]:
        lcm.base.guard.check_delegation("lcm_expand_query.py", *args, environ={})
    assert not lcm.base.guard.in_subagent({})


def test_subagent_is_refused_without_scope_and_kept_work():
    env = {"LCM_SUBAGENT": "1"}
    for scope, kept in [(None, None), ("scope", None), (None, "kept"), ("scope", "   "), ("", "kept")]:
        with pytest.raises(LcmError) as refused:
            lcm.base.guard.check_delegation("lcm_agentic_map.py", scope, kept, environ=env, instead="run it in a loop")
        assert "refused inside a sub-agent" in refused.value.message
        assert refused.value.hint.startswith("do it yourself: run it in a loop")
    lcm.base.guard.check_delegation("lcm_agentic_map.py", "scope", "kept", environ=env)


def test_depth_travels_in_the_environment():
    child = lcm.base.guard.child_env({"PATH": "/bin"})
    grandchild = lcm.base.guard.child_env(child)
    assert (child["LCM_SUBAGENT"], child["LCM_DELEGATION_DEPTH"]) == ("1", "1")
    assert grandchild["LCM_DELEGATION_DEPTH"] == "2"
    # the depth alone marks a sub-agent, even if LCM_SUBAGENT was dropped on the way
    assert lcm.base.guard.in_subagent({"LCM_DELEGATION_DEPTH": "2"})
    with pytest.raises(LcmError, match="LCM_DELEGATION_DEPTH"):
        lcm.base.guard.in_subagent({"LCM_DELEGATION_DEPTH": "deep"})


def test_expand_query_inside_a_subagent_points_to_expand(monkeypatch, capsys):
    monkeypatch.setenv("LCM_SUBAGENT", "1")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "what was the retry constant?", "--query", "retry")
    assert code == 1 and out == ""
    assert err.startswith("Error: lcm_expand_query.py refused inside a sub-agent")
    assert "Hint: do it yourself" in err and "lcm_expand.py" in err
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "q", "--query", "retry", "--delegated-scope", "x")
    assert code == 1 and "refused inside a sub-agent" in err


def test_expand_query_inside_a_subagent_runs_with_scope_and_kept_work(monkeypatch, capsys):
    lcm.vault.db.connect()  # an empty vault
    monkeypatch.setenv("LCM_SUBAGENT", "1")
    monkeypatch.setenv("LCM_LLM", "none")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "q", "--summary-ids", "sum_0000000000000000", *SCOPE)
    # past the guard: the next complaint is about the unknown id, not about delegation
    assert code == 1 and "refused" not in err and "sum_0000000000000000" in err


def test_expand_query_for_the_root_agent_is_not_refused(monkeypatch, capsys):
    lcm.vault.db.connect()
    monkeypatch.setenv("LCM_LLM", "none")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "q", "--summary-ids", "sum_0000000000000000")
    assert code == 1 and "refused" not in err and "sum_0000000000000000" in err


def test_guard_as_a_command_in_a_subagent():
    env = {**os.environ, "LCM_SUBAGENT": "1", "LCM_DELEGATION_DEPTH": "1"}
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_expand_query.py"), "--prompt", "q", "--query", "x"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "lcm_expand.py" in done.stderr and "Traceback" not in done.stderr


def test_delegation_stops_at_the_depth_limit_whatever_the_agent_says(monkeypatch, capsys):
    """The depth was counted but never capped: a chain 50 deep ran. Past the limit even a
    sub-agent that names its scope and kept work is refused, with an error that says why."""
    limit = lcm.base.guard.MAX_DELEGATION_DEPTH
    assert limit == 2
    lcm.base.guard.check_delegation("lcm_expand_query.py", "scope", "kept",
                                    environ={"LCM_SUBAGENT": "1", "LCM_DELEGATION_DEPTH": str(limit - 1)})
    for depth in (limit, limit + 1, 50):
        with pytest.raises(LcmError) as refused:
            lcm.base.guard.check_delegation("lcm_expand_query.py", "scope", "kept",
                                            environ={"LCM_SUBAGENT": "1", "LCM_DELEGATION_DEPTH": str(depth)})
        assert f"delegation depth {depth}" in refused.value.message and f"at most {limit} levels" in refused.value.message
    lcm.vault.db.connect()  # an empty vault
    monkeypatch.setenv("LCM_SUBAGENT", "1")
    monkeypatch.setenv("LCM_DELEGATION_DEPTH", "50")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "q", "--query", "retry", *SCOPE)
    assert code == 1 and out == "" and "Traceback" not in err
    assert "Error: lcm_expand_query.py refused: this agent is already at delegation depth 50" in err
    assert "Hint: do the work here" in err and "lcm_expand.py" in err
