"""The bar of a long run (lcm.base.progress): a person on a terminal sees progress with the
system python too (no tqdm), and a log or a pipe gets no carriage returns at all."""
from __future__ import annotations

import io
import sys

import lcm.base.progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `from tqdm import tqdm` raises ImportError


def test_without_tqdm_a_terminal_gets_one_line_redrawn_in_place_ending_at_the_total(monkeypatch):
    without_tqdm(monkeypatch)
    screen = Terminal()
    bar = lcm.base.progress.bar(100_000, "merge", "msg", stream=screen)
    assert isinstance(bar, lcm.base.progress.Line)
    for _ in range(1000):
        bar.update(100)
    bar.close()
    drawn = screen.getvalue()
    assert drawn.endswith("\n") and drawn.count("\n") == 1         # one line, left on screen
    frames = drawn.rstrip("\n").split("\r")[1:]
    assert len(frames) < 20                                        # throttled: not one write per update
    assert frames[0].startswith("merge:   0% 0/100000 msg")
    assert frames[-1].startswith("merge: 100% 100000/100000 msg")


def test_a_shorter_frame_covers_the_longer_one_before_and_leave_false_clears_the_line(monkeypatch):
    without_tqdm(monkeypatch)
    screen = Terminal()
    bar = lcm.base.progress.bar(3, "compact", "session", stream=screen, leave=False)
    bar.set_postfix(calls=12345678)
    bar.set_postfix(calls=1)
    frames = screen.getvalue().split("\r")[1:]
    assert len(frames[-1]) == len(frames[-2])                       # padded: no stale "5678" left behind
    bar.close()
    assert screen.getvalue().endswith("\r") and "\n" not in screen.getvalue()


def test_not_a_terminal_gets_no_bar_and_tqdm_draws_it_where_installed(monkeypatch):
    assert lcm.base.progress.bar(100, "pack", "line", stream=io.StringIO()) is None    # a log, a pipe
    assert lcm.base.progress.bar(0, "pack", "line", stream=Terminal()) is None         # nothing to do
    try:
        import tqdm
    except ImportError:
        return
    screen = Terminal()
    bar = lcm.base.progress.bar(10, "pack", "line", stream=screen)
    assert isinstance(bar, tqdm.tqdm)
    bar.update(10)
    bar.close()
    assert "pack: 100%" in screen.getvalue() and "10/10" in screen.getvalue()
