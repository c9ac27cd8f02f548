"""The pure pieces of the ``cre`` command: paths to lines, thresholds, node verdicts, axis
steps and error mapping."""

from __future__ import annotations

import attrs
import pytest
from ruamel.yaml import YAML

from cre.api.converter import from_dict
from cre.cli.cluster import api_failure
from cre.cli.exitcodes import ExitCode
from cre.cli.htmlreport import nice_step, render_html, size_label
from cre.cli.yamlpos import resolve, show_path, tokens
from cre.core.certification.report import Snapshot, build_report, threshold_gbps
from cre.kube.client import ApiError

from .conftest import fixture_documents

DOC = """\
metadata:
  labels:
    cre.dev/job: x
spec:
  items:
  - name: a
  - name: b
    value: 2
"""


def test_paths_of_every_validator_spelling_find_their_line() -> None:
    """Model paths, structural paths and kube-schema paths land on the same node; a missing
    field points at its parent; dotted keys are joined back."""
    node = YAML(typ="rt", pure=True).load(DOC)
    assert tokens("spec.items[1].value") == ["spec", "items", 1, "value"]
    assert resolve(node, "spec.items[1].value") == (8, ["spec", "items", 1, "value"])
    assert resolve(node, ".spec.items.1.value")[0] == 8
    assert resolve(node, "spec.items[1].missing") == (7, ["spec", "items", 1, "missing"])
    line, keys = resolve(node, ".metadata.labels.cre.dev/job")
    assert line == 3 and show_path(keys) == "metadata.labels[cre.dev/job]"
    assert resolve(node, "(root)")[0] == 1


@pytest.mark.parametrize(("expr", "bound"), [
    ("value >= 300", 300.0), ("value > 12.5 && value < 900", 12.5), ("value <= 4", None)])
def test_the_threshold_line_is_a_simple_lower_bound(expr: str, bound: float | None) -> None:
    """Only ``value >= N`` / ``value > N`` draw a line."""
    assert threshold_gbps({"busBandwidthGBps": expr}) == bound


def test_node_verdicts_follow_the_group_and_the_jobs_failed_nodes() -> None:
    """A cancelled group leaves its nodes Incomplete; Succeeded groups pass theirs."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in fixture_documents()}
    cert = from_dict(docs[("Certification", "gpu-cert")])
    workflows = {n: from_dict(d) for (k, n), d in docs.items() if k == "Workflow"}
    jobs = {n: from_dict(d) for (k, n), d in docs.items() if k == "Job"}
    name = "gpu-cert-diagnostics-dcgm-level1"
    wf = workflows[name]
    cancelled = attrs.evolve(wf.status.groups[1], phase="Cancelled")
    workflows[name] = attrs.evolve(wf, status=attrs.evolve(
        wf.status, groups=(wf.status.groups[0], cancelled)))
    report = build_report(Snapshot(certification=cert, workflows=workflows, jobs=jobs))
    dcgm = {n.node: n.verdict for n in report.categories[1].nodes}
    assert dcgm == {"gpu-01": "Passed", "gpu-02": "Passed", "gpu-03": "Passed",
                    "gpu-04": "Incomplete", "gpu-05": "Incomplete", "gpu-06": "Incomplete"}
    assert report.failed_nodes == ("gpu-03", "gpu-04", "gpu-05", "gpu-06")
    page = render_html(report)
    assert "<script>" in page and "No bandwidth measured" in page  # no measurements given


def test_html_escapes_what_the_cluster_says() -> None:
    """A failure log with markup is shown as text."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in fixture_documents()}
    job = docs[("Job", "gpu-cert-communication-nccl-all-reduce-group-1")]
    job["status"]["failureLog"]["tail"] = "<script>alert(1)</script>"
    cert = from_dict(docs[("Certification", "gpu-cert")])
    workflows = {n: from_dict(d) for (k, n), d in docs.items() if k == "Workflow"}
    jobs = {n: from_dict(d) for (k, n), d in docs.items() if k == "Job"}
    page = render_html(build_report(Snapshot(certification=cert, workflows=workflows, jobs=jobs)))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 1


@pytest.mark.parametrize(("rough", "step"), [(0.3, 0.5), (7.0, 10.0), (77.5, 100.0),
                                             (120.0, 200.0), (0.0, 1.0)])
def test_axis_steps_are_round(rough: float, step: float) -> None:
    """1, 2 or 5 times a power of ten."""
    assert nice_step(rough) == pytest.approx(step)


def test_sizes_read_as_people_write_them() -> None:
    """Binary units on the x axis."""
    assert [size_label(s) for s in (8, 2048, 1 << 20, 3 << 30)] == ["8 B", "2 KiB", "1 MiB",
                                                                   "3 GiB"]


@pytest.mark.parametrize(("status", "code", "fragment"), [
    (0, ExitCode.UNREACHABLE, "cannot reach the API server at https://k:6443"),
    (401, ExitCode.API, "refused the request (401 Unauthorized)"),
    (403, ExitCode.API, "refused the request (403 Forbidden)"),
    (500, ExitCode.API, "Certification a/b: 500 InternalError"),
])
def test_api_errors_map_to_exit_codes(status: int, code: ExitCode, fragment: str) -> None:
    """Transport failures are unreachable; error statuses are the API's refusal."""
    reason = {401: "Unauthorized", 403: "Forbidden", 500: "InternalError"}.get(status, "")
    exc = ApiError(status=status, body={"reason": reason, "message": "no"},
                   message="GET /x: ClientConnectorError('refused')" if status == 0 else "")
    error = api_failure(exc, host="https://k:6443", what="Certification a/b")
    assert error.code == code and fragment in error.message


def test_categories_not_started_show_as_pending() -> None:
    """A Certification whose controller has not written a status yet lists its categories."""
    docs = {(d["kind"], d["metadata"]["name"]): d for d in fixture_documents()}
    raw = {k: v for k, v in docs[("Certification", "gpu-cert")].items() if k != "status"}
    report = build_report(Snapshot(certification=from_dict(raw)))
    assert [(c.entry, c.state) for c in report.categories] == [
        ("communication/nccl-all-reduce", "Pending"), ("diagnostics/dcgm-level1", "Pending")]
    assert report.result == "PENDING"
    assert "diagnostics/dcgm-level1" in render_html(report)
