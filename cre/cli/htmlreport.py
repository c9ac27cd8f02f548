"""``cre report --html``: the report as one self-contained HTML file a person would rather read.

No network fetches: the CSS and the few lines of JavaScript (the node table's filters, opening
a failure log at its first error) are inlined, and the charts are SVG drawn here, one per
category with one series per group: bus bandwidth against message size on a log-2 x axis, and
the ``busBandwidthGBps`` threshold as a dashed line. When nodes were measured one by one (a
per-node measurement such as ``nccl-loopback``, or one Job per node) a second chart draws one
bar per node with the threshold and the median, and marks the outliers (below the threshold,
flagged by the Certification's fleet-relative rule, or, without one, under
:data:`OUTLIER_FRACTION` of the median): an aggregate curve hides a slow node.

The page opens with the headline (the Certification's verdict message, which names the most
severe genuine failure) and that failure's key log lines, linked to the full log. Failed
groups' captured logs are folded (``<details>``; the headline's one open), wrap instead of
scrolling sideways, and open scrolled to their first NCCL ``WARN``/``ERROR`` line (else the
first error line), which carries an id. Every value from the cluster is escaped. Pure:
:func:`render_html` maps a :class:`~cre.core.certification.report.Report` to text.
"""

from __future__ import annotations

import html
import math
import re
import statistics
from collections.abc import Sequence
from typing import Final

import attrs

from cre.core.certification.report import (
    CategoryReport,
    GroupReport,
    NodeReport,
    Report,
    failure_lines,
)

