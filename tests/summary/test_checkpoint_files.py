"""Where a checkpoint goes: the project's .lcm-checkpoint.md only for this project's session,
stdout for --output -, the vault always; the resume hint names the checkpoint just made."""
from __future__ import annotations

import json
import re

import pytest

from conftest import command, run

import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm_checkpoint
import lcm_resume
from transcripts import coding_session


def output(capsys, module, *argv) -> str:
    """stdout of a command that must succeed."""
    code, out, err = run(capsys, module, *argv)
    assert code == 0, err
    return out


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root))
    monkeypatch.chdir(root)
    return root


def stored(tmp_path, session_id: str, cwd: str, turns: int = 2):
    t = coding_session(tmp_path / "projects", turns=turns, session_id=session_id, cwd=cwd)
    t.write()
    lcm.capture.bulk.ingest_paths(lcm.vault.db.connect(), [t.path])
    return t




def checkpoints() -> list:
    return lcm.vault.db.connect().execute("SELECT session_id, path, content FROM checkpoints ORDER BY id").fetchall()


def test_output_dash_prints_the_checkpoint_and_writes_no_file(tmp_path, workspace, capsys):
    stored(tmp_path, "s-mine", str(workspace))
    out = output(capsys, lcm_checkpoint, "--session", "s-mine", "--output", "-")
    assert out.startswith("<!-- lcm-checkpoint: ") and "# lcm checkpoint" in out
    assert list(workspace.iterdir()) == []           # neither "-" nor .lcm-checkpoint.md
    assert [(r["session_id"], r["path"], r["content"]) for r in checkpoints()] == [("s-mine", None, out)]
    doc = json.loads(output(capsys, lcm_checkpoint, "--session", "s-mine", "--output", "-", "--json"))
    assert doc["content"].startswith("<!-- lcm-checkpoint: ") and doc["path"] is None


def test_another_sessions_checkpoint_never_overwrites_this_projects_file(tmp_path, workspace, capsys, monkeypatch):
    stored(tmp_path, "s-mine", str(workspace))
    stored(tmp_path, "s-other", "/home/user/elsewhere")
    monkeypatch.setenv("LCM_SESSION_ID", "s-mine")
    output(capsys, lcm_checkpoint)
    mine = (workspace / ".lcm-checkpoint.md").read_text()
    assert "s-mine" in mine
    out = output(capsys, lcm_checkpoint, "--session", "s-other")
    assert (workspace / ".lcm-checkpoint.md").read_text() == mine
    assert "stored in the vault only" in out and "pass --output PATH" in out
    assert f'Resume it in a new session with: {command("lcm_resume.py", "--session", "s-other")}' in out
    assert checkpoints()[-1]["session_id"] == "s-other" and checkpoints()[-1]["path"] is None
    # unless --output says so
    target = tmp_path / "other.md"
    output(capsys, lcm_checkpoint, "--session", "s-other", "--output", str(target))
    assert "s-other" in target.read_text()
    monkeypatch.delenv("LCM_SESSION_ID")              # no current session: the session's own project decides
    out = output(capsys, lcm_checkpoint, "--session", "s-other")
    assert "belongs to /home/user/elsewhere" in out and (workspace / ".lcm-checkpoint.md").read_text() == mine


def test_the_resume_hint_resumes_the_checkpoint_it_printed(tmp_path, workspace, capsys, monkeypatch):
    stored(tmp_path, "s-mine", str(workspace))
    stored(tmp_path, "s-other", "/home/user/elsewhere")
    monkeypatch.setenv("LCM_SESSION_ID", "s-mine")
    for argv, session in (([], "s-mine"), (["--session", "s-other"], "s-other")):
        out = output(capsys, lcm_checkpoint, *argv)
        hint = re.search(r'lcm_resume.py (.*)$', out, re.M).group(1).split()
        resumed = output(capsys, lcm_resume, *hint)
        assert f"Resuming session {session}" in resumed, (hint, resumed[:200])


def git(*args, cwd):
    import subprocess
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"HOME": str(cwd), "PATH": "/usr/bin:/bin:/usr/local/bin", "GIT_AUTHOR_NAME": "t",
                               "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@example.com"}).stdout


def test_the_checkpoint_file_stays_out_of_git_status(tmp_path, capsys, monkeypatch):
    """In a repository and in a linked worktree (where .git is a file), the checkpoint is kept
    out of `git status` through the local .git/info/exclude, written once; .gitignore is never
    touched; outside a repository nothing changes."""
    import shutil
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    (repo / ".gitignore").write_text("build/\n")
    (repo / "app.py").write_text("print('hi')\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "start", cwd=repo)
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", str(linked), cwd=repo)
    assert (linked / ".git").is_file()
    plain = tmp_path / "plain"
    plain.mkdir()
    for i, root in enumerate((repo, linked, plain)):
        stored(tmp_path / f"t{i}", f"s-{i}", str(root))
        monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root))
        monkeypatch.chdir(root)
        for _ in range(2):  # a second checkpoint adds nothing to the exclude file
            output(capsys, lcm_checkpoint, "--session", f"s-{i}")
        assert (root / ".lcm-checkpoint.md").is_file()
    for root in (repo, linked):
        assert git("status", "--porcelain", cwd=root) == ""
        assert git("status", "--porcelain", "--ignored", cwd=root).count(".lcm-checkpoint.md") == 1
    exclude = (repo / ".git" / "info" / "exclude").read_text()
    assert exclude.count(".lcm-checkpoint.md") == 1
    assert (repo / ".gitignore").read_text() == "build/\n" and (linked / ".gitignore").read_text() == "build/\n"
    assert sorted(p.name for p in plain.iterdir()) == [".lcm-checkpoint.md"]
