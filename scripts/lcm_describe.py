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

import sys

import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.readers.describe
import lcm.vault.grants
import lcm.vault.resolve
import lcm.base.shell
from lcm.base.errors import LcmError

TREE_LINES = 200  # text tree of a session stays readable; --json has everything


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
        w(f"... {len(lines) - TREE_LINES} more lines: "
          f"{lcm.base.shell.command_line('lcm_describe.py', '--session', doc['session_id'], '--json')}\n")
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
    ident = lcm.base.shell.Positional(doc["id"])
    if doc["type"] == "summary":
        full = ["--full"] if doc["kind"] == "condensed" else []
        w(f"\nNext: {lcm.base.shell.command_line('lcm_expand.py', ident, *full)}\n")
    elif doc["type"] == "file" and doc.get("has_more"):
        w(f"... more: {lcm.base.shell.command_line('lcm_describe.py', ident, '--content', '--offset', str(doc['next_offset']))}\n")
    elif doc["type"] == "file" and "content" not in doc:
        w(f"\nNext: {lcm.base.shell.command_line('lcm_describe.py', ident, '--content')}\n")


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
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    scope = lcm.vault.grants.scope(conn)
    if args.id is None:
        doc = lcm.readers.describe.describe_session(conn, lcm.vault.resolve.session(conn, args.session))
        lcm.cli.print_json(doc) if args.json else _print_session(doc)
        return 0
    doc = lcm.readers.describe.describe(conn, args.id, content=args.content, max_tokens=args.max_tokens, offset=args.offset,
                                scope=scope)
    lcm.cli.print_json(doc) if args.json else _print_node(doc)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())
