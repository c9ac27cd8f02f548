"""The HTML report's structure: the headline and its failure log (wrapped, opening at the first
NCCL WARN/ERROR line), and the per-node bandwidth chart of a loopback measurement (one bar per
node, the threshold and median lines, the slow node marked as an outlier).

Built from the fixtures ``fixtures/gpu-cert.yaml`` and ``fixtures/loopback-cert.yaml`` (the
statuses of the scenario golden ``goldens/measurement/loopback-bad-node.json``)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import attrs
import pytest

from cre.api.converter import from_dict
from cre.cli.htmlreport import OUTLIER_FRACTION, log_html, node_bars, render_html
from cre.core.certification.report import Report, Snapshot, build_report
from cre.testing.apiserver import Emulator

from .conftest import HERE, RunCli, fixture_documents, in_thread

LOOPBACK = HERE / "fixtures" / "loopback-cert.yaml"
SLOW = "aws-h100-node-3"


@attrs.frozen
class Element:
    """One start tag of the page, with its attributes and the text directly inside it."""

    tag: str
    attrs: dict[str, str]
    classes: frozenset[str]
    text: list[str] = attrs.field(factory=list)


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[Element] = []
        self.open: list[Element] = []

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs_}
        el = Element(tag, values, frozenset(values.get("class", "").split()))
        self.elements.append(el)
        if tag not in ("meta", "input", "line", "rect", "circle", "polyline", "br"):
            self.open.append(el)

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop().tag != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self.open:
            self.open[-1].text.append(data)


def elements(page: str) -> list[Element]:
    """Every start tag of ``page`` in document order."""
    parser = _Collect()
    parser.feed(page)
    return parser.elements


def select(page: str, tag: str, cls: str | None = None) -> list[Element]:
    """Elements of a tag (and class)."""
    return [e for e in elements(page) if e.tag == tag and (cls is None or cls in e.classes)]


def snapshot(path: Path) -> Snapshot:
    """The fixture's objects as ``cre report`` would read them from a cluster."""
    objs = {(d["kind"], d["metadata"]["name"]): from_dict(d) for d in fixture_documents(path)
            if d["kind"] != "Namespace"}
    cert = next(o for (k, _), o in objs.items() if k == "Certification")
    return Snapshot(
        certification=cert,
        workflows={n: o for (k, n), o in objs.items() if k == "Workflow"},
        jobs={n: o for (k, n), o in objs.items() if k == "Job"},
        bandwidth={o.spec.job_ref.name: o for (k, _), o in objs.items()
                   if k == "BandwidthMeasurement"})


@pytest.fixture
def loopback() -> Report:
    return build_report(snapshot(LOOPBACK))


@pytest.fixture
def gpu_report() -> Report:
    return build_report(snapshot(HERE / "fixtures" / "gpu-cert.yaml"))


def test_loopback_draws_one_bar_per_node_and_marks_the_slow_one(loopback: Report) -> None:
    """The per-node chart has the 8 nodes, each with its own peak; only the 191.60 GB/s node
    is an outlier, and the page names it."""
    page = render_html(loopback)
    assert len(select(page, "svg", "node-chart")) == 1
    bars = select(page, "g", "node-series")
    assert [b.attrs["data-node"] for b in bars] == [f"aws-h100-node-{i}" for i in range(8)]
    assert {b.attrs["data-node"]: b.attrs["data-gbps"] for b in bars}[SLOW] == "191.60"
    assert {b.attrs["data-gbps"] for b in bars if b.attrs["data-node"] != SLOW} == {"478.91"}
    outliers = [b for b in bars if "outlier" in b.classes]
    assert [b.attrs["data-node"] for b in outliers] == [SLOW]
    assert outliers[0].attrs["data-why"] == "below the threshold 300; 40% of the median 478.91"
    (named,) = select(page, "p", "outliers")
    assert "".join(named.text).startswith(f"Outliers: {SLOW} (191.60 GB/s")


def test_the_node_chart_draws_the_threshold_and_the_median(loopback: Report) -> None:
    """Both charts of the category carry the 300 GB/s threshold line; the node chart also the
    median of the nodes' peaks, and the aggregate curve says it is a mean."""
    page = render_html(loopback)
    chart = page[page.index('<svg class="node-chart"'):]
    chart = chart[:chart.index("</svg>")]
    assert [t.attrs["data-gbps"] for t in select(chart, "line", "threshold")] == ["300.00"]
    assert [m.attrs["data-gbps"] for m in select(chart, "line", "median")] == ["478.91"]
    assert [t.attrs["data-gbps"] for t in select(page, "line", "threshold")] == ["300.00"] * 2
    (curve,) = select(page, "g", "series")
    assert curve.attrs["data-points"] == "32" and "outlier" not in curve.classes
    assert "group-0 (mean)" in page and "group-0: 8 nodes" in page


