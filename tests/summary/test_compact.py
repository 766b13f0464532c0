"""Compaction: the summary DAG stays lossless, contiguous and idempotent; prompts per depth,
escalation, retries and auth failures against the real SDK talking to a fake Messages API."""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lcm.summary.compact

import lcm_compact
import lcm.summary.dag
import lcm.base.config
import lcm.vault.db
import lcm.base.errors
import lcm.vault.schema
import lcm.summary.extract
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.base.llm
import lcm.summary.prompts
from conftest import ROOT, SCRIPTS, shared_data
from fake_anthropic import FakeAnthropic
from transcripts import Transcript, coding_session

JSON_KEYS = {"session_id", "leaf_created", "condensed_created", "levels", "model_calls", "tokens_before",
             "tokens_after"}


@pytest.fixture(autouse=True)
def small_leaves(monkeypatch):
    """The sessions built here are tiny: any leaf size will do (test_order.py tests the minimum)."""
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "1")


# -- helpers: build, run, verify --------------------------------------------------------

def run_json(capsys, *args) -> dict:
    code = lcm_compact.main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def ingest(conn, *paths):
    return lcm.capture.bulk.ingest_paths(conn, [str(p) for p in paths])


def stored_rows(t: Transcript) -> list:
    """Write the transcript, ingest it into a fresh vault, return its message rows in order."""
    t.write()
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    rows = conn.execute("SELECT *, lcm_line(raw, block_id, block_pos) AS line, lcm_text(content) AS text"
                        " FROM messages ORDER BY id").fetchall()
    return [{**dict(r), "raw": r["line"], "content": r["text"]} for r in rows]  # as lcm's readers read them


def session_with(tmp_path, turns=12, **kw) -> Transcript:
    t = coding_session(tmp_path / "projects", turns=turns, **kw)
    t.write()
    return t


def expand_to_messages(conn, node_id: str) -> list[int]:
    """Message ids under a node, in order, by walking summary_sources."""
    out = []
    for row in conn.execute("SELECT message_id, child_id FROM summary_sources WHERE summary_id = ? ORDER BY ord",
                            (node_id,)):
        out.extend([row["message_id"]] if row["message_id"] is not None else expand_to_messages(conn, row["child_id"]))
    return out


def check_dag(conn, session_id: str, tail: int, complete: bool = True) -> dict:
    """Assert every DAG invariant of one session; returns a few counts."""
    rows = conn.execute("SELECT id, thread, token_count FROM messages WHERE session_id = ? ORDER BY seq",
                        (session_id,)).fetchall()
    seq = [r["id"] for r in rows]
    thread_of = {r["id"]: r["thread"] for r in rows}
    threads: dict[str, list[int]] = {}
    for r in rows:
        threads.setdefault(r["thread"], []).append(r["id"])
    position = {mid: i for i, mid in enumerate(seq)}
    nodes = {r["id"]: r for r in conn.execute("SELECT * FROM summaries WHERE session_id = ?", (session_id,))}
    covered = {}
    for node in nodes.values():
        assert node["token_count"] == lcm.base.config.estimate_tokens(node["content"])
        assert 0 <= node["token_count"] < node["source_token_count"], node["id"]
        assert node["level"] in lcm.summary.compact.LEVELS
        sources = conn.execute("SELECT * FROM summary_sources WHERE summary_id = ? ORDER BY ord",
                               (node["id"],)).fetchall()
        assert [s["ord"] for s in sources] == list(range(len(sources))) and sources
        if node["kind"] == "leaf":
            assert node["depth"] == 0
            ids = [s["message_id"] for s in sources]
            assert all(i is not None for i in ids)
            assert ids == sorted(ids, key=position.get), "a leaf lists its messages in conversation order"
            for thread in {thread_of[i] for i in ids}:  # a contiguous run of each thread it holds
                mine = [i for i in ids if thread_of[i] == thread]
                start = threads[thread].index(mine[0])
                assert mine == threads[thread][start:start + len(mine)], "a leaf covers a contiguous run"
            for i in ids:
                assert i not in covered, "a message is covered by one leaf at most"
                covered[i] = node["id"]
        else:
            children = [nodes[s["child_id"]] for s in sources]
            # the seeds' two fanouts: LCM_LEAF_MIN_FANOUT leaves under a depth-1 node,
            # LCM_CONDENSED_MIN_FANOUT condensed summaries under a deeper one
            assert len(children) == lcm.summary.dag.fanouts()[0 if node["depth"] == 1 else 1], node["id"]
            assert all(c["depth"] == node["depth"] - 1 for c in children)
            assert all(c["parent_id"] == node["id"] for c in children)
            same_depth = sorted((n for n in nodes.values() if n["depth"] == node["depth"] - 1),
                                key=lambda n: position[n["first_message_id"]])
            order = [n["id"] for n in same_depth]
            start = order.index(children[0]["id"])
            assert [c["id"] for c in children] == order[start:start + len(children)], "contiguous children"
            assert node["descendant_count"] == sum(c["descendant_count"] for c in children)
        if node["parent_id"] is not None:
            parent_rows = conn.execute("SELECT summary_id FROM summary_sources WHERE child_id = ?",
                                       (node["id"],)).fetchall()
            assert [r[0] for r in parent_rows] == [node["parent_id"]], "one parent, recorded both ways"
        under = expand_to_messages(conn, node["id"])
        assert under[0] == node["first_message_id"]
        assert max(under, key=position.get) == node["last_message_id"]
        assert len(under) == node["descendant_count"]
    main = threads.get("", [])
    in_tail = set(main[max(len(main) - tail, 0):]) if tail else set()
    assert not any(m in covered for m in in_tail), "the fresh tail is never compacted"
    if complete:  # what is left before the tail is a remainder under the minimum leaf size
        minimum = min(lcm.base.config.get("LCM_LEAF_MIN_TOKENS"), lcm.base.config.get("LCM_LEAF_CHUNK_TOKENS"))
        start = position[min(in_tail, key=position.get)] if in_tail else len(seq)
        left: dict[str, int] = {}
        for r in rows[:start]:
            if r["id"] not in covered:
                left[r["thread"]] = left.get(r["thread"], 0) + r["token_count"]
        assert all(n < minimum for n in left.values()), left
    # covered main-thread messages are a prefix: a kill can never leave a hole
    done = [m in covered for m in main]
    assert done == sorted(done, reverse=True)
    return {"nodes": len(nodes), "covered": len(covered), "depth": max((n["depth"] for n in nodes.values()), default=-1)}


