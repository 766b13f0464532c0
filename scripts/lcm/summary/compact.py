"""Compaction: leaf and condensed passes over a session's messages, building the summary DAG.

The command is scripts/lcm_compact.py; hooks and other commands import this module.
"""
from __future__ import annotations

import contextlib
import json
import sys
import time

import lcm.summary.dag
import lcm.base.config
import lcm.vault.db
import lcm.base.errors
import lcm.vault.schema
import lcm.vault.squeeze
import lcm.vault.store
import lcm.summary.extract
import lcm.base.llm
import lcm.base.mask
import lcm.base.progress
import lcm.summary.prompts
import lcm.base.text
import lcm.capture.transcript
from lcm.base.config import estimate_tokens
from lcm.base.errors import LcmError

TRUNCATE_TOKENS = 512
# the sampling temperature of each escalation level, as the seeds set them: level 1 (details
# kept) at 0.2, level 2 (bullets at half the target) steadier at 0.1. Sent where the backend
# takes one (lcm.base.llm.complete: an anthropic SDK before 1.0; the SDKs since, and the API
# version they send, refuse sampling parameters, and the claude CLI has no such option).
ESCALATION_TEMPERATURE = {1: 0.2, 2: 0.1}
# normal/aggressive: the model's (levels 1 and 2); truncated: level 3, the source cut short;
# extractive: written without a model by choice (LCM_LLM=none); fallback: the model failed during
# the pass, so the extractive text (or the cut) stands in until a later run upgrades it
LEVELS = ("normal", "aggressive", "truncated", "extractive", "fallback")
UPGRADABLE = ("extractive", "fallback")  # what --upgrade rewrites; a normal run upgrades 'fallback' only


# the DAG readers other modules call through lcm.summary.compact (hooks, status)


# ---------------------------------------------------------------------------
# Lock and due check
# ---------------------------------------------------------------------------



# ---------------------------------------------------------------------------
# Writing nodes
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _atomic(conn):
    """One node = one transaction (a savepoint inside a dry run's outer transaction)."""
    if conn.in_transaction:
        conn.execute("SAVEPOINT node")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO node")
            conn.execute("RELEASE node")
            raise
        conn.execute("RELEASE node")
    else:
        with lcm.vault.db.transaction(conn):
            yield


def _leaf_source(rows) -> tuple[str, str]:
    """(span, text the model reads) for a run of messages."""
    times = [r["created_at"] for r in rows if r["created_at"]]
    agent = rows[0]["thread"]
    span = (f"messages #{rows[0]['id']}-#{rows[-1]['id']} ({len(rows)} messages"
            + (f" of sub-agent {agent}" if agent else "")
            + (f", {min(times)} to {max(times)})" if times else ")"))
    source = "\n\n".join(
        f"[#{r['id']} {r['role']}{' sub-agent ' + r['thread'] if r['thread'] else ''} {r['created_at'] or ''}]\n"
        f"{r['content']}" for r in rows)
    return span, lcm.base.text.strip_ansi(source)  # terminal colour codes mean nothing to a summariser


def _condensed_source(depth: int, children) -> tuple[str, str]:
    """(span, text the model reads) for the children of a depth-`depth` node."""
    times = [t for c in children for t in (c["earliest_at"], c["latest_at"]) if t]
    descendants = sum(c["descendant_count"] for c in children)
    span = (f"{len(children)} depth-{depth - 1} summaries {children[0]['id']}..{children[-1]['id']}, "
            f"{descendants} messages" + (f", {min(times)} to {max(times)}" if times else ""))
    source = "\n\n".join(
        f"<summary id=\"{c['id']}\" depth=\"{c['depth']}\" earliest_at=\"{c['earliest_at'] or ''}\""
        f" latest_at=\"{c['latest_at'] or ''}\">\n{c['content']}\n</summary>" for c in children)
    return span, source


