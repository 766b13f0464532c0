"""The viewer's pages, rendered as HTML from a read-only connection. Every string a page shows is
masked (lcm.base.mask) and escaped; nothing here can write to the vault."""
from __future__ import annotations

import html
import json
import re
from urllib.parse import quote, urlencode

import lcm.base.mask
import lcm.search.engine
import lcm.search.query
import lcm.readers.sessions
import lcm.vault.store
from lcm.base.errors import LcmError
from lcm.base.text import content_blocks, one_line, strip_ansi

SESSIONS_PAGE = 50     # sessions a list page shows
MESSAGES_PAGE = 200    # messages a session page shows: a long session pages
SEARCH_RESULTS = 50
DAG_NODES = 3000       # summaries drawn at most; a larger DAG draws its upper levels
NODE_W, NODE_H, GAP_X, ROW_H = 170, 50, 8, 86
TITLE_CHARS = 26       # of a summary's title on its DAG node (the node's tooltip and panel say the rest)


class NotFound(LcmError):
    """A page for an id the vault does not hold: 404."""


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def shown(text) -> str:
    """Masked, then escaped: the only way text reaches a page (what a person typed included: a
    search for a key must not print the key)."""
    return esc(lcm.base.mask.mask(strip_ansi("" if text is None else str(text))))


def link(path: str, **query) -> str:
    """A link relative to the viewer's root (`/s/ID` -> `s/ID`, `/` -> `./`): the page's <base>
    names the root, which holds the viewer's capability (lcm.view.server), so no link spells it."""
    query = {k: v for k, v in query.items() if v not in (None, "", 0)}
    return esc((path.lstrip("/") or "./") + ("?" + urlencode(query) if query else ""))


def layout(title: str, body: str, *, query: str = "", wide: bool = False, root: str = "/") -> str:
    """A whole page; `root` is the viewer's root path (its capability), the base of every link."""
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><base href='{esc(root)}'>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        f"<title>{shown(title)} - lcm</title><link rel=stylesheet href='static/app.css'>"
        "<script src='static/app.js' defer></script></head><body>"
        "<header><a class=brand href='./'>lcm</a><a href='./'>Sessions</a>"
        f"<form action='search' method=get role=search><input type=search name=q value='{shown(query)}'"
        " placeholder='Search every session' aria-label=Search> <button>Search</button></form></header>"
        f"<main{' class=wide' if wide else ''}>{body}</main></body></html>")


def _when(value) -> str:
    """A time to the minute, kept on one line (a table cell or a card's header never breaks it)."""
    return f"<span class=when>{esc((value or '')[:16].replace('T', ' '))}</span>" if value else ""


# -- markdown -----------------------------------------------------------------------------------
# Claude writes markdown. A small renderer, no script library: the text is masked and escaped
# first, then only our own tags are added around escaped text (headings, lists, code, emphasis);
# a link is shown as its text and its address, never as a live link.

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
NUMBERED = re.compile(r"^(\s*)(\d{1,4})[.)]\s+(.*)$")
INLINE = re.compile(r"`([^`\n]+)`|\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__"
                    r"|(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"
                    r"|\[([^\]\n]+)\]\(([^)\s]+)\)")


def _inline(escaped: str) -> str:
    """Emphasis, code spans and links of one escaped line (code spans are left as they are)."""
    def piece(m):
        code, strong, strong2, em, em2, label, url = m.groups()
        if code is not None:
            return f"<code>{code}</code>"
        if strong is not None or strong2 is not None:
            return f"<strong>{_inline(strong if strong is not None else strong2)}</strong>"
        if em is not None or em2 is not None:
            return f"<em>{em if em is not None else em2}</em>"
        return f"{label} <span class=url>({url})</span>"
    return INLINE.sub(piece, escaped)


