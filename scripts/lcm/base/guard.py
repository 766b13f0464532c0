"""The delegation guard: a sub-agent may start another only when it says what it hands off
and what it keeps, so delegation chains cannot grow without bound.

The depth travels in the environment: every lcm sub-agent runs with LCM_SUBAGENT=1 and
LCM_DELEGATION_DEPTH one more than its parent's. The root agent (depth 0, no LCM_SUBAGENT)
is never refused. Past MAX_DELEGATION_DEPTH nothing starts another sub-agent, whatever it says.
"""
from __future__ import annotations

import os

from lcm.base.config import get as config
from lcm.base.errors import LcmError

TYPE_CHECKING = False
if TYPE_CHECKING:  # names for annotations only
    import argparse


# The deepest sub-agent lcm starts. The seeds give the sub-agent of expand_query the low-level
# expand only ("preventing recursive sub-agent spawning"): one level below the main agent. The
# skill's rule lets a sub-agent that names its delegated scope and kept work start one more,
# so a chain is main agent -> sub-agent -> sub-agent, and a third level is refused.
MAX_DELEGATION_DEPTH = 2


def delegation_depth(environ: dict | None = None) -> int:
    env = os.environ if environ is None else environ
    raw = env.get("LCM_DELEGATION_DEPTH", "0").strip() or "0"
    try:
        depth = int(raw)
    except ValueError:
        raise LcmError(f"invalid LCM_DELEGATION_DEPTH={raw!r}: expected an integer >= 0",
                       "unset LCM_DELEGATION_DEPTH; lcm sets it for its own sub-agents") from None
    if depth < 0:
        raise LcmError(f"invalid LCM_DELEGATION_DEPTH={raw!r}: expected an integer >= 0",
                       "unset LCM_DELEGATION_DEPTH; lcm sets it for its own sub-agents")
    return depth


def in_subagent(environ: dict | None = None) -> bool:
    return bool(config("LCM_SUBAGENT", environ)) or delegation_depth(environ) > 0


def add_guard_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--delegated-scope", metavar="TEXT",
                   help="inside a sub-agent: the slice of work handed to the new sub-agent")
    p.add_argument("--kept-work", metavar="TEXT",
                   help="inside a sub-agent: the work this agent keeps doing itself")


def check_delegation(tool: str, delegated_scope: str | None, kept_work: str | None,
                     environ: dict | None = None, instead: str | None = None) -> None:
    """Refuse a sub-agent that delegates without naming both its delegated scope and kept work,
    and any delegation past MAX_DELEGATION_DEPTH."""
    if not in_subagent(environ):
        return
    depth_limit(tool, environ, instead)
    if (delegated_scope or "").strip() and (kept_work or "").strip():
        return
    hint = "do it yourself"
    if instead:
        hint += f": {instead}"
    hint += "; or pass both --delegated-scope and --kept-work if delegating is really needed"
    raise LcmError(f"{tool} refused inside a sub-agent without --delegated-scope and --kept-work", hint)


def depth_limit(tool: str, environ: dict | None = None, instead: str | None = None) -> None:
    """Refuse to start a sub-agent deeper than MAX_DELEGATION_DEPTH."""
    depth = delegation_depth(environ)
    if depth < MAX_DELEGATION_DEPTH:
        return
    raise LcmError(f"{tool} refused: this agent is already at delegation depth {depth}"
                   f" (LCM_DELEGATION_DEPTH={depth}); lcm starts sub-agents at most {MAX_DELEGATION_DEPTH} levels deep",
                   "do the work here" + (f": {instead}" if instead else "")
                   + "; a deeper chain of sub-agents is never allowed")


def child_env(environ: dict | None = None) -> dict:
    """Environment for a sub-agent lcm starts: marked as a sub-agent, one level deeper. (The
    commands that start agents check the limit first: check_delegation.)"""
    env = dict(os.environ if environ is None else environ)
    env["LCM_SUBAGENT"] = "1"
    env["LCM_DELEGATION_DEPTH"] = str(delegation_depth(env) + 1)
    return env
