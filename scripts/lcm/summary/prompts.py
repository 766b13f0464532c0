"""Prompt texts for the summariser, read from prompts.md beside this module (their only home,
shipped as package data, so an installed `lcm` has them too).

Each prompt is the first ```text block under a `## name` heading; `{{placeholder}}` marks
are filled by `fill`. Stdlib only.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from lcm.base.errors import LcmError

PROMPTS_PATH = Path(__file__).resolve().parent / "prompts.md"
_SECTION = re.compile(r"^## (\S+)\s*\n(.*?)(?=^## |\Z)", re.M | re.S)
_BLOCK = re.compile(r"^```text\n(.*?)^```", re.M | re.S)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@lru_cache(maxsize=None)
def load_prompts(path: str | None = None) -> dict[str, str]:
    """{heading: prompt text} for every heading that has a text block."""
    source = Path(path) if path else PROMPTS_PATH
    try:
        markdown = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise LcmError(f"cannot read the prompts file {source}: {exc.strerror}",
                       "reinstall lcm: prompts.md ships inside the package (lcm/summary/prompts.md)") from None
    prompts = {}
    for name, body in _SECTION.findall(markdown):
        block = _BLOCK.search(body)
        if block:
            prompts[name] = block.group(1).strip()
    return prompts


def prompt(name: str) -> str:
    prompts = load_prompts()
    if name not in prompts:
        raise LcmError(f"{PROMPTS_PATH} has no prompt `{name}`",
                       "restore the file from the lcm release; the code expects headings "
                       "system, leaf, leaf-aggressive, condensed-d1/d2/d3, condensed-aggressive")
    return prompts[name]


def fill(template: str, **values) -> str:
    """Replace {{name}} marks; one pass, so braces inside the values stay as they are."""
    def replace(match: re.Match) -> str:
        key = match.group(1)
        return str(values[key]) if key in values else match.group(0)
    return _PLACEHOLDER.sub(replace, template)


def prompt_name(depth: int, level: int) -> str:
    """The prompt for a node at `depth` (0 = leaf) and escalation `level` (1 or 2)."""
    if depth == 0:
        return "leaf" if level == 1 else "leaf-aggressive"
    if level != 1:
        return "condensed-aggressive"
    return f"condensed-d{min(depth, 3)}"