class Compactor:
    def __init__(self, conn, session_id: str, backend: str, model: str | None, max_calls: int,
                 breaker: lcm.base.llm.Breaker | None = None, deadline: float | None = None):
        self.conn, self.session_id, self.backend, self.model = conn, session_id, backend, model
        self.max_calls = max_calls
        self.breaker = breaker or lcm.base.llm.Breaker()  # shared by the sessions of one --all run
        self.deadline = deadline
        self.calls = 0
        self.levels = dict.fromkeys(LEVELS, 0)
        self.created: list[str] = []
        self.leaf_created = self.condensed_created = 0
        self.stopped: str | None = None
        self.tail = lcm.base.config.get("LCM_FRESH_TAIL_COUNT")
        self.chunk_cap = lcm.base.config.get("LCM_LEAF_CHUNK_TOKENS")
        self.leaf_target = lcm.base.config.get("LCM_LEAF_TARGET_TOKENS")
        self.condensed_target = lcm.base.config.get("LCM_CONDENSED_TARGET_TOKENS")
        self.leaf_min = min(lcm.base.config.get("LCM_LEAF_MIN_TOKENS"), self.chunk_cap)  # never above a chunk
        self.body: list[dict] | None = None
        self.max_depth = -1  # deepest node condense_pass makes (-1: no limit); an incremental run sets it
        self.upgraded = 0
        self.not_upgraded: list[str] = []

    # -- eligibility --------------------------------------------------------------
    def eligible_body(self) -> list[dict]:
        """The messages before the fresh tail in conversation order (read once per run)."""
        if self.body is None:
            self.body = lcm.summary.dag.body_rows(self.conn, self.session_id, self.tail)
        return self.body

    def raw_tokens(self) -> int:
        return sum(r["token_count"] for r in self.eligible_body() if not r["covered"])

    # -- summarising with escalation ----------------------------------------------
    def summarise(self, depth: int, source: str, source_tokens: int, span: str, previous: str,
                  extractive) -> tuple[str, str, str | None]:
        """(text, level, model): the first level whose text is shorter than source_tokens."""
        target = self.leaf_target if depth == 0 else self.condensed_target
        if self.backend == "none":
            text = extractive(min(target, source_tokens - 1))
            if text and estimate_tokens(text) < source_tokens:
                return text, "extractive", None
        elif self.breaker.failure is not None:  # the backend failed earlier in this pass: no new call
            return self._fallback(source, span, source_tokens, target, extractive)
        else:
            system = lcm.summary.prompts.prompt("system")
            for level, goal in ((1, target), (2, max(target // 2, 1))):
                temperature = ESCALATION_TEMPERATURE[level]
                if self.calls >= self.max_calls:
                    self.stopped = "call_limit"
                    break
                body = lcm.summary.prompts.fill(lcm.summary.prompts.prompt(lcm.summary.prompts.prompt_name(depth, level)),
                                        target_tokens=goal, span=span, previous=previous or "none", source=source)
                self.calls += 1
                try:
                    done = self.breaker.complete(system, body, max_tokens=2 * goal, model=self.model,
                                                 backend=self.backend, temperature=temperature,
                                                 **self._call_limits())
                except lcm.base.errors.ModelError:
                    return self._fallback(source, span, source_tokens, target, extractive)
                text = lcm.base.text.strip_ansi(done.text).strip()
                if text and estimate_tokens(text) < source_tokens:
                    return text, ("normal" if level == 1 else "aggressive"), done.model
        return lcm.summary.extract.truncate(source, span, min(TRUNCATE_TOKENS, source_tokens - 1)), "truncated", None

    def _fallback(self, source, span, source_tokens, target, extractive) -> tuple[str, str, str | None]:
        """The model failed (this call or earlier in the pass): the extractive summary, else the
        level-3 cut, at level 'fallback' so a later run with a working model upgrades it. An
        upgrade has nothing to fall back to (extractive is None): its node stays as it is."""
        if extractive is not None:
            text = extractive(min(target, source_tokens - 1))
            if text and estimate_tokens(text) < source_tokens:
                return text, "fallback", None
        return lcm.summary.extract.truncate(source, span, min(TRUNCATE_TOKENS, source_tokens - 1)), "fallback", None

    def _call_limits(self) -> dict:
        """A pass under a time budget (the PreCompact hook) gives each call what is left of it,
        with one retry, so a hung API cannot hold the pass far past its budget."""
        if self.deadline is None:
            return {}
        return {"timeout": max(1.0, min(lcm.base.llm.DEFAULT_TIMEOUT, (self.deadline - time.monotonic()) / 2)),
                "max_retries": 1}

    def _previous(self, depth: int, before_message_id: int) -> str:
        """The summary at this depth that ends last before the given message, in conversation order."""
        row = self.conn.execute(
            "SELECT s.content FROM summaries s JOIN messages l ON l.id = s.last_message_id"
            " WHERE s.session_id = ? AND s.depth = ? AND l.seq < (SELECT seq FROM messages WHERE id = ?)"
            " ORDER BY l.seq DESC LIMIT 1", (self.session_id, depth, before_message_id)).fetchone()
        return row["content"] if row else ""

    # -- passes -------------------------------------------------------------------
    def leaf_pass(self) -> str | None:
        anchors = dict(self.conn.execute("SELECT thread, anchor_id FROM threads WHERE session_id = ?",
                                         (self.session_id,)).fetchall())
        run = lcm.summary.dag.next_run(self.eligible_body(), anchors, self.leaf_min)
        if not run:
            return None
        rows = lcm.summary.dag.leaf_chunk(self.conn, self.session_id, run, self.chunk_cap, self.leaf_min,
                                  closed=run[0]["thread"] != "")
        times = [r["created_at"] for r in rows if r["created_at"]]
        span, source = _leaf_source(rows)
        # the input's size as the active context counts it (at least 1, for runs of empty results)
        source_tokens = max(sum(r["token_count"] for r in rows), 1)
        content, level, model = self.summarise(
            0, source, source_tokens, span, self._previous(0, rows[0]["id"]),
            lambda budget: lcm.summary.extract.summarize_messages(rows, span, budget))
        file_ids = sorted(set(lcm.summary.extract.FILE_ID.findall(source))) if "file_" in source else []
        node_id = lcm.base.config.new_id("sum")
        with _atomic(self.conn):
            self._insert(node_id, "leaf", 0, content, source_tokens, level, model,
                         rows[0]["id"], rows[-1]["id"], min(times) if times else None, max(times) if times else None,
                         len(rows), file_ids)
            self.conn.executemany("INSERT INTO summary_sources (summary_id, ord, message_id) VALUES (?, ?, ?)",
                                  [(node_id, i, r["id"]) for i, r in enumerate(rows)])
        done = {r["id"] for r in rows}
        for row in self.body:
            if row["id"] in done:
                row["covered"] = 1
        self.leaf_created += 1
        self._count(node_id, level)
        return node_id

    def condense_pass(self) -> str | None:
        group = lcm.summary.dag.condense_group(lcm.summary.dag.top_summaries(self.conn, self.session_id),
                                               lcm.summary.dag.gap_check(self.conn, self.session_id),
                                               max_depth=self.max_depth)
        if group is None:
            return None
        depth, children = group
        times = [t for c in children for t in (c["earliest_at"], c["latest_at"]) if t]
        descendants = sum(c["descendant_count"] for c in children)
        span, source = _condensed_source(depth, children)
        source_tokens = max(sum(c["token_count"] for c in children), 1)
        content, level, model = self.summarise(
            depth, source, source_tokens, span, self._previous(depth, children[0]["first_message_id"]),
            lambda budget: lcm.summary.extract.summarize_summaries([c["content"] for c in children], span, budget))
        file_ids = sorted({f for c in children for f in json.loads(c["file_ids"] or "[]")})
        node_id = lcm.base.config.new_id("sum")
        with _atomic(self.conn):
            last = max(children, key=lambda c: c["last_seq"])  # a sub-agent's leaf may end inside its call's
            self._insert(node_id, "condensed", depth, content, source_tokens, level, model,
                         children[0]["first_message_id"], last["last_message_id"],
                         min(times) if times else None, max(times) if times else None, descendants, file_ids)
            self.conn.executemany("INSERT INTO summary_sources (summary_id, ord, child_id) VALUES (?, ?, ?)",
                                  [(node_id, i, c["id"]) for i, c in enumerate(children)])
            ids = [c["id"] for c in children]
            updated = self.conn.execute(
                f"UPDATE summaries SET parent_id = ? WHERE parent_id IS NULL AND id IN ({','.join('?' * len(ids))})",
                [node_id, *ids]).rowcount
            if updated != len(ids):
                raise LcmError(f"summaries under {node_id} changed during compaction", "run lcm_compact.py again")
        self.condensed_created += 1
        self._count(node_id, level)
        return node_id

    def upgrade_pass(self, levels: tuple = UPGRADABLE) -> str | None:
        """Rewrite the oldest, shallowest summary at one of `levels` with the model, in place.

        Children go before their parents, so a parent is rebuilt from upgraded children. The
        node keeps its id, place, parent and sources (the DAG and every id that points at it
        stay valid); its text, level and model change, and the text it had is kept in
        summary_versions, so nothing written is lost. A model answer that cannot beat the
        source, or a model failure, leaves the node as it is.
        """
        skip = ",".join("?" * len(self.not_upgraded))
        node = self.conn.execute(
            f"SELECT * FROM summaries WHERE session_id = ? AND level IN ({','.join('?' * len(levels))})"
            + (f" AND id NOT IN ({skip})" if skip else "")
            + " ORDER BY depth, (SELECT seq FROM messages WHERE id = first_message_id) LIMIT 1",
            (self.session_id, *levels, *self.not_upgraded)).fetchone()
        if node is None:
            return None
        if node["kind"] == "leaf":
            rows = self.conn.execute(
                f"SELECT m.*, m.thread, {lcm.vault.store.LINE} AS line FROM summary_sources s JOIN messages m"
                " ON m.id = s.message_id WHERE s.summary_id = ? ORDER BY s.ord", (node["id"],)).fetchall()
            # the original line (packed or not) and the text (compressed or not), as every reader reads them
            rows = [{**dict(r), "raw": r["line"], "content": lcm.vault.squeeze.text(self.conn, r["content"])}
                    for r in rows]
            span, source = _leaf_source(rows)
            source_tokens = max(sum(r["token_count"] for r in rows), 1)
        else:
            children = self.conn.execute(
                "SELECT c.* FROM summary_sources s JOIN summaries c ON c.id = s.child_id WHERE s.summary_id = ?"
                " ORDER BY s.ord", (node["id"],)).fetchall()
            span, source = _condensed_source(node["depth"], children)
            source_tokens = max(sum(c["token_count"] for c in children), 1)
        content, level, model = self.summarise(node["depth"], source, source_tokens, span,
                                               self._previous(node["depth"], node["first_message_id"]), None)
        if level in ("truncated", "fallback"):
            self.not_upgraded.append(node["id"])
            return node["id"]
        content = lcm.base.text.safe_text(lcm.base.mask.mask(content))
        with _atomic(self.conn):
            self.conn.execute(
                "INSERT INTO summary_versions (summary_id, content, level, model, token_count, written_at, replaced_at)"
                " SELECT id, content, level, model, token_count, created_at, ? FROM summaries WHERE id = ?",
                (lcm.base.config.now_iso(), node["id"]))
            if lcm.vault.schema.fts_enabled(self.conn):  # external-content FTS: swap the indexed text by hand
                self.conn.execute("INSERT INTO summaries_fts (summaries_fts, rowid, content)"
                                  " SELECT 'delete', rowid, content FROM summaries WHERE id = ?", (node["id"],))
            self.conn.execute(
                "UPDATE summaries SET content = ?, token_count = ?, source_token_count = ?, level = ?, model = ?"
                " WHERE id = ? AND level IN ('extractive', 'fallback')",
                (content, estimate_tokens(content), source_tokens, level, model, node["id"]))
            if lcm.vault.schema.fts_enabled(self.conn):
                self.conn.execute("INSERT INTO summaries_fts (rowid, content) SELECT rowid, content FROM summaries"
                                  " WHERE id = ?", (node["id"],))
        self.upgraded += 1
        self.levels[level] += 1
        return node["id"]

    def _insert(self, node_id, kind, depth, content, source_tokens, level, model, first, last,
                earliest, latest, descendants, file_ids) -> None:
        content = lcm.base.mask.mask(content)  # a truncated summary of a vault filled before masking quotes it
        content = lcm.base.text.safe_text(content)  # a lone surrogate quoted from a line: SQLite takes UTF-8 only
        self.conn.execute(
            "INSERT INTO summaries (id, session_id, kind, depth, content, token_count, source_token_count, level,"
            " model, first_message_id, last_message_id, earliest_at, latest_at, descendant_count, file_ids,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (node_id, self.session_id, kind, depth, content, estimate_tokens(content), source_tokens, level, model,
             first, last, earliest, latest, descendants, json.dumps(file_ids), lcm.base.config.now_iso()))

    def _count(self, node_id: str, level: str) -> None:
        self.created.append(node_id)
        self.levels[level] += 1


# ---------------------------------------------------------------------------
# The verb
# ---------------------------------------------------------------------------

def compact(conn, session_id: str, *, mode: str = "incremental", until_under: int | None = None,
            dry_run: bool = False, time_budget: float | None = None, max_calls: int | None = None,
            breaker: lcm.base.llm.Breaker | None = None) -> dict:
    """Run one compaction of a session under its lock; returns the --json document.

    mode: "incremental" | "full" | "upgrade" (rewrite extractive and fallback summaries with the model).
    max_calls: the spend guard for this run (default LCM_MAX_SUMMARY_CALLS).
    A model that fails never fails the pass: its summaries are written at level 'fallback'
    (model_failure says why), and the breaker (shared across the sessions of one run) keeps
    every later call of the pass from trying again. A later run with a working model upgrades
    them first-come, within the same spend guard.
    """
    if conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (session_id,)).fetchone() is None:
        raise LcmError(f"no messages for session {session_id}", "list sessions with lcm_sessions.py, or ingest first")
    backend = lcm.base.llm.resolve_backend()
    model = None if backend == "none" else lcm.base.llm.resolve_model(conn, session_id)
    if mode == "upgrade" and backend == "none":
        raise LcmError("--upgrade rewrites extractive summaries with a model, and no model backend is available",
                       lcm.base.llm.NO_BACKEND_HINT.replace(", or set LCM_LLM=none for extractive summaries without a model", ""))
    if max_calls is None:
        max_calls = lcm.base.config.get("LCM_MAX_SUMMARY_CALLS")
    started = time.monotonic()
    with lcm.summary.dag.session_lock(session_id):
        if not dry_run and mode != "upgrade":
            rebuild_stale(conn, session_id)
        work = Compactor(conn, session_id, "none" if dry_run else backend, model, max_calls, breaker,
                         None if time_budget is None else started + time_budget)
        before = lcm.summary.dag.active_context_tokens(conn, session_id)
        if dry_run:
            conn.execute("BEGIN IMMEDIATE")
        try:
            if mode == "upgrade" and dry_run:
                work.upgraded = conn.execute("SELECT COUNT(*) FROM summaries WHERE session_id = ?"
                                             " AND level IN ('extractive', 'fallback')", (session_id,)).fetchone()[0]
            else:
                _passes(work, mode, until_under, started, time_budget)
            after = lcm.summary.dag.active_context_tokens(conn, session_id)
        finally:
            if dry_run:
                conn.execute("ROLLBACK")
    result = {"session_id": session_id, "leaf_created": work.leaf_created,
              "condensed_created": work.condensed_created, "levels": work.levels, "model_calls": work.calls,
              "tokens_before": before, "tokens_after": after, "mode": mode if until_under is None else "until_under",
              "backend": backend, "model": model, "max_model_calls": work.max_calls, "stopped": work.stopped,
              "upgraded": work.upgraded, "dry_run": dry_run, "created": [] if dry_run else work.created,
              "model_failure": work.breaker.failure.message if work.breaker.failure else None,
              "seconds": round(time.monotonic() - started, 3)}
    if dry_run:
        nodes = work.leaf_created + work.condensed_created
        result.update(model_calls=0, levels=dict.fromkeys(LEVELS, 0),
                      would_create={"leaf": work.leaf_created, "condensed": work.condensed_created},
                      model_calls_needed=0 if backend == "none" else f"{nodes}-{2 * nodes}")
        if mode == "upgrade":
            result.update(would_upgrade=work.upgraded, upgraded=0,
                          model_calls_needed=f"{work.upgraded}-{2 * work.upgraded}")
    return result


def fallback_summaries(conn, limit: int | None = None) -> list[dict]:
    """Summaries written without the model because it failed during their pass (level
    'fallback'), oldest first: what `lcm_compact.py --upgrade` (or any run with a working model)
    rewrites. For lcm_doctor.py."""
    rows = conn.execute("SELECT id, session_id, kind, depth, created_at FROM summaries WHERE level = 'fallback'"
                        " ORDER BY created_at, id" + (" LIMIT ?" if limit else ""), (limit,) if limit else ())
    return [dict(r) for r in rows]


def rebuild_stale(conn, session_id: str) -> int:
    """Drop a session's summaries made when its order was ingest order (summaries.built_on =
    'ingest': they mix a sub-agent's messages into the main thread's story), so this run rebuilds
    them in conversation order. Messages are untouched. Returns how many were dropped."""
    if conn.execute("SELECT 1 FROM summaries WHERE session_id = ? AND built_on = 'ingest' LIMIT 1",
                    (session_id,)).fetchone() is None:
        return 0
    with lcm.vault.db.transaction(conn):
        conn.execute("DELETE FROM summary_sources WHERE summary_id IN (SELECT id FROM summaries WHERE session_id = ?)",
                     (session_id,))
        return conn.execute("DELETE FROM summaries WHERE session_id = ?", (session_id,)).rowcount


def _passes(work: Compactor, mode: str, until_under: int | None, started: float, budget: float | None) -> None:
    def out_of_time() -> bool:
        if budget is not None and time.monotonic() - started > budget:
            work.stopped = "time_budget"
        if work.backend != "none" and work.calls >= work.max_calls:
            work.stopped = "call_limit"
        return work.stopped is not None

    if mode == "upgrade":
        while not out_of_time() and work.breaker.failure is None and work.upgrade_pass():
            pass
        return
    if until_under is not None:
        while lcm.summary.dag.active_context_tokens(work.conn, work.session_id) > until_under and not out_of_time():
            if work.leaf_pass() is None and work.condense_pass() is None:
                work.stopped = "nothing_left"
                break
        return
    if mode == "full":
        while not out_of_time() and work.leaf_pass():
            pass
    else:  # drain the backlog down to less than a chunk; a later turn resumes where this stops
        while work.raw_tokens() > work.chunk_cap and not out_of_time() and work.leaf_pass():
            pass
        # condense no deeper than the seeds' incrementalMaxDepth (0: leaves only; -1: no limit)
        work.max_depth = lcm.base.config.get("LCM_INCREMENTAL_MAX_DEPTH")
    while not out_of_time() and work.condense_pass():
        pass
    # summaries an earlier pass wrote while the model was failing: now that it may work, upgrade
    # them (after the due work, so a budgeted pass spends its time on what lowers the context first)
    while work.backend != "none" and work.breaker.failure is None and not out_of_time() \
            and work.upgrade_pass(levels=("fallback",)):
        pass


class Progress:
    """What a long compaction run (--all, --upgrade: up to LCM_MAX_SUMMARY_CALLS model calls)
    shows while it works, on stderr: a bar on a terminal (lcm.base.progress), else one line per
    session done (a log, a pipe)."""

    def __init__(self, total: int, stream=None):
        self.stream = stream or sys.stderr
        self.total, self.done = total, 0
        self.bar = lcm.base.progress.bar(total, "compact", "session", stream=self.stream)

    def session_done(self, result: dict) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.set_postfix(calls=result["model_calls"], refresh=False)
            self.bar.update(1)
            return
        made = (f"would create {result['would_create']['leaf']} leaf + {result['would_create']['condensed']} condensed"
                if result["dry_run"] else f"{result['leaf_created']} leaf + {result['condensed_created']} condensed"
                + (f", {result['upgraded']} upgraded" if result["upgraded"] else ""))
        try:
            self.stream.write(f"compact {self.done}/{self.total} {result['session_id'][:8]}: {made};"
                              f" {result['model_calls']} model calls ({result['backend']})\n")
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed (a detached run): progress is not worth failing for
            pass

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def sessions_to_compact(conn, session: str | None, every: bool = False) -> list[str]:
    """The sessions a compaction run works on: every stored one (every=True) or the one the
    resolver picks; a session of a project in LCM_EXCLUDE is left alone (refused when named)."""
    import lcm.capture.exclude
    import lcm.vault.resolve
    if every:
        sessions = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages ORDER BY session_id")]
        projects = dict(conn.execute("SELECT session_id, project FROM sessions").fetchall())
        return [s for s in sessions if not lcm.capture.exclude.excluded(projects.get(s))]
    session = lcm.vault.resolve.session(conn, session)
    row = conn.execute("SELECT project FROM sessions WHERE session_id = ?", (session,)).fetchone()
    if row and lcm.capture.exclude.excluded(row[0]):
        raise LcmError(f"session {session} belongs to {row[0]}, a project LCM_EXCLUDE keeps out of lcm",
                       "remove the glob that matches it from LCM_EXCLUDE to compact this session")
    return [session]