def raw_lines_via_expand(conn, node_id: str) -> list[bytes]:
    """Original lines under a node: `lcm_expand.py ID --full --raw` (in-process) when it exists, else SQL."""
    try:
        import lcm.readers.expand
        import lcm_expand
    except ImportError:  # helper module not there yet: walk summary_sources ourselves
        ids = expand_to_messages(conn, node_id)
        return [bytes(conn.execute("SELECT raw FROM messages WHERE id = ?", (i,)).fetchone()[0]) for i in ids]
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(out):
        assert lcm_expand.main([node_id, "--full", "--raw", "--max-tokens", "1000000000"]) == 0
    out.flush()
    return out.buffer.getvalue().split(b"\n")[:-1]


# -- Must show 1: the shared real transcripts, LCM_LLM=none --------------------------------

@pytest.mark.slow  # every session of the shared data
def test_full_over_every_real_session_is_lossless_and_idempotent(monkeypatch, capsys):
    projects = shared_data("claude-projects")
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "1500")   # small chunks: several depths on real data
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "3")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "3")
    conn = lcm.vault.db.connect()
    ingest(conn, projects)
    sessions = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages")]
    first = run_json(capsys, "--all", "--full")
    assert first["count"] == len(sessions) and first["leaf_created"] > 50
    assert first["levels"]["extractive"] + first["levels"]["truncated"] == first["leaf_created"] + first["condensed_created"]
    assert first["tokens_after"] < first["tokens_before"] / 2
    depths = set()
    for sid in sessions:
        depths.add(check_dag(conn, sid, tail=32)["depth"])
    assert {0, 1, 2} <= depths
    # expanding every top node gives back every compacted raw line, verbatim and in order
    for sid in sessions:
        covered = [bytes(r[0]) for r in conn.execute(
            "SELECT lcm_line(m.raw, m.block_id, m.block_pos) FROM messages m JOIN summary_sources s"
            " ON s.message_id = m.id WHERE m.session_id = ?"
            " ORDER BY m.seq", (sid,))]
        tops = conn.execute("SELECT s.id FROM summaries s JOIN messages f ON f.id = s.first_message_id"
                            " WHERE s.session_id = ? AND s.parent_id IS NULL ORDER BY f.seq", (sid,)).fetchall()
        expanded = [line for top in tops for line in raw_lines_via_expand(conn, top[0])]
        assert sorted(expanded) == sorted(covered)  # a sub-agent's own leaves nest inside its caller's span
        assert len(expanded) == len(covered)
    # the raw lines are the transcript's own bytes
    sample = conn.execute("SELECT lcm_line(m.raw, m.block_id, m.block_pos) AS raw, coalesce(m.transcript_path,"
                          " (SELECT b.transcript_path FROM blocks b WHERE b.id = m.block_id)) AS transcript_path, line_no"
                          " FROM messages m JOIN summary_sources s ON s.message_id = m.id LIMIT 1").fetchone()
    line = Path(sample["transcript_path"]).read_bytes().split(b"\n")[sample["line_no"] - 1]
    assert bytes(sample["raw"]) == line.rstrip(b"\r")
    second = run_json(capsys, "--all", "--full")
    assert second["leaf_created"] == second["condensed_created"] == 0
    assert second["tokens_after"] == first["tokens_after"]


# -- properties on generated sessions --------------------------------------------------------

@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(1, 25), batches=st.integers(1, 4), chunk=st.integers(60, 900),
       tail=st.integers(0, 10), fanout=st.integers(2, 5), leaf_fanout=st.integers(2, 5), max_depth=st.integers(-1, 2))
