"""Every reader of the searchable text reads compressed rows (lcm/vault/squeeze.py) as it reads
plain ones: the same sessions stored twice, once left plain as the hooks store them and once
compressed in place by packing, give the same output from grep (with --context), export, a
bundle taken to a third vault, usage, doctor, the view's pages, describe and expand, the
checkpoint, the session digest, and a remask."""
from __future__ import annotations

import json
import re

import lcm.base.mask
import lcm.capture.bulk
import lcm.vault.db
import lcm.vault.pack
import lcm.view.pages
from conftest import run
from transcripts import Transcript

COMMON = ["The build of the osprey service runs in the ci pipeline and reports to the dashboard.",
          "Running the full test suite with coverage enabled before merging the branch.",
          "All checks passed; the release notes list the migration and the config change."]


def sessions(projects) -> list[str]:
    """Two sessions whose texts share lines (a dictionary's lines come from two sessions), long
    enough to be compressed, with a word to find, tool calls and a key for remask to hide later."""
    ids = []
    for n in range(2):
        t = Transcript(projects, session_id=f"s{n}-compressed", cwd=f"/home/user/proj{n}")
        for i in range(30):
            t.user(f"turn {i}: please look at the kestrel parser again\n" + "\n".join(COMMON) * 2)
            t.assistant_text(f"Looking at kestrel case {i}.\n" + "\n".join(COMMON[::-1]) * 2
                             + (f"\nthe token is heronpass-{n}-{i}-zzzz" if i % 7 == 0 else ""))
            call = t.tool_use("Bash", {"command": f"pytest -q tests/test_kestrel_{i}.py  # {COMMON[0]}"})
            t.tool_result(call, ("\n".join(COMMON) + "\n") * 3 + f"{i} passed")
        t.write()
        ids.append(t.session_id)
    return ids


def undated(text: str) -> str:
    """A reader's output without the times it was written at (each vault is read at its own)."""
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?|\d{4}-\d\d-\d\d \d\d:\d\d", "T", text)


def outputs(capsys, monkeypatch, db: str, home, sids: list[str], tmp_path) -> dict:
    """What each reader shows of the vault at `db` (paths of the vault itself left out)."""
    monkeypatch.setenv("LCM_DB", db)
    out: dict = {}
    code, text, _ = run(capsys, "lcm_grep", "kestrel parser", "--all-sessions", "--context", "2", "--json")
    assert code == 0
    out["grep"] = json.loads(text)
    assert out["grep"]["results"] and any(r.get("context") for r in out["grep"]["results"])
    code, text, _ = run(capsys, "lcm_grep", "heronpass", "--all-sessions", "--mode", "regex", "--json")
    out["grep_regex"] = json.loads(text)["results"]
    conn = lcm.vault.db.connect(db, readonly=True)
    first = conn.execute("SELECT uuid FROM messages WHERE session_id = ? ORDER BY seq LIMIT 1", (sids[0],)).fetchone()[0]
    out["view"] = [lcm.view.pages.session_page(conn, sids[0], {}),
                   lcm.view.pages.search_page(conn, {"q": "kestrel parser"})]
    conn.close()
    for sid in sids:
        exported = tmp_path / f"{sid}.md"
        assert run(capsys, "lcm_export", "--session", sid, "--output", exported)[0] == 0
        out[f"export {sid}"] = undated(exported.read_text())
        code, text, _ = run(capsys, "lcm_checkpoint", "--session", sid, "--output", "-")
        assert code == 0
        out[f"checkpoint {sid}"] = undated(text.replace(db, "VAULT"))
    code, text, _ = run(capsys, "lcm_usage", "--json")
    out["usage"] = json.loads(text)
    code, text, _ = run(capsys, "lcm_doctor", "--json")
    doctor = json.loads(text)
    out["doctor"] = {k: doctor[k]["status"] for k in ("fts", "blocks", "dag") if k in doctor}
    assert out["doctor"]["fts"] == "ok"
    code, text, _ = run(capsys, "lcm_expand", first, "--json")
    out["expand"] = json.loads(text)
    code, text, _ = run(capsys, "lcm_describe", first, "--json")
    out["describe"] = json.loads(text)
    # a bundle of the vault, taken into a third one: the same messages, read back alike
    bundle = tmp_path / f"{abs(hash(db))}.lcmb"
    assert run(capsys, "lcm_export", "--bundle", bundle, "--all", "--unmasked")[0] == 0
    third = str(tmp_path / f"third-{abs(hash(db))}.db")
    assert run(capsys, "lcm_ingest", bundle, "--db", third, "--json")[0] == 0
    other = lcm.vault.db.connect(third, readonly=True)
    out["bundle"] = sorted(tuple(r) for r in other.execute("SELECT uuid, lcm_text(content), lcm_line(raw, block_id, block_pos)"
                                         " FROM messages"))
    other.close()
    # the session digest (extractive: no model), then a remask of a pattern added to redact.txt
    monkeypatch.setenv("LCM_LLM", "none")
    for sid in sids:
        assert run(capsys, "lcm_compact", "--session", sid, "--digest", "--json")[0] == 0
        code, text, _ = run(capsys, "lcm_sessions", sid, "--json")
        out[f"digest {sid}"] = undated(json.dumps(json.loads(text).get("digest")))
    (home / "redact.txt").write_text("heronpass-[0-9-]+zzzz\n")
    assert run(capsys, "lcm_doctor", "--remask", "--json")[0] in (0, 1)
    conn = lcm.vault.db.connect(db)
    out["remasked"] = sorted(tuple(r) for r in conn.execute("SELECT uuid, lcm_text(content) FROM messages WHERE lcm_text(content)"
                                          " LIKE '%the token is%'"))
    assert out["remasked"] and not any("heronpass" in text for _, text in out["remasked"])
    assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'heronpass*'").fetchone()[0] == 0
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    conn.close()
    (home / "redact.txt").unlink()
    lcm.base.mask.reload_user_patterns()  # the next vault's readers mask as before
    return out


def test_every_reader_reads_compressed_text_as_plain(tmp_path, monkeypatch, capsys):
    import os
    home = tmp_path / "lcm-home"
    home.mkdir()
    monkeypatch.setenv("LCM_HOME", str(home))
    sids = sessions(tmp_path / "projects")
    plain, packed = str(tmp_path / "plain.db"), str(tmp_path / "packed.db")
    for db in (plain, packed):
        conn = lcm.vault.db.connect(db)
        with lcm.vault.db.transaction(conn):  # file by file, every row plain, as the hooks store them
            lcm.capture.bulk.ingest_paths(conn, [str(tmp_path / "projects")])
        conn.close()
    conn = lcm.vault.db.connect(packed)
    lcm.vault.pack.pack(conn, everything=True)  # packing compresses the text in place
    compressed = conn.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0]
    total = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    conn.close()
    assert compressed > total // 2
    conn = lcm.vault.db.connect(plain)
    assert conn.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0] == 0
    conn.close()
    assert os.path.exists(packed)
    compressed_out = outputs(capsys, monkeypatch, packed, home, sids, tmp_path)
    plain_out = outputs(capsys, monkeypatch, plain, home, sids, tmp_path)
    assert sorted(compressed_out) == sorted(plain_out)
    for reader, shown in plain_out.items():
        assert compressed_out[reader] == shown, reader
