"""What an extractive summary (LCM_LLM=none) keeps: the line that says what failed, stated
choices but not narration, the final todo list once, commands with their outcome."""
from __future__ import annotations

import lcm.vault.db
import lcm.vault.store
import lcm.summary.extract
import lcm.capture.bulk
import lcm.summary.failures
import lcm.capture.ingest
from fake_anthropic import FakeAnthropic
from transcripts import Transcript

PYTEST_OUTPUT = "\n".join(
    ["============================= test session starts ==============================",
     "platform linux -- Python 3.12.7, pytest-8.4.0", "collected 12 items", ""]
    + [f"tests/test_pack.py::test_case_{i} PASSED" for i in range(10)]
    + ["", "=================================== FAILURES ===================================",
       "E       AssertionError: archive is missing README.md",
       "=========================== short test summary info ============================",
       "FAILED tests/test_pack.py::test_tar_keeps_readme - AssertionError: archive is missing README.md",
       "FAILED tests/test_pack.py::test_tar_sizes - AssertionError: 3 != 4",
       "========================= 2 failed, 10 passed in 0.41s ========================="])
TRACEBACK = ('Traceback (most recent call last):\n  File "pack.py", line 3, in <module>\n'
             "    import zstandard\nModuleNotFoundError: No module named 'zstandard'")


# the rows compaction reads (lcm.summary.dag.load_messages): lines and text decoded, as a bulk
# import leaves them packed and compressed
ROWS = ("SELECT id, uuid, type, role, subtype, is_meta, is_sidechain, thread, seq, lcm_text(content) AS content,"
        f" {lcm.vault.store.LINE} AS raw, created_at, token_count FROM messages ORDER BY seq")


def summary_of(tmp_path) -> str:
    t = Transcript(tmp_path / "projects")
    t.user("add tar support to the packer")
    t.assistant_text("Now I'll implement the tar support. I'll use tarfile instead of shelling out,"
                     " because it works on Windows too.")
    t.tool_use("TodoWrite", {"todos": [{"content": "write tar packer", "status": "in_progress"},
                                       {"content": "test it", "status": "pending"}]})
    run = t.tool_use("Bash", {"command": "pytest -q tests/test_pack.py"})
    t.tool_result(run, PYTEST_OUTPUT, is_error=True)
    run = t.tool_use("Bash", {"command": "python pack.py --zstd"})
    t.tool_result(run, TRACEBACK, is_error=True)
    run = t.tool_use("Bash", {"command": "git log -1"})
    t.tool_result(run, "fatal: not a git repository (or any of the parent directories): .git", is_error=True)
    run = t.tool_use("Bash", {"command": "ls dist"})
    t.tool_result(run, "pack.tar")
    t.tool_use("TodoWrite", {"todos": [{"content": "write tar packer", "status": "completed"},
                                       {"content": "test it", "status": "in_progress"}]})
    t.assistant_text("Let me check the README handling next.")
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    rows = conn.execute(ROWS).fetchall()
    return lcm.summary.extract.summarize_messages(rows, "test", 1200)


def test_extractive_summary_keeps_the_line_that_says_what_failed(tmp_path):
    text = summary_of(tmp_path)
    assert "FAILED tests/test_pack.py::test_tar_keeps_readme - AssertionError: archive is missing README.md" in text
    assert "(+1 more failed)" in text
    assert "ModuleNotFoundError: No module named 'zstandard'" in text
    assert "fatal: not a git repository" in text
    assert "`pytest -q tests/test_pack.py` (failed)" in text and "`ls dist` (ok)" in text


def test_extractive_summary_keeps_choices_and_the_final_todo_list_only(tmp_path):
    text = summary_of(tmp_path)
    assert "I'll use tarfile instead of shelling out, because it works on Windows too." in text
    assert "Now I'll implement the tar support." not in text
    assert text.count("write tar packer") == 1
    assert "Todos: [completed] write tar packer; [in_progress] test it" in text


