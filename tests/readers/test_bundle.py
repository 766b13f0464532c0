"""Bundles: sessions that travel between vaults (lcm_export.py --bundle, lcm_ingest.py BUNDLE).

Two vaults holding overlapping halves of the shared transcripts merge into a third as their exact
union; a purge on either side holds on both; a masked bundle carries no planted secret, an
unmasked one the exact bytes."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import lcm_export
import lcm_ingest
import lcm_purge
import lcm_usage
from conftest import run, shared_data
from test_mask import SAMPLES
from transcripts import Transcript


def lines_of(db: Path) -> dict[str, bytes]:
    """uuid -> stored original line, read through lcm's own store (packed or plain)."""
    import lcm.vault.db
    import lcm.vault.store
    conn = lcm.vault.db.connect(str(db), create=False, readonly=True)
    try:
        rows = conn.execute(f"SELECT uuid, {lcm.vault.store.LINE} FROM messages").fetchall()
    finally:
        conn.close()
    found = {uuid: lcm.vault.store.as_bytes(line) for uuid, line in rows}
    assert len(found) == len(rows)  # none twice
    return found


def transcript_lines(root: Path) -> dict[str, set[bytes]]:
    """uuid -> every line of the transcripts under root that carries it."""
    out: dict[str, set[bytes]] = {}
    for path in root.rglob("*.jsonl"):
        for line in path.read_bytes().split(b"\n"):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("uuid"), str) and entry.get("type") in ("user", "assistant", "system"):
                out.setdefault(entry["uuid"], set()).add(line)
    return out


def bundle_body(path: Path) -> tuple[dict, bytes]:
    with open(path, "rb") as f:
        header = json.loads(f.readline())
        return header, gzip.decompress(f.read())


