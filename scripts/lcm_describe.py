"""Describe one node of the vault: a summary, a stored large file, a message, or a session's DAG.

Usage:
  python3 scripts/lcm_describe.py ID [--content] [--max-tokens N] [--offset N] [--json]
  python3 scripts/lcm_describe.py --session ID [--json]

ID is a summary (sum_...: content, kind, depth, time range, tokens, escalation level, model,
sources, parent, file ids), a stored file (file_...: name, type, size, exploration summary;
--content prints the content itself, bounded by --max-tokens from character --offset) or a
message uuid. --session alone shows the session's summary DAG as an indented tree and its
context items (top summaries and messages not yet summarised, in order).

Examples:
  python3 "$LCM_SCRIPTS/lcm_describe.py" sum_0123456789abcdef
  python3 "$LCM_SCRIPTS/lcm_describe.py" file_0123456789abcdef --content --max-tokens 2000
  python3 "$LCM_SCRIPTS/lcm_describe.py" --session "$LCM_SESSION_ID" --json
"""
from __future__ import annotations

import json
import re
import sys

import lcm.cli
import lcm.config
import lcm.db
import lcm.resolve
import lcm.expand
import lcm.files
import lcm.grants
import lcm.mask
from lcm.errors import LcmError

TREE_LINES = 200  # text tree of a session stays readable; --json has everything


def describe_summary(conn, row) -> dict:
    sources = conn.execute(
        "SELECT coalesce(m.uuid, s.child_id) FROM summary_sources s LEFT JOIN messages m ON m.id = s.message_id"
        " WHERE s.summary_id = ? ORDER BY s.ord", (row["id"],)).fetchall()
    return {"type": "summary", "id": row["id"], "session_id": row["session_id"], "kind": row["kind"],
            "depth": row["depth"], "earliest_at": row["earliest_at"], "latest_at": row["latest_at"],
            "token_count": row["token_count"], "source_token_count": row["source_token_count"],
            "level": row["level"], "model": row["model"], "parent_id": row["parent_id"],
            "descendant_count": row["descendant_count"], "source_ids": [r[0] for r in sources],
            "file_ids": json.loads(row["file_ids"] or "[]"), "created_at": row["created_at"],
            "content": lcm.mask.mask(row["content"])}


def describe_file(conn, file_id, content=False, max_tokens=4000, offset=0) -> dict:
    if not re.fullmatch(r"file_[0-9a-f]{16}", file_id):
        raise LcmError(f"malformed file id {file_id!r}", "file ids are file_ + 16 hex digits; find them with lcm_grep.py QUERY")
    row = conn.execute("SELECT * FROM files WHERE id = ?", (file_id,)).fetchone()
    if row is None:
        raise LcmError(f"no file {file_id} in this vault", "file references appear in messages: lcm_grep.py 'file_'")
    doc = {"type": "file", "id": row["id"], "name": row["name"], "kind": row["kind"],
           "byte_size": row["byte_size"], "token_count": row["token_count"], "session_id": row["session_id"],
           "message_uuid": row["message_uuid"], "created_at": row["created_at"],
           "exploration": lcm.mask.mask(row["exploration"])}
    if content:
        text = lcm.mask.mask(lcm.files.read_content(row))  # whole, so a page never cuts a secret
        end = offset + max_tokens * 4
        doc.update(content=text[offset:end], offset=offset, has_more=end < len(text),
                   next_offset=end if end < len(text) else None)
    return doc


def describe_message(conn, row) -> dict:
    cover = conn.execute("SELECT summary_id FROM summary_sources WHERE message_id = ?", (row["id"],)).fetchone()
    files = [r[0] for r in conn.execute("SELECT id FROM files WHERE message_uuid = ?", (row["uuid"],))]
    return {"type": "message", "id": row["uuid"], "uuid": row["uuid"], "session_id": row["session_id"],
            "role": row["role"], "created_at": row["created_at"], "token_count": row["token_count"],
            "covering_summary_id": cover[0] if cover else None, "file_ids": files,
            "content": lcm.mask.mask(row["content"])}


def describe_session(conn, session_id) -> dict:
    if not conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (session_id,)).fetchone() and \
            not conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone():
        raise LcmError(f"no session {session_id!r} in this vault", "list sessions with lcm_sessions.py, or ingest with lcm_ingest.py")
    summaries = []
    rows = conn.execute("SELECT s.* FROM summaries s JOIN messages f ON f.id = s.first_message_id"
                        " WHERE s.session_id = ? ORDER BY s.depth DESC, f.seq",
                        (session_id,)).fetchall()
    for row in rows:
        d = describe_summary(conn, row)
        summaries.append({k: d[k] for k in ("id", "kind", "depth", "parent_id", "source_ids", "token_count",
                                            "source_token_count", "level", "earliest_at", "latest_at")})
    return {"session_id": session_id, "summaries": summaries, "context_items": context_items(conn, session_id)}


