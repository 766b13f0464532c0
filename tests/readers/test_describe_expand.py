"""lcm_describe and lcm_expand: every summary leads back to the exact original lines."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lcm.summary.compact
import lcm.summary.dag
import lcm.vault.db
import lcm_describe
import lcm.readers.expand
import lcm_expand
import lcm.capture.bulk
import lcm.capture.ingest
from conftest import command, run, SCRIPTS
from transcripts import Transcript, coding_session


def compacted_vault(tmp_path, monkeypatch, turns=12, sessions=("s1",)):
    """Sessions ingested from transcript files and compacted into a DAG (extractive, no model)."""
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "4")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "250")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    projects = tmp_path / "projects"
    paths = {}
    for sid in sessions:
        t = coding_session(projects, turns=turns, session_id=sid, cwd=f"/home/u/{sid}")
        paths[sid] = t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [projects])
    for sid in sessions:
        lcm.summary.compact.compact(conn, sid, mode="full")
    return conn, paths


def original_lines(path) -> dict:
    """uuid -> the transcript line exactly as written (bytes, no newline)."""
    lines = {}
    for line in path.read_bytes().split(b"\n"):
        if line:
            lines[json.loads(line)["uuid"]] = line
    return lines




def covered_uuids(conn, summary_id):
    row = conn.execute("SELECT session_id, first_message_id, last_message_id FROM summaries WHERE id = ?",
                       (summary_id,)).fetchone()
    return [r[0] for r in conn.execute("SELECT uuid FROM messages WHERE session_id = ? AND id BETWEEN ? AND ?"
                                       " ORDER BY id", tuple(row))]


def test_every_summary_expands_to_its_exact_original_lines(tmp_path, monkeypatch, capsysbinary):
    conn, paths = compacted_vault(tmp_path, monkeypatch, turns=15)
    originals = original_lines(paths["s1"])
    summaries = [r[0] for r in conn.execute("SELECT id FROM summaries")]
    assert len(summaries) > 5 and conn.execute("SELECT max(depth) FROM summaries").fetchone()[0] >= 2
    for sid in summaries:
        assert lcm_expand.main([sid, "--full", "--raw", "--max-tokens", "10000000"]) == 0
        out = capsysbinary.readouterr().out
        expected = b"".join(originals[u] + b"\n" for u in covered_uuids(conn, sid))
        assert out == expected, sid


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(min_value=3, max_value=14), page=st.integers(min_value=50, max_value=3000))
def test_paged_raw_expansion_is_lossless(tmp_path_factory, monkeypatch, turns, page):
    """Property: for any session length and page size, the pages of --raw concatenate to the originals."""
    tmp = tmp_path_factory.mktemp("prop")
    monkeypatch.setenv("LCM_HOME", str(tmp / "home"))
    conn, paths = compacted_vault(tmp, monkeypatch, turns=turns)
    originals = original_lines(paths["s1"])
    for (sid,) in conn.execute("SELECT id FROM summaries WHERE parent_id IS NULL").fetchall():
        got, offset = [], 0
        while offset is not None:
            doc = lcm.readers.expand.expand(conn, sid, raw=True, max_tokens=page, offset=offset)
            got += [bytes(r["raw"]) for r in doc["_rows"]]
            offset = doc["next_offset"]
        assert got == [originals[u] for u in covered_uuids(conn, sid)]


def test_leaf_gives_messages_condensed_gives_children(tmp_path, monkeypatch, capsys):
    conn, _paths = compacted_vault(tmp_path, monkeypatch)
    leaf = conn.execute("SELECT id FROM summaries WHERE kind = 'leaf' ORDER BY first_message_id").fetchone()[0]
    code, out, _err = run(capsys, lcm_expand, leaf, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["kind"] == "leaf" and {i["type"] for i in doc["items"]} == {"message"}
    assert [i["uuid"] for i in doc["items"]] == covered_uuids(conn, leaf)
    top = conn.execute("SELECT id FROM summaries WHERE parent_id IS NULL AND kind = 'condensed'").fetchone()[0]
    doc = json.loads(run(capsys, lcm_expand, top, "--json")[1])
    children = [r[0] for r in conn.execute("SELECT child_id FROM summary_sources WHERE summary_id = ? ORDER BY ord", (top,))]
    assert [i["id"] for i in doc["items"]] == children and doc["items"][0]["type"] == "summary"
    doc = json.loads(run(capsys, lcm_expand, top, "--full", "--json", "--max-tokens", "100000")[1])
    assert [i["uuid"] for i in doc["items"]] == covered_uuids(conn, top)


def test_max_tokens_cuts_with_next_page_command(tmp_path, monkeypatch, capsys):
    conn, _paths = compacted_vault(tmp_path, monkeypatch)
    top = conn.execute("SELECT id FROM summaries WHERE parent_id IS NULL").fetchone()[0]
    code, out, _err = run(capsys, lcm_expand, top, "--full", "--max-tokens", "100")
    assert code == 0
    assert f'more: {command("lcm_expand.py", top, "--full --max-tokens 100 --offset")} ' in out.splitlines()[-1]
    nxt = int(out.splitlines()[-1].rsplit(" ", 1)[1])
    doc = json.loads(run(capsys, lcm_expand, top, "--full", "--max-tokens", "100", "--offset", str(nxt), "--json")[1])
    assert doc["offset"] == nxt and doc["count"] >= 1
    code, out, err = run(capsys, lcm_expand, top, "--raw", "--max-tokens", "100")
    assert all(json.loads(line)["uuid"] for line in out.splitlines())  # stdout stays pure JSONL
    assert command("lcm_expand.py", top, "--raw --max-tokens 100 --offset") in err
    code, out, err = run(capsys, lcm_expand, top, "--full", "--offset", "100000")
    assert code == 1 and "past the end" in err and f"lcm_expand.py {top} --full --offset 0" in err


def test_expand_a_message_and_cut_a_huge_one(tmp_path, monkeypatch, capsys, vault):
    t = Transcript(tmp_path / "projects", session_id="big")
    t.user("short question")
    t.user("x" * 40000)
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    big = t.entries[1]["uuid"]
    code, out, _err = run(capsys, lcm_expand, big, "--max-tokens", "1000")
    assert code == 0 and len(out) < 5000 and f"lcm_expand.py {big} --raw" in out
    code, out, _err = run(capsys, lcm_expand, big, "--raw")
    assert json.loads(out)["uuid"] == big


def test_describe_summary_message_and_session(tmp_path, monkeypatch, capsys):
    conn, _paths = compacted_vault(tmp_path, monkeypatch)
    leaf = conn.execute("SELECT * FROM summaries WHERE kind = 'leaf' AND parent_id IS NOT NULL").fetchone()
    doc = json.loads(run(capsys, lcm_describe, leaf["id"], "--json")[1])
    for key in ("content", "kind", "depth", "earliest_at", "latest_at", "token_count", "source_token_count",
                "level", "model", "parent_id", "source_ids", "file_ids"):
        assert key in doc
    assert doc["parent_id"] == leaf["parent_id"] and doc["source_ids"] == covered_uuids(conn, leaf["id"])
    code, out, _err = run(capsys, lcm_describe, leaf["id"])
    assert code == 0 and f'Next: {command("lcm_expand.py", leaf["id"])}' in out

    uuid = doc["source_ids"][0]
    msg = json.loads(run(capsys, lcm_describe, uuid, "--json")[1])
    assert msg["type"] == "message" and msg["covering_summary_id"] == leaf["id"]

    session = json.loads(run(capsys, lcm_describe, "--session", "s1", "--json")[1])
    assert set(session) == {"session_id", "summaries", "context_items"}
    keys = {"id", "kind", "depth", "parent_id", "source_ids", "token_count", "source_token_count", "level",
            "earliest_at", "latest_at"}
    assert all(set(s) == keys for s in session["summaries"])
    assert len(session["summaries"]) == conn.execute("SELECT count(*) FROM summaries").fetchone()[0]
    items = session["context_items"]
    assert items[0]["type"] == "summary" and items[-1]["type"] == "message"
    assert [i["id"] for i in items] == [i["id"] for i in lcm.summary.dag.active_context(conn, "s1")]
    code, out, _err = run(capsys, lcm_describe, "--session", "s1")
    top = next(s for s in session["summaries"] if s["parent_id"] is None)
    assert code == 0 and out.splitlines()[1].startswith(top["id"]) and "\n  sum_" in out
    monkeypatch.setenv("LCM_SESSION_ID", "s1")
    assert json.loads(run(capsys, lcm_describe, "--json")[1])["session_id"] == "s1"


def test_describe_file_with_bounded_content(tmp_path, monkeypatch, capsys, vault):
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "1000")
    t = Transcript(tmp_path / "projects", session_id="f1")
    call = t.tool_use("Read", {"file_path": "/home/user/proj/data.csv"})
    t.tool_result(call, "id,name,score\n" + "".join(f"{i},name{i},{i % 7}\n" for i in range(2000)))
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    row = conn.execute("SELECT * FROM files").fetchone()
    doc = json.loads(run(capsys, lcm_describe, row["id"], "--json")[1])
    assert doc["kind"] == "csv" and "columns: id, name, score" in doc["exploration"] and "content" not in doc
    doc = json.loads(run(capsys, lcm_describe, row["id"], "--content", "--max-tokens", "100", "--json")[1])
    assert len(doc["content"]) == 400 and doc["has_more"] and doc["next_offset"] == 400
    code, out, _err = run(capsys, lcm_describe, row["id"], "--content", "--max-tokens", "100")
    assert command("lcm_describe.py", row["id"], "--content --offset 400") in out


@pytest.mark.parametrize("module", [lcm_expand, lcm_describe])
@pytest.mark.parametrize("bad, message", [
    ("sum_0000000000000000", "no summary sum_0000000000000000"),
    ("sum_xyz", "malformed summary id"),
    ("file_0000000000000000", None),
    ("file_nothex", None),
    ("not a valid id!", "malformed id"),
    ("00000000-0000-4000-8000-000000000000", "no summary or message"),
])
def test_unknown_and_malformed_ids_are_errors_with_hints(tmp_path, monkeypatch, capsys, module, bad, message):
    compacted_vault(tmp_path, monkeypatch, turns=3)
    code, out, err = run(capsys, module, bad)
    assert code == 1 and out == "" and err.startswith("Error: ") and "\nHint: " in err
    if message:
        assert message in err
    assert "lcm_" in err.split("Hint: ")[1]  # the hint names a command to run instead


def test_subprocess_smoke(tmp_path, monkeypatch):
    conn, paths = compacted_vault(tmp_path, monkeypatch, turns=4)
    top = conn.execute("SELECT id FROM summaries WHERE parent_id IS NULL").fetchone()[0]
    proc = subprocess.run([sys.executable, str(SCRIPTS / "lcm_expand.py"), top, "--raw"], capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.count(b"\n") == len(covered_uuids(conn, top))
    proc = subprocess.run([sys.executable, str(SCRIPTS / "lcm_describe.py"), "--session", "s1", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["session_id"] == "s1"


def test_real_transcript_round_trips_through_the_dag(tmp_path, monkeypatch, capsysbinary):
    """A real Claude Code session (shared data): compact it, then --full --raw gives its lines back."""
    from conftest import shared_data
    source = shared_data("claude-projects", "-Users-dain-workspace-JSSoundRecorder",
                         "7acd37a8-2745-4b58-a8a9-46164b22ad9e.jsonl")
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "3000")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [source])
    session = conn.execute("SELECT session_id FROM messages LIMIT 1").fetchone()[0]
    lcm.summary.compact.compact(conn, session, mode="full")
    by_uuid = {}
    for line in source.read_bytes().split(b"\n"):
        try:
            by_uuid.setdefault(json.loads(line).get("uuid"), line)
        except ValueError:
            continue
    tops = conn.execute("SELECT id FROM summaries WHERE parent_id IS NULL").fetchall()
    assert tops
    for (sid,) in tops:
        assert lcm_expand.main([sid, "--raw", "--max-tokens", "100000000"]) == 0
        out = capsysbinary.readouterr().out
        assert out == b"".join(by_uuid[u] + b"\n" for u in covered_uuids(conn, sid))
