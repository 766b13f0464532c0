"""The two map commands end to end: check the job, pick the backend, run the items, report.

Each returns the one JSON document its command prints (the summary, or the --dry-run estimate).
"""
from __future__ import annotations

import os
from pathlib import Path

import lcm.base.config
import lcm.vault.db
import lcm.base.errors
import lcm.base.llm
from lcm.base.errors import LcmError
from lcm.maps import backends, job as jobs, state as states
from lcm.maps.batches import BatchRun
from lcm.maps.tools import FileTools
from lcm.maps.worker import run_items

ASSUMED_ANSWER_TOKENS = 200   # per item, for the --dry-run estimate; --max-tokens is the ceiling


def needs_a_model(command: str) -> lcm.base.errors.ModelConfigError:
    """The error for a map tool when LCM_LLM resolves to none: its hint leads to a backend that
    works (never to LCM_LLM=none, which is what stops it)."""
    env = os.environ
    if lcm.base.config.get("LCM_LLM", env) == "none":
        return lcm.base.errors.ModelConfigError(
            f"{command} needs a model, and LCM_LLM=none turns models off",
            "unset LCM_LLM (or set LCM_LLM=anthropic with ANTHROPIC_API_KEY, or LCM_LLM=claude with Claude Code "
            "logged in), then run the same command again")
    if (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")) and not lcm.base.llm.sdk_available():
        return lcm.base.errors.ModelConfigError(
            f"{command} needs a model: ANTHROPIC_API_KEY is set but the anthropic package is not installed",
            "python3 -m pip install anthropic, then run the same command again")
    return lcm.base.errors.ModelConfigError(
        f"{command} needs a model, and none is reachable: no ANTHROPIC_API_KEY and no `claude` on PATH",
        "set ANTHROPIC_API_KEY (and pip install anthropic), or install Claude Code and log in (`claude`, then /login)")


def backend_problem(backend: str, command: str) -> lcm.base.errors.ModelConfigError | None:
    """Why the chosen backend cannot run a map job here, or None when it can: no backend; the
    anthropic backend without its package or credentials; the claude backend without `claude`
    on PATH. The hints lead to a backend that works, never to LCM_LLM=none (which stops maps)."""
    env = os.environ
    if backend == "none":
        return needs_a_model(command)
    if backend == "anthropic" and not lcm.base.llm.sdk_available():
        return lcm.base.errors.ModelConfigError(
            f"{command} uses the anthropic backend, and the anthropic package is not installed",
            "python3 -m pip install anthropic (or pip install -r requirements.txt); or set LCM_LLM=claude"
            " with Claude Code logged in")
    if backend == "anthropic" and not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")):
        return lcm.base.errors.ModelConfigError(
            f"{command} uses the anthropic backend, and no ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) is set",
            "export ANTHROPIC_API_KEY; or set LCM_LLM=claude with Claude Code logged in")
    if backend == "claude" and not lcm.base.llm.claude_executable(env):
        return lcm.base.errors.ModelConfigError(
            f"{command} uses the claude backend, and no `claude` is on PATH",
            "install Claude Code and log in (`claude`, then /login); or set ANTHROPIC_API_KEY and LCM_LLM=anthropic")
    return None


def _not_ready(document: dict, command: str) -> dict:
    """A --dry-run says whether the real run could start (`ready`), and if not, why and what to do,
    instead of estimating quietly."""
    error = backend_problem(document["backend"], command)
    if error is not None:
        document.update(ready=False, problem=error.message, hint=error.hint)
    else:
        document["ready"] = True
    return document


def _run(job: jobs.MapJob, opts: jobs.MapOptions, model: str, go) -> dict:
    """Open (or resume) the run in the vault, call go(state), write OUT and the summary."""
    conn = lcm.vault.db.connect(opts.db)
    state = states.RunState.open(conn, job, model, opts.resume)
    try:
        go(state)
    except LcmError:
        state.finish("failed")
        raise
    return states.report(state, job.output_path)


def llm_map(opts: jobs.MapOptions) -> dict:
    job = jobs.prepare(opts, "llm")
    job.options = {"max_attempts": opts.max_attempts, "max_tokens": opts.max_tokens, "batch": opts.batch}
    backend = lcm.base.llm.resolve_backend()
    model = opts.model or lcm.base.llm.resolve_model()
    requests = backends.Requests(job, model, opts.max_tokens, backend)
    if opts.dry_run:
        input_tokens = jobs.estimate_input_tokens(job, requests.system)
        answer = min(opts.max_tokens, ASSUMED_ANSWER_TOKENS)
        return _not_ready({
            "dry_run": True, "total": job.total, "backend": backend, "model": model, "batch": opts.batch,
            "estimated_input_tokens": input_tokens, "estimated_output_tokens": answer * job.total,
            "estimated_cost_usd": jobs.cost_usd(model, input_tokens, answer * job.total, opts.batch),
            "max_cost_usd": jobs.cost_usd(model, input_tokens, opts.max_tokens * job.total, opts.batch),
            "cost_note": f"list prices; output assumed {answer} tokens per item, max_cost_usd at --max-tokens",
            "first_request": lcm.base.llm.masked_params(requests.params(job.first_item, [])),
        }, "lcm_llm_map.py")
    problem = backend_problem(backend, "lcm_llm_map.py")
    if problem is not None:
        raise problem
    if opts.batch and backend != "anthropic":
        raise LcmError("--batch needs the anthropic backend (an API key)",
                       "set ANTHROPIC_API_KEY, or drop --batch to run the items one call each")

    def go(state) -> None:
        if backend == "anthropic":
            client = lcm.base.llm.anthropic_client(timeout=opts.timeout, max_retries=max(0, opts.api_retries))
            if opts.batch:
                BatchRun(job, state, client, requests, opts.max_attempts, opts.poll_interval).run()
                return
            start = backends.llm_api(client, requests, opts.timeout)
        else:
            start = backends.llm_claude(requests, job.schema, opts.timeout)
        run_items(job, state, start, concurrency=opts.concurrency, desc="llm_map", max_attempts=opts.max_attempts)
    return _run(job, opts, model, go)


def agentic_map(opts: jobs.MapOptions) -> dict:
    job = jobs.prepare(opts, "agentic")
    root = Path(opts.cwd).expanduser().resolve()
    if not root.is_dir():
        raise LcmError(f"--cwd {opts.cwd} is not a directory", "pass the directory the agents should work in")
    job.options = {"max_attempts": opts.max_attempts, "max_turns": opts.max_turns, "allow_write": opts.allow_write,
                   "cwd": str(root)}
    backend = lcm.base.llm.resolve_backend()
    model = opts.model or lcm.base.llm.resolve_model()
    if opts.dry_run:
        system = backends.agent_system_prompt(job.prompt, job.schema, root, opts.allow_write)
        first_turn = jobs.estimate_input_tokens(job, system)
        tools = (",".join(t["name"] for t in FileTools(root, opts.allow_write).specs()) if backend == "anthropic"
                 else backends.agent_cli_tools(opts.allow_write))
        return _not_ready({
            "dry_run": True, "total": job.total, "backend": backend, "model": model, "read_only": not opts.allow_write,
            "tools": tools, "estimated_first_turn_input_tokens": first_turn,
            "min_cost_usd": jobs.cost_usd(model, first_turn, ASSUMED_ANSWER_TOKENS * job.total),
            "cost_note": f"each item may take up to {opts.max_turns} turns, each re-sending its conversation; "
                         "expect several times min_cost_usd",
            "first_request": {"system": system, "prompt": jobs.item_text(job.first_item)},
        }, "lcm_agentic_map.py")
    problem = backend_problem(backend, "lcm_agentic_map.py")
    if problem is not None:
        raise problem

    def go(state) -> None:
        if backend == "anthropic":
            start = backends.agent_api(lcm.base.llm.anthropic_client(timeout=opts.timeout, max_retries=0), job, root,
                                       model, allow_write=opts.allow_write, max_turns=opts.max_turns,
                                       max_tokens=opts.max_tokens, timeout=opts.timeout, retries=opts.api_retries)
        else:
            start = backends.agent_claude(job, root, model, allow_write=opts.allow_write, max_turns=opts.max_turns,
                                          timeout=opts.timeout)
        run_items(job, state, start, concurrency=opts.concurrency, desc="agentic_map", max_attempts=opts.max_attempts)
    return _run(job, opts, model, go)
