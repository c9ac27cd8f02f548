"""``cre report --html``: the report as one self-contained HTML file a person would rather read.

No network fetches: the CSS and the few lines of JavaScript (the node table's filters) are
inlined, and the charts are SVG drawn here, one per category with one series per group: bus
bandwidth against message size on a log-2 x axis, and the ``busBandwidthGBps`` threshold as a
dashed line. Failed groups' captured logs are folded (``<details>``). Every value from the
cluster is escaped. Pure: :func:`render_html` maps a :class:`~cre.cli.report.Report` to text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from cre.cli.report import CategoryReport, NodeReport, Report

WIDTH, HEIGHT = 720, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 20, 44
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
# Worst first: a node's overall verdict is the worst of its categories.
SEVERITY = ("Failed", "Incomplete", "Running", "Pending", "Passed")

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1d2330;
background:#f7f8fa}
h1{margin:0 0 .3rem}h2{margin:2rem 0 .5rem}.muted{color:#5b6475}
.badge{display:inline-block;padding:.15rem .6rem;border-radius:1rem;font-weight:600;color:#fff;
font-size:.85rem}
.v-Passed,.v-PASSED{background:#1e8e3e}.v-Failed,.v-FAILED{background:#c5221f}
.v-Incomplete,.v-INCOMPLETE{background:#b06000}.v-other{background:#5b6475}
.cards{display:flex;gap:1rem;margin:1rem 0}.card{background:#fff;border:1px solid #dde1e8;
border-radius:.5rem;padding:.8rem 1.2rem;min-width:9rem}.card b{font-size:1.5rem;display:block}
table{border-collapse:collapse;background:#fff;margin:.5rem 0;width:100%}
th,td{border:1px solid #dde1e8;padding:.35rem .6rem;text-align:left;vertical-align:top;
font-size:.9rem}th{background:#eef1f5}
section.category{background:#fff;border:1px solid #dde1e8;border-radius:.5rem;padding:1rem 1.5rem;
margin:1.5rem 0}
svg.bw-chart{background:#fff}svg .axis{stroke:#5b6475}svg .grid{stroke:#eef1f5}
svg text{font-size:11px;fill:#1d2330}svg .threshold{stroke:#c5221f;stroke-dasharray:6 4;
stroke-width:1.5}
details.failure-log{margin:.5rem 0}details.failure-log pre{background:#1d2330;color:#e8eaed;
padding:.8rem;overflow-x:auto;font-size:.8rem}
.filters{display:flex;gap:1rem;margin:.5rem 0}.filters label{font-size:.9rem}
"""

SCRIPT = """
(function(){
  var verdict=document.getElementById('filter-verdict');
  var category=document.getElementById('filter-category');
  var search=document.getElementById('filter-node');
  var rows=document.querySelectorAll('#nodes tbody tr');
  var count=document.getElementById('node-count');
  function apply(){
    var shown=0;
    rows.forEach(function(row){
      var ok=(!verdict.value||row.dataset.verdict===verdict.value)&&
        (!category.value||row.dataset.failing.split(' ').indexOf(category.value)>=0)&&
        (!search.value||row.dataset.node.indexOf(search.value.toLowerCase())>=0);
      row.hidden=!ok; if(ok){shown++;}
    });
    count.textContent=shown+' of '+rows.length+' nodes';
  }
  [verdict,category,search].forEach(function(el){el.addEventListener('input',apply);});
  apply();
})();
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(verdict: str | None) -> str:
    text = verdict or "—"
    known = text in ("Passed", "Failed", "Incomplete", "PASSED", "FAILED", "INCOMPLETE")
    return f'<span class="badge {"v-" + text if known else "v-other"}">{_e(text)}</span>'


def size_label(size: int) -> str:
    """``1048576`` as ``1 MiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:g} {unit}"
    return f"{size} B"


def nice_step(rough: float) -> float:
    """A round axis step (1, 2 or 5 times a power of ten) of at least ``rough``."""
    if rough <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(rough))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= rough))


