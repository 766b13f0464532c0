"""What surrounds the vault, as lcm_doctor.py checks it: files killed imports left behind, where
Claude Code loads the plugin from, whether the hooks ran for the sessions recorded since, and
whether the model backend works now.

Each check returns a dict with a `status` ("ok", "warn" or "problem") and, for a problem, a
`hint` that leads somewhere new: never "run the same command again", never advice about a
setting that is not the cause.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import lcm.base.llm
import lcm.base.config
import lcm.vault.db
import lcm.base.mask
from lcm.base.errors import LcmError

HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "PostCompact",
               "SessionEnd")
# A transcript may gain lines after the session's last hook ran (Claude Code appends its title and
# summary lines on exit): only a session written this long after the newest stamp went unseen.
HOOK_SLACK_SECONDS = 600
LISTED = 20


def status(problem: bool, warn: bool = False) -> str:
    return "problem" if problem else "warn" if warn else "ok"


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# ---------------------------------------------------------------------------
# Stage directories and lock files
# ---------------------------------------------------------------------------

def stage_parents() -> list[str]:
    """Where bulk imports make their stage directories (lcm.capture.ingest: /dev/shm, else the temp dir)."""
    return sorted({"/dev/shm", tempfile.gettempdir()})


def stage_dirs() -> list[str]:
    """Stage directories of bulk imports whose process is gone."""
    return sorted(path for parent in stage_parents() for path in lcm.vault.db.stale_stages(parent))


def _idle(path: str) -> bool | None:
    """Whether nobody holds the flock on `path` (None: it cannot be opened). A lock is an flock
    the OS releases when its holder dies, so an idle file is only litter."""
    try:
        import fcntl
    except ImportError:
        return None  # no flock (Windows): whether a lock is held cannot be told
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def stale() -> dict:
    directory = lcm.base.config.lcm_home() / "locks"
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        names = []
    held, idle = [], []
    for name in names:
        state = _idle(str(directory / name))
        if state is not None:
            (idle if state else held).append(str(directory / name))
    dirs = stage_dirs()
    return {"status": status(bool(dirs)), "stage_dirs": dirs, "locks_held": held, "locks_idle": idle}


def remove_stale(doc: dict) -> list[str]:
    """Delete dead imports' stage directories and lock files still idle; returns what went."""
    removed = []
    for path in doc["stage_dirs"]:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    for path in doc["locks_idle"]:
        if _idle(path):  # still idle: nobody waits on this file
            try:
                os.remove(path)
                removed.append(path)
            except OSError:
                pass
    return removed


# ---------------------------------------------------------------------------
# The plugin and its hooks
# ---------------------------------------------------------------------------

def claude_dir() -> str:
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return os.path.expanduser(base) if base else os.path.join(os.path.expanduser("~"), ".claude")


def _json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _is_plugin(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "hooks", "hooks.json")) and os.path.isfile(
        os.path.join(directory, "scripts", "lcm_grep.py"))