def test_two_overlapping_halves_merge_into_their_exact_union_and_a_purge_holds(tmp_path, capsys):
    source = shared_data("claude-projects")
    files = sorted(p.relative_to(source) for p in source.rglob("*.jsonl"))
    cut = len(files) * 3 // 5
    halves = {"a": files[:cut], "b": files[len(files) - cut:]}  # the middle fifth on both sides
    for side, chosen in halves.items():
        for rel in chosen:
            (tmp_path / side / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / rel, tmp_path / side / rel)
    dbs = {side: tmp_path / f"{side}.db" for side in ("a", "b", "c")}
    for side in ("a", "b"):
        assert run(capsys, lcm_ingest, "--db", dbs[side], tmp_path / side)[0] == 0
    a, b = lines_of(dbs["a"]), lines_of(dbs["b"])
    shared = sorted(set(a) & set(b))
    assert shared and set(a) - set(b) and set(b) - set(a)
    gone = shared[len(shared) // 2]  # purged on side a; side b still has it
    assert run(capsys, lcm_purge, "--db", dbs["a"], "--message", gone, "--yes")[0] == 0
    for side in ("a", "b"):
        code, out, err = run(capsys, lcm_export, "--db", dbs[side], "--bundle", tmp_path / f"{side}.lcmb", "--all",
                             "--unmasked", "--json")
        assert code == 0, err
    header, body = bundle_body(tmp_path / "a.lcmb")
    assert header["lcm_bundle"] == 1 and header["masked"] is False and header["purged"] == 1
    assert gone.encode() in body and f'"uuid":"{gone}"'.encode() not in body  # in the purge list, never as a line
    for side in ("a", "b"):
        code, out, err = run(capsys, lcm_ingest, "--db", dbs["c"], tmp_path / f"{side}.lcmb", "--json")
        assert code == 0, err
    merged = lines_of(dbs["c"])
    assert set(merged) == (set(a) | set(b)) - {gone}
    originals = transcript_lines(source)
    for uuid, line in merged.items():
        assert line == (a.get(uuid) or b[uuid]) and line in originals[uuid]  # byte for byte
    # merging again adds nothing
    for side in ("a", "b"):
        doc = json.loads(run(capsys, lcm_ingest, "--db", dbs["c"], tmp_path / f"{side}.lcmb", "--json")[1])
        assert doc["messages_added"] == 0
    assert lines_of(dbs["c"]) == merged
    # and the other way: a purge made in the merged vault reaches side b through a bundle
    other = next(u for u in shared if u != gone)
    assert run(capsys, lcm_purge, "--db", dbs["c"], "--message", other, "--yes")[0] == 0
    assert run(capsys, lcm_export, "--db", dbs["c"], "--bundle", tmp_path / "c.lcmb", "--all")[0] == 0
    code, out, err = run(capsys, lcm_ingest, "--db", dbs["b"], tmp_path / "c.lcmb", tmp_path / "a.lcmb")
    assert code == 0, err
    assert "messages here purged as they were there" in out
    after = lines_of(dbs["b"])
    assert gone not in after and other not in after
    listed = (tmp_path / "b.db.purged").read_text().split()  # the purge list beside the vault, which outlives it
    assert gone in listed and other in listed
    assert run(capsys, lcm_ingest, "--db", dbs["b"], tmp_path / "b")[0] == 0  # its transcripts never bring them back
    assert gone not in lines_of(dbs["b"])


def planted_session(projects: Path) -> Transcript:
    t = Transcript(projects, session_id="5ec2e7aa-0000-4000-8000-000000000001", model="claude-sonnet-4-5")
    for kind, text, _secret in SAMPLES:
        t.user(f"Here it is. {text}")
        call = t.tool_use("Bash", {"command": f"echo '{text}' > .env"})
        t.tool_result(call, f"wrote {text}")
        t.assistant_text(f"Stored the {kind} ({text}).")
    t.title(f"keys: {SAMPLES[0][1]}")
    t.write()
    return t


def test_a_masked_bundle_holds_no_planted_secret_and_an_unmasked_one_the_exact_bytes(tmp_path, capsys):
    t = planted_session(tmp_path / "projects")
    assert run(capsys, lcm_ingest, t.path)[0] == 0
    code, out, err = run(capsys, lcm_export, "--bundle", tmp_path / "masked.lcmb", "--session", t.session_id[:8])
    assert code == 0, err
    assert "(masked)" in out and "lcm_ingest.py" in out
    header, body = bundle_body(tmp_path / "masked.lcmb")
    assert header["masked"] is True and header["messages"] == len(t.entries)
    for kind, _text, secret in SAMPLES:
        assert secret.encode() not in body, kind
        assert json.dumps(secret)[1:-1].encode() not in body, kind
    assert b"[secret:" in body
    # the masked bundle still merges: its lines are the masked JSON lines, one per message
    other = tmp_path / "other.db"
    assert run(capsys, lcm_ingest, "--db", other, tmp_path / "masked.lcmb")[0] == 0
    stored = lines_of(other)
    assert len(stored) == len(t.entries) and all(b"[secret:" in line for line in list(stored.values())[:4])
    # what a masked bundle keeps: the usage of every response (README: "What a masked bundle loses")
    here = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
    there = json.loads(run(capsys, lcm_usage, "--json", "--by", "model", "--db", other)[1])
    assert here["totals"] == there["totals"] and here["totals"]["responses"] == len(SAMPLES) * 2
    # unmasked: the exact bytes of the transcript, through a second vault
    assert run(capsys, lcm_export, "--bundle", tmp_path / "exact.lcmb", "--all", "--unmasked")[0] == 0
    exact = tmp_path / "exact.db"
    assert run(capsys, lcm_ingest, "--db", exact, tmp_path / "exact.lcmb")[0] == 0
    code, out, err = run(capsys, lcm_export, "--db", exact, "--session", t.session_id, "--format", "jsonl",
                         "--unmasked", "--output", tmp_path / "back.jsonl")
    assert code == 0, err
    assert (tmp_path / "back.jsonl").read_bytes() == b"".join(
        line + b"\n" for line in t.path.read_bytes().split(b"\n") if line and b'"uuid"' in line)
    import lcm.vault.db
    conn = lcm.vault.db.connect(str(exact), create=False, readonly=True)
    title = conn.execute("SELECT title FROM sessions").fetchone()[0]
    assert SAMPLES[0][2] not in title  # titles are stored masked on every vault


def test_a_bad_or_cut_bundle_is_an_error_with_a_hint_and_changes_nothing(tmp_path, capsys):
    t = Transcript(tmp_path / "projects")
    t.user("hello")
    t.assistant_text("hi")
    t.write()
    run(capsys, lcm_ingest, t.path)
    assert run(capsys, lcm_export, "--bundle", tmp_path / "one.lcmb", "--all")[0] == 0
    data = (tmp_path / "one.lcmb").read_bytes()
    (tmp_path / "cut.lcmb").write_bytes(data[: len(data) - 12])
    fresh = tmp_path / "fresh.db"
    code, out, err = run(capsys, lcm_ingest, "--db", fresh, tmp_path / "cut.lcmb")
    assert code == 1 and "Error:" in err and "Hint:" in err and "Traceback" not in err
    (tmp_path / "future.lcmb").write_bytes(b'{"lcm_bundle": 9, "compression": "zstd"}\n')
    code, out, err = run(capsys, lcm_ingest, "--db", tmp_path / "f.db", tmp_path / "future.lcmb")
    assert code == 1 and "format 9" in err and "Hint: upgrade lcm" in err
    assert not (tmp_path / "f.db").exists()  # refused before the vault was even created
    for argv, said in ((["--bundle", str(tmp_path / "x.lcmb"), "--all", "--since", "2d"], "one of --session, --all, --since"),
                       (["--all"], "choose the sessions of a --bundle")):
        with pytest.raises(SystemExit) as exit_:
            lcm_export.main(argv)
        assert exit_.value.code == 2 and said in capsys.readouterr().err


def test_a_large_merge_shows_its_progress_on_a_terminal_without_tqdm(tmp_path, capsys):
    """The system python has no tqdm: a person merging a bundle by hand still sees how far it is."""
    import os
    import sys
    from conftest import SCRIPTS, on_terminal
    t = Transcript(tmp_path / "projects")
    for n in range(600):
        t.user(f"question {n}")
        t.assistant_text(f"answer {n}")
    t.write()
    assert run(capsys, lcm_ingest, t.path)[0] == 0
    assert run(capsys, lcm_export, "--bundle", tmp_path / "big.lcmb", "--all")[0] == 0
    hidden = tmp_path / "no-tqdm"
    hidden.mkdir()
    (hidden / "tqdm.py").write_text("raise ImportError('not installed')\n")
    code, out, drawn = on_terminal([sys.executable, SCRIPTS / "lcm_ingest.py", "--db", tmp_path / "other.db",
                                    tmp_path / "big.lcmb"], env={**os.environ, "PYTHONPATH": str(hidden)})
    assert code == 0
    assert "merge: 100% 1200/1200 msg" in drawn, drawn
    assert "Merged " in out and "1200 new messages" in out and "\r" not in out   # stdout stays the result


def test_a_merge_in_many_groups_through_the_parser_process_is_the_exact_union_and_searchable(tmp_path, capsys, monkeypatch):
    """A large bundle is stored as a bulk import stores files (groups parsed ahead in a parser
    process, one transaction each): shrunk here so a small one takes that path, over several
    groups, into a vault that holds part of it already."""
    import lcm.capture.bulk
    import lcm_grep
    monkeypatch.setattr(lcm.capture.bulk, "PARSE_PROCESS_MIN_LINES", 10)
    monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 40_000)  # ~80 lines a group
    sessions = []
    for n in range(3):
        t = Transcript(tmp_path / f"projects-{n}", session_id=f"5ec2e7aa-0000-4000-8000-00000000010{n}")
        for turn in range(120):
            t.user(f"question {turn} of session {n}" + " padding" * 20)
            t.assistant_text(f"answer {turn}" + (" zanzibarite" if n == 2 and turn == 77 else "") + " words" * 20)
        t.write()
        sessions.append(t)
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db, chosen in ((a, sessions[:2]), (b, sessions[1:])):
        for t in chosen:
            assert run(capsys, lcm_ingest, "--db", db, t.path)[0] == 0
    gone = sessions[1].entries[10]["uuid"]  # purged on side b, which side a still holds
    assert run(capsys, lcm_purge, "--db", b, "--message", gone, "--yes")[0] == 0
    assert run(capsys, lcm_export, "--db", b, "--bundle", tmp_path / "b.lcmb", "--all", "--unmasked")[0] == 0
    code, out, err = run(capsys, lcm_ingest, "--db", a, tmp_path / "b.lcmb", "--json")
    assert code == 0, err
    doc = json.loads(out)["bundles"][0]
    assert (doc["messages_added"], doc["messages_skipped"], doc["messages_purged"]) == (240, 239, 1)
    merged = lines_of(a)
    every = {e["uuid"]: e for t in sessions for e in t.entries}
    assert set(merged) == set(every) - {gone}
    originals = {u: ln for t in sessions for u, ln in transcript_lines(t.path.parent).items()}
    assert all(line in originals[uuid] for uuid, line in merged.items())  # byte for byte
    found = json.loads(run(capsys, lcm_grep, "zanzibarite", "--db", a, "--json")[1])["results"]
    word = next(e["uuid"] for e in sessions[2].entries if "zanzibarite" in json.dumps(e))
    assert [r["uuid"] for r in found if r["coverage"] == 1.0] == [word]  # indexed for search as it was stored
    assert any(r["next_to"] == word for r in found)                     # and its turns around it
    doc = json.loads(run(capsys, lcm_ingest, "--db", a, tmp_path / "b.lcmb", "--json")[1])["bundles"][0]
    assert doc["messages_added"] == 0 and doc["messages_skipped"] == 479
    assert lines_of(a) == merged


