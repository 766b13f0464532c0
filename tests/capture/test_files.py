"""Large-file externalisation: stored once, type-aware summaries, recoverable content."""
from __future__ import annotations

import json
import os
import stat

import pytest

import lcm.base.config
import lcm.vault.db
import lcm.capture.files
from conftest import run


def _externalize(vault, name, content):
    conn = lcm.vault.db.connect(str(vault))
    with lcm.vault.db.transaction(conn):
        text = lcm.capture.files.externalize(conn, session_id="s1", message_uuid="u1", name=name, content=content)
    row = conn.execute("SELECT * FROM files").fetchone()
    return conn, text, row


def test_json_summary_shows_shape_and_keys(vault):
    data = {"users": [{"id": i, "name": f"user{i}", "tags": ["a"]} for i in range(500)], "total": 500}
    conn, text, row = _externalize(vault, "/tmp/users.json", json.dumps(data))
    assert text.startswith(f"[{row['id']}] /tmp/users.json (json, ")
    assert '"users": [{"id": int, "name": str, "tags": [str] x1}] x500' in text
    assert "top-level keys: users, total" in text
    assert row["kind"] == "json" and row["message_uuid"] == "u1"
    assert lcm.capture.files.read_content(row) == json.dumps(data)


def test_csv_summary_names_columns_and_rows(vault):
    content = "city,population,country\n" + "".join(f"c{i},{i * 10},XY\n" for i in range(1000))
    _conn, text, row = _externalize(vault, "cities.csv", content)
    assert "CSV table, 1000 data rows, 3 columns" in text
    assert "columns: city, population, country" in text


def test_code_summary_lists_signatures(vault):
    content = "import os\n\n" + "".join(f"def handler_{i}(event):\n    return {i}\n\n" for i in range(50))
    content += "class Router:\n    pass\n"
    _conn, text, _row = _externalize(vault, "app.py", content)
    assert "code, " in text and "3: def handler_0(event):" in text
    assert "more declarations" in text  # bounded
    assert len(text) < 3000


def test_text_summary_has_head_and_tail(vault):
    content = "".join(f"log line {i}\n" for i in range(5000))
    _conn, text, row = _externalize(vault, "build output", content)
    assert "log line 0" in text and "log line 4999" in text and "log line 2500" not in text
    assert row["kind"] == "text"


def test_content_stored_once_private_and_named_by_hash(vault):
    conn, _text, row = _externalize(vault, "a.txt", "same content\n" * 100)
    with lcm.vault.db.transaction(conn):
        lcm.capture.files.externalize(conn, session_id="s1", message_uuid="u2", name="b.txt", content="same content\n" * 100)
    paths = {r["path"] for r in conn.execute("SELECT path FROM files")}
    assert len(paths) == 1
    assert stat.S_IMODE(os.stat(row["path"]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(lcm.base.config.files_dir()).st_mode) == 0o700


def test_detect_kind_from_content_without_extension():
    assert lcm.capture.files.detect_kind("tool output", '{"a": 1}') == "json"
    assert lcm.capture.files.detect_kind("tool output", "a\tb\n1\t2\n3\t4\n") == "tsv"
    assert lcm.capture.files.detect_kind("notes", "just some words\nmore words\n") == "text"


def _numbered(lines, arrow: bool) -> str:
    return "\n".join(f"{n:>6}{'→' if arrow else chr(9)}{line}" for n, line in enumerate(lines, 1))


JS_MODULE = ["import { readFile, writeFile } from 'fs';", "import { join, dirname } from 'path';",
             "import { parse, format } from 'url';", "const pair = [1, 2];", "const sum = add(1, 2);", ""] + [
    line for i in range(2600) for line in (f"export function handleToken{i}(stream, position) {{",
                                           f"  return stream.read(position, 'quokka{i}word');", "}", "")]


@pytest.mark.parametrize("arrow", [True, False], ids=["arrow", "cat-n"])
@pytest.mark.parametrize("tool", ["Read", "Bash"])
def test_a_numbered_file_without_tool_use_result_is_outlined_as_code_and_found(capsys, isolated_home, tool, arrow):
    """A large block with Read's line numbers (`  12→` or cat -n's `  12<TAB>`) and no
    `toolUseResult` naming the file (older Claude Code; `cat -n` through Bash): it was outlined as
    "CSV table, 10004 data rows, 2 columns" because a module's first lines held one comma each.
    Whatever tool made it, its outline names the code's declarations and grep finds its words."""
    from transcripts import Transcript
    projects = isolated_home / ".claude" / "projects"
    t = Transcript(projects, session_id="s-num", cwd=str(isolated_home))
    t.user("show me the module")
    call = t.tool_use(tool, {"file_path": "/srv/app.js"} if tool == "Read" else {"command": "cat -n /srv/app.js"})
    t.tool_result(call, _numbered(JS_MODULE, arrow))
    t.write()
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    code, out, err = run(capsys, "lcm_describe", "--json", _file_id())
    assert code == 0, err
    outline = json.loads(out)
    assert outline["kind"] == "code", outline
    assert "export function handleToken0(stream, position) {" in json.dumps(outline)
    assert "CSV" not in json.dumps(outline)
    code, out, err = run(capsys, "lcm_grep", "--json", "--all-sessions", "quokka2417word")
    assert code == 0, err
    hits = json.loads(out)["results"]
    assert hits and hits[0]["type"] == "file" and "quokka2417word" in hits[0]["snippet"]


def _file_id() -> str:
    conn = lcm.vault.db.connect(str(lcm.base.config.db_path()))
    try:
        return conn.execute("SELECT id FROM files").fetchone()[0]
    finally:
        conn.close()


def test_a_real_table_with_numbered_lines_stays_a_table():
    """The near miss: a CSV file read with Read keeps its table outline (no declarations)."""
    rows = ["city,population,country"] + [f"c{i},{i * 10},XY" for i in range(50)]
    assert lcm.capture.files.detect_kind("tool output", _numbered(rows, True)) == "csv"
    assert lcm.capture.files.detect_kind("tool output", _numbered(JS_MODULE[:200], True)) == "code"