def plugin_sources() -> list[dict]:
    """Each place Claude Code loads lcm from, and whether it is still there: an enabled lcm plugin
    (its install path, and the directory of a local marketplace, which Claude Code re-reads and
    newer versions load in place), a clone in the skills directory, hook commands in settings."""
    root = claude_dir()
    settings_path = os.path.join(root, "settings.json")
    settings = _json(settings_path)
    settings = settings if isinstance(settings, dict) else {}
    installed = _json(os.path.join(root, "plugins", "installed_plugins.json"))
    installed = installed.get("plugins") if isinstance(installed, dict) else None
    markets = _json(os.path.join(root, "plugins", "known_marketplaces.json"))
    markets = markets if isinstance(markets, dict) else {}
    found = []
    enabled = settings.get("enabledPlugins")
    for name, on in (enabled.items() if isinstance(enabled, dict) else ()):
        if on is not True or name.split("@")[0] != "lcm":
            continue
        where = {"what": f"plugin {name} (enabled in {settings_path})", "paths": [], "missing": []}
        records = installed.get(name) if isinstance(installed, dict) else None
        for record in records if isinstance(records, list) else ():
            if isinstance(record, dict) and isinstance(record.get("installPath"), str):
                where["paths"].append(record["installPath"])
        market = markets.get(name.partition("@")[2])
        source = market.get("source") if isinstance(market, dict) else None
        if isinstance(source, dict) and source.get("source") == "directory" and isinstance(source.get("path"), str):
            where["paths"].append(source["path"])  # a local clone: the plugin lives (or is copied from) there
        where["paths"] = list(dict.fromkeys(where["paths"]))  # a local clone is often both
        where["missing"] = [p for p in where["paths"] if not _is_plugin(p)]
        found.append(where)
    if "session_start.py" in json.dumps(settings.get("hooks", {})):
        found.append({"what": f"hook commands in {settings_path}", "paths": [], "missing": []})
    skills = os.path.join(root, "skills")
    for name in sorted(os.listdir(skills)) if os.path.isdir(skills) else []:
        if _is_plugin(os.path.join(skills, name)):
            found.append({"what": f"skills-directory plugin {os.path.join(skills, name)}", "paths": [
                os.path.join(skills, name)], "missing": []})
    return found


def _sessions_since(seconds: float | None) -> list[str]:
    """Main-session transcripts written after `seconds` (all when None), newest first: one per
    session (`<session id>.jsonl`; the `agent-*.jsonl` of sub-agents beside them are no session)."""
    projects = os.path.join(claude_dir(), "projects")
    found = []
    try:
        folders = list(os.scandir(projects))
    except OSError:
        return []
    for folder in folders:
        try:
            entries = list(os.scandir(folder.path)) if folder.is_dir() else []
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.name.endswith(".jsonl") and not entry.name.startswith("agent-") and entry.is_file():
                    mtime = entry.stat().st_mtime
                    if seconds is None or mtime > seconds:
                        found.append((mtime, entry.path))
            except OSError:
                continue
    return [path for _mtime, path in sorted(found, reverse=True)]