def context_items(conn, session_id) -> list[dict]:
    """Top summaries and the messages no summary covers yet, in conversation order."""
    tops = conn.execute("SELECT s.id, f.seq FROM summaries s JOIN messages f ON f.id = s.first_message_id"
                        " WHERE s.session_id = ? AND s.parent_id IS NULL", (session_id,)).fetchall()
    loose = conn.execute(
        "SELECT m.uuid, m.seq FROM messages m LEFT JOIN summary_sources s ON s.message_id = m.id"
        " WHERE m.session_id = ? AND s.summary_id IS NULL", (session_id,)).fetchall()
    items = [(r[1] or 0, "summary", r[0]) for r in tops] + [(r[1] or 0, "message", r[0]) for r in loose]
    return [{"type": t, "id": i} for _pos, t, i in sorted(items)]


# ---------------------------------------------------------------------------
# Text output
# ---------------------------------------------------------------------------

def _print_session(doc) -> None:
    w = sys.stdout.write
    by_parent: dict = {}
    for s in doc["summaries"]:
        by_parent.setdefault(s["parent_id"], []).append(s)
    lines: list[str] = []

    def walk(node, indent):
        lines.append(f"{'  ' * indent}{node['id']} {node['kind']} d{node['depth']} {node['token_count']}t"
                     f" <- {len(node['source_ids'])} {'messages' if node['kind'] == 'leaf' else 'summaries'}"
                     f"  {(node['earliest_at'] or '')[:16]} .. {(node['latest_at'] or '')[:16]}  {node['level']}")
        for child in sorted(by_parent.get(node["id"], []), key=lambda c: doc["summaries"].index(c)):
            walk(child, indent + 1)

    for top in by_parent.get(None, []):
        walk(top, 0)
    w(f"session {doc['session_id']}: {len(doc['summaries'])} summaries\n")
    for line in lines[:TREE_LINES]:
        w(line + "\n")
    if len(lines) > TREE_LINES:
        w(f"... {len(lines) - TREE_LINES} more lines: lcm_describe.py --session {doc['session_id']} --json\n")
    items = doc["context_items"]
    n_msg = sum(1 for i in items if i["type"] == "message")
    w(f"context items: {len(items) - n_msg} summaries + {n_msg} messages not yet summarised\n")
    for item in items[:10]:
        w(f"  {item['type']} {item['id']}\n")
    if len(items) > 10:
        w(f"  ... {len(items) - 10} more (--json lists all)\n")


def _print_node(doc) -> None:
    w = sys.stdout.write
    skip = {"content", "exploration", "type", "id"}
    w(f"{doc['id']} ({doc['type']})\n")
    for key, value in doc.items():
        if key == "source_ids" and len(value) > 2:  # a leaf may cover hundreds: count and ends only
            w(f"  source_ids: {len(value)} ({value[0]} .. {value[-1]}; --json lists all)\n")
        elif key not in skip and value not in (None, [], ""):
            w(f"  {key}: {', '.join(value) if isinstance(value, list) else value}\n")
    if doc.get("exploration"):
        w(f"\n{doc['exploration']}\n")
    if "content" in doc:
        w(f"\n{doc['content']}\n")
    ident = lcm.cli.Positional(doc["id"])
    if doc["type"] == "summary":
        full = ["--full"] if doc["kind"] == "condensed" else []
        w(f"\nNext: {lcm.cli.command_line('lcm_expand.py', ident, *full)}\n")
    elif doc["type"] == "file" and doc.get("has_more"):
        w(f"... more: {lcm.cli.command_line('lcm_describe.py', ident, '--content', '--offset', str(doc['next_offset']))}\n")
    elif doc["type"] == "file" and "content" not in doc:
        w(f"\nNext: {lcm.cli.command_line('lcm_describe.py', ident, '--content')}\n")


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("id", nargs="?", metavar="ID", help="sum_..., file_... or a message uuid")
    p.add_argument("--session", metavar="ID", help="describe this session's DAG and context items")
    p.add_argument("--content", action="store_true", help="include a stored file's content (bounded)")
    p.add_argument("--max-tokens", type=lcm.cli.int_arg(1), default=4000, metavar="N", help="content bound (default 4000)")
    p.add_argument("--offset", type=lcm.cli.int_arg(), default=0, metavar="N", help="first character of --content")
    args = p.parse_args(argv)
    if args.max_tokens < 1 or args.offset < 0:
        raise LcmError("--max-tokens must be >= 1 and --offset >= 0", "e.g. --max-tokens 4000 --offset 0")
    conn = lcm.db.connect(args.db, create=False, readonly=True)
    scope = lcm.grants.scope(conn)
    if args.id is None:
        doc = describe_session(conn, lcm.resolve.session(conn, args.session))
        lcm.cli.print_json(doc) if args.json else _print_session(doc)
        return 0
    if args.id.startswith("file_"):
        doc = describe_file(conn, args.id, args.content, args.max_tokens, args.offset)
        if scope.limited:  # a stored file is read as part of its message
            scope.check_node(doc["message_uuid"] or args.id)
    else:
        kind, row = lcm.expand.resolve_node(conn, args.id)
        scope.check_node(args.id)
        doc = describe_summary(conn, row) if kind == "summary" else describe_message(conn, row)
        if kind == "message" and len(doc["content"]) > args.max_tokens * 4:
            doc["content"] = doc["content"][: args.max_tokens * 4] + (
                f"\n[... cut at {args.max_tokens} tokens: lcm_expand.py {args.id} --raw prints it all]")
    lcm.cli.print_json(doc) if args.json else _print_node(doc)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())