def chart_svg(category: CategoryReport, chart_id: str) -> str:
    """The bandwidth chart of one category (empty when nothing was measured)."""
    series = [g for g in category.groups if g.points]
    if not series:
        return '<p class="muted no-bandwidth">No bandwidth measured for this category.</p>'
    sizes = sorted({p.size_bytes for g in series for p in g.points if p.size_bytes > 0})
    lo, hi = math.log2(sizes[0]), math.log2(sizes[-1])
    hi = hi if hi > lo else lo + 1
    highest = max([p.bus_bw for g in series for p in g.points] + [category.threshold_gbps or 0.0])
    step = nice_step(highest * 1.05 / 5)
    top = step * max(1, math.ceil(highest * 1.05 / step))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(size: int) -> float:
        return LEFT + (math.log2(max(size, 1)) - lo) / (hi - lo) * plot_w

    def y(value: float) -> float:
        return TOP + plot_h - value / top * plot_h

    parts = [f'<svg class="bw-chart" id="{_e(chart_id)}" data-category="{_e(category.entry)}" '
             f'xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="bus bandwidth by message size, {_e(category.entry)}">']
    for i in range(round(top / step) + 1):  # y grid and labels at round values
        value = step * i
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(value):.1f}" '
                     f'y2="{y(value):.1f}"/><text x="{LEFT - 6}" y="{y(value) + 4:.1f}" '
                     f'text-anchor="end">{value:g}</text>')
    step = max(1, math.ceil(len(sizes) / 8))
    for size in sizes[::step]:  # x ticks at measured sizes (log scale)
        parts.append(f'<line class="axis" x1="{x(size):.1f}" x2="{x(size):.1f}" '
                     f'y1="{TOP + plot_h}" y2="{TOP + plot_h + 4}"/><text x="{x(size):.1f}" '
                     f'y="{TOP + plot_h + 16}" text-anchor="middle">{_e(size_label(size))}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}"/>'
                 f'<line class="axis" x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" '
                 f'y2="{TOP + plot_h}"/>'
                 f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle">'
                 'message size (log scale)</text>'
                 f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {TOP + plot_h / 2})">busBW (GB/s)</text>')
    for i, group in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = [p for p in group.points if p.size_bytes > 0]
        coords = " ".join(f"{x(p.size_bytes):.1f},{y(p.bus_bw):.1f}" for p in pts)
        parts.append(f'<g class="series" data-group="{_e(group.name)}" '
                     f'data-points="{len(pts)}"><polyline fill="none" stroke="{color}" '
                     f'stroke-width="2" points="{coords}"/>')
        for p in pts:
            parts.append(f'<circle class="point" cx="{x(p.size_bytes):.1f}" '
                         f'cy="{y(p.bus_bw):.1f}" r="3" fill="{color}"><title>{_e(group.name)}: '
                         f'{_e(size_label(p.size_bytes))} busBW {p.bus_bw:.2f} GB/s</title>'
                         '</circle>')
        ly = TOP + 14 + 16 * i
        parts.append(f'<line x1="{LEFT + plot_w + 12}" x2="{LEFT + plot_w + 30}" y1="{ly - 4}" '
                     f'y2="{ly - 4}" stroke="{color}" stroke-width="2"/>'
                     f'<text x="{LEFT + plot_w + 34}" y="{ly}">{_e(group.name)}</text></g>')
    if category.threshold_gbps is not None:
        ty = y(category.threshold_gbps)
        parts.append(f'<line class="threshold" data-gbps="{category.threshold_gbps:.2f}" '
                     f'x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
                     f'<text x="{LEFT + plot_w + 4}" y="{ty + 4:.1f}" fill="#c5221f">threshold '
                     f'{category.threshold_gbps:g}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _fc(node_or_group: NodeReport | None) -> str:
    fc = node_or_group.failure_class if node_or_group else None
    return "" if fc is None else f"{fc.scope}: {fc.reason}"


def _category_section(category: CategoryReport, index: int) -> str:
    out = [f'<section class="category" id="category-{index}"><h2>{_e(category.entry)} '
           f'{_badge(category.verdict or category.state)}</h2>',
           f'<p class="muted">Workflow {_e(category.workflow or "not created yet")}'
           f'{" · platform " + _e(category.platform) if category.platform else ""}'
           f'{" · " + _e(category.architecture) if category.architecture else ""}'
           f'{" · " + _e(category.message) if category.message else ""}</p>']
    if category.thresholds:
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(category.thresholds.items()))
        out.append(f'<p>Thresholds: <code>{_e(shown)}</code></p>')
    out.append(chart_svg(category, f"chart-{index}"))
    out.append('<table class="groups"><thead><tr><th>group</th><th>phase</th><th>nodes</th>'
               '<th>job</th><th>reason</th><th>failure class</th><th>peak busBW (GB/s)</th>'
               '</tr></thead><tbody>')
    for g in category.groups:
        fc = "" if g.failure_class is None else f"{g.failure_class.scope}: {g.failure_class.reason}"
        peak = "" if g.bus_bw_peak is None else f"{g.bus_bw_peak:.2f}"
        out.append(f"<tr><td>{_e(g.name)}</td><td>{_e(g.phase)}</td><td>{_e(', '.join(g.nodes))}"
                   f"</td><td>{_e(g.job)}</td><td>{_e(g.reason)}</td><td>{_e(fc)}</td>"
                   f"<td>{peak}</td></tr>")
    out.append("</tbody></table>")
    for g in category.groups:
        log = g.failure_log
        if log is None or g.phase == "Succeeded":
            continue
        where = f"pod {log.pod or '?'}"
        if log.container:
            where += f" container {log.container}"
        if log.node:
            where += f" on {log.node}"
        exit_text = f", exit code {log.exit_code}" if log.exit_code is not None else ""
        out.append(f'<details class="failure-log" data-group="{_e(g.name)}"><summary>'
                   f'{_e(g.name)}: failure log of {_e(where)}{_e(exit_text)}'
                   f'{" (" + _e(log.reason) + ")" if log.reason else ""}</summary>'
                   f'<pre>{_e(log.tail or "(empty)")}</pre></details>')
    out.append("</section>")
    return "".join(out)