def _seconds(stamp) -> float | None:
    """An ISO time Claude Code wrote ("2026-11-27T18:20:02.123Z") as epoch seconds, or None."""
    if not isinstance(stamp, str) or len(stamp) < 19:
        return None
    import calendar
    try:
        return float(calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def installed_at(sources: list[dict]) -> float | None:
    """When lcm was installed (or last updated) where Claude Code loads it: the newest
    installedAt/lastUpdated of its plugin records, else the time Claude Code last wrote its
    plugin records or settings, else the skills-directory clone's time. None when not installed."""
    if not sources:
        return None
    root = claude_dir()
    times = []
    installed = _json(os.path.join(root, "plugins", "installed_plugins.json"))
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    for name, records in (plugins.items() if isinstance(plugins, dict) else ()):
        if name.split("@")[0] == "lcm" and isinstance(records, list):
            times += [_seconds(r.get(k)) for r in records if isinstance(r, dict) for k in ("installedAt", "lastUpdated")]
    times = [t for t in times if t]
    for group in ([os.path.join(root, "plugins", "installed_plugins.json"), os.path.join(root, "settings.json")],
                  [p for s in sources for p in s["paths"]]):
        if times:
            break
        for path in group:
            try:
                times.append(os.path.getmtime(path))
            except OSError:
                continue
    return max(times, default=None)


def hooks(conn) -> dict:
    """Where lcm is loaded from, when each hook last ran (the stamps hooks leave under
    $LCM_HOME/last-run) and last failed (lcm.log), and the sessions Claude Code recorded since
    the newest stamp (or, when no hook ever ran, since lcm was installed): a session no hook saw
    means the hooks are not running. Right after installing, before any session started, no hook
    has run and none should have: that is advice (start `claude` once), never a problem."""
    home = lcm.base.config.lcm_home()
    stamps = {}
    for event in HOOK_EVENTS:
        try:
            stamps[event] = os.path.getmtime(home / "last-run" / event)
        except OSError:
            stamps[event] = None
    last_error = {}
    try:
        with open(home / "lcm.log", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(" ", 3)
                if len(parts) == 4 and parts[1] in HOOK_EVENTS and "error:" in parts[3]:
                    last_error[parts[1]] = f"{parts[0]} {parts[3].strip()}"[:300]
    except OSError:
        pass
    sources = plugin_sources()
    newest = max((t for t in stamps.values() if t), default=None)
    install = installed_at(sources) if newest is None else None
    since = newest if newest is not None else install
    unseen = _sessions_since(since + HOOK_SLACK_SECONDS) if since is not None else []
    missing = [p for s in sources for p in s["missing"]]
    doc = {"installed": [s["what"] for s in sources], "sources": sources, "missing_sources": missing,
           "installed_at": iso(install) if install else None,
           "last_run": {e: iso(t) if t else None for e, t in stamps.items()}, "last_error": last_error,
           "unseen_sessions": len(unseen), "unseen_examples": unseen[:3],
           "last_ingest": conn.execute("SELECT max(updated_at) FROM transcripts").fetchone()[0] if conn else None}
    disabled = lcm.base.config.get("LCM_DISABLE") if os.environ.get("LCM_DISABLE") else False
    if missing:
        doc["problem"] = (f"Claude Code loads lcm from {missing[0]}, which no longer holds the plugin (moved or"
                          " deleted): nothing is captured")
        doc["hint"] = ("put the clone back there; or, from where the clone is now, run `claude plugin marketplace"
                       " add .` and `claude plugin install lcm@<marketplace>` (`claude plugin list` shows the error)")
    elif unseen:
        when = (f"since the last hook run ({iso(newest)}) that no lcm hook saw" if newest else
                f"since lcm was installed ({iso(install)}), and no lcm hook has run")
        doc["problem"] = f"Claude Code recorded {len(unseen)} session{'s' * (len(unseen) != 1)} {when}"
        doc["hint"] = ("LCM_DISABLE is set: unset it to capture again" if disabled else
                       "`claude plugin list` shows whether lcm is enabled and why it failed to load; "
                       "`claude --debug hooks` shows each hook run; meanwhile lcm_ingest.py --all stores"
                       " those sessions")
    elif sources and newest is None:
        doc["advice"] = "no session has started since lcm was installed: start `claude` once and the hooks capture from then on"
    doc["status"] = status("problem" in doc, not sources or newest is None or bool(last_error))
    return doc


# ---------------------------------------------------------------------------
# The model backend
# ---------------------------------------------------------------------------

def backend(probe: bool = True) -> dict:
    """The backend lcm would use now (as lcm.base.llm picks it from this environment), why, and whether
    it works: checked by probe_backend, at no cost, unless probe is False."""
    import lcm.base.llm
    try:
        chosen = lcm.base.llm.resolve_backend()
        choice = lcm.base.config.get("LCM_LLM")
    except LcmError as exc:
        return {"status": "problem", "backend": None, "reason": exc.message, "hint": exc.hint, "verified": False}
    key = bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))
    how = f"LCM_LLM={choice}" if choice != "auto" else "LCM_LLM=auto picked it"
    doc = {"backend": chosen, "reason": how, "verified": None, "hint": None}
    if key and choice == "auto" and chosen != "anthropic" and not lcm.base.llm.sdk_available():
        # a key is set, so the API is meant; the package is what is missing, not the key
        doc.update(status="problem", verified=False, detail="ANTHROPIC_API_KEY is set but the anthropic package is"
                   f" not installed for {sys.executable}", hint=f"{sys.executable} -m pip install -r requirements.txt"
                   " (in the lcm clone); or set LCM_LLM=claude to use your Claude Code login on purpose")
        return doc
    if chosen == "none":
        doc.update(status="warn", detail="summaries stay extractive until a model is available",
                   hint="unset LCM_LLM (or set it to auto) to let lcm use a model" if choice == "none" else
                   "export ANTHROPIC_API_KEY (with the anthropic package), or install Claude Code and run"
                   " `claude auth login`")
        return doc
    result = probe_backend(chosen) if probe else {"verified": None, "detail": "not probed", "hint": None}
    doc.update(verified=result["verified"], detail=result["detail"], hint=result["hint"])
    doc["status"] = status(doc["verified"] is False, doc["verified"] is None)
    if doc["verified"] is None:
        doc["detail"] += " (unverified)"
    return doc