def test_a_node_without_figures_is_shown_as_missing_not_as_slow(loopback: Report) -> None:
    """A node whose log held no table is drawn as no data, never as an outlier, and does not
    move the median."""
    group = loopback.categories[0].groups[0]
    peaks = tuple(attrs.evolve(p, bus_bw=None, message="pod x: no bandwidth rows in its log")
                  if p.node == "aws-h100-node-5" else p for p in group.node_peaks)
    category = attrs.evolve(loopback.categories[0],
                            groups=(attrs.evolve(group, node_peaks=peaks),))
    page = render_html(attrs.evolve(loopback, categories=(category,)))
    bars = {b.attrs["data-node"]: b for b in select(page, "g", "node-series")}
    missing = bars["aws-h100-node-5"]
    assert "no-data" in missing.classes and "outlier" not in missing.classes
    assert "data-gbps" not in missing.attrs
    assert "no data: pod x: no bandwidth rows in its log" in page
    assert [m.attrs["data-gbps"] for m in select(page, "line", "median")] == ["478.91"]
    assert [n for n, b in bars.items() if "outlier" in b.classes] == [SLOW]


def test_one_job_per_node_labels_each_curve_with_its_node(gpu_report: Report) -> None:
    """When every group is one node, each curve is that node's own measurement: it is named
    by the node, and the nodes below the threshold or far under the median are outliers in
    both charts."""
    category = gpu_report.categories[0]
    groups = tuple(attrs.evolve(g, nodes=g.nodes[:1]) for g in category.groups)
    single = attrs.evolve(category, groups=groups)
    bars = node_bars(single)
    assert [(b.node, b.bus_bw) for b in bars] == [
        ("gpu-01", 352.17), ("gpu-03", 123.35), ("gpu-05", 210.40)]
    assert [b.node for b in bars if b.outlier] == ["gpu-03", "gpu-05"]
    page = render_html(attrs.evolve(gpu_report, categories=(single, *gpu_report.categories[1:])))
    curves = select(page, "g", "series")
    assert [c.attrs["data-node"] for c in curves] == ["gpu-01", "gpu-03", "gpu-05"]
    assert [c.attrs["data-node"] for c in curves if "outlier" in c.classes] == ["gpu-03",
                                                                               "gpu-05"]
    assert [b.attrs["data-node"] for b in select(page, "g", "node-series")
            if "outlier" in b.classes] == ["gpu-03", "gpu-05"]


def test_far_below_the_median_is_an_outlier_without_a_threshold(loopback: Report) -> None:
    """With no threshold, a node under OUTLIER_FRACTION of the median still stands out; one
    just under the median does not."""
    category = attrs.evolve(loopback.categories[0], threshold_gbps=None)
    group = category.groups[0]
    near = 478.91 * (OUTLIER_FRACTION + 0.05)
    peaks = tuple(attrs.evolve(p, bus_bw=near) if p.node == "aws-h100-node-0" else p
                  for p in group.node_peaks)
    bars = node_bars(attrs.evolve(category, groups=(attrs.evolve(group, node_peaks=peaks),)))
    assert [(b.node, b.outlier) for b in bars if b.outlier] == [
        (SLOW, "40% of the median 478.91")]


def test_measured_together_draws_no_node_chart(gpu_report: Report) -> None:
    """Groups of several nodes measured as one have no per-node figures: no node chart, and
    the curves keep their group names."""
    page = render_html(gpu_report)
    assert select(page, "svg", "node-chart") == [] and select(page, "p", "outliers") == []
    assert [c.attrs["data-group"] for c in select(page, "g", "series")] == [
        "group-0", "group-1", "group-2"]
    assert all("data-node" not in c.attrs for c in select(page, "g", "series"))


def test_the_headline_is_the_failure_with_its_log_lines(gpu_report: Report) -> None:
    """The page opens with the verdict's message, the failing group's failure class and the
    WARN/error lines of its log, linked to that log's first NCCL WARN line."""
    page = render_html(gpu_report)
    (head,) = select(page, "div", "headline")
    assert "failed" in head.classes
    assert page.index('class="headline') < page.index('<section class="category"')
    (message,) = select(page, "p", "headline-message")
    assert "".join(message.text) == ": Category communication/nccl-all-reduce failed"
    (cause,) = select(page, "p", "headline-cause")
    assert "".join(cause.text) == ("communication/nccl-all-reduce group-1: Workload "
                                   "LauncherExitedNonZero — mpirun exited 1: NCCL WARN Net : "
                                   "Connection closed")
    (lines,) = select(page, "pre", "key-lines")
    assert "".join(lines.text).splitlines()[0].endswith(
        "NCCL WARN Net : Connection closed by remote peer gpu-03<51234>")
    (link,) = select(page, "a", "to-error")
    assert link.attrs["href"] == "#log-0-1-first-error"


