"""Everything a person would search is searchable, each as its own result type grep can filter:
session titles, checkpoints, pinned notes, session digests, and the text of externalised files."""
from __future__ import annotations

import json

import pytest

import lcm.vault.db
import lcm.capture.files
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.summary.digest
import lcm_checkpoint
import lcm_grep
import lcm_remember
from conftest import run
from transcripts import Transcript


def _read_result(lines: int) -> str:
    """A Read tool result as Claude Code writes it: every line numbered `     N→`."""
    body = []
    for n in range(1, lines + 1):
        if n % 50 == 1:
            body.append(f"class Handler{n}:")
        elif n % 50 == 2:
            body.append(f"    def handle_{n}(self, request):")
        elif n == 377:
            body.append("        return quasar_flux_capacitor(request)  # only in this file")
        else:
            body.append(f"        value_{n} = compute(request, {n})")
    return "\n".join(f"{n:>6}→{line}" for n, line in enumerate(body, 1))


@pytest.fixture
def typed_vault(tmp_path, vault, capsys, monkeypatch):
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "2000")  # tokens: the 754-line file is above it
    t = Transcript(tmp_path / "projects", session_id="types-0001", cwd="/home/u/app")
    t.title("Migrating the billing service to Kubernetes")
    t.user("Please read the request handlers.")
    call = t.tool_use("Read", {"file_path": "/home/u/app/handlers.py"})
    t.tool_result(call, _read_result(754), toolUseResult={"type": "text", "file": {
        "filePath": "/home/u/app/handlers.py", "content": "...", "numLines": 754}})
    t.assistant_text("The handlers are all thin wrappers.")
    t.user("Next, wire the marmalade exporter into the handlers.")
    t.write()
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    assert run(capsys, lcm_remember, "Always deploy the tangerine cluster on Fridays", "--global")[0] == 0
    assert run(capsys, lcm_checkpoint, "--session", "types-0001", "--output", tmp_path / "cp.md")[0] == 0
    # session digests are written at SessionEnd (lcm.summary.extract); made here as that table holds them
    conn.execute("CREATE TABLE IF NOT EXISTS digests (session_id TEXT PRIMARY KEY, text TEXT NOT NULL,"
                 " level TEXT NOT NULL, created_at TEXT NOT NULL)")
    conn.execute("INSERT INTO digests VALUES ('types-0001', 'Decided: pin the zeppelin chart version.'"
                 ", 'extractive', '2026-11-20T10:00:00Z')")
    conn.commit()
    return vault


def _grep(capsys, vault, *argv):
    code, out, err = run(capsys, lcm_grep, *argv, "--db", vault, "--all-sessions", "--json")
    assert code == 0, err
    return json.loads(out)["results"]


@pytest.mark.parametrize("query,kind,expected", [
    ("billing kubernetes", "title", "Migrating the billing service to Kubernetes"),
    ("tangerine cluster", "note", "tangerine cluster"),
    ("marmalade exporter", "checkpoint", "marmalade exporter"),
    ("zeppelin chart", "digest", "zeppelin chart"),
    ("quasar_flux_capacitor", "file", "quasar_flux_capacitor"),
])
def test_each_type_is_found_and_can_be_asked_for_alone(typed_vault, capsys, query, kind, expected):
    everything = _grep(capsys, typed_vault, query)
    assert any(r["type"] == kind and expected in r["snippet"] for r in everything), everything
    only = _grep(capsys, typed_vault, query, "--type", kind)
    assert only and {r["type"] for r in only} == {kind} and expected in only[0]["snippet"]


def test_text_output_names_each_type(typed_vault, capsys):
    code, out, _ = run(capsys, lcm_grep, "quasar_flux_capacitor", "--db", typed_vault, "--all-sessions",
                       "--type", "file")
    assert code == 0 and "  file  " in out and "handlers.py" in out and "quasar_flux_capacitor" in out
    assert "lcm_describe.py file_" in out  # the next command looks at the stored file


def test_an_unknown_type_is_an_error_with_the_list(typed_vault, capsys):
    code, _, err = run(capsys, lcm_grep, "x", "--db", typed_vault, "--type", "tweets")
    assert code == 1 and "Error:" in err and "checkpoint" in err


def test_a_large_read_result_keeps_its_outline_and_its_text_is_found(typed_vault, capsys):
    """Issue 23.6: the line-number prefix no longer hides the declarations; the text that went to
    disk is found by grep in auto and full_text modes."""
    conn = lcm.vault.db.connect(str(typed_vault), create=False, readonly=True)
    row = conn.execute("SELECT * FROM files WHERE name LIKE '%handlers.py'").fetchone()
    assert row is not None, "the 754-line Read result was not externalised"
    outline = row["exploration"]
    assert outline.startswith("code, 754 lines, 32 declarations"), outline[:80]
    assert "1: class Handler1:" in outline and "2: def handle_2(self, request):" in outline
    for mode in ("auto", "full_text"):
        results = _grep(capsys, typed_vault, "quasar_flux_capacitor", "--mode", mode)
        assert results and results[0]["type"] == "file" and results[0]["id"] == row["id"], (mode, results)