def test_a_merge_into_a_new_vault_leaves_it_packed_and_compressed_with_nothing_for_packing(tmp_path, capsys, monkeypatch):
    """A bundle merged through the parser processes packs its lines and compresses its text as
    a first import does: a vault made by a merge alone holds no plain line, no long text
    uncompressed and nothing for a packing run, reads every line back byte for byte and finds
    a word in the compressed text."""
    import lcm.capture.bulk
    import lcm.vault.db
    import lcm.vault.pack
    import lcm_grep
    monkeypatch.setattr(lcm.capture.bulk, "PARSE_PROCESS_MIN_LINES", 10)
    monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 40_000)  # several groups
    for n in range(3):
        t = Transcript(tmp_path / "projects", session_id=f"5ec2e7aa-0000-4000-8000-00000000020{n}")
        for turn in range(60):
            t.user(f"question {turn} of session {n}: the release pipeline of the kestrel service "
                   "failed again on the staging cluster, look at its logs" + " and its tests" * 8)
            t.assistant_text(f"answer {turn}: the kestrel deploy step timed out waiting for the database"
                             + (" zanzibarite" if n == 2 and turn == 41 else "") + " migration to finish" * 8)
        t.write()
    a = tmp_path / "a.db"
    assert run(capsys, lcm_ingest, "--db", a, tmp_path / "projects")[0] == 0
    assert run(capsys, lcm_export, "--db", a, "--bundle", tmp_path / "a.lcmb", "--all", "--unmasked")[0] == 0
    c = tmp_path / "c.db"
    code, out, err = run(capsys, lcm_ingest, "--db", c, tmp_path / "a.lcmb", "--json")
    assert code == 0, err
    assert json.loads(out)["bundles"][0]["messages_added"] == 360
    conn = lcm.vault.db.connect(str(c), create=False, readonly=True)
    try:
        plain_texts = conn.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'text'"
                                   " AND length(CAST(content AS BLOB)) >= 128").fetchone()[0]
        compressed = conn.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0]
        assert (lcm.vault.pack.pending(conn), lcm.vault.pack.unsqueezed(conn), plain_texts) == (0, 0, 0)
        assert compressed == 360
    finally:
        conn.close()
    assert lines_of(c) == lines_of(a)  # byte for byte
    found = json.loads(run(capsys, lcm_grep, "zanzibarite", "--db", c, "--json")[1])["results"]
    assert [r["coverage"] for r in found if r["coverage"] == 1.0] == [1.0]