def test_incremental_then_full_keeps_the_dag_sound(tmp_path_factory, monkeypatch, turns, batches, chunk, tail, fanout,
                                                   leaf_fanout, max_depth):
    home = tmp_path_factory.mktemp("prop")
    monkeypatch.setenv("LCM_HOME", str(home))
    monkeypatch.setenv("LCM_LLM", "none")
    for name, value in (("LCM_LEAF_CHUNK_TOKENS", chunk), ("LCM_FRESH_TAIL_COUNT", tail),
                        ("LCM_CONDENSED_MIN_FANOUT", fanout), ("LCM_LEAF_MIN_FANOUT", leaf_fanout),
                        ("LCM_INCREMENTAL_MAX_DEPTH", max_depth)):
        monkeypatch.setenv(name, str(value))
    t = Transcript(home / "projects")
    conn = lcm.vault.db.connect()
    per_batch = max(turns // batches, 1)
    for i in range(turns):  # the session grows between incremental compactions, like a live one
        t.user(f"turn {i}: change file_{i}.py")
        call = t.tool_use("Edit", {"file_path": f"/p/file_{i}.py", "old_string": "a", "new_string": "b" * (i * 7)})
        t.tool_result(call, "ok" * (i % 4), is_error=i % 5 == 0)
        t.assistant_text(f"Done with {i}; I'll run the tests next because they matter.")
        if i % per_batch == 0:
            t.write()
            ingest(conn, t.path)
            lcm.summary.compact.compact(conn, t.session_id)
            check_dag(conn, t.session_id, tail, complete=False)
            if max_depth >= 0:  # an incremental run condenses no deeper than LCM_INCREMENTAL_MAX_DEPTH
                assert conn.execute("SELECT coalesce(max(depth), 0) FROM summaries WHERE session_id = ?",
                                    (t.session_id,)).fetchone()[0] <= max_depth
    t.write()
    ingest(conn, t.path)
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    check_dag(conn, t.session_id, tail)
    again = lcm.summary.compact.compact(conn, t.session_id, mode="full")
    assert again["leaf_created"] == again["condensed_created"] == 0


def test_tool_call_and_result_are_never_split(tmp_path, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "40")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    t = session_with(tmp_path, turns=8)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    check_dag(conn, t.session_id, 0)
    for leaf in conn.execute("SELECT id FROM summaries WHERE kind = 'leaf'"):
        opened, answered = set(), set()
        for mid in expand_to_messages(conn, leaf[0]):
            o, a = lcm.summary.dag.tool_ids(conn.execute("SELECT raw FROM messages WHERE id = ?", (mid,)).fetchone()[0])
            opened.update(o)
            answered.update(a)
        assert opened <= answered and answered <= opened


def test_a_call_whose_result_is_in_the_fresh_tail_does_not_hold_back_the_chunk(tmp_path, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "1")
    t = Transcript(tmp_path / "projects")
    t.user("list the files, then show the log " + "please " * 30)
    a = t.tool_use("Bash", {"command": "ls"})
    t.tool_result(a, "a.py b.py " * 20)
    b = t.tool_use("Bash", {"command": "git log"})
    t.tool_result(b, "commit 123")          # the fresh tail
    t.write()
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    result = lcm.summary.compact.compact(conn, t.session_id, mode="full")
    assert result["leaf_created"] == 1, "one leaf up to the tail, not a tiny leaf for the last call"
    check_dag(conn, t.session_id, 1)


# -- modes, lock, output ----------------------------------------------------------------------

def test_incremental_waits_for_a_full_chunk(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    t = session_with(tmp_path, turns=10)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    quiet = run_json(capsys, "--session", t.session_id)
    assert set(quiet) >= JSON_KEYS and quiet["leaf_created"] == 0
    assert not lcm.summary.dag.compaction_due(conn, t.session_id)
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "200")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "8")
    assert lcm.summary.dag.compaction_due(conn, t.session_id)
    one = run_json(capsys, "--session", t.session_id)
    # one run drains the backlog until less than a chunk is left
    assert one["leaf_created"] > 1 and one["tokens_after"] < one["tokens_before"]
    assert one["levels"]["extractive"] == one["leaf_created"] + one["condensed_created"]
    assert not lcm.summary.dag.compaction_due(conn, t.session_id)


def test_dry_run_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "150")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "4")
    t = session_with(tmp_path, turns=10)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    plan = run_json(capsys, "--session", t.session_id, "--full", "--dry-run")
    assert plan["would_create"]["leaf"] > 1 and plan["leaf_created"] > 1
    assert conn.execute("SELECT COUNT(*) FROM summaries").fetchone()[0] == 0
    done = run_json(capsys, "--session", t.session_id, "--full")
    assert done["leaf_created"] == plan["would_create"]["leaf"]
    assert done["condensed_created"] == plan["would_create"]["condensed"]


def test_until_under_stops_at_the_target(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "100")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    t = session_with(tmp_path, turns=20)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    before = lcm.summary.dag.active_context_tokens(conn, t.session_id)
    target = before * 9 // 10
    result = run_json(capsys, "--session", t.session_id, "--until-under", str(target))
    assert result["tokens_after"] <= target < result["tokens_before"]
    full = lcm.summary.compact.compact(conn, t.session_id, mode="full")
    assert full["leaf_created"] > 0, "--until-under stopped early, leaving work for --full"


def test_session_lock_excludes_a_second_compaction(tmp_path):
    with lcm.summary.dag.session_lock("s1"):
        with pytest.raises(lcm.base.errors.LcmError, match="another compaction"):
            with lcm.summary.dag.session_lock("s1", blocking=False):
                pass
        with lcm.summary.dag.session_lock("s2", blocking=False):
            pass
    with lcm.summary.dag.session_lock("s1", blocking=False):
        pass