# ---------------------------------------------------------------------------
# Probing a backend: does it work now, at no cost? (the one SDK request is lcm.base.llm.probe_key)
# ---------------------------------------------------------------------------

PROBE_TIMEOUT = 8.0  # seconds a probe may take: doctor runs in a terminal, someone waits for it


def probe_backend(backend: str, timeout: float = PROBE_TIMEOUT) -> dict:
    """Whether `backend` would work now, checked by a request that costs nothing: for anthropic the
    SDK is imported and the key lists one model (GET /v1/models); for claude the CLI reports its
    login (`claude auth status`, offline). Returns {"verified": True | False | None, "detail",
    "hint"}: False is a failure the person must act on, None a check that could not be made."""
    if backend == "anthropic":
        return _probe_anthropic(timeout)
    if backend == "claude":
        return _probe_claude(timeout)
    return {"verified": None, "detail": "no model is used", "hint": None}


def _probe_anthropic(timeout: float) -> dict:
    if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
        return {"verified": False, "detail": "neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set",
                "hint": "export ANTHROPIC_API_KEY (console.anthropic.com/settings/keys), or set LCM_LLM=claude"
                        " to use your Claude Code login"}
    outcome, detail = lcm.base.llm.probe_key(timeout)
    base = lcm.base.mask.mask(os.environ.get("ANTHROPIC_BASE_URL") or "api.anthropic.com")  # may hold user:password@
    if outcome == "package":
        return {"verified": False, "detail": f"the anthropic package cannot be used by {sys.executable} ({detail})",
                "hint": f"{sys.executable} -m pip install -r requirements.txt (the key is set: only the package"
                        " is missing); or set LCM_LLM=claude to use your Claude Code login"}
    if outcome == "refused":
        return {"verified": False, "detail": f"{base} refused the key ({detail})",
                "hint": "the key is wrong, revoked or for another organisation: create a new one at"
                        " console.anthropic.com/settings/keys and export it as ANTHROPIC_API_KEY; or unset it and"
                        " set LCM_LLM=claude to use your Claude Code login"}
    if outcome == "status":  # a gateway without the models endpoint, an outage
        return {"verified": None, "detail": f"{base} answered {detail} to the free models request,"
                                            " so the key is unverified", "hint": None}
    if outcome == "unreachable":
        return {"verified": None, "detail": f"cannot reach {base} ({detail}), so the key is unverified",
                "hint": "check the network or ANTHROPIC_BASE_URL"}
    return {"verified": True, "detail": f"{base} accepted the key", "hint": None}


def _probe_claude(timeout: float) -> dict:
    exe = lcm.base.llm.claude_executable()
    if not exe:
        return {"verified": False, "detail": "the claude CLI is not on PATH",
                "hint": "install Claude Code (npm install -g @anthropic-ai/claude-code) or add its directory to"
                        " PATH; or export ANTHROPIC_API_KEY to use the API"}
    try:
        proc = subprocess.run([exe, "auth", "status", "--json"], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"verified": None, "detail": f"`claude auth status` did not answer ({type(exc).__name__})",
                "hint": None}
    try:
        state = json.loads(proc.stdout)
    except ValueError:
        state = None
    if not isinstance(state, dict) or "loggedIn" not in state:  # a CLI older than `auth status`
        return {"verified": None, "detail": f"{exe} does not report its login (an older Claude Code?)",
                "hint": "update Claude Code to check its login here"}
    if state["loggedIn"] is not True:
        return {"verified": False, "detail": f"{exe} is not logged in",
                "hint": "run `claude auth login` in a terminal (or start `claude` and type /login); or export"
                        " ANTHROPIC_API_KEY to use the API"}
    how = state.get("authMethod") or "unknown method"
    return {"verified": True, "detail": f"{exe} is logged in ({how})", "hint": None}