def _worst(verdicts: Sequence[str]) -> str:
    for verdict in SEVERITY:
        if verdict in verdicts:
            return verdict
    return verdicts[0] if verdicts else "—"


def _node_table(report: Report) -> str:
    by_node: dict[str, dict[int, NodeReport]] = {}
    for i, category in enumerate(report.categories):
        for node in category.nodes:
            by_node.setdefault(node.node, {})[i] = node
    verdicts = sorted({n.verdict for c in report.categories for n in c.nodes},
                      key=lambda v: SEVERITY.index(v) if v in SEVERITY else len(SEVERITY))
    out = ['<h2>Nodes</h2><div class="filters"><label>verdict <select id="filter-verdict">'
           '<option value="">all</option>']
    out += [f'<option value="{_e(v)}">{_e(v)}</option>' for v in verdicts]
    out.append('</select></label><label>failing in <select id="filter-category">'
               '<option value="">any category</option>')
    out += [f'<option value="c{i}">{_e(c.entry)}</option>' for i, c in enumerate(report.categories)]
    out.append('</select></label><label>node <input id="filter-node" type="search" '
               'placeholder="name contains"></label><span id="node-count" class="muted"></span>'
               '</div><table id="nodes"><thead><tr><th>node</th><th>verdict</th>')
    out += [f"<th>{_e(c.entry)}</th>" for c in report.categories]
    out.append("</tr></thead><tbody>")
    for name in sorted(by_node):
        cells = by_node[name]
        worst = _worst([n.verdict for n in cells.values()])
        failing = " ".join(f"c{i}" for i, n in sorted(cells.items()) if n.verdict == "Failed")
        row = [f'<tr data-node="{_e(name.lower())}" data-verdict="{_e(worst)}" '
               f'data-failing="{failing}"><td>{_e(name)}</td><td>{_badge(worst)}</td>']
        for i in range(len(report.categories)):
            n = cells.get(i)
            if n is None:
                row.append('<td class="muted">not run</td>')
                continue
            bits = [n.verdict]
            if n.reason:
                bits.append(n.reason)
            if _fc(n):
                bits.append(_fc(n))
            bw = f" · busBW {n.bus_bw:.2f} GB/s" if n.bus_bw is not None else ""
            row.append(f"<td>{_e(' · '.join(bits))}{_e(bw)} <span class='muted'>"
                       f"({_e(n.group)})</span></td>")
        out.append("".join(row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def render_html(report: Report) -> str:
    """The whole report page."""
    passed = sum(1 for c in report.categories if c.verdict == "Passed")
    title = f"CRE report: {report.namespace}/{report.name}"
    failed = report.failed_nodes
    body = [
        f"<h1>{_e(title)} {_badge(report.result)}</h1>",
        f'<p class="muted">phase {_e(report.phase or "Pending")}'
        f'{" · " + _e(report.reason) if report.reason else ""}'
        f'{" · " + _e(report.message) if report.message else ""}</p>',
        '<div class="cards">'
        f'<div class="card"><b>{passed}/{len(report.categories)}</b>categories passed</div>'
        f'<div class="card"><b>{len(report.all_nodes)}</b>nodes</div>'
        f'<div class="card"><b>{len(failed)}</b>failed nodes</div></div>',
    ]
    if report.failure_lines:
        body.append(f'<p class="muted">failure log ({_e(report.failure_source or "")})</p>'
                    f'<pre class="key-lines">{_e(chr(10).join(report.failure_lines))}</pre>')
    if failed:
        body.append(f"<p>Failed nodes: {_e(', '.join(failed))}</p>")
    body += [_category_section(c, i) for i, c in enumerate(report.categories)]
    body.append(_node_table(report))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            + "".join(body) + f"<script>{SCRIPT}</script></body></html>\n")
