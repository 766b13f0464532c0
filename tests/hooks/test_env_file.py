"""CLAUDE_ENV_FILE, which bash sources before every Bash tool command: whatever the session id
and whatever other tools wrote there, sourcing it sets our variables to their exact values, runs
nothing else, and leaves the other lines byte for byte; the file keeps its mode and its symlink."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hooks"))
import session_start  # noqa: E402

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed: nothing sources the env file")
OURS = session_start.OUR_EXPORTS
# every character a reader may take for the end of a line: bash splits on \n alone, Python's
# str.splitlines() on all of these, bytes.splitlines() on \n and \r
SEPARATORS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def source(path: Path, names: list[str]) -> tuple[list[bytes], dict[str, bytes]]:
    """(every command bash ran while sourcing path, {name: value} of the names that are set)."""
    trace = path.parent / "trace"
    script = ('set -T; exec 3>"$2"; trap \'printf "%s\\0" "$BASH_COMMAND" >&3\' DEBUG; source "$1"; trap - DEBUG; '
              'for n in "${@:3}"; do [ "${!n+set}" ] && printf "%s=%s\\0" "$n" "${!n}"; done; true')
    done = subprocess.run([BASH, "--norc", "--noprofile", "-c", script, "bash", str(path), str(trace), *names],
                          capture_output=True, env={"PATH": str(path.parent / "no-commands-here")}, cwd=path.parent,
                          timeout=30)
    assert done.returncode == 0 and done.stderr == b"", done.stderr  # a command not found would say so here
    ran = trace.read_bytes().split(b"\0")[1:-2]  # between `source "$1"` and `trap - DEBUG`
    values = dict(item.split(b"=", 1) for item in done.stdout.split(b"\0") if item)
    return ran, {k.decode(): v for k, v in values.items()}


def other_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line for line in lines if not line.startswith(tuple(f"export {n}=".encode() for n in OURS))]


# text of any kind, the line separators often, and sometimes a lone surrogate (a JSON \ud800)
ANY_TEXT = st.text(st.one_of(st.sampled_from(SEPARATORS + "'\"\\$`;#\x00 x\ud800"), st.characters(codec=None)),
                   max_size=30)
SAFE_TEXT = ANY_TEXT.map(lambda s: s.replace("\n", " ").replace("\0", " "))  # what another tool could quote


@st.composite
def other_tools_file(draw) -> tuple[bytes, dict[str, str]]:
    """An env file as other tools (and an earlier SessionStart) leave it: comments, their exports
    (values holding any separator but \\n, in single quotes, as shlex.quote writes them), our old lines."""
    lines, exports = [], {}
    for i in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["comment", "export", "ours", "blank"]))
        text = draw(SAFE_TEXT)
        if kind == "comment":
            lines.append(("# " + text).encode("utf-8", "surrogatepass"))
        elif kind == "export":
            exports[f"OTHER_{i}"] = text
            lines.append(f"export OTHER_{i}={shlex.quote(text)}".encode("utf-8", "surrogatepass"))
        elif kind == "ours":
            lines.append(f"export {draw(st.sampled_from(OURS))}=".encode() + session_start.env_value(text))
        else:
            lines.append(b"")
    data = b"\n".join(lines) + (b"\n" if lines and draw(st.booleans()) else b"")
    return data, exports


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sessions=st.lists(ANY_TEXT, min_size=1, max_size=3), existing=other_tools_file())
def test_sourcing_the_env_file_sets_our_values_and_runs_nothing(tmp_path_factory, sessions, existing):
    work = tmp_path_factory.mktemp("env")
    path = work / "sessionstart-hook-0.sh"
    data, exports = existing
    path.write_bytes(data)
    for sid in sessions:  # startup, then resumes: each rewrites the file
        values = {"LCM_SCRIPTS": str(ROOT / "scripts"), "LCM_SESSION_ID": sid, "LCM_DB": str(work / "v é.db")}
        session_start.write_env_file(str(path), values)
    written = path.read_bytes()
    assert other_lines(written) == other_lines(data)  # byte for byte, blank lines included
    ran, got = source(path, [*OURS, *exports])
    assert all(command.startswith(b"export ") for command in ran), ran
    assert len(ran) == len([line for line in written.split(b"\n") if line.startswith(b"export ")])
    expected = {name: value.encode("utf-8", "surrogatepass") for name, value in values.items() if "\0" not in value}
    expected.update({name: value.encode("utf-8", "surrogatepass") for name, value in exports.items()})
    assert got == expected


def test_a_line_separator_in_a_session_id_or_another_tools_line_runs_nothing(tmp_path):
    """The reported case: Python's splitlines() split at U+2028 where bash does not, so the rewrite
    on resume turned the rest of a quoted value, or of a comment, into a command of its own."""
    path = tmp_path / "env.sh"
    path.write_bytes("# set up by another tool\u2028touch ran-comment\n".encode())
    sid = "s\u2028touch ran-session #"
    for _ in range(2):
        session_start.write_env_file(str(path), {"LCM_SESSION_ID": sid})
    ran, got = source(path, ["LCM_SESSION_ID"])
    assert got == {"LCM_SESSION_ID": sid.encode()} and all(c.startswith(b"export ") for c in ran)
    assert path.read_bytes().startswith("# set up by another tool\u2028touch ran-comment\n".encode())
    assert not list(tmp_path.glob("ran-*"))


def test_the_file_keeps_its_mode_and_a_symlink_stays_a_symlink(tmp_path):
    target = tmp_path / "real" / "env.sh"
    target.parent.mkdir()
    target.write_bytes(b"export KEEP=1")  # no final newline
    target.chmod(0o640)
    link = tmp_path / "link.sh"
    link.symlink_to(target)
    session_start.write_env_file(str(link), {"LCM_SESSION_ID": "abc"})
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"export KEEP=1\nexport LCM_SESSION_ID='abc'\n"
    assert target.stat().st_mode & 0o777 == 0o640
    fresh = tmp_path / "new" / "env.sh"
    session_start.write_env_file(str(fresh), {"LCM_SESSION_ID": "abc"})
    assert fresh.stat().st_mode & 0o777 == 0o600


def test_an_env_file_that_is_a_fifo_is_left_alone(tmp_path):
    fifo = tmp_path / "env.sh"
    os.mkfifo(fifo)
    session_start.write_env_file(str(fifo), {"LCM_SESSION_ID": "abc"})  # returns: no reader blocks
    assert fifo.is_fifo()
