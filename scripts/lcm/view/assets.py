"""The viewer's only static files, served by the viewer itself: nothing is loaded from the network."""

CSS = """
:root { --fg: #1d2327; --muted: #5f6b73; --line: #d9dee2; --bg: #fff; --soft: #f4f6f8; --accent: #1f5fa8;
        --user: #eef5ff; --assistant: #fff; --tool: #f7f7f2; --agent: #f5f0ff; --mark: #ffe58a; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 1rem; align-items: center; padding: .5rem 1rem; border-bottom: 1px solid var(--line); background: var(--soft); position: sticky; top: 0; z-index: 2; }
header a.brand { font-weight: 600; color: var(--fg); text-decoration: none; }
header form { margin-left: auto; }
main { padding: 1rem; max-width: 1100px; margin: 0 auto; }
main.wide { max-width: none; }
a { color: var(--accent); }
h1 { font-size: 1.3rem; margin: .2rem 0 .6rem; }
.muted, .meta { color: var(--muted); font-size: 12px; }
input[type=search], input[type=text] { padding: .3rem .5rem; border: 1px solid var(--line); border-radius: 4px; min-width: 16rem; }
button { padding: .3rem .7rem; border: 1px solid var(--line); border-radius: 4px; background: #fff; cursor: pointer; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; white-space: nowrap; }
td { overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.filters { display: flex; gap: .5rem; margin-bottom: .8rem; flex-wrap: wrap; }
.msg { border: 1px solid var(--line); border-radius: 6px; margin: .5rem 0; padding: .4rem .7rem; background: var(--assistant); }
.msg.user { background: var(--user); }
.msg.system { background: var(--soft); }
.msg { scroll-margin-top: 4.5rem; }  /* a hit opened by its link lands below the sticky header */
.msg:target { outline: 3px solid var(--accent); }
.when { white-space: nowrap; font-variant-numeric: tabular-nums; }
.md { overflow-wrap: anywhere; }
.md p, .md ul, .md ol, .md pre { margin: .3rem 0; }
.md ul, .md ol { padding-left: 1.4rem; }
.md h3, .md h4, .md h5, .md h6 { margin: .5rem 0 .2rem; font-size: 1rem; }
.md h3 { font-size: 1.1rem; }
.md code { background: var(--soft); padding: 0 .2rem; border-radius: 3px; font-size: 12px; }
.md pre code { background: none; padding: 0; }
.md .url { color: var(--muted); font-size: 12px; }
details.status { color: var(--muted); font-size: 12px; margin: .1rem 0 .1rem .7rem; }
.hookcount { color: var(--muted); font-size: 11px; margin-left: .4rem; }
.msg .meta.hooks { display: block; margin-top: .3rem; }
.msg .meta { display: flex; gap: .6rem; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--soft); padding: .4rem; border-radius: 4px; margin: .3rem 0; max-height: 30rem; overflow: auto; font-size: 12px; }
details.tool { background: var(--tool); border: 1px solid var(--line); border-radius: 4px; margin: .3rem 0; padding: .2rem .5rem; }
details.agent { background: var(--agent); border: 1px solid var(--line); border-radius: 6px; margin: .5rem 0 .5rem 1.5rem; padding: .3rem .6rem; }
details > summary { cursor: pointer; }
.failed { color: #a4262c; }
mark { background: var(--mark); }
.pager { display: flex; gap: 1rem; margin: 1rem 0; }
.hit { padding: .5rem 0; border-bottom: 1px solid var(--line); }
.dag { display: flex; gap: 1rem; align-items: flex-start; }
.dag .canvas { overflow: auto; border: 1px solid var(--line); border-radius: 6px; flex: 1 1 60%; max-height: 80vh; background: #fff; }
.dag aside { flex: 1 1 40%; max-height: 80vh; overflow: auto; }
svg .node rect { fill: #e8f0fb; stroke: #1f5fa8; }
svg .node.leaf rect { fill: #eef8ee; stroke: #2e7d32; }
svg .node.fallback rect { stroke-dasharray: 4 3; }
svg .node:hover rect, svg .node.active rect { fill: #ffe58a; }
svg .node text { font-size: 11px; fill: #1d2327; pointer-events: none; }
svg .node text.title { font-weight: 600; }
svg line { stroke: #9aa5ad; }
"""

# Progressive enhancement only: every link works without it. A click on a DAG node shows the
# node in the side panel instead of leaving the page.
JS = """
document.addEventListener("click", function (event) {
  var link = event.target.closest && event.target.closest("a.node");
  var panel = document.getElementById("panel");
  if (!link || !panel) return;
  event.preventDefault();
  var href = link.getAttribute("href");
  fetch(href + (href.indexOf("?") < 0 ? "?" : "&") + "part=1", {credentials: "same-origin"})
    .then(function (r) { return r.text(); })
    .then(function (html) {
      panel.innerHTML = html;
      document.querySelectorAll("a.node.active").forEach(function (a) { a.classList.remove("active"); });
      link.classList.add("active");
    });
});
"""