def markdown_html(text) -> str:
    """Markdown as safe HTML: headings, bullet and numbered lists, fenced code, emphasis, code
    spans; everything else a paragraph. Masked and escaped before any tag is added."""
    lines = shown(text).split("\n")
    out, para, lists = [], [], []  # lists: the open list tags, innermost last

    def flush_para():
        if para:
            out.append("<p>" + "<br>".join(_inline(line) for line in para) + "</p>")
            para.clear()

    def close_lists(to: int = 0):
        while len(lists) > to:
            out.append(f"</{lists.pop()}>")

    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            flush_para()
            close_lists()
            fence = FENCE.match(line).group(1)
            code = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(fence):
                code.append(lines[i])
                i += 1
            out.append("<pre class=code><code>" + "\n".join(code) + "</code></pre>")
            i += 1
            continue
        heading, bullet, numbered = HEADING.match(line), BULLET.match(line), NUMBERED.match(line)
        if heading:
            flush_para()
            close_lists()
            level = min(len(heading.group(1)) + 2, 6)  # a message's heading sits below the page's
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif bullet or numbered:
            flush_para()
            m = bullet or numbered
            tag = "ul" if bullet else "ol"
            depth = min(len(m.group(1).expandtabs(4)) // 2, 3) + 1
            if len(lists) > depth:
                close_lists(depth)
            if len(lists) == depth and lists[-1] != tag:
                close_lists(depth - 1)
            while len(lists) < depth:
                lists.append(tag)
                start = int(numbered.group(2)) if numbered and len(lists) == depth else 1
                out.append(f"<{tag} start={start}>" if start != 1 else f"<{tag}>")
            out.append(f"<li>{_inline(m.group(m.lastindex))}</li>")
        elif not line.strip():
            flush_para()  # a list goes on past a blank line (a loose list); a paragraph ends it
        else:
            if lists and line.startswith((" ", "\t")):  # a list item's continued line
                out[-1] = out[-1][:-len("</li>")] + "<br>" + _inline(line.strip()) + "</li>"
            else:
                close_lists()
                para.append(line)
        i += 1
    flush_para()
    close_lists()
    return "<div class=md>" + "".join(out) + "</div>"


# -- sessions -----------------------------------------------------------------------------------

def sessions_page(conn, params: dict, root: str = "/") -> str:
    project, text = params.get("project", ""), params.get("q", "")
    page = _page_number(params)
    rows, total = lcm.readers.sessions.list_sessions(conn, project=project or None, text=text or None,
                                             limit=SESSIONS_PAGE, offset=page * SESSIONS_PAGE)
    body = [f"<h1>Sessions</h1><form class=filters method=get action='./'>"
            f"<input type=text name=q value='{shown(text)}' placeholder='Title contains' aria-label='Title contains'>"
            f"<input type=text name=project value='{shown(project)}' placeholder='Project directory'"
            " aria-label='Project directory'><button>Filter</button></form>",
            f"<p class=muted>{total} session{'s' if total != 1 else ''}</p>"]
    if rows:
        body.append("<table><thead><tr><th>Title</th><th>Project</th><th>Last active</th>"
                    "<th>Messages</th><th>Summaries</th></tr></thead><tbody>")
        for s in rows:
            body.append(f"<tr><td><a class=session href='{link('/s/' + quote(s['id'], safe=''))}'>{shown(s['title'])}</a>"
                        f"<div class=meta>{esc(s['id'][:8])}</div></td><td>{shown(s['project'])}</td>"
                        f"<td>{_when(s['last_at'])}</td><td class=num>{s['messages']}</td>"
                        f"<td class=num>{s['summaries']}</td></tr>")
        body.append("</tbody></table>")
    body.append(_pager("/", page, total, SESSIONS_PAGE, q=text, project=project))
    return layout("Sessions", "".join(body), root=root)


def _page_number(params: dict) -> int:
    raw = params.get("page", "0")
    return int(raw) if raw.isdigit() and len(raw) < 7 else 0


def _pager(path: str, page: int, total: int, size: int, **query) -> str:
    parts = []
    if page:
        parts.append(f"<a rel=prev href='{link(path, page=page - 1, **query)}'>Newer</a>")
    if (page + 1) * size < total:
        parts.append(f"<a rel=next href='{link(path, page=page + 1, **query)}'>Older</a>"
                     if path == "/" else f"<a rel=next href='{link(path, page=page + 1, **query)}'>Next page</a>")
    return f"<nav class=pager>{''.join(parts)}</nav>" if parts else ""


# -- a session's conversation -------------------------------------------------------------------

def _session_row(conn, session_id: str):
    row = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        raise NotFound(f"no session {session_id!r}")
    return row


def session_page(conn, session_id: str, params: dict, root: str = "/") -> str:
    row = _session_row(conn, session_id)
    total = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    page = _page_number(params)
    at = params.get("at")
    if at:  # the page holding that message, so a search hit's link lands on it
        found = conn.execute("SELECT seq FROM messages WHERE uuid = ? AND session_id = ?", (at, session_id)).fetchone()
        if found:
            before = conn.execute("SELECT count(*) FROM messages WHERE session_id = ? AND seq < ?",
                                  (session_id, found[0])).fetchone()[0]
            page = before // MESSAGES_PAGE
    rows = conn.execute(f"SELECT id, uuid, role, type, subtype, created_at, thread, is_meta, model, {lcm.vault.store.LINE} AS raw"
                        " FROM messages WHERE session_id = ? ORDER BY seq LIMIT ? OFFSET ?",
                        (session_id, MESSAGES_PAGE, page * MESSAGES_PAGE)).fetchall()
    title = lcm.readers.sessions.title(conn, session_id, row["title"], total)
    sid = quote(session_id, safe="")
    body = [f"<h1>{shown(title)}</h1><p class=meta>{esc(session_id)} &middot; {shown(row['project'])} &middot; "
            f"{_when(row['first_at'])} to {_when(row['last_at'])} &middot; {total} messages &middot; "
            f"<a href='{link('/s/' + sid + '/dag')}'>Summary DAG</a></p>",
            _pager(f"/s/{sid}", page, total, MESSAGES_PAGE), conversation(rows),
            _pager(f"/s/{sid}", page, total, MESSAGES_PAGE)]
    return layout(title, "".join(body), root=root)


def hook_status(row, entry: dict) -> str | None:
    """The one-line text of a hook's status line (Claude Code writes "Running PostToolUse:Edit...",
    then "... completed successfully", a Stop hook summary, the turn's duration: several per tool
    call), else None for a system line worth a card of its own."""
    if row["type"] != "system" or row["role"] == "user":
        return None
    subtype = entry.get("subtype")
    if subtype == "stop_hook_summary":
        hooks = entry.get("hookInfos") if isinstance(entry.get("hookInfos"), list) else []
        names = ", ".join(one_line(str(h.get("command", "")), 60) for h in hooks if isinstance(h, dict))
        return f"Stop hooks ran: {names}" if names else "Stop hooks ran"
    if subtype == "turn_duration" and isinstance(entry.get("durationMs"), (int, float)):
        return f"Turn took {entry['durationMs'] / 1000:.0f} s"
    content = entry.get("content")
    if entry.get("level") == "info" and isinstance(content, str) and (
            content.startswith("Running ") or "] completed" in content or "] failed" in content
            or " hook" in content.lower()):
        return one_line(strip_ansi(content), 200)
    return None


def conversation(rows) -> str:
    """Messages in order: each sub-agent run folded under a <details>, each tool call collapsed
    with its result (the result-only user lines are shown inside their call, not again). Hook
    status lines go into the card of the tool call they name (toolUseID), else into one collapsed
    line per run of them, so they never outnumber the conversation."""
    entries = [(r, _entry(r["raw"])) for r in rows]
    results = {}
    for _row, entry in entries:
        for block in content_blocks(entry):
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                results[block["tool_use_id"]] = block
    calls = {b.get("id") for _r, e in entries for b in content_blocks(e) if b.get("type") == "tool_use"}
    statuses: dict[str, list[str]] = {}  # tool_use id -> its hooks' status lines
    folded: set[int] = set()  # row indexes shown inside their call's card
    loose: dict[int, str] = {}  # row index -> a status line with no call on this page
    for index, (row, entry) in enumerate(entries):
        status = hook_status(row, entry)
        if status is None:
            continue
        if entry.get("toolUseID") in calls:
            statuses.setdefault(entry["toolUseID"], []).append(status)
            folded.add(index)
        else:
            loose[index] = status
    out, run, run_thread, pending = [], [], None, []

    def flush_status():
        if pending:
            noun = "hook message" if len(pending) == 1 else "hook messages"
            out.append(f"<details class=status><summary>{len(pending)} {noun}: {shown(pending[-1])}</summary>"
                       + "".join(f"<div>{shown(s)}</div>" for s in pending) + "</details>")
            pending.clear()

    def close_run():
        if run:
            out.append(f"<details class=agent><summary>Sub-agent {esc(run_thread[:12])} "
                       f"({len(run)} messages)</summary>{''.join(run)}</details>")
            run.clear()

    for index, (row, entry) in enumerate(entries):
        if index in loose:
            if not row["thread"]:
                close_run()
                run_thread = None
                pending.append(loose[index])
            continue  # a sub-agent's loose hook lines are left out of its fold
        if index in folded:
            continue  # shown in its tool call's card
        piece = message_html(row, entry, results, calls, statuses)
        if not piece:
            continue
        flush_status()
        if row["thread"]:
            if run_thread != row["thread"]:
                close_run()
                run_thread = row["thread"]
            run.append(piece)
        else:
            close_run()
            run_thread = None
            out.append(piece)
    close_run()
    flush_status()
    return "".join(out) or "<p class=muted>No messages on this page.</p>"


def _entry(raw) -> dict:
    try:
        entry = json.loads(raw)
    except (ValueError, TypeError, RecursionError):
        return {}
    return entry if isinstance(entry, dict) else {}


def message_html(row, entry: dict, results: dict, calls: set, statuses: dict | None = None) -> str:
    blocks = content_blocks(entry)
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            if row["role"] == "assistant":  # Claude writes markdown; a person's prompt stays as typed
                parts.append(markdown_html(block.get("text")))
            else:
                parts.append(f"<div class=text>{shown(block.get('text'))}</div>")
        elif kind == "thinking":
            parts.append(f"<details class=tool><summary>Thinking</summary><div class=text>"
                         f"{shown(block.get('thinking'))}</div></details>")
        elif kind == "tool_use":
            parts.append(tool_html(block, results.get(block.get("id")), (statuses or {}).get(block.get("id"), ())))
        elif kind == "tool_result":
            if block.get("tool_use_id") in calls:
                continue  # shown inside its call
            parts.append(f"<details class=tool><summary>Tool result</summary>{result_html(block)}</details>")
        elif kind == "image":
            parts.append("<div class=muted>[image]</div>")
    if not parts:
        if row["type"] == "system" and row["subtype"] == "compact_boundary":
            parts.append("<div class=muted>Claude Code compacted the conversation here.</div>")
        else:
            return ""
    role = row["role"] if row["role"] in ("user", "assistant") else "system"
    who = {"user": "You" if not row["is_meta"] else "Harness", "assistant": "Claude"}.get(role, "System")
    return (f"<article class='msg {role}' id='m-{esc(row['uuid'])}'><div class=meta><b>{who}</b>"
            f"<span>{_when(row['created_at'])}</span><span>{esc(row['uuid'][:8])}</span></div>{''.join(parts)}</article>")


def _label(block: dict) -> str:
    """What a tool call is about, in a line: the description Claude gave it (Bash, Task), else
    its command, file, pattern, address or query."""
    data = block.get("input") if isinstance(block.get("input"), dict) else {}
    for key in ("description", "command", "file_path", "pattern", "url", "query", "prompt", "path"):
        if isinstance(data.get(key), str) and data[key].strip():
            return one_line(lcm.base.mask.mask(data[key]), 100)
    return ""


def tool_html(block: dict, result: dict | None, statuses=()) -> str:
    failed = bool(result and result.get("is_error"))
    name = block.get("name") or "tool"
    data = lcm.base.mask.mask_json(block.get("input"))  # decoded strings masked before they are dumped
    body = f"<pre>{esc(json.dumps(data, ensure_ascii=False, indent=1))}</pre>"
    if result is not None:
        body += f"<div class=meta>{'failed' if failed else 'result'}</div>{result_html(result)}"
    if statuses:
        body += "<div class='meta hooks'>" + "".join(f"<div>{shown(s)}</div>" for s in statuses) + "</div>"
    hooks = (f" <span class=hookcount>{len(statuses)} hook message{'s' if len(statuses) != 1 else ''}</span>"
             if statuses else "")
    return (f"<details class=tool><summary><b>{esc(name)}</b> {esc(_label(block))}"
            f"{' <span class=failed>failed</span>' if failed else ''}{hooks}</summary>{body}</details>")


def result_html(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(str(c.get("text", "[image]" if c.get("type") == "image" else ""))
                            for c in content if isinstance(c, dict))
    return f"<pre>{shown(content)}</pre>"


# -- the summary DAG ----------------------------------------------------------------------------

def dag_page(conn, session_id: str, params: dict, root: str = "/") -> str:
    row = _session_row(conn, session_id)
    nodes = conn.execute(
        "SELECT s.id, s.kind, s.depth, s.parent_id, s.token_count, s.descendant_count, s.level,"
        " s.earliest_at, s.latest_at, m.seq AS first_seq, substr(s.content, 1, 600) AS content FROM summaries s JOIN messages m ON m.id = s.first_message_id"
        " WHERE s.session_id = ? ORDER BY s.depth DESC, m.seq LIMIT ?", (session_id, DAG_NODES)).fetchall()
    count = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    title = lcm.readers.sessions.title(conn, session_id, row["title"], count)
    sid = quote(session_id, safe="")
    head = (f"<h1>Summary DAG: {shown(title)}</h1><p class=meta><a href='{link('/s/' + sid)}'>Conversation</a>"
            f" &middot; {len(nodes)} summaries &middot; depth by row, the newest to the right; click a node</p>")
    if not nodes:
        return layout(title, head + "<p>No summaries yet: this session has not been compacted.</p>", root=root)
    return layout(title, head + f"<div class=dag><div class=canvas>{dag_svg(nodes)}</div>"
                  "<aside id=panel><p class=muted>Click a node to see its text and its sources.</p></aside></div>",
                  wide=True, root=root)


def dag_svg(nodes) -> str:
    """Rows by depth (the deepest on top); leaves left to right in conversation order; a parent
    centred over its children."""
    by_id = {n["id"]: n for n in nodes}
    children: dict[str, list] = {}
    for n in nodes:
        if n["parent_id"] in by_id:
            children.setdefault(n["parent_id"], []).append(n)
    top = max(n["depth"] for n in nodes)
    x: dict[str, float] = {}
    slot = 0
    for n in sorted(nodes, key=lambda n: (n["depth"], n["first_seq"])):  # shallow first, in order
        kids = children.get(n["id"])
        if kids and all(k["id"] in x for k in kids):
            x[n["id"]] = sum(x[k["id"]] for k in kids) / len(kids)
        else:
            x[n["id"]] = slot * (NODE_W + GAP_X)
            slot += 1
    width = int(max(x.values()) + NODE_W + 2 * GAP_X)
    height = (top + 1) * ROW_H + 10
    y = {n["id"]: 5 + (top - n["depth"]) * ROW_H for n in nodes}
    lines, boxes = [], []
    for n in nodes:
        parent = n["parent_id"]
        if parent in by_id:
            lines.append(f"<line x1='{x[parent] + NODE_W / 2 + GAP_X:.0f}' y1='{y[parent] + NODE_H}'"
                         f" x2='{x[n['id']] + NODE_W / 2 + GAP_X:.0f}' y2='{y[n['id']]}'/>")
        classes = "node leaf" if n["kind"] == "leaf" else "node"
        if n["level"] in ("extractive", "truncated", "fallback"):
            classes += " fallback"
        label = f"d{n['depth']} {n['descendant_count']} msgs {n['token_count']} tok"
        name = summary_title(n["content"]) if "content" in n.keys() else ""
        tip = (f"{name}\n{n['id']} ({n['kind']}, {n['level']}): {(n['earliest_at'] or '')[:16]} to"
               f" {(n['latest_at'] or '')[:16]}")
        boxes.append(f"<a class='{classes}' href='{link('/n/' + n['id'])}' data-id='{esc(n['id'])}'>"
                     f"<title>{shown(tip)}</title><rect x='{x[n['id']] + GAP_X:.0f}' y='{y[n['id']]}' rx=4"
                     f" width='{NODE_W}' height='{NODE_H}'/><text class=title x='{x[n['id']] + GAP_X + 6:.0f}'"
                     f" y='{y[n['id']] + 15}'>{shown(one_line(name, TITLE_CHARS))}</text>"
                     f"<text x='{x[n['id']] + GAP_X + 6:.0f}' y='{y[n['id']] + 30}'>{esc(n['id'][:12])}</text>"
                     f"<text x='{x[n['id']] + GAP_X + 6:.0f}' y='{y[n['id']] + 44}'>{esc(label)}</text></a>")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'"
            f" viewBox='0 0 {width} {height}' role=img aria-label='summary DAG'>{''.join(lines)}{''.join(boxes)}</svg>")


SUMMARY_HEAD = re.compile(r"^\s*(?:\[.*\]|#+\s*(?:summary|leaf summary|condensed summary)\b.*|[A-Za-z][\w ]{0,30}:)\s*$", re.I)


def summary_title(content) -> str:
    """A short title of a summary for its DAG node: its first line that says something (not
    the bracketed provenance line, a bare section label such as "Asked:" or a heading), without
    its list marker or label ("Ended: ..."); a line of files names the first file."""
    for line in str(content or "").splitlines():
        if not line.strip() or SUMMARY_HEAD.match(line):
            continue
        text = re.sub(r"^\s*(?:[-*+]|\d+[.)]|#+)\s*", "", line).strip()
        label = re.match(r"^([A-Z][a-z]+(?: [a-z]+)?):\s+(.*)$", text)
        if label:
            text = label.group(2)
            if label.group(1) == "Files" and text.startswith("/"):
                text = text.split(",")[0].rsplit("/", 1)[-1]
        return text.replace("`", "").strip("*_ ")
    return ""


def node_page(conn, node_id: str, params: dict, root: str = "/") -> str:
    node = conn.execute("SELECT * FROM summaries WHERE id = ?", (node_id,)).fetchone()
    if node is None:
        raise NotFound(f"no summary {node_id!r}")
    sid = quote(node["session_id"], safe="")
    parts = [f"<h2>{esc(node['id'])}</h2><p class=meta>{esc(node['kind'])}, depth {node['depth']}, "
             f"{esc(node['level'])} &middot; {node['token_count']} tokens from {node['source_token_count']} &middot; "
             f"{node['descendant_count']} messages &middot; {_when(node['earliest_at'])} to {_when(node['latest_at'])}"
             + (f" &middot; parent <a class=node href='{link('/n/' + node['parent_id'])}'>{esc(node['parent_id'])}</a>"
                if node["parent_id"] else "") + "</p>",
             markdown_html(node["content"])]
    if node["kind"] == "condensed":
        kids = conn.execute("SELECT s.id, s.depth, s.descendant_count, substr(s.content, 1, 300) AS head"
                            " FROM summary_sources x JOIN summaries s ON s.id = x.child_id"
                            " WHERE x.summary_id = ? ORDER BY x.ord", (node_id,)).fetchall()
        parts.append(f"<h3>Sources: {len(kids)} summaries</h3><ul>" + "".join(
            f"<li><a class=node href='{link('/n/' + k['id'])}'>{esc(k['id'])}</a> "
            f"<span class=meta>depth {k['depth']}, {k['descendant_count']} messages</span>"
            f"<div>{shown(one_line(k['head'], 200))}</div></li>" for k in kids) + "</ul>")
    else:
        rows = conn.execute(
            "SELECT m.id, m.uuid, m.role, m.type, m.subtype, m.created_at, m.thread, m.is_meta, m.model,"
            " lcm_line(m.raw, m.block_id, m.block_pos) AS raw"  # lcm.vault.store.LINE of `m`
            " FROM summary_sources x JOIN messages m ON m.id = x.message_id WHERE x.summary_id = ? ORDER BY m.seq",
            (node_id,)).fetchall()
        parts.append(f"<h3>Sources: {len(rows)} messages</h3>")
        for row in rows:
            entry = _entry(row["raw"])
            piece = message_html(row, entry, {}, set()) or (
                f"<article class='msg system' id='m-{esc(row['uuid'])}'><div class=meta>{esc(row['uuid'][:8])}</div></article>")
            original = esc(lcm.base.mask.mask_line(row["raw"]).decode("utf-8", "replace"))
            parts.append(piece.replace("</article>",
                         f"<div class=meta><a href='{link('/s/' + sid, at=row['uuid'])}#m-{esc(row['uuid'])}'>in the"
                         f" conversation</a></div><details><summary class=meta>Original line (masked)</summary>"
                         f"<pre>{original}</pre></details></article>", 1))
    fragment = "".join(parts)
    if params.get("part") == "1":
        return fragment
    return layout(node["id"], f"<p class=meta><a href='{link('/s/' + sid + '/dag')}'>Back to the DAG</a></p>" + fragment, root=root)


# -- search -------------------------------------------------------------------------------------

def search_page(conn, params: dict, root: str = "/") -> str:
    query = params.get("q", "").strip()
    if not query:
        return layout("Search", "<h1>Search</h1><p class=muted>Type words, a phrase or an id in the box above.</p>",
                      root=root)
    doc = lcm.search.engine.search(conn, lcm.search.query.Query(query, all_sessions=True, limit=SEARCH_RESULTS))
    finder = term_finder(query)
    body = [f"<h1>Search: {shown(query)}</h1><p class=muted>{doc['count']} result{'s' if doc['count'] != 1 else ''}"
            f"{' (more not shown)' if doc.get('has_more') else ''}</p>"]
    titles: dict[str, str] = {}
    for hit in doc["results"]:
        sid = hit.get("session_id") or ""
        if sid and sid not in titles:
            titles[sid] = session_label(conn, sid)
        snippet = highlighted(hit["snippet"], finder)
        if hit["type"] == "message":
            target = f"{link('/s/' + quote(sid, safe=''), at=hit['uuid'])}#m-{esc(hit['uuid'])}"
        elif hit["type"] == "summary":
            target = link("/n/" + hit["id"])
        else:
            target = link("/s/" + quote(sid, safe="")) if sid else ""
        head = f"<a class=hit-link href='{target}'>{esc(hit['type'])} {esc(str(hit['id'])[:12])}</a>" if target else esc(hit["type"])
        body.append(f"<div class=hit>{head} <span class=meta>{titles.get(sid, '')} &middot; "
                    f"{_when(hit.get('created_at'))}</span><div>{snippet}</div></div>")
    return layout(f"Search: {query}", "".join(body), query=query, root=root)


def session_label(conn, session_id: str) -> str:
    """A hit's session as the sessions list shows it: its title and its real message count."""
    row = conn.execute("SELECT title FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    count = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    title = lcm.readers.sessions.title(conn, session_id, row["title"] if row else None, count)
    return f"{shown(title)} &middot; {count} message{'s' if count != 1 else ''}"


STEM_ENDINGS = ("ing", "ed", "es", "er", "ly", "s", "e")  # enough of Porter's for marking what grep found


def _stem(word: str) -> str:
    for ending in STEM_ENDINGS:
        if word.lower().endswith(ending) and len(word) - len(ending) >= 3:
            return word[:-len(ending)]
    return word


def term_finder(query: str):
    """What grep matched, to mark in a snippet: whole words, as its word index (Porter stems,
    letters and digits; `_` and punctuation separate) matches them. A word of the query marks
    a word of the text that is it or, for three letters and more, shares its stem ("starting"
    marks "starts", "cache" marks the cache in "html_with_cache"); never letters inside a word
    ("in" in "Starting"). A quoted phrase is marked whole."""
    phrases = [p for p in re.findall(r'"([^"]+)"', query) if p.strip()]
    rest = re.sub(r'"[^"]*"', " ", query)
    words = [w for w in re.findall(r"[^\W_]+", rest) if len(w) > 1 and w.upper() not in ("AND", "OR", "NOT")]
    terms = [r"\W+".join(re.escape(w) for w in re.findall(r"[^\W_]+", p)) for p in phrases]
    terms += [re.escape(_stem(w)) + r"[^\W_]*" if len(w) >= 3 else re.escape(w) for w in words]
    terms = [t for t in terms if t]
    if not terms:
        return None
    return re.compile(r"(?<![^\W_])(?:" + "|".join(sorted(terms, key=len, reverse=True)) + r")(?![^\W_])", re.I)


def highlighted(snippet, finder) -> str:
    """The snippet masked and escaped, with what grep matched in <mark>: matched on the text
    itself, then escaped piece by piece, so a mark never cuts an entity."""
    text = lcm.base.mask.mask(strip_ansi("" if snippet is None else str(snippet)))
    if finder is None:
        return esc(text)
    out, at = [], 0
    for m in finder.finditer(text):
        out.append(esc(text[at:m.start()]) + f"<mark>{esc(m.group(0))}</mark>")
        at = m.end()
    return "".join(out) + esc(text[at:])


# -- usage --------------------------------------------------------------------------------------

USAGE_BARS = 60  # groups the chart draws at most (the newest, or the costliest)
CHART_W, CHART_H, CHART_PAD = 900, 220, 48


def usage_page(conn, params: dict, root: str = "/") -> str:
    """Tokens and cost (lcm_usage.py's report) by day, week, month, session, project or model: a
    bar chart of the cost as inline SVG (no script), then the table. Every name is masked."""
    import lcm.readers.usage
    by = params.get("by") or "day"
    since = lcm.readers.usage.parse_day(params.get("since"), "since")
    until = lcm.readers.usage.parse_day(params.get("until"), "until")
    doc = lcm.readers.usage.report(conn, by, since, until)
    tabs = " ".join(f"<a href='{link('/usage', by=b, since=since, until=until)}'>{'<b>' + b + '</b>' if b == by else b}</a>"
                    for b in lcm.readers.usage.BY)
    body = [f"<h1>Usage</h1><p>{tabs}</p><form class=filters method=get action='usage'>"
            f"<input type=hidden name=by value='{esc(by)}'>"
            f"<input type=text name=since value='{esc(since or '')}' placeholder='Since YYYY-MM-DD' aria-label=Since>"
            f"<input type=text name=until value='{esc(until or '')}' placeholder='Until YYYY-MM-DD' aria-label=Until>"
            "<button>Show</button></form>"]
    totals = doc["totals"]
    body.append(f"<p class=muted>{totals['responses']:,} responses, {totals['total_tokens']:,} tokens,"
                f" ${totals['cost_usd']:,.2f}{'+' if doc['unpriced_models'] else ''}; prices taken"
                f" {esc(doc['prices']['taken'])}; days in {esc(doc['timezone'])} time</p>")
    if not doc["items"]:
        return layout("Usage", "".join(body + ["<p>No usage recorded.</p>"]), root=root)
    body.append(_usage_chart(doc["items"], by))
    body.append("<table><thead><tr><th>" + esc(by.capitalize()) + "</th><th>Input</th><th>Output</th>"
                "<th>Cache write</th><th>Cache read</th><th>Cost</th><th>Models</th></tr></thead><tbody>")
    for g in doc["items"]:
        key = g["key"] if g["key"] is not None else "(unknown)"
        label = (f"<a href='{link('/s/' + quote(key, safe=''))}'>{shown(key[:8])}</a>" if by == "session"
                 else shown(key))
        models = ", ".join(shown(m["model"]) for m in g["models"])
        body.append(f"<tr><td>{label}</td><td class=num>{g['input_tokens']:,}</td><td class=num>{g['output_tokens']:,}</td>"
                    f"<td class=num>{g['cache_write_tokens']:,}</td><td class=num>{g['cache_read_tokens']:,}</td>"
                    f"<td class=num>${g['cost_usd']:,.2f}{'' if g['cost_complete'] else '+'}</td><td>{models}</td></tr>")
    body.append("</tbody></table>")
    if doc["unpriced_models"]:
        body.append("<p class=muted>Not priced (add them to $LCM_HOME/prices.json): "
                    + ", ".join(shown(m["model"]) for m in doc["unpriced_models"]) + "</p>")
    return layout("Usage", "".join(body), wide=True, root=root)


def _usage_chart(items: list[dict], by: str) -> str:
    """The cost of each group as a bar (oldest left for time groups), each with its value in a
    <title> a browser shows on hover."""
    shown_items = items[:USAGE_BARS]
    if by in ("day", "week", "month"):
        shown_items = list(reversed(shown_items))
    top = max((g["cost_usd"] for g in shown_items), default=0) or 1.0
    width = (CHART_W - CHART_PAD) / len(shown_items)
    bars = []
    for i, g in enumerate(shown_items):
        height = (CHART_H - 30) * g["cost_usd"] / top
        x, y = CHART_PAD + i * width, CHART_H - 20 - height
        label = g["key"] if g["key"] is not None else "(unknown)"
        bars.append(f"<rect class=bar x='{x + 1:.1f}' y='{y:.1f}' width='{max(width - 2, 1):.1f}' height='{height:.1f}'"
                    f" fill='#4a7bd0'><title>{shown(label)}: ${g['cost_usd']:,.2f}, {g['total_tokens']:,} tokens</title></rect>")
    first, last = (shown_items[0]["key"], shown_items[-1]["key"]) if by in ("day", "week", "month") else ("", "")
    return (f"<svg class=usage-chart role=img aria-label='Cost by {esc(by)}' viewBox='0 0 {CHART_W} {CHART_H}'"
            f" width='100%' xmlns='http://www.w3.org/2000/svg'>"
            f"<text x='0' y='12' font-size='11'>${top:,.2f}</text>"
            f"<line x1='{CHART_PAD}' y1='{CHART_H - 20}' x2='{CHART_W}' y2='{CHART_H - 20}' stroke='#888'/>"
            + "".join(bars)
            + f"<text x='{CHART_PAD}' y='{CHART_H - 4}' font-size='11'>{shown(first)}</text>"
            f"<text x='{CHART_W}' y='{CHART_H - 4}' font-size='11' text-anchor='end'>{shown(last)}</text></svg>")