def test_render_context_is_bounded_xml_with_drill_down_ids(tmp_path, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "120")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "3")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    t = session_with(tmp_path, turns=15)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    items = lcm.summary.dag.active_context(conn, t.session_id)
    assert [i["type"] for i in items][-3:] == ["message"] * 3
    tops = [i for i in items if i["type"] == "summary"]
    xml = lcm.summary.dag.render_context(conn, t.session_id, max_chars=100_000)
    import xml.etree.ElementTree as ET
    root = ET.fromstring(xml)
    found = root.findall("summary")
    assert [s.get("id") for s in found] == [i["id"] for i in tops]
    assert set(found[0].attrib) == {"id", "kind", "depth", "descendant_count", "earliest_at", "latest_at"}
    for limit in (600, 1500, 3000):
        small = lcm.summary.dag.render_context(conn, t.session_id, max_chars=limit)
        assert len(small) <= limit
        shown = ET.fromstring(small)
        cut = shown.find("omitted")
        assert len(shown.findall("summary")) + (int(cut.get("summaries")) if cut is not None else 0) == len(tops)
    # a cut body points the main agent to describe (lcm_expand.py is for sub-agents)
    cut_xml = next(x for x in (lcm.summary.dag.render_context(conn, t.session_id, max_chars=n)
                               for n in range(1500, 6000, 250)) if "(cut;" in x)
    assert "(cut; lcm_describe.py sum_" in cut_xml and "lcm_expand.py" not in cut_xml
    # a condensed summary names the summaries it was made from, in order, as the seeds' <parents>
    condensed = [s for s in found if s.get("kind") == "condensed"]
    assert condensed, [s.get("kind") for s in found]
    for node in condensed:
        refs = [r.get("id") for r in node.find("parents").findall("summary_ref")]
        sources = [r[0] for r in conn.execute("SELECT id FROM summaries WHERE parent_id = ? ORDER BY earliest_at, id",
                                              (node.get("id"),))]
        assert refs == sources and len(refs) >= 2
    assert all(s.find("parents") is None for s in found if s.get("kind") == "leaf")


def test_missing_session_and_bad_setting(capsys, monkeypatch):
    assert lcm_compact.main(["--session", "nope"]) == 1
    assert "no session 'nope' in the vault" in capsys.readouterr().err
    assert lcm_compact.main([]) == 1
    assert "--session" in capsys.readouterr().err
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "many")
    assert lcm_compact.main(["--session", "x"]) == 1
    assert "LCM_FRESH_TAIL_COUNT" in capsys.readouterr().err


