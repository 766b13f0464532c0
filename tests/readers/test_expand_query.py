"""expand_query: a question answered from the exact messages under summaries, within a grant's cap."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

import lcm.readers.answer
import lcm.summary.compact
import lcm.vault.db
import lcm_expand_query
import lcm.vault.grants
import lcm.capture.bulk
import lcm.capture.ingest
from conftest import run, SCRIPTS, shared_data

from lcm.base.errors import LcmError
from transcripts import Transcript

FILLER = " ".join(["the build keeps the audio worklet in its own chunk"] * 30)   # ~400 tokens a message
SECRET = "SECRET-BEYOND-CAP"


@pytest.fixture
def dag(tmp_path, vault):
    """A session of 12 messages under two leaves and one condensed summary (written as compaction would).

    Message 3 holds the fact asked about; the second leaf holds text that a 1200-token cap never reaches.
    """
    t = Transcript(tmp_path / "projects", session_id="s-q", cwd="/home/user/proj")
    for i in range(12):
        if i == 2:
            t.user("Decision: set RETRY_DELAY = 750 ms in net/retry.py, the API rate limits bursts. " + FILLER)
        elif i >= 6:
            t.assistant_text(f"{SECRET} later work {i}. " + FILLER)
        else:
            t.assistant_text(f"Working on step {i}. " + FILLER)
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(t.path)])
    ids = [r["id"] for r in conn.execute("SELECT id FROM messages WHERE session_id = 's-q' ORDER BY id")]
    uuids = [r["uuid"] for r in conn.execute("SELECT uuid FROM messages WHERE session_id = 's-q' ORDER BY id")]
    leaves = {"sum_aaaaaaaaaaaaaaa1": ids[:6], "sum_aaaaaaaaaaaaaaa2": ids[6:]}
    with lcm.vault.db.transaction(conn):
        for sid, span in [("sum_cccccccccccccccc", None), *leaves.items()]:
            kind, depth = ("condensed", 1) if span is None else ("leaf", 0)
            conn.execute(
                "INSERT INTO summaries (id, session_id, kind, depth, content, token_count, source_token_count, level,"
                " first_message_id, last_message_id, descendant_count, created_at) VALUES"
                " (?, 's-q', ?, ?, ?, 20, 4800, 'extractive', ?, ?, ?, '2026-11-20T10:00:00Z')",
                (sid, kind, depth, f"Summary {sid}: network retry work, the retry delay was chosen.",
                 ids[0] if span is None else span[0], ids[-1] if span is None else span[-1], len(span or ids)))
        for sid, span in leaves.items():
            conn.execute("UPDATE summaries SET parent_id = 'sum_cccccccccccccccc' WHERE id = ?", (sid,))
            for ord_, mid in enumerate(span):
                conn.execute("INSERT INTO summary_sources (summary_id, ord, message_id) VALUES (?, ?, ?)", (sid, ord_, mid))
        for ord_, child in enumerate(leaves):
            conn.execute("INSERT INTO summary_sources (summary_id, ord, child_id) VALUES ('sum_cccccccccccccccc', ?, ?)",
                         (ord_, child))
    return {"conn": conn, "uuids": uuids, "top": "sum_cccccccccccccccc", "leaves": list(leaves)}



def all_request_text(api) -> str:
    return "\n".join(json.dumps(body) for body in api.requests)


def test_question_sources_and_cap_reach_the_model_and_nothing_past_the_cap(dag, fake_api, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    fact = dag["uuids"][2]
    fake_api.enqueue(text=f"RETRY_DELAY was set to 750 ms [{fact}] (see also [sum_0000000000000bad]).")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay did we pick?", "--summary-ids", dag["top"],
                          "--max-tokens", "1200", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert set(doc) >= {"answer", "cited_ids", "expanded_summary_count", "total_source_tokens", "truncated"}
    assert "750 ms" in doc["answer"]
    assert doc["cited_ids"] == [fact]                    # the made-up id is dropped
    assert doc["unknown_cited_ids"] == ["sum_0000000000000bad"]
    assert doc["truncated"] is True and 0 < doc["total_source_tokens"] <= 1200
    assert doc["expanded_summary_count"] == 2            # the condensed node and its first leaf

    first = fake_api.requests[0]
    prompt = fake_api.user_text(first)
    assert "Which retry delay did we pick?" in prompt
    assert "RETRY_DELAY = 750 ms" in prompt and f'id="{fact}"' in prompt
    assert "cap 1200 tokens" in prompt
    assert {t["name"] for t in first["tools"]} == {"lcm_describe", "lcm_expand", "lcm_grep"}
    assert SECRET not in all_request_text(fake_api)       # never read, never sent

    grant = dag["conn"].execute("SELECT * FROM grants WHERE id = ?", (doc["grant_id"],)).fetchone()
    assert grant["revoked_at"] is not None and grant["token_cap"] == 1200 and grant["tokens_used"] <= 1200
    lifetime = datetime.fromisoformat(grant["expires_at"][:-1]) - datetime.fromisoformat(grant["created_at"][:-1])
    assert lifetime.total_seconds() == 300
    with pytest.raises(LcmError):
        lcm.vault.grants.check_and_charge(dag["conn"], doc["grant_id"], dag["top"], 1)


def test_max_tokens_caps_the_models_answer(dag, fake_api, monkeypatch, capsys):
    """--max-tokens caps the answer itself, as the seeds' maxTokens does: the model is asked for at
    most that many tokens, and an answer longer than that (a fake that ignores the bound, as
    `claude -p` takes none) is cut with a marker. It was fixed at 1,500 whatever was asked."""
    monkeypatch.setenv("LCM_LLM", "anthropic")
    fact = dag["uuids"][2]
    long_answer = f"RETRY_DELAY is 750 ms [{fact}]. " + "Because the API rate limits bursts of calls. " * 200
    fake_api.enqueue(text=long_answer)
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay?", "--summary-ids", dag["top"],
                         "--max-tokens", "300", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert fake_api.requests[0]["max_tokens"] == 300
    assert doc["answer_truncated"] is True and len(doc["answer"]) <= 300 * 4
    assert doc["answer"].startswith("RETRY_DELAY is 750 ms") and "raise --max-tokens" in doc["answer"]
    assert doc["cited_ids"] == [fact]
    # without the flag the answer keeps its default room, and a short one is whole
    fake_api.enqueue(text=f"RETRY_DELAY is 750 ms [{fact}].")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay?", "--summary-ids", dag["top"],
                         "--json")
    assert code == 0, err
    assert fake_api.requests[-1]["max_tokens"] == lcm.readers.answer.ANSWER_MAX_TOKENS
    assert json.loads(out)["answer_truncated"] is False


def test_tool_loop_expands_under_the_grant_and_only_inside_its_scope(dag, fake_api, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    later = dag["uuids"][7]
    fake_api.enqueue(tool_use=[{"name": "lcm_expand", "input": {"id": later}}])
    fake_api.enqueue(text=f"Later work happened [{later}].")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "What came later?", "--summary-ids", dag["top"],
                          "--max-tokens", "2000", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cited_ids"] == [later]
    assert len(fake_api.requests) == 2
    assert "later work 7" not in fake_api.user_text(fake_api.requests[0])   # prefetch left room
    tool_turn = json.dumps(fake_api.requests[1]["messages"][-1])
    assert "tool_result" in tool_turn and "later work 7" in tool_turn
    assert doc["total_source_tokens"] <= 2000

    # a grant over the first leaf does not reach the second one
    before = len(fake_api.requests)
    fake_api.enqueue(tool_use=[{"name": "lcm_expand", "input": {"id": dag["leaves"][1]}}])
    fake_api.enqueue(text="Cannot tell.")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "q", "--summary-ids", dag["leaves"][0], "--json")
    assert code == 0, err
    tool_turn = json.dumps(fake_api.requests[-1]["messages"][-1])
    assert "is outside grant" in tool_turn
    assert all(SECRET not in json.dumps(body) for body in fake_api.requests[before:])


def test_tool_loop_is_refused_past_the_cap_and_bounded_in_turns(dag, fake_api, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    fake_api.respond(lambda body: {"tool_use": [{"name": "lcm_expand", "input": {"id": dag["leaves"][1]}}]}
                     if body.get("tool_choice", {}).get("type") != "none" else {"text": "Cannot tell."})
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "q", "--summary-ids", dag["top"], "--max-tokens", "500", "--json")
    assert code == 0, err
    assert len(fake_api.requests) == lcm.readers.answer.MAX_TURNS
    sent = all_request_text(fake_api)
    assert "later work 6" in sent and "later work 7" not in sent     # the cap ends inside message 7
    assert "has used its 500 tokens" in sent
    assert json.loads(out)["total_source_tokens"] == 500


def test_revoked_or_expired_grant_refuses_expansion(dag, monkeypatch, capsys):
    conn = dag["conn"]
    revoked = lcm.vault.grants.create_grant(conn, ["s-q"], [dag["top"]], 1000)
    lcm.vault.grants.revoke_grant(conn, revoked)
    expired = lcm.vault.grants.create_grant(conn, ["s-q"], [dag["top"]], 1000)
    with lcm.vault.db.transaction(conn):
        conn.execute("UPDATE grants SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?", (expired,))
    for grant in (revoked, expired):
        with pytest.raises(LcmError):
            lcm.readers.answer.Expansion(conn, grant, 1000).expand(dag["top"])
        monkeypatch.setenv("LCM_GRANT", grant)
        import lcm_expand
        code = lcm_expand.main([dag["top"]])
        out, err = capsys.readouterr()
        assert code == 1 and err.startswith("Error: ") and SECRET not in out


def test_no_model_gives_ranked_excerpts_not_an_answer(dag, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay?", "--summary-ids", dag["leaves"][0], "--json")
    doc = json.loads(out)
    assert code == 0 and doc["backend"] == "none"
    assert doc["answer"].startswith("No model backend (LCM_LLM=none): these are excerpts")
    assert "RETRY_DELAY = 750 ms" in doc["answer"]
    # the best excerpt first; the filler turns are one excerpt; nothing is "cited"
    assert doc["excerpt_ids"][0] == dag["uuids"][2] and len(doc["excerpt_ids"]) == 2
    assert doc["cited_ids"] == []
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay?", "--summary-ids", dag["leaves"][0])
    assert "Cited:" not in out and "near-identical" in out


def test_a_failed_model_call_falls_back_to_the_excerpts(dag, fake_api, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    fake_api.enqueue(status=400)
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay?", "--summary-ids", dag["leaves"][0], "--json")
    doc = json.loads(out)
    assert code == 0 and "Warning: the model call failed" in err
    assert doc["backend"] == "none" and doc["answer"].startswith("The model call failed: these are excerpts")
    assert doc["excerpt_ids"] and "RETRY_DELAY = 750 ms" in doc["answer"]


def test_claude_backend_runs_headless_with_only_the_lcm_tools(dag, fake_claude, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "claude")
    fact = dag["uuids"][2]
    fake_claude.enqueue(result=f"750 ms [{fact}]")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay?", "--summary-ids", dag["top"], "--max-tokens", "1200")
    assert code == 0, err
    assert "750 ms" in out and f"Cited: {fact}" in out
    call = fake_claude.calls()[0]
    allowed = call["argv"][call["argv"].index("--allowedTools") + 1]
    assert f"Bash(python3 {SCRIPTS.resolve()}/lcm_expand.py:*)" in allowed and "Edit" not in allowed
    assert call["argv"][call["argv"].index("--tools") + 1] == "Bash"
    assert call["env"]["LCM_GRANT"].startswith("grant_") and call["env"]["LCM_SUBAGENT"] == "1"
    assert "Which retry delay?" in call["prompt"] and "RETRY_DELAY = 750 ms" in call["prompt"]
    assert SECRET not in call["prompt"]


def test_query_finds_candidates_through_grep(dag, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which retry delay?", "--query", "RETRY_DELAY", "--all-sessions", "--json")
    assert code == 0, err
    assert "RETRY_DELAY = 750 ms" in json.loads(out)["answer"]
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "q", "--query", "zebra-unicorn-nowhere", "--all-sessions")
    assert code == 1 and "nothing in the vault matches" in err and "Hint:" in err


def test_command_smoke(dag):
    env = {**os.environ, "LCM_LLM": "none"}
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_expand_query.py"), "--prompt", "q",
                           "--summary-ids", dag["leaves"][0], "--max-tokens", "150"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "cut at the cap" in done.stdout and "anthropic" not in done.stderr


def test_real_session_compacted_then_asked(vault, fake_api, monkeypatch, capsys):
    """A real transcript, compacted; the question is answered from the messages under the summaries."""
    session = "7acd37a8-2745-4b58-a8a9-46164b22ad9e"
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(shared_data("claude-projects", "-Users-dain-workspace-JSSoundRecorder"))])
    monkeypatch.setenv("LCM_LLM", "none")
    lcm.summary.compact.compact(conn, session, mode="full")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which build tool did we choose?", "--query", "let's do vite",
                          "--session", session, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "ok, fine, let's do vite" in doc["answer"] and doc["total_source_tokens"] <= 4000
    assert doc["excerpt_ids"] and all(lcm.readers.answer.node_info(conn, i) for i in doc["excerpt_ids"])

    monkeypatch.setenv("LCM_LLM", "anthropic")
    choice = conn.execute("SELECT uuid FROM messages WHERE content LIKE '%let''s do vite%'").fetchone()[0]
    fake_api.enqueue(text=f"Vite [{choice}].")
    code, out, err = run(capsys, lcm_expand_query, "--prompt", "Which build tool did we choose?", "--query", "let's do vite",
                          "--session", session, "--json")
    assert code == 0, err
    assert json.loads(out)["cited_ids"] == [choice]
    assert "ok, fine, let's do vite" in fake_api.user_text(fake_api.requests[0])


def test_text_past_the_cap_is_never_fetched_from_the_vault(dag):
    """Every statement that touches message text asks for at most the granted characters."""
    conn = dag["conn"]
    grant = lcm.vault.grants.create_grant(conn, ["s-q"], [dag["top"]], 1000)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        exp = lcm.readers.answer.Expansion(conn, grant, 1000)
        got = exp.expand(dag["top"])
    finally:
        conn.set_trace_callback(None)
    assert exp.used == 1000 and exp.truncated and SECRET not in json.dumps(got)
    reads = [s for s in statements if "content" in s and "messages" in s]
    # (the text read through lcm_text, compressed or not: only the cap's prefix comes back)
    assert reads and all("substr(lcm_text(content), 1, " in s for s in reads)
    second_leaf = {str(r[0]) for r in conn.execute(
        "SELECT message_id FROM summary_sources WHERE summary_id = ?", (dag["leaves"][1],))}
    read_ids = {s.rsplit("=", 1)[1].strip() for s in reads}
    assert read_ids and not read_ids & second_leaf
    assert sum(int(s.split("substr(lcm_text(content), 1, ")[1].split(")")[0]) for s in reads) == 4000   # 1000 tokens
