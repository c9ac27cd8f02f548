"""Target discovery: matching, exclusions (reported, never silent), one platform, majority
architecture, GPU capacity, deterministic order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cre.api.common import NodeSelectorRequirement, TaintSelector, TargetSpec
from cre.api.conditions import WorkflowReason
from cre.core.common.observed import NodeTaint, NodeView
from cre.core.workflow.discovery import (
    Discovery,
    DiscoveryFailure,
    ExclusionReason,
    discover,
    majority_architecture,
)
from tests.core.tierworld import gpu_node, nodes

A100 = "NVIDIA-A100-SXM4-80GB"


def _ok(result: Discovery | DiscoveryFailure) -> Discovery:
    assert isinstance(result, Discovery), result
    return result


def test_only_gpu_nodes_in_name_order() -> None:
    """Non-GPU nodes are not candidates (and not reported); the rest come sorted by name."""
    pool = [gpu_node("b"), gpu_node("a"), gpu_node("cpu", gpu=False)]
    found = _ok(discover(target=TargetSpec(), nodes=pool))
    assert found.names == ("a", "b")
    assert found.excluded == ()
    assert (found.platform, found.architecture) == ("aws", "h100")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (TargetSpec(node_selector={"rack": "r1"}), ("a", "b")),
        (TargetSpec(match_expressions=(NodeSelectorRequirement(
            key="rack", operator="In", values=("r2",)),)), ("c",)),
        (TargetSpec(match_expressions=(NodeSelectorRequirement(
            key="rack", operator="NotIn", values=("r1",)),)), ("c", "d")),
        (TargetSpec(match_expressions=(NodeSelectorRequirement(
            key="rack", operator="Exists"),)), ("a", "b", "c")),
        (TargetSpec(match_expressions=(NodeSelectorRequirement(
            key="rack", operator="DoesNotExist"),)), ("d",)),
        (TargetSpec(node_names=("d", "a", "zz")), ("a", "d")),
        (TargetSpec(node_selector={"rack": "r1"}, node_names=("b", "c")), ("b",)),
        (TargetSpec(taint_selectors=(TaintSelector(key="dedicated"),)), ("b", "c")),
        (TargetSpec(taint_selectors=(TaintSelector(key="dedicated", value="gpu"),)), ("b",)),
        (TargetSpec(taint_selectors=(TaintSelector(key="dedicated", effect="NoExecute"),)),
         ("c",)),
    ],
)
def test_target_filters_all_apply(target: TargetSpec, expected: tuple[str, ...]) -> None:
    """nodeSelector, matchExpressions, nodeNames and taintSelectors all apply together."""
    pool = [
        gpu_node("a", labels=[("rack", "r1")]),
        gpu_node("b", labels=[("rack", "r1")],
                 taints=[NodeTaint(key="dedicated", value="gpu", effect="NoSchedule")]),
        gpu_node("c", labels=[("rack", "r2")],
                 taints=[NodeTaint(key="dedicated", value="x", effect="NoExecute")]),
        gpu_node("d"),
    ]
    assert _ok(discover(target=target, nodes=pool)).names == expected


def test_cordoned_and_not_ready_excluded_and_reported() -> None:
    """Cordoned and NotReady nodes are left out, each with its reason in the summary."""
    pool = [gpu_node("a"), gpu_node("b", cordoned=True), gpu_node("c", ready="False"),
            gpu_node("d", ready="Unknown")]
    found = _ok(discover(target=TargetSpec(), nodes=pool))
    assert found.names == ("a",)
    assert found.excluded_by(ExclusionReason.CORDONED) == ("b",)
    assert found.excluded_by(ExclusionReason.NOT_READY) == ("c", "d")
    assert "1 cordoned node(s) excluded (b)" in found.summary
    assert "2 NotReady node(s) excluded (c, d)" in found.summary


def test_cordoned_nodes_kept_when_the_target_asks_for_them() -> None:
    """Selecting the unschedulable taint admits cordoned nodes."""
    taint = NodeTaint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
    pool = [gpu_node("a", cordoned=True, taints=[taint]), gpu_node("b")]
    target = TargetSpec(taint_selectors=(TaintSelector(key="node.kubernetes.io/unschedulable"),))
    assert _ok(discover(target=target, nodes=pool)).names == ("a",)


def test_no_match_fails_with_node_discovery_error() -> None:
    """A target that matches no usable node fails NodeDiscoveryError naming the target."""
    result = discover(target=TargetSpec(node_selector={"rack": "nowhere"}), nodes=nodes(2))
    assert isinstance(result, DiscoveryFailure)
    assert result.reason == WorkflowReason.NODE_DISCOVERY_ERROR
    assert "rack=nowhere" in result.message


def test_two_platforms_fail_heterogeneous_platform() -> None:
    """One platform per Workflow: an AWS node and a GCP node fail, naming one of each."""
    pool = [gpu_node("a"), gpu_node("b", provider="gce://p/z/b")]
    result = discover(target=TargetSpec(), nodes=pool)
    assert isinstance(result, DiscoveryFailure)
    assert result.reason == WorkflowReason.HETEROGENEOUS_PLATFORM
    assert "aws (e.g. a)" in result.message and "gcp (e.g. b)" in result.message


def test_minority_architecture_excluded_unlabelled_kept() -> None:
    """The majority architecture stays; the minority is excluded; unlabelled nodes stay."""
    pool = [gpu_node("a"), gpu_node("b"), gpu_node("c", product=A100),
            gpu_node("d", product=None)]
    found = _ok(discover(target=TargetSpec(), nodes=pool))
    assert found.architecture == "h100"
    assert found.names == ("a", "b", "d")
    assert found.excluded_by(ExclusionReason.MINORITY_ARCHITECTURE) == ("c",)


def test_architecture_tie_goes_to_the_earliest_node() -> None:
    """A tie is broken by the architecture of the first node by name, not alphabetically."""
    pool = [gpu_node("b", product=A100), gpu_node("a"), gpu_node("c", product=A100),
            gpu_node("d")]
    assert majority_architecture(pool) == "h100"


def test_capacity_filter_keeps_missing_and_zero() -> None:
    """Positive allocatable below the request is excluded; 0 (plugin restarting) is kept."""
    pool = [gpu_node("a"), gpu_node("b", gpus=4), gpu_node("c", gpus=0)]
    found = _ok(discover(target=TargetSpec(), nodes=pool, gpus_per_node=8))
    assert found.names == ("a", "c")
    assert found.excluded_by(ExclusionReason.INSUFFICIENT_GPUS) == ("b",)


def test_every_node_under_capacity_fails_naming_the_best() -> None:
    """All nodes too small: PartitionError naming the request and the best available."""
    result = discover(target=TargetSpec(), nodes=[gpu_node("a", gpus=4),
                                                  gpu_node("b", gpus=2)], gpus_per_node=8)
    assert isinstance(result, DiscoveryFailure)
    assert result.reason == WorkflowReason.PARTITION_ERROR
    assert "8 nvidia.com/gpu" in result.message and "best available is 4" in result.message


@given(st.permutations([*nodes(6), gpu_node("x", cordoned=True), gpu_node("y", product=A100)]))
def test_discovery_ignores_input_order(pool: list[NodeView]) -> None:
    """The same nodes in any order give the same discovery."""
    assert discover(target=TargetSpec(), nodes=pool, gpus_per_node=8) == discover(
        target=TargetSpec(), nodes=sorted(pool, key=lambda n: n.name), gpus_per_node=8)