def test_script_runs_as_a_subprocess_with_the_stdlib(tmp_path):
    t = session_with(tmp_path, turns=10)
    env = {**os.environ, "LCM_LLM": "none", "LCM_FRESH_TAIL_COUNT": "4"}
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    conn.close()
    proc = subprocess.run(["python3", str(ROOT / "scripts" / "lcm_compact.py"), "--session", t.session_id,
                           "--full", "--json"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["leaf_created"] >= 1
    helped = subprocess.run(["python3", str(ROOT / "scripts" / "lcm_compact.py"), "--help"],
                            capture_output=True, text=True, env=env)
    assert "--until-under" in helped.stdout and "Examples" in helped.stdout


# -- the extractive summariser ----------------------------------------------------------------

def test_extractive_summary_tells_a_coding_story(tmp_path, monkeypatch):
    t = Transcript(tmp_path / "projects")
    t.user("Add a --verbose flag to cli.py and make the tests pass")
    t.assistant_text("I'll add the flag with argparse. The cause of the failure is a missing import.")
    w = t.tool_use("Write", {"file_path": "/p/new_module.py", "content": "x = 1\n" * 50})
    t.tool_result(w, "File created successfully")
    e = t.tool_use("Edit", {"file_path": "/p/cli.py", "old_string": "a", "new_string": "b"})
    t.tool_result(e, "updated")
    b = t.tool_use("Bash", {"command": "pytest -q tests/test_cli.py"})
    t.tool_result(b, "ImportError: cannot import name 'verbose'\n1 failed", is_error=True)
    t.assistant_text("Fixed the import; all tests pass now.")
    rows = stored_rows(t)
    text = lcm.summary.extract.summarize_messages(rows, "messages #1-#9", 400)
    assert "Add a --verbose flag" in text
    assert "/p/new_module.py (written)" in text and "/p/cli.py (edited)" in text
    assert "`pytest -q tests/test_cli.py` (failed)" in text
    assert "ImportError: cannot import name 'verbose'" in text
    assert "Ended: Fixed the import" in text
    assert text.splitlines()[-1].startswith("Expand for details about:")
    assert text == lcm.summary.extract.summarize_messages(rows, "messages #1-#9", 400), "deterministic"
    for budget in (150, 80, 60):
        small = lcm.summary.extract.summarize_messages(rows, "messages #1-#9", budget)
        assert lcm.base.config.estimate_tokens(small) <= budget and "Files: " in small
    assert lcm.summary.extract.summarize_messages(rows, "messages #1-#9", 5) is None, "too small: caller truncates"
    merged = lcm.summary.extract.summarize_summaries([text, text], "2 summaries", 300)
    assert "/p/cli.py (edited)" in merged and lcm.base.config.estimate_tokens(merged) <= 300


def test_extractive_summary_keeps_what_the_user_typed_not_the_ide_context(tmp_path):
    t = Transcript(tmp_path / "projects")
    t.entry("user", {"role": "user", "content": [
        {"type": "text", "text": "<ide_opened_file>The user opened the file /p/notes.md in the IDE."
                                 " This may or may not be related to the current task.</ide_opened_file>"},
        {"type": "text", "text": "Rename parse_args in utils.py to read_options"}]})
    t.user("<command-name>/clear</command-name>\n<command-message>clear</command-message>")
    t.assistant_text("Renamed it; the tests pass.")
    rows = stored_rows(t)
    text = lcm.summary.extract.summarize_messages(rows, "messages #1-#3", 400)
    assert "Rename parse_args in utils.py to read_options" in text
    assert "ide_opened_file" not in text and "/p/notes.md" not in text and "/clear" not in text


# -- prompts: one home, the required shape ------------------------------------------------------

def test_prompts_live_only_in_references_and_have_the_required_shape():
    prompts = lcm.summary.prompts.load_prompts()
    assert set(prompts) >= {"system", "leaf", "leaf-aggressive", "condensed-d1", "condensed-d2", "condensed-d3",
                            "condensed-aggressive"}
    assert "untrusted" in prompts["system"]
    for name, text in prompts.items():
        if name == "system":
            continue
        assert "untrusted data" in text and "Files: " in text and "Expand for details about: " in text, name
        assert "{{source}}" in text and "{{target_tokens}}" in text
    # no prompt sentence is duplicated in the code
    code = "".join(p.read_text() for p in (ROOT / "scripts").glob("*.py"))
    for text in prompts.values():
        first_line = text.splitlines()[0]
        assert first_line[:60] not in code


def test_prompt_for_each_depth_and_level():
    names = {(d, lvl): lcm.summary.prompts.prompt_name(d, lvl) for d in range(6) for lvl in (1, 2)}
    assert names[(0, 1)] == "leaf" and names[(0, 2)] == "leaf-aggressive"
    assert [names[(d, 1)] for d in (1, 2, 3, 4, 5)] == ["condensed-d1", "condensed-d2"] + ["condensed-d3"] * 3
    assert {names[(d, 2)] for d in range(1, 6)} == {"condensed-aggressive"}
    filled = lcm.summary.prompts.fill(lcm.summary.prompts.prompt("leaf"), target_tokens=7, span="S", previous="P",
                              source="{{previous}} stays")
    assert "about 7 tokens" in filled and "{{previous}} stays" in filled and "{{" not in filled.replace(
        "{{previous}} stays", "")


# -- Must show 2: the real SDK against the fake Messages API ----------------------------------

def prompt_of(body: dict) -> str:
    """Which prompt of lcm/summary/prompts.md a recorded request used."""
    user = FakeAnthropic.user_text(body)
    for name, text in lcm.summary.prompts.load_prompts().items():
        if name != "system" and user.startswith(text.split("{{")[0]):
            return name
    raise AssertionError("unknown prompt: " + user[:200])


def test_each_depth_gets_its_own_prompt(tmp_path, monkeypatch, fake_api, capsys):
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "250")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_SUMMARY_MODEL", "claude-haiku-4-5")
    counter = iter(range(10_000))
    fake_api.respond(lambda body: f"S{next(counter)} {prompt_of(body)}\nFiles: none\nExpand for details about: x")
    t = session_with(tmp_path, turns=30)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    result = run_json(capsys, "--session", t.session_id, "--full")
    assert result["backend"] == "anthropic" and result["model_calls"] == len(fake_api.requests)
    assert result["levels"]["normal"] == result["leaf_created"] + result["condensed_created"]
    expected = {0: "leaf", 1: "condensed-d1", 2: "condensed-d2", 3: "condensed-d3", 4: "condensed-d3"}
    depths = set()
    for row in conn.execute("SELECT depth, content, model FROM summaries"):
        assert row["content"].split()[1] == expected[row["depth"]]
        assert row["model"] == "claude-haiku-4-5"
        depths.add(row["depth"])
    assert depths >= {0, 1, 2, 3}
    system = lcm.summary.prompts.prompt("system")
    for body in fake_api.requests:
        assert FakeAnthropic.system_text(body) == system and body["model"] == "claude-haiku-4-5"
        assert "<conversation>" in FakeAnthropic.user_text(body) or "<summaries>" in FakeAnthropic.user_text(body)
    leaf_body = next(b for b in fake_api.requests if prompt_of(b) == "leaf")
    assert f"about {lcm.base.config.get('LCM_LEAF_TARGET_TOKENS')} tokens" in FakeAnthropic.user_text(leaf_body)
    check_dag(conn, t.session_id, 2)


def one_leaf_session(tmp_path, monkeypatch):
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    t = session_with(tmp_path, turns=3)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    return conn, t


def test_longer_answer_escalates_to_aggressive_then_truncation(tmp_path, monkeypatch, fake_api, capsys):
    conn, t = one_leaf_session(tmp_path, monkeypatch)
    longer = "word " * 5000
    fake_api.enqueue(longer).enqueue("- short bullets\nFiles: none\nExpand for details about: x")
    result = run_json(capsys, "--session", t.session_id, "--full")
    assert result["levels"]["aggressive"] == 1 and result["model_calls"] == 2
    assert [prompt_of(b) for b in fake_api.requests] == ["leaf", "leaf-aggressive"]
    half = lcm.base.config.get("LCM_LEAF_TARGET_TOKENS") // 2
    assert f"at most {half} tokens" in FakeAnthropic.user_text(fake_api.requests[1])
    assert conn.execute("SELECT level FROM summaries").fetchone()[0] == "aggressive"

    conn2, t2 = one_leaf_session(tmp_path / "b", monkeypatch)
    fake_api.enqueue(longer).enqueue(longer)
    result = run_json(capsys, "--session", t2.session_id, "--full")
    assert result["levels"]["truncated"] == 1 and result["model_calls"] == 2
    row = conn2.execute("SELECT * FROM summaries WHERE session_id = ?", (t2.session_id,)).fetchone()
    assert row["level"] == "truncated" and row["token_count"] <= 512 and row["token_count"] < row["source_token_count"]
    assert row["content"].startswith("[truncated")


def test_rate_limit_and_overload_are_retried(tmp_path, monkeypatch, fake_api, capsys):
    conn, t = one_leaf_session(tmp_path, monkeypatch)
    fake_api.enqueue(status=429).enqueue(status=529).enqueue("fine\nFiles: none\nExpand for details about: x")
    result = run_json(capsys, "--session", t.session_id, "--full")
    assert result["leaf_created"] == 1 and result["levels"]["normal"] == 1
    assert len(fake_api.requests) == 3 and result["model_calls"] == 1


def test_refused_key_falls_back_and_says_what_to_fix(tmp_path, monkeypatch, fake_api, capsys):
    conn, t = one_leaf_session(tmp_path, monkeypatch)
    fake_api.enqueue(status=401)
    assert lcm_compact.main(["--session", t.session_id, "--full"]) == 0
    err = capsys.readouterr().err
    assert "refused the credentials" in err and "ANTHROPIC_API_KEY" in err and "level fallback" in err
    assert "Traceback" not in err
    rows = conn.execute("SELECT * FROM summaries").fetchall()
    assert [r["level"] for r in rows] == ["fallback"] and rows[0]["model"] is None
    assert len(fake_api.requests) == 1          # a refused key is not retried
    check_dag(conn, t.session_id, 0)


def test_persistent_overload_falls_back_once_and_a_later_run_upgrades(tmp_path, monkeypatch, fake_api, capsys):
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "100")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    t = session_with(tmp_path, turns=8)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    fake_api.enqueue("first\nFiles: none\nExpand for details about: x")
    for _ in range(lcm.base.llm.DEFAULT_MAX_RETRIES + 1):
        fake_api.enqueue(status=529)
    assert lcm_compact.main(["--session", t.session_id, "--full"]) == 0
    err = capsys.readouterr().err
    assert "529" in err and "Traceback" not in err
    # the breaker: one failed call (with the SDK's retries), then no request for the other chunks
    assert len(fake_api.requests) == 1 + lcm.base.llm.DEFAULT_MAX_RETRIES + 1
    check_dag(conn, t.session_id, 0)
    levels = dict(conn.execute("SELECT level, count(*) FROM summaries GROUP BY level").fetchall())
    assert levels.get("normal") == 1 and levels["fallback"] >= 2
    before = {r["id"]: r for r in conn.execute("SELECT * FROM summaries WHERE level = 'fallback'")}
    tree = conn.execute("SELECT summary_id, ord, message_id, child_id FROM summary_sources ORDER BY 1, 2").fetchall()
    parents = dict(conn.execute("SELECT id, parent_id FROM summaries").fetchall())

    fake_api.respond(lambda body: "later\nFiles: none\nExpand for details about: x")
    result = lcm.summary.compact.compact(conn, t.session_id, mode="incremental")
    assert result["upgraded"] == len(before) and result["model_failure"] is None
    after = {r["id"]: r for r in conn.execute("SELECT * FROM summaries")}
    assert all(after[i]["level"] == "normal" and after[i]["content"].startswith("later") for i in before)
    # the DAG is the same graph: same ids, same sources, same parents; the old texts are kept
    assert conn.execute("SELECT summary_id, ord, message_id, child_id FROM summary_sources ORDER BY 1, 2").fetchall() == tree
    assert dict(conn.execute("SELECT id, parent_id FROM summaries").fetchall()) == parents
    kept = {r["summary_id"]: r for r in conn.execute("SELECT * FROM summary_versions")}
    assert set(kept) == set(before)
    assert all(kept[i]["content"] == before[i]["content"] and kept[i]["level"] == "fallback" for i in before)
    check_dag(conn, t.session_id, 0)
    again = lcm.summary.compact.compact(conn, t.session_id, mode="incremental")
    assert again["upgraded"] == 0 and again["model_calls"] == 0


