"""``cre report`` shows what the fleet-relative rule found: a node listed in its Job's
``status.outliers`` carries the comparison in JSON, REASON ``Outlier`` in the table (its verdict
unchanged), the summary counts it, and the HTML chart names the rule's reference."""

from __future__ import annotations

import attrs

from cre.api.conditions import OutlierBasis
from cre.api.job import NodeOutlier
from cre.cli.htmlreport import node_bars
from cre.cli.reportview import report_lines
from cre.core.certification.report import Report, build_report, report_json

from .conftest import HERE
from .test_htmlreport import snapshot

NODE = "aws-h100-node-6"  # a healthy node of the fixture, flagged here for the test
FLAG = NodeOutlier(node_name=NODE, bus_bw="478.91", reference="700.00",
                   basis=OutlierBasis.PEER_MEDIAN, peers=4, domain="c1",
                   message=f"Outlier: node {NODE} busBW 478.91 GB/s is below 80% of the median "
                           "of its 4 peers in c1 (700.00 GB/s)")


def _report(flagged: bool) -> Report:
    snap = snapshot(HERE / "fixtures" / "loopback-cert.yaml")
    if flagged:
        jobs = {name: attrs.evolve(job, status=attrs.evolve(job.status, outliers=(FLAG,)))
                for name, job in snap.jobs.items()}
        snap = attrs.evolve(snap, jobs=jobs)
    return build_report(snap)


def test_an_outlier_is_reported_per_node_without_changing_its_verdict() -> None:
    """JSON: the node's ``outlier`` holds value, reference, basis and peers and the summary
    lists it; its verdict is that of the report without the finding."""
    plain, flagged = report_json(_report(False)), report_json(_report(True))
    node = {n["node"]: n for n in flagged["categories"][0]["nodes"]}[NODE]
    before = {n["node"]: n for n in plain["categories"][0]["nodes"]}[NODE]
    assert node["outlier"] == {"busBW": "478.91", "reference": "700.00", "basis": "PeerMedian",
                               "peers": 4, "domain": "c1", "message": FLAG.message}
    assert before["outlier"] is None
    assert node["verdict"] == before["verdict"] == "Passed"
    assert flagged["summary"]["outlierNodes"] == [NODE]
    assert plain["summary"]["outlierNodes"] == []


def test_the_table_says_outlier_and_the_chart_uses_the_rule() -> None:
    """The table's REASON is Outlier for the flagged passed node and the summary line counts
    it; the HTML node chart marks it with the rule's own comparison."""
    report = _report(True)
    lines = report_lines(report, wide=False)
    assert "outliers 1" in lines[0]
    row = next(line for line in lines if line.startswith(NODE))
    assert row.split()[2:4] == ["Passed", "Outlier"]
    bars = {b.node: b for b in node_bars(report.categories[0])}
    assert bars[NODE].outlier == FLAG.message
    assert "outliers" not in report_lines(_report(False), wide=False)[0]


def test_the_category_status_keeps_the_outliers_once_the_jobs_are_gone() -> None:
    """A Certification whose Jobs were deleted still reports the outlier from its category
    status (copied from the Workflow): the node's outlier and the summary's list."""
    snap = snapshot(HERE / "fixtures" / "loopback-cert.yaml")
    cert = snap.certification
    statuses = tuple(attrs.evolve(s, outliers=(FLAG,))
                     for s in cert.status.category_statuses)
    snap = attrs.evolve(snap, jobs={}, certification=attrs.evolve(
        cert, status=attrs.evolve(cert.status, category_statuses=statuses)))
    report = build_report(snap)
    data = report_json(report)
    assert data["summary"]["outlierNodes"] == [NODE]
    node = {n["node"]: n for n in data["categories"][0]["nodes"]}[NODE]
    assert node["outlier"]["reference"] == "700.00" and node["outlier"]["domain"] == "c1"