def test_key_line_rules():
    assert lcm.summary.failures.key_line("<tool_use_error>String to replace not found in file.\nString: x"
                                "</tool_use_error>") == "String to replace not found in file."
    assert lcm.summary.failures.key_line("== test session starts ==\ncollected 3 items / 3 deselected\n\n"
                                "======== no tests collected (3 deselected) in 0.39s ========") == \
        "======== no tests collected (3 deselected) in 0.39s ========"
    assert lcm.summary.failures.key_line("npm ERR! code E404\nnpm error: 404 Not Found") == "npm error: 404 Not Found"
    assert lcm.summary.failures.key_line("Exit code 127\n(eval):1: command not found: pytest") == \
        "Exit code 127: (eval):1: command not found: pytest"


def coloured_session(tmp_path) -> Transcript:
    t = Transcript(tmp_path / "projects")
    t.user("make the build pass")
    run = t.tool_use("Bash", {"command": "npx tsc --noEmit --pretty"})
    t.tool_result(run, "\x1b[96msrc/app.ts\x1b[0m:\x1b[93m3\x1b[0m:\x1b[93m7\x1b[0m - \x1b[91merror\x1b[0m"
                       "\x1b[90m TS2304: \x1b[0mCannot find name 'fetchUser'.\r\n\x1b[1m1 error\x1b[22m", is_error=True)
    t.assistant_text("\x1b[32mDecided to import fetchUser from api.ts instead of redefining it.\x1b[0m")
    for i in range(6):
        run = t.tool_use("Bash", {"command": f"npm test -- --color part{i}"})
        t.tool_result(run, f"\x1b[32m\u2713\x1b[39m part {i} passed " + "\x1b[2m.\x1b[22m" * 400)
    t.write()
    return t


def test_no_ansi_escape_reaches_a_summary_or_the_summariser(tmp_path, monkeypatch, capsys, fake_api):
    """Terminal colour codes never reach a summary: not the extractive one, not what a model
    reads, and not a model's answer that echoes them back."""
    import lcm_compact
    from conftest import run
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    monkeypatch.setenv("LCM_LEAF_MIN_TOKENS", "1")
    t = coloured_session(tmp_path)
    lcm.capture.bulk.ingest_paths(lcm.vault.db.connect(), [t.path])
    monkeypatch.setenv("LCM_LLM", "none")
    assert run(capsys, lcm_compact, "--session", t.session_id, "--full")[0] == 0
    conn = lcm.vault.db.connect()
    texts = [r[0] for r in conn.execute("SELECT content FROM summaries")]
    assert texts and not any("\x1b" in s for s in texts)
    joined = "\n".join(texts)
    assert "src/app.ts:3:7 - error TS2304: Cannot find name 'fetchUser'." in joined
    assert "Decided to import fetchUser from api.ts instead of redefining it." in joined

    other = coloured_session(tmp_path / "b")
    lcm.capture.bulk.ingest_paths(conn, [other.path])
    monkeypatch.setenv("LCM_LLM", "anthropic")
    fake_api.respond(lambda body: "Echo \x1b[31m" + FakeAnthropic.user_text(body)[-300:] + "\x1b[0m")
    assert run(capsys, lcm_compact, "--session", other.session_id, "--full")[0] == 0
    assert fake_api.requests and not any("\x1b" in FakeAnthropic.user_text(b) for b in fake_api.requests)
    rows = conn.execute("SELECT content FROM summaries WHERE session_id = ?", (other.session_id,)).fetchall()
    assert rows and not any("\x1b" in r[0] for r in rows)


def test_rejection_reasons_and_findings_are_kept(tmp_path):
    t = Transcript(tmp_path / "projects")
    t.user("set up the workspace")
    run = t.tool_use("Bash", {"command": "npm install"})
    t.tool_result(run, "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it "
                       "was a file edit, the new_string was NOT written to the file). The user provided the "
                       "following reason for the rejection:  use pnpm", is_error=True)
    t.assistant_text("Understood. Turns out the repo already has a pnpm-lock.yaml, so I'll use pnpm.\n\n"
                     "Let me check the lock file first.")
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    rows = conn.execute(ROWS).fetchall()
    text = lcm.summary.extract.summarize_messages(rows, "test", 1200)
    assert "rejected by the user (`npm install`): use pnpm" in text
    assert "- (user) use pnpm" in text
    decisions = text.split("Decisions:")[1]
    assert "so I'll use pnpm." in decisions and "Let me check" not in text.split("Ended:")[0]