def test_spend_guard_caps_model_calls(tmp_path, monkeypatch, fake_api, capsys):
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "100")
    monkeypatch.setenv("LCM_MAX_SUMMARY_CALLS", "3")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    t = session_with(tmp_path, turns=10)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    fake_api.respond(lambda body: "ok\nFiles: none\nExpand for details about: x")
    result = run_json(capsys, "--session", t.session_id, "--full")
    assert result["model_calls"] == 3 == len(fake_api.requests)
    assert result["stopped"] == "call_limit" and result["max_model_calls"] == 3
    check_dag(conn, t.session_id, 0, complete=False)


def test_claude_cli_is_used_without_an_api_key(tmp_path, monkeypatch, fake_claude, capsys):
    conn, t = one_leaf_session(tmp_path, monkeypatch)
    fake_claude.enqueue("from claude\nFiles: none\nExpand for details about: x")
    result = run_json(capsys, "--session", t.session_id, "--full")
    assert result["backend"] == "claude" and result["levels"]["normal"] == 1
    call = fake_claude.calls()[0]
    assert call["env"]["LCM_SUBAGENT"] == "1" and "--no-session-persistence" in call["argv"]
    assert call["prompt"].startswith(lcm.summary.prompts.prompt("leaf").split("{{")[0])
    argv = call["argv"]
    assert argv[argv.index("--append-system-prompt") + 1] == lcm.summary.prompts.prompt("system")
    assert conn.execute("SELECT content FROM summaries").fetchone()[0].startswith("from claude")