def test_a_threshold_miss_headline_names_the_node(loopback: Report) -> None:
    """A loopback threshold miss has no log: the headline is the verdict message naming the
    slow node and its figure, and no log lines are invented."""
    page = render_html(loopback)
    (message,) = select(page, "p", "headline-message")
    text = "".join(message.text)
    assert text.startswith(": A performance threshold was missed: Category "
                           "communication/nccl-loopback")
    assert f"violated on node {SLOW}: measured 191.6000" in text
    assert select(page, "pre", "key-lines") == [] and select(page, "a", "to-error") == []


def test_the_failure_log_opens_at_its_first_nccl_warn_line(gpu_report: Report) -> None:
    """The headline's log is unfolded; its first NCCL WARN line carries the anchor id (the
    INFO line before it does not), the other error lines are marked, and the page's script
    scrolls the log there."""
    page = render_html(gpu_report)
    (log,) = select(page, "details", "failure-log")
    assert "open" in log.attrs
    spans = select(page, "span", "key-line")
    first = [s for s in spans if "first-error" in s.classes]
    assert len(first) == 1 and first[0].attrs["id"] == "log-0-1-first-error"
    assert "NCCL WARN Net : Connection closed" in "".join(first[0].text)
    assert not any("NCCL INFO" in "".join(s.text) for s in spans)
    assert ["Test NCCL failure" in "".join(s.text) for s in spans] == [False, True, False]
    script = select(page, "script")
    assert len(script) == 1 and ".first-error" in page and "scrollTop" in page


def test_failure_logs_wrap_instead_of_scrolling_sideways(gpu_report: Report) -> None:
    """The log styles wrap long lines and never scroll horizontally; the page stays one file
    with no network reference."""
    page = render_html(gpu_report)
    css = page[page.index("<style>"):page.index("</style>")]
    rule = re.search(r"pre\.key-lines,details\.failure-log pre\{([^}]*)\}", css)
    assert rule is not None
    assert "white-space:pre-wrap" in rule.group(1) and "overflow-x:hidden" in rule.group(1)
    assert "overflow-wrap:anywhere" in rule.group(1) and "overflow-x:auto" not in css
    assert "scroll-margin-top" in css
    assert "<link" not in page and "src=" not in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


@pytest.mark.parametrize(("tail", "first"), [
    ("a NCCL INFO x\nfatal error: boom\nb NCCL WARN late\nc NCCL ERROR later", "b NCCL WARN late"),
    ("NCCL INFO ok\nc NCCL ERROR unhandled system error", "c NCCL ERROR unhandled system error"),
    ("starting\nTraceback (most recent call last):\n  raise", "Traceback (most recent call last):"),
])
def test_the_anchor_prefers_nccl_warn_or_error_lines(tail: str, first: str) -> None:
    """The first NCCL WARN/ERROR line gets the anchor even after an earlier error line; with
    none, the first line that explains the failure."""
    out = log_html(tail, "a1")
    anchored = re.findall(r'<span class="key-line first-error" id="a1">([^<]*)</span>', out)
    assert anchored == [first.replace("&", "&amp;")]


def test_a_log_without_error_lines_has_no_anchor() -> None:
    """Nothing to point at: the log is shown as it is, escaped, without an id."""
    out = log_html("all good <ok>\nNCCL INFO chatter", "a1")
    assert out == "all good &lt;ok&gt;\nNCCL INFO chatter"
    assert log_html("", "a1") == "(empty)"


@pytest.fixture
async def loopback_cert(kube_emulator: Emulator) -> Emulator:
    """The emulator holding the loopback fixture."""
    from cre.kube.client import KubeClient

    from .conftest import apply_fixture

    client = await KubeClient.from_kubeconfig(str(kube_emulator.kubeconfig_path))
    try:
        await apply_fixture(client, fixture_documents(LOOPBACK))
    finally:
        await client.close()
    return kube_emulator


@pytest.mark.anyio
async def test_cre_report_html_of_a_loopback_certification(loopback_cert: Emulator,
                                                           cre: RunCli, tmp_path: Path) -> None:
    """``cre report --html`` read from a cluster draws the loopback nodes one by one."""
    target = tmp_path / "lb.html"
    run = await in_thread(cre, "report", "lb", "-n", "team-b", "--html", str(target),
                          "--kubeconfig", str(loopback_cert.kubeconfig_path))
    assert run.code == 0, run.err
    page = target.read_text(encoding="utf-8")
    bars: list[Any] = select(page, "g", "node-series")
    assert len(bars) == 8
    assert [b.attrs["data-node"] for b in bars if "outlier" in b.classes] == [SLOW]
