"""The per-node gauges (cre.controller.certification.nodemetrics): sources replace their own
results, the latest result per node and category is shown, and a forgotten source's series go."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from cre.controller.certification.nodemetrics import NodeMetrics
from cre.core.certification.nodestate import NodeResult, NodeState

CATEGORY = "communication/nccl-loopback"
T1 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
T2 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _names(registry: CollectorRegistry) -> set[tuple[str, str]]:
    return {(s.name, s.labels["node"]) for m in registry.collect() for s in m.samples
            if s.name.startswith("cre_node_")}


def test_sources_merge_and_forgetting_removes_only_what_no_source_reports() -> None:
    """Two Certifications report n1 (the later one Failed wins, the pass of the earlier one is
    kept), one reports n2; forgetting the later one shows n1 Passed again, forgetting the other
    leaves no series at all."""
    registry = CollectorRegistry()
    metrics = NodeMetrics(registry)
    passed = NodeResult(node="n1", category=CATEGORY, state=NodeState.PASSED, at=T1,
                        last_pass=T1, bus_bandwidth_gbps=371.5)
    metrics.publish("ns/a", [passed, NodeResult(node="n2", category=CATEGORY,
                                                state=NodeState.UNCERTIFIED, at=T1)])
    metrics.publish("ns/b", [NodeResult(node="n1", category=CATEGORY, state=NodeState.FAILED,
                                        at=T2)])
    labels = {"node": "n1", "category": CATEGORY}
    assert registry.get_sample_value("cre_node_certification_state", labels) == 2
    assert registry.get_sample_value("cre_node_last_pass_timestamp_seconds",
                                     labels) == T1.timestamp()
    assert registry.get_sample_value("cre_node_bus_bandwidth_gbps", labels) is None
    metrics.forget("ns/b")
    assert registry.get_sample_value("cre_node_certification_state", labels) == 1
    assert registry.get_sample_value("cre_node_bus_bandwidth_gbps", labels) == 371.5
    assert ("cre_node_certification_state", "n2") in _names(registry)
    metrics.forget("ns/a")
    assert _names(registry) == set()


def test_a_source_with_no_results_left_drops_its_series() -> None:
    """A source publishing nothing (its Workflows are gone) removes the series it had."""
    registry = CollectorRegistry()
    metrics = NodeMetrics(registry)
    metrics.publish("ns/a", [NodeResult(node="n1", category=CATEGORY, state=NodeState.TESTING)])
    assert _names(registry) == {("cre_node_certification_state", "n1")}
    metrics.publish("ns/a", [])
    assert _names(registry) == set()