WIDTH, HEIGHT = 720, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 20, 44
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")
# Worst first: a node's overall verdict is the worst of its categories.
SEVERITY = ("Failed", "Incomplete", "Running", "Pending", "Passed")
# A node whose peak is under this fraction of the category's median is an outlier even when it
# clears the threshold (or when there is none).
OUTLIER_FRACTION: Final = 0.8
BAR_H, BAR_GAP, BAR_LEFT, BAR_RIGHT, BAR_TOP = 16, 6, 190, 120, 36
_NCCL_PROBLEM: Final = re.compile(r"NCCL (WARN|ERROR)\b")

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
stroke-width:1.5}svg .median{stroke:#5b6475;stroke-dasharray:2 3}
svg .node-series .bar{fill:#1f77b4}svg .node-series.outlier .bar{fill:#c5221f}
svg .node-series.outlier text{fill:#c5221f;font-weight:600}svg .series.outlier polyline{
stroke-width:3.5}svg .node-series.no-data text{fill:#b06000}
p.outliers{color:#c5221f}
.headline{background:#fff;border:1px solid #dde1e8;border-left:.35rem solid #5b6475;
border-radius:.5rem;padding:.6rem 1.2rem;margin:1rem 0}.headline.failed{border-left-color:#c5221f}
.headline p{margin:.3rem 0}
pre.key-lines,details.failure-log pre{white-space:pre-wrap;overflow-wrap:anywhere;
overflow-x:hidden}
details.failure-log{margin:.5rem 0}details.failure-log pre{background:#1d2330;color:#e8eaed;
padding:.8rem;font-size:.8rem;max-height:28rem;overflow-y:auto;position:relative}
details.failure-log .key-line{color:#ffb4a9}details.failure-log .first-error{
background:#5c1d1a;color:#fff;scroll-margin-top:4rem}
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
  function toError(d){
    var pre=d.querySelector('pre'),first=d.querySelector('.first-error');
    if(d.open&&pre&&first){pre.scrollTop=Math.max(0,first.offsetTop-8);}
  }
  function reveal(id){
    var el=id&&document.getElementById(id),d=el&&el.closest('details');
    if(d){d.open=true;toError(d);el.scrollIntoView({block:'start'});}
  }
  document.querySelectorAll('details.failure-log').forEach(function(d){
    d.addEventListener('toggle',function(){toError(d);});toError(d);
  });
  document.querySelectorAll('a.to-error').forEach(function(a){
    a.addEventListener('click',function(){reveal(a.getAttribute('href').slice(1));});
  });
  reveal(location.hash.slice(1));
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


def _series_label(group: GroupReport, single: bool) -> str:
    """A curve's legend: the node when the group is one node, the mean when the curve averages
    per-node tables."""
    if single:
        return f"{group.nodes[0]}"
    measured = sum(1 for p in group.node_peaks if p.bus_bw is not None)
    return f"{group.name} (mean)" if measured > 1 else group.name


def chart_svg(category: CategoryReport, chart_id: str,
              outliers: dict[str, str] | None = None) -> str:
    """The bandwidth chart of one category (empty when nothing was measured); ``outliers``
    maps the groups to mark (one Job per node) to why."""
    outliers = outliers or {}
    single = _single_node(category)
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
        label, extra = _series_label(group, single), ""
        if single:
            extra = f' data-node="{_e(group.nodes[0])}"'
        why = outliers.get(group.name)
        if why:
            extra += f' data-why="{_e(why)}"'
        parts.append(f'<g class="series{" outlier" if why else ""}" data-group="{_e(group.name)}"'
                     f'{extra} data-points="{len(pts)}"><polyline fill="none" stroke="{color}" '
                     f'stroke-width="2" points="{coords}"/>')
        for p in pts:
            parts.append(f'<circle class="point" cx="{x(p.size_bytes):.1f}" '
                         f'cy="{y(p.bus_bw):.1f}" r="3" fill="{color}"><title>{_e(label)}: '
                         f'{_e(size_label(p.size_bytes))} busBW {p.bus_bw:.2f} GB/s</title>'
                         '</circle>')
        ly = TOP + 14 + 16 * i
        parts.append(f'<line x1="{LEFT + plot_w + 12}" x2="{LEFT + plot_w + 30}" y1="{ly - 4}" '
                     f'y2="{ly - 4}" stroke="{color}" stroke-width="2"/>'
                     f'<text x="{LEFT + plot_w + 34}" y="{ly}">{_e(label)}</text></g>')
    if category.threshold_gbps is not None:
        ty = y(category.threshold_gbps)
        parts.append(f'<line class="threshold" data-gbps="{category.threshold_gbps:.2f}" '
                     f'x1="{LEFT}" x2="{LEFT + plot_w}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
                     f'<text x="{LEFT + plot_w + 4}" y="{ty + 4:.1f}" fill="#c5221f">threshold '
                     f'{category.threshold_gbps:g}</text>')
    parts.append("</svg>")
    return "".join(parts)


@attrs.frozen(kw_only=True)
class NodeBar:
    """One node's own peak busBW in a category, and whether (and why) it is an outlier."""

    node: str
    group: str
    bus_bw: float | None
    message: str | None
    outlier: str | None  # why the node stands out, None when it does not


def _single_node(category: CategoryReport) -> bool:
    """One Job per node: every group has one node, and some group was measured."""
    return (bool(category.groups) and all(len(g.nodes) == 1 for g in category.groups)
            and any(g.points for g in category.groups))


def node_bars(category: CategoryReport) -> tuple[NodeBar, ...]:
    """Per-node peaks of a category (from per-node measurements, else one Job per node), sorted
    by node, with the outliers named; empty when the nodes were only measured together."""
    raw: list[tuple[str, str, float | None, str | None]] = [
        (p.node, g.name, p.bus_bw, p.message) for g in category.groups for p in g.node_peaks]
    if not raw and _single_node(category):
        raw = [(g.nodes[0], g.name, g.bus_bw_peak,
                None if g.points else f"no bandwidth measured ({g.phase})")
               for g in category.groups]
    measured = [bw for _, _, bw, _ in raw if bw is not None]
    median = statistics.median(measured) if measured else None
    bound = category.threshold_gbps
    judged = {n.node: n.outlier for n in category.nodes if n.outlier is not None}
    out = []
    for node, group, bw, message in sorted(raw):
        why = []
        if bw is not None and bound is not None and bw < bound:
            why.append(f"below the threshold {bound:g}")
        if node in judged:  # the relative rule's own finding, with its reference
            why.append(judged[node].message)
        elif bw is not None and median and len(measured) > 1 and bw < OUTLIER_FRACTION * median:
            why.append(f"{bw / median:.0%} of the median {median:.2f}")
        out.append(NodeBar(node=node, group=group, bus_bw=bw, message=message,
                           outlier="; ".join(why) or None))
    return tuple(out)


def node_chart_svg(category: CategoryReport, bars: Sequence[NodeBar], chart_id: str) -> str:
    """One horizontal bar per node (its own peak busBW), the threshold and the median as
    vertical lines, outliers in red; plus a line naming the outliers."""
    measured = [b.bus_bw for b in bars if b.bus_bw is not None]
    highest = max([*measured, category.threshold_gbps or 0.0, 1.0])
    step = nice_step(highest * 1.05 / 5)
    top = step * max(1, math.ceil(highest * 1.05 / step))
    plot_w = WIDTH - BAR_LEFT - BAR_RIGHT
    plot_h = len(bars) * (BAR_H + BAR_GAP)
    height = BAR_TOP + plot_h + BOTTOM

    def x(value: float) -> float:
        return BAR_LEFT + value / top * plot_w

    parts = [f'<svg class="node-chart" id="{_e(chart_id)}" data-category="{_e(category.entry)}" '
             f'xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" role="img" '
             f'aria-label="peak bus bandwidth per node, {_e(category.entry)}">']
    for i in range(round(top / step) + 1):
        value = step * i
        parts.append(f'<line class="grid" x1="{x(value):.1f}" x2="{x(value):.1f}" '
                     f'y1="{BAR_TOP}" y2="{BAR_TOP + plot_h}"/><text x="{x(value):.1f}" '
                     f'y="{BAR_TOP + plot_h + 16}" text-anchor="middle">{value:g}</text>')
    parts.append(f'<line class="axis" x1="{BAR_LEFT}" x2="{BAR_LEFT}" y1="{BAR_TOP}" '
                 f'y2="{BAR_TOP + plot_h}"/><text x="{BAR_LEFT + plot_w / 2}" y="{height - 8}" '
                 'text-anchor="middle">peak busBW per node (GB/s)</text>')
    for i, bar in enumerate(bars):
        top_y = BAR_TOP + i * (BAR_H + BAR_GAP) + BAR_GAP / 2
        mid = top_y + BAR_H / 2 + 4
        classes = "node-series" + (" outlier" if bar.outlier else "") + (
            " no-data" if bar.bus_bw is None else "")
        gbps = "" if bar.bus_bw is None else f' data-gbps="{bar.bus_bw:.2f}"'
        why = "" if bar.outlier is None else f' data-why="{_e(bar.outlier)}"'
        parts.append(f'<g class="{classes}" data-node="{_e(bar.node)}" '
                     f'data-group="{_e(bar.group)}"{gbps}{why}>'
                     f'<text x="{BAR_LEFT - 6}" y="{mid:.1f}" text-anchor="end">{_e(bar.node)}'
                     '</text>')
        if bar.bus_bw is None:
            parts.append(f'<text x="{BAR_LEFT + 6}" y="{mid:.1f}">no data: '
                         f'{_e(bar.message or "no figures")}</text></g>')
            continue
        title = f"{bar.node} ({bar.group}): peak busBW {bar.bus_bw:.2f} GB/s"
        if bar.outlier:
            title += f", {bar.outlier}"
        parts.append(f'<rect class="bar" x="{BAR_LEFT}" y="{top_y:.1f}" '
                     f'width="{max(x(bar.bus_bw) - BAR_LEFT, 1.0):.1f}" height="{BAR_H}">'
                     f'<title>{_e(title)}</title></rect><text x="{x(bar.bus_bw) + 4:.1f}" '
                     f'y="{mid:.1f}">{bar.bus_bw:.2f}</text></g>')
    if measured:
        median = statistics.median(measured)
        parts.append(f'<line class="median" data-gbps="{median:.2f}" x1="{x(median):.1f}" '
                     f'x2="{x(median):.1f}" y1="{BAR_TOP}" y2="{BAR_TOP + plot_h}"/>'
                     f'<text x="{x(median):.1f}" y="{BAR_TOP - 4}" text-anchor="middle">median '
                     f'{median:.2f}</text>')
    if category.threshold_gbps is not None:
        tx = x(category.threshold_gbps)
        parts.append(f'<line class="threshold" data-gbps="{category.threshold_gbps:.2f}" '
                     f'x1="{tx:.1f}" x2="{tx:.1f}" y1="{BAR_TOP}" y2="{BAR_TOP + plot_h}"/>'
                     f'<text x="{tx:.1f}" y="{BAR_TOP - 18}" text-anchor="middle" '
                     f'fill="#c5221f">threshold {category.threshold_gbps:g}</text>')
    parts.append("</svg>")
    slow = [b for b in bars if b.outlier]
    if slow:
        named = "; ".join(f"{b.node} ({b.bus_bw:.2f} GB/s: {b.outlier})" for b in slow
                          if b.bus_bw is not None)
        parts.append(f'<p class="outliers">Outliers: {_e(named)}</p>')
    return "".join(parts)


def log_anchor(category_index: int, group_index: int) -> str:
    """The id of the first NCCL WARN/ERROR (else error) line of a group's failure log."""
    return f"log-{category_index}-{group_index}-first-error"


def log_html(tail: str, anchor: str) -> str:
    """A failure log as escaped lines: the lines that explain the failure marked ``key-line``,
    the first NCCL ``WARN``/``ERROR`` line (else the first key line) ``first-error`` with the
    id ``anchor``."""
    lines = tail.splitlines()
    keys = {i for i, line in enumerate(lines) if failure_lines(line)}
    first = next((i for i, line in enumerate(lines) if _NCCL_PROBLEM.search(line)),
                 min(keys, default=None))
    out = []
    for i, line in enumerate(lines):
        if i == first:
            out.append(f'<span class="key-line first-error" id="{_e(anchor)}">{_e(line)}</span>')
        elif i in keys:
            out.append(f'<span class="key-line">{_e(line)}</span>')
        else:
            out.append(_e(line))
    return "\n".join(out) or "(empty)"


def _fc(node_or_group: NodeReport | None) -> str:
    fc = node_or_group.failure_class if node_or_group else None
    return "" if fc is None else f"{fc.scope}: {fc.reason}"


def _category_section(category: CategoryReport, index: int,
                      headline_log: tuple[int, int] | None = None) -> str:
    out = [f'<section class="category" id="category-{index}"><h2>{_e(category.entry)} '
           f'{_badge(category.verdict or category.state)}</h2>',
           f'<p class="muted">Workflow {_e(category.workflow or "not created yet")}'
           f'{" · platform " + _e(category.platform) if category.platform else ""}'
           f'{" · " + _e(category.architecture) if category.architecture else ""}'
           f'{" · " + _e(category.message) if category.message else ""}</p>']
    if category.thresholds:
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(category.thresholds.items()))
        out.append(f'<p>Thresholds: <code>{_e(shown)}</code></p>')
    bars = node_bars(category)
    out.append(chart_svg(category, f"chart-{index}", {
        b.group: b.outlier for b in bars if b.outlier and _single_node(category)}))
    if bars:
        means = [g for g in category.groups if len(g.node_peaks) > 1 and g.points]
        if means:
            counts = ", ".join(f"{g.name}: {len(g.node_peaks)} nodes" for g in means)
            out.append('<p class="muted">A curve marked (mean) averages the nodes measured one '
                       f'by one ({_e(counts)}); each node\'s own peak is drawn below.</p>')
        out.append(node_chart_svg(category, bars, f"node-chart-{index}"))
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
    for j, g in enumerate(category.groups):
        log = g.failure_log
        if log is None or g.phase == "Succeeded":
            continue
        where = f"pod {log.pod or '?'}"
        if log.container:
            where += f" container {log.container}"
        if log.node:
            where += f" on {log.node}"
        exit_text = f", exit code {log.exit_code}" if log.exit_code is not None else ""
        is_open = " open" if (index, j) == headline_log else ""
        out.append(f'<details class="failure-log" data-group="{_e(g.name)}"{is_open}><summary>'
                   f'{_e(g.name)}: failure log of {_e(where)}{_e(exit_text)}'
                   f'{" (" + _e(log.reason) + ")" if log.reason else ""}</summary>'
                   f'<pre>{log_html(log.tail, log_anchor(index, j))}</pre></details>')
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


def _headline_log(report: Report) -> tuple[int, int] | None:
    """(category, group) of the failure log the headline quotes (``report.failure_source``)."""
    for i, category in enumerate(report.categories):
        for j, g in enumerate(category.groups):
            log = g.failure_log
            if log is not None and report.failure_source == (
                    f"{category.entry} {g.name} {log.pod or ''}".rstrip()):
                return i, j
    return None


def _headline(report: Report, where: tuple[int, int] | None) -> str:
    """The verdict's message (the most severe genuine failure, as the Certification names it)
    with the key lines of its failure log and a link to that log's first error line."""
    if not report.message and not report.failure_lines:
        return ""
    failed = " failed" if report.result == "FAILED" else ""
    out = [f'<div class="headline{failed}" id="headline">']
    if report.message:
        out.append(f'<p class="headline-message"><b>{_e(report.reason or "")}</b>'
                   f'{": " if report.reason else ""}{_e(report.message)}</p>')
    if where is not None:
        category = report.categories[where[0]]
        group = category.groups[where[1]]
        fc = group.failure_class
        if fc is not None:
            detail = f" — {fc.message}" if fc.message else ""
            out.append(f'<p class="headline-cause">{_e(category.entry)} {_e(group.name)}: '
                       f'{_e(fc.scope)} {_e(fc.reason)}{_e(detail)}</p>')
    if report.failure_lines:
        link = "" if where is None else (
            f' · <a class="to-error" href="#{log_anchor(*where)}">open the full log at the '
            'first error</a>')
        out.append(f'<p class="muted">failure log ({_e(report.failure_source or "")}){link}</p>'
                   f'<pre class="key-lines">{_e(chr(10).join(report.failure_lines))}</pre>')
    out.append("</div>")
    return "".join(out)


def render_html(report: Report) -> str:
    """The whole report page."""
    passed = sum(1 for c in report.categories if c.verdict == "Passed")
    title = f"CRE report: {report.namespace}/{report.name}"
    failed = report.failed_nodes
    body = [
        f"<h1>{_e(title)} {_badge(report.result)}</h1>",
        f'<p class="muted">phase {_e(report.phase or "Pending")}'
        f'{" · " + _e(report.reason) if report.reason and not report.message else ""}</p>',
        '<div class="cards">'
        f'<div class="card"><b>{passed}/{len(report.categories)}</b>categories passed</div>'
        f'<div class="card"><b>{len(report.all_nodes)}</b>nodes</div>'
        f'<div class="card"><b>{len(failed)}</b>failed nodes</div></div>',
    ]
    where = _headline_log(report)
    body.append(_headline(report, where))
    if failed:
        body.append(f"<p>Failed nodes: {_e(', '.join(failed))}</p>")
    body += [_category_section(c, i, where) for i, c in enumerate(report.categories)]
    body.append(_node_table(report))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            + "".join(body) + f"<script>{SCRIPT}</script></body></html>\n")