# -- Must show 3: a kill midway leaves a consistent vault; the next run finishes ------------------

@pytest.mark.slow  # a kill loop
def test_killed_compaction_leaves_a_consistent_vault(tmp_path, monkeypatch, fake_api):
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "120")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    t = session_with(tmp_path, turns=12)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    answered = iter(range(10_000))

    def slow_after_three(body):
        n = next(answered)
        return {"text": f"S{n}\nFiles: none\nExpand for details about: x", "delay": 30 if n >= 3 else 0}

    fake_api.respond(slow_after_three)
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "lcm_compact.py"), "--session", t.session_id,
                             "--full", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 60
    while len(fake_api.requests) < 4 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert len(fake_api.requests) >= 4, proc.stderr.read() if proc.poll() is not None else "too slow"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    fake_api.release_delays()  # the killed client's slow answer need not wait any longer
    made = check_dag(conn, t.session_id, 2, complete=False)
    assert made["nodes"] == 3, "three answered calls, three committed nodes, nothing half-written"
    fake_api.respond(lambda body: "done\nFiles: none\nExpand for details about: x")
    result = lcm.summary.compact.compact(conn, t.session_id, mode="full")  # the lock died with the process
    assert result["leaf_created"] > 0
    check_dag(conn, t.session_id, 2)
    assert lcm.summary.compact.compact(conn, t.session_id, mode="full")["leaf_created"] == 0


def test_upgrade_rewrites_extractive_summaries_in_place(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "150")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LLM", "none")
    t = session_with(tmp_path, turns=10)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    assert lcm_compact.main(["--session", t.session_id, "--upgrade"]) == 1
    assert "no model backend" in capsys.readouterr().err
    before = {r["id"]: r["parent_id"] for r in conn.execute("SELECT id, parent_id FROM summaries")}
    extractive = {r[0] for r in conn.execute("SELECT id FROM summaries WHERE level = 'extractive'")}
    assert len(extractive) > 5
    monkeypatch.delenv("LCM_LLM")
    with FakeAnthropic() as api:
        for key, value in api.env().items():
            monkeypatch.setenv(key, value)
        api.respond(lambda body: "upgraded zebraword")
        plan = run_json(capsys, "--session", t.session_id, "--upgrade", "--dry-run")
        assert plan["would_upgrade"] == len(extractive) and not api.requests
        result = run_json(capsys, "--session", t.session_id, "--upgrade")
    assert result["upgraded"] == len(extractive) == result["levels"]["normal"] == result["model_calls"]
    rows = conn.execute("SELECT * FROM summaries").fetchall()
    assert {r["id"]: r["parent_id"] for r in rows} == before, "same nodes, same places"
    assert all(r["level"] == "normal" and r["content"].startswith("upgraded") for r in rows if r["id"] in extractive)
    assert all(r["level"] == "truncated" for r in rows if r["id"] not in extractive)
    check_dag(conn, t.session_id, 2)
    if lcm.vault.schema.fts_enabled(conn):
        hits = conn.execute("SELECT COUNT(*) FROM summaries_fts WHERE summaries_fts MATCH 'zebraword'").fetchone()[0]
        assert hits == len(extractive)
        assert conn.execute("SELECT COUNT(*) FROM summaries_fts WHERE summaries_fts MATCH 'extractive'").fetchone()[0] == 0


def test_all_sessions_share_one_spend_guard(tmp_path, monkeypatch, fake_api, capsys):
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "100")
    monkeypatch.setenv("LCM_MAX_SUMMARY_CALLS", "4")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    conn = lcm.vault.db.connect()
    for i in range(3):
        ingest(conn, coding_session(tmp_path / "projects", turns=6, session_id=f"s{i}").write())
    fake_api.respond(lambda body: "ok\nFiles: none\nExpand for details about: x")
    result = run_json(capsys, "--all", "--full")
    assert result["model_calls"] == 4 == len(fake_api.requests)


def test_a_backlog_drains_in_one_incremental_run_and_resumes_after_the_spend_guard(tmp_path, monkeypatch, fake_api,
                                                                                    capsys):
    """What the hooks detach: one incremental run summarises the whole backlog, within
    LCM_MAX_SUMMARY_CALLS; the next run goes on from where it stopped."""
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "100")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "4")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "100")  # leaves only: one model call each
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "100")
    t = session_with(tmp_path, turns=12)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    fake_api.respond(lambda body: "ok\nFiles: none\nExpand for details about: x")
    monkeypatch.setenv("LCM_MAX_SUMMARY_CALLS", "3")
    first = run_json(capsys, "--session", t.session_id)
    assert first["leaf_created"] == 3 and first["stopped"] == "call_limit"
    assert lcm.summary.dag.compaction_due(conn, t.session_id)
    monkeypatch.setenv("LCM_MAX_SUMMARY_CALLS", "50")
    second = run_json(capsys, "--session", t.session_id)
    assert second["leaf_created"] > 3 and second["stopped"] is None
    assert not lcm.summary.dag.compaction_due(conn, t.session_id)
    check_dag(conn, t.session_id, 4, complete=False)


