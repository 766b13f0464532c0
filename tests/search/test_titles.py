"""Session titles come from the session itself (issue 23.2).

Older Claude Code wrote `{"type":"summary","summary":...,"leafUuid":...}` lines at the top of a
resumed session's file: each titles the session that holds its leaf message, not the file it
sits in. A session without such a title uses its own ai-title or custom title, else its first
real prompt."""
from __future__ import annotations

import json
from collections import defaultdict

import lcm.vault.db
import lcm.capture.ingest
import lcm.base.mask
import lcm_ingest
import lcm_sessions
from conftest import run, shared_data
from transcripts import Transcript


def _summary_line(title: str, leaf: str) -> str:
    return json.dumps({"type": "summary", "summary": title, "leafUuid": leaf})


def _titles(capsys) -> dict[str, str]:
    code, out, _ = run(capsys, lcm_sessions, "--json", "--limit", "200")
    assert code == 0
    return {s["id"]: s["title"] for s in json.loads(out)["sessions"]}


def test_a_summary_line_titles_the_session_of_its_leaf(tmp_path, capsys, vault):
    projects = tmp_path / "projects"
    parent = Transcript(projects, session_id="aaaa0000-parent")
    parent.user("fix the flaky upload test")
    last = parent.assistant_text("the upload test waits for the server now")
    resumed = Transcript(projects, session_id="bbbb0000-resumed")
    resumed.raw_line(_summary_line("Flaky Upload Test Fix", last["uuid"]))  # the parent's title
    resumed.user("now write the changelog entry")
    resumed.assistant_text("done")
    parent.write(), resumed.write()
    assert run(capsys, lcm_ingest, resumed.path)[0] == 0  # before its leaf is stored: it waits
    assert _titles(capsys)["bbbb0000-resumed"] == "now write the changelog entry"
    assert run(capsys, lcm_ingest, parent.path)[0] == 0  # the leaf arrives: the title goes to it
    titles = _titles(capsys)
    assert titles == {"aaaa0000-parent": "Flaky Upload Test Fix", "bbbb0000-resumed": "now write the changelog entry"}
    conn = lcm.vault.db.connect()
    assert conn.execute("SELECT count(*) FROM leaf_titles").fetchone()[0] == 0  # nothing left waiting


def test_own_titles_outrank_summary_lines_and_bulk_ingest_agrees(tmp_path, capsys, vault, monkeypatch):
    projects = tmp_path / "projects"
    a = Transcript(projects, session_id="cccc0000-own-title")
    a.user("tune the cache")
    leaf = a.assistant_text("cache tuned")
    a.title("Cache Tuning")  # its own ai-title
    b = Transcript(projects, session_id="dddd0000-other")
    b.raw_line(_summary_line("Someone Else's Summary", leaf["uuid"]))
    b.user("unrelated work")
    a.write(), b.write()
    for i in range(8):  # enough files for the bulk path's parser process
        t = Transcript(projects, session_id=f"ffff000{i}-filler")
        t.user(f"filler {i}")
        t.write()
    assert run(capsys, lcm_ingest, projects)[0] == 0
    titles = _titles(capsys)
    assert titles["cccc0000-own-title"] == "Cache Tuning" and titles["dddd0000-other"] == "unrelated work"


def test_every_title_of_the_shared_data_comes_from_its_own_session(capsys, vault):
    data = shared_data("claude-projects")
    owner: dict[str, str] = {}           # message uuid -> its session
    own: dict[str, set] = defaultdict(set)   # session -> titles it may carry
    summaries = []                       # (leafUuid, title)
    for path in sorted(data.rglob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if entry.get("type") in ("user", "assistant", "system") and entry.get("uuid"):
                owner[entry["uuid"]] = entry.get("sessionId")
            elif entry.get("type") == "summary" and entry.get("leafUuid"):
                summaries.append((entry["leafUuid"], entry["summary"]))
            elif entry.get("type") in ("ai-title", "custom-title") and entry.get("sessionId"):
                own[entry["sessionId"]].add(entry.get("aiTitle") or entry.get("customTitle"))
    for leaf, title in summaries:
        if leaf in owner:
            own[owner[leaf]].add(title)
    assert run(capsys, lcm_ingest, data)[0] == 0
    conn = lcm.vault.db.connect()
    stored = dict(conn.execute("SELECT session_id, title FROM sessions WHERE title IS NOT NULL").fetchall())
    assert stored  # the data has titles of both kinds
    for sid, title in stored.items():
        assert title in {lcm.base.mask.mask(t.strip()) for t in own[sid]}, (sid, title)
    # a session that holds the leaf of a summary line carries a title
    for leaf, _title in summaries:
        if owner.get(leaf) and conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (owner[leaf],)).fetchone():
            assert owner[leaf] in stored, owner[leaf]


def test_a_vault_filled_before_the_fix_gets_its_titles_back(tmp_path, capsys, vault):
    """Migration 10 takes back a title credited to the file a summary line sat in, and gives it
    to the session that holds its leaf."""
    import sqlite3
    projects = tmp_path / "projects"
    parent = Transcript(projects, session_id="aaaa1111-parent")
    parent.user("speed up the importer")
    last = parent.assistant_text("the importer now batches its inserts")
    resumed = Transcript(projects, session_id="bbbb1111-resumed")
    resumed.raw_line(_summary_line("Importer Speed-up", last["uuid"]))
    resumed.user("document the batch size")
    parent.write(), resumed.write()
    assert run(capsys, lcm_ingest, projects)[0] == 0
    raw = sqlite3.connect(vault)  # as the code before the fix left it: the title on the wrong session
    raw.execute("UPDATE sessions SET title = CASE session_id WHEN 'bbbb1111-resumed' THEN 'Importer Speed-up' END")
    raw.execute("DROP TABLE leaf_titles")
    raw.execute("PRAGMA user_version = 9")
    raw.commit()
    raw.close()
    assert run(capsys, lcm_ingest, projects)[0] == 0  # the next writer migrates (a reader never does)
    assert _titles(capsys) == {"aaaa1111-parent": "Importer Speed-up", "bbbb1111-resumed": "document the batch size"}
