"""What an extractive summary (LCM_LLM=none) keeps: the line that says what failed, stated
choices but not narration, the final todo list once, commands with their outcome."""
from __future__ import annotations

import lcm.db
import lcm.extract
import lcm.ingest
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
    conn = lcm.db.connect()
    lcm.ingest.ingest_paths(conn, [t.path])
    rows = conn.execute("SELECT m.*, m.thread FROM messages m ORDER BY seq").fetchall()
    return lcm.extract.summarize_messages(rows, "test", 1200)


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
    assert lcm.extract.key_line("<tool_use_error>String to replace not found in file.\nString: x"
                                "</tool_use_error>") == "String to replace not found in file."
    assert lcm.extract.key_line("== test session starts ==\ncollected 3 items / 3 deselected\n\n"
                                "======== no tests collected (3 deselected) in 0.39s ========") == \
        "======== no tests collected (3 deselected) in 0.39s ========"
    assert lcm.extract.key_line("npm ERR! code E404\nnpm error: 404 Not Found") == "npm error: 404 Not Found"
    assert lcm.extract.key_line("Exit code 127\n(eval):1: command not found: pytest") == \
        "Exit code 127: (eval):1: command not found: pytest"