def test_incremental_max_depth_and_the_two_fanouts(tmp_path, monkeypatch, capsys):
    """The seeds' incrementalMaxDepth: an incremental pass (the hooks', lcm_compact.py without
    --full) condenses no deeper than LCM_INCREMENTAL_MAX_DEPTH (0: leaves only); --full is not
    limited. Their leafMinFanout and condensedMinFanout: leaves are condensed LCM_LEAF_MIN_FANOUT
    at a time, condensed summaries LCM_CONDENSED_MIN_FANOUT at a time."""
    for name, value in {"LCM_LLM": "none", "LCM_LEAF_CHUNK_TOKENS": "120", "LCM_LEAF_MIN_TOKENS": "60",
                        "LCM_FRESH_TAIL_COUNT": "3", "LCM_LEAF_MIN_FANOUT": "3", "LCM_CONDENSED_MIN_FANOUT": "2",
                        "LCM_INCREMENTAL_MAX_DEPTH": "0"}.items():
        monkeypatch.setenv(name, value)
    t = session_with(tmp_path, turns=40)
    conn = lcm.vault.db.connect()
    ingest(conn, t.path)
    first = lcm.summary.compact.compact(conn, t.session_id)
    assert first["leaf_created"] >= 6 and first["condensed_created"] == 0
    assert not lcm.summary.dag.compaction_due(conn, t.session_id)  # nothing a hook's run may do
    monkeypatch.setenv("LCM_INCREMENTAL_MAX_DEPTH", "1")
    assert lcm.summary.dag.compaction_due(conn, t.session_id)
    lcm.summary.compact.compact(conn, t.session_id)
    depths = [r[0] for r in conn.execute("SELECT depth FROM summaries WHERE session_id = ?", (t.session_id,))]
    assert max(depths) == 1
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    rows = conn.execute("SELECT s.depth, count(*) FROM summaries s JOIN summary_sources x ON x.summary_id = s.id"
                        " WHERE s.session_id = ? AND s.kind = 'condensed' GROUP BY s.id", (t.session_id,)).fetchall()
    assert {depth for depth, _ in rows} >= {1, 2}
    assert all(n == (3 if depth == 1 else 2) for depth, n in rows), rows
    monkeypatch.setenv("LCM_INCREMENTAL_MAX_DEPTH", "-2")
    assert lcm_compact.main(["--session", t.session_id]) == 1
    assert "LCM_INCREMENTAL_MAX_DEPTH" in capsys.readouterr().err


def test_each_escalation_level_sends_its_temperature_where_the_sdk_takes_one(tmp_path, monkeypatch, fake_api, capsys):
    """The seeds: 0.2 for the normal prompt, 0.1 for the aggressive one, sent through the model
    seam and seen by the Messages API. An SDK of 1.0 or later has no sampling parameters (and the
    API version it sends answers any with a 400): then none is sent, and the call still works."""
    import inspect
    from anthropic.resources.messages import Messages
    takes = "temperature" in inspect.signature(Messages.create).parameters
    conn, t = one_leaf_session(tmp_path, monkeypatch)
    fake_api.enqueue("word " * 5000).enqueue("- short bullets\nFiles: none\nExpand for details about: x")
    result = run_json(capsys, "--session", t.session_id, "--full")
    assert result["levels"]["aggressive"] == 1
    expected = [("leaf", 0.2), ("leaf-aggressive", 0.1)] if takes else [("leaf", None), ("leaf-aggressive", None)]
    assert [(prompt_of(b), b.get("temperature")) for b in fake_api.requests] == expected
    assert lcm.summary.compact.ESCALATION_TEMPERATURE == {1: 0.2, 2: 0.1}


def test_compact_all_reports_each_session_on_stderr_when_not_a_terminal(tmp_path, monkeypatch, fake_api, capsys):
    """A model compaction of every session (up to LCM_MAX_SUMMARY_CALLS calls) printed nothing
    until it ended; off a terminal it now says each session as it finishes."""
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    for n in range(3):
        session_with(tmp_path, turns=3, session_id=f"s-{n}")
    conn = lcm.vault.db.connect()
    ingest(conn, tmp_path / "projects")
    code = lcm_compact.main(["--all", "--full"])
    out, err = capsys.readouterr()
    assert code == 0
    lines = [ln for ln in err.splitlines() if ln.startswith("compact ")]
    assert [ln.split(" ", 2)[1] for ln in lines] == ["1/3", "2/3", "3/3"]
    assert all("1 leaf + 0 condensed" in ln and "model calls (anthropic)" in ln for ln in lines), lines
    assert "compact " not in out                                   # stdout stays the result
    code = lcm_compact.main(["--session", "s-0", "--full"])        # one session: nothing to follow
    assert code == 0 and "compact 1/1" not in capsys.readouterr().err


def test_compact_all_shows_a_bar_on_a_terminal(tmp_path, vault, monkeypatch):
    """On a terminal (stderr a pty) the run shows tqdm's bar, not a line per session."""
    pytest.importorskip("tqdm")
    from conftest import on_terminal
    for n in range(2):
        session_with(tmp_path, turns=3, session_id=f"s-bar-{n}")
    conn = lcm.vault.db.connect()
    ingest(conn, tmp_path / "projects")
    conn.close()
    env = {**os.environ, "LCM_LLM": "none", "LCM_FRESH_TAIL_COUNT": "0"}
    code, _, text = on_terminal([sys.executable, SCRIPTS / "lcm_compact.py", "--all", "--full"], env=env)
    assert code == 0
    assert "compact:" in text and "2/2" in text and "session" in text, text
    assert "compact 1/2" not in text                      # the bar, not the lines
