"""The node projection keeps what target discovery reads: taints and extended resource names."""

from __future__ import annotations

import pytest

from cre.core.common.observed import NodeTaint
from cre.core.common.projections import ProjectionError, node_view


def test_taints_and_extended_resources_are_kept() -> None:
    """spec.taints become NodeTaints; allocatable names beyond cpu/memory/pods/storage and
    hugepages are kept (sorted), their amounts are not."""
    view = node_view({
        "kind": "Node",
        "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110",
                                   "hugepages-2Mi": "0", "nvidia.com/gpu": "8",
                                   "nscale.com/rdmashare": "1"}},
    })
    assert view.taints == (NodeTaint(key="dedicated", value="gpu", effect="NoSchedule"),
                           NodeTaint(key="node.kubernetes.io/unschedulable",
                                     effect="NoSchedule"))
    assert view.extended_resources == ("nscale.com/rdmashare", "nvidia.com/gpu")
    assert view.allocatable_gpus == 8


def test_a_taint_without_key_names_the_field() -> None:
    """A malformed taint is a ProjectionError naming the node and the path."""
    with pytest.raises(ProjectionError, match=r"Node n1: spec.taints\[0\].key is required"):
        node_view({"kind": "Node", "metadata": {"name": "n1"}, "spec": {"taints": [{}]}})
