"""A progress bar for a long run made by hand (an import, a bundle, packing, compaction, a map):
tqdm's when it is installed, else one line of the standard library redrawn in place; nothing
when the stream (stderr) is not a terminal (a log, a pipe, a hook). stdout stays the result."""
from __future__ import annotations

import sys
import time

REDRAW_SECONDS = 0.2  # the plain line is redrawn at most this often: a person reads no faster, a log of \r lines stays short


def bar(total: int, desc: str, unit: str, stream=None, initial: int = 0, leave: bool = True):
    """A bar of `total` `unit`s named `desc` on `stream` (stderr) when it is a terminal, else
    None. leave=False clears it when closed (a run that prints its own lines after it)."""
    stream = stream or sys.stderr
    if not total or not isatty(stream):
        return None
    try:
        from tqdm import tqdm  # here: only a run by hand shows it, and it costs an import
    except ImportError:
        return Line(total, desc, unit, stream, initial, leave)
    return tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream, leave=leave)


def isatty(stream) -> bool:
    """Whether `stream` is a terminal (False for a closed or replaced one)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class Line:
    """The bar without tqdm: `merge: 45% 45000/100000 msg, 12 s` redrawn after a carriage return,
    as tqdm's methods are called (update, set_postfix, close)."""

    def __init__(self, total: int, desc: str, unit: str, stream, initial: int = 0, leave: bool = True):
        self.total, self.desc, self.unit, self.stream, self.leave = total, desc, unit, stream, leave
        self.n, self.postfix, self.width = initial, "", 0
        self.started = self.drawn = time.monotonic()
        self._draw()

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self.drawn >= REDRAW_SECONDS or self.n >= self.total:
            self._draw()

    def set_postfix(self, refresh: bool = True, **values) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in values.items())
        if refresh:
            self._draw()

    def close(self) -> None:
        if self.stream is None:
            return
        self._draw()
        self._write("\n" if self.leave else "\r" + " " * self.width + "\r")
        self.stream = None

    def _draw(self) -> None:
        self.drawn = time.monotonic()
        done = min(self.n, self.total)
        text = (f"{self.desc}: {100 * done // self.total:3d}% {done}/{self.total} {self.unit},"
                f" {self.drawn - self.started:.0f} s" + (f", {self.postfix}" if self.postfix else ""))
        self._write("\r" + text + " " * max(self.width - len(text), 0))  # over a longer line before
        self.width = len(text)

    def _write(self, text: str) -> None:
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth failing for
            self.stream = None