def test_line_numbers_are_read_through_only_when_most_lines_have_them():
    numbered = "\n".join(f"{n:>6}→def f{n}(): pass" for n in range(1, 30))
    assert lcm.capture.files.without_line_numbers(numbered).splitlines()[0] == "def f1(): pass"
    prose = "Step 1→ take the key\nthen open the door\nand go in\n12→ was the floor"
    assert lcm.capture.files.without_line_numbers(prose) == prose


def test_a_new_result_type_is_one_record_and_grep_finds_it(typed_vault, capsys, monkeypatch):
    """Adding a result type is one record in lcm.search.result_types.TYPES (and the migration that
    makes its table): grep then searches it, filters it by --type, --since and project, prints its
    head line and its Next: command, and --json carries its extra keys."""
    import lcm.search.result_types as result_types
    conn = lcm.vault.db.connect()
    with conn:  # the type's "migration": its table
        conn.execute("CREATE TABLE bookmarks (session_id TEXT, created_at TEXT, label TEXT, content TEXT)")
        conn.execute("INSERT INTO bookmarks VALUES ('types-0001', '2026-01-02T03:04:05Z', 'pinned',"
                     " 'the zeppelin checklist lives in docs/launch.md')")
        conn.execute("INSERT INTO bookmarks VALUES ('types-0001', '2020-01-01T00:00:00Z', 'old',"
                     " 'an older zeppelin note')")
    record = result_types.ResultType(
        "bookmark", "bookmarks", "rowid",
        "t.rowid AS rowid_, t.rowid AS id, t.session_id, t.created_at, t.label, t.content", "t.content",
        "t.created_at", "t.created_at", extra=("label",),
        head=lambda r: f"bookmark {r['label']}  {r['when']}",
        next=lambda r: [("lcm_sessions.py", result_types.Positional(r["session_id"]))])
    monkeypatch.setitem(result_types.TYPES, "bookmark", record)

    code, out, _ = run(capsys, lcm_grep, "zeppelin checklist", "--all-sessions", "--type", "bookmark", "--json")
    doc = json.loads(out)
    assert code == 0 and {r["type"] for r in doc["results"]} == {"bookmark"}
    assert doc["results"][0]["label"] == "pinned" and "docs/launch.md" in doc["results"][0]["snippet"]

    code, out, _ = run(capsys, lcm_grep, "zeppelin", "--all-sessions", "--type", "bookmark", "--since", "2025-01-01")
    assert code == 0 and "bookmark pinned  2026-01-02 03:04" in out and "old" not in out
    assert "Next: " in out and "lcm_sessions.py types-0001" in out

    code, out, _ = run(capsys, lcm_grep, "zeppelin", "--all-sessions", "--json")  # every type: it is among them
    assert code == 0 and {"bookmark"} <= {r["type"] for r in json.loads(out)["results"]}
    code, out, _ = run(capsys, lcm_grep, "zeppelin", "--project", "/somewhere/else", "--type", "bookmark", "--json")
    assert code == 0 and json.loads(out)["results"] == []  # scoped like every type


def test_every_result_type_is_dated_by_its_conversation(tmp_path, vault, capsys, monkeypatch):
    """A year-old session imported today: its digest, checkpoint and kept-aside file are written
    now, yet they are last year's. `--since 1w` finds none of them; `--before 1w` finds each,
    dated by its conversation."""
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "2000")
    t = Transcript(tmp_path / "projects", session_id="old-year", cwd="/home/u/app", start="2025-06-01T09:00:00Z")
    t.title("The walrus ledger migration")
    t.user("Please read the walrus ledger handlers.")
    call = t.tool_use("Read", {"file_path": "/home/u/app/walrus.py"})
    t.tool_result(call, _read_result(754).replace("quasar_flux_capacitor", "walrus_ledger"), toolUseResult={
        "type": "text", "file": {"filePath": "/home/u/app/walrus.py", "content": "...", "numLines": 754}})
    t.assistant_text("We decided to keep the walrus ledger in Postgres.")
    t.write()
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    lcm.summary.digest.write(conn, "old-year", use_model=False)          # written today
    assert run(capsys, lcm_checkpoint, "--session", "old-year", "--vault-only")[0] == 0   # written today
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 1  # kept aside today
    kinds = ("title", "digest", "checkpoint", "file", "message")
    recent = _grep(capsys, vault, "walrus ledger", "--all-sessions", "--since", "1w")
    assert [r["type"] for r in recent] == []
    old = _grep(capsys, vault, "walrus ledger", "--all-sessions", "--before", "1w", "--limit", "50")
    found = {r["type"]: r for r in old}
    assert set(kinds) <= set(found), set(found)
    for kind in kinds:
        assert found[kind]["created_at"].startswith("2025-06-01"), (kind, found[kind]["created_at"])
    code, out, _ = run(capsys, lcm_grep, "walrus ledger", "--all-sessions", "--type", "digest,checkpoint,file")
    assert code == 0 and out.count("2025-06-01 09:0") == 3, out
