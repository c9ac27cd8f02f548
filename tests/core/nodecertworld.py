"""Builders for the NodeCertification core's tests: an ended Certification, its result
ConfigMaps' data and the records a fold writes, applied as the API server would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from cre.api.certification import CategoryStatus, Certification
from cre.api.conditions import CategoryState, ConditionType
from cre.api.meta import (
    Condition,
    ConditionStatus,
    NamespacedName,
    ObjectMeta,
    TypedLocalObjectReference,
)
from cre.api.nodecertification import NodeCertification, NodeCertificationSpec
from cre.core.common.observed import NodeView
from cre.core.nodecertification.reconcile import (
    NodeCertificationObservation,
    NodeCertificationPlan,
)
from cre.core.workflow import noderesults as NR
from cre.core.workflow.deferral import NodeRecord
from tests.core.tierworld import certification, gpu_node

T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def ended(*, name: str = "cert", at: datetime = T0, failed: bool = False,
          node_state: Mapping[str, Any] | None = None) -> Certification:
    """A Certification of one category (nccl-all-reduce) that ended at ``at``, its category's
    result ConfigMaps named after ``name``."""
    options = {"nodeState": dict(node_state)} if node_state is not None else {}
    cert = certification(("communication", "nccl-all-reduce"), uid=f"{name}-uid", **options)
    member = ConditionType.FAILED if failed else ConditionType.SUCCEEDED
    ref = {kind: TypedLocalObjectReference(kind="ConfigMap", name=f"{kind}-{name}")
           for kind in (NR.SUCCEEDED, NR.FAILED, NR.UNCERTIFIED)}
    category = CategoryStatus(
        domain="communication", variant="nccl-all-reduce",
        workflow_ref=NamespacedName(name=f"{name}-wf"),
        status=CategoryState.FAILED if failed else CategoryState.SUCCEEDED,
        succeeded_nodes_ref=ref[NR.SUCCEEDED], failed_nodes_ref=ref[NR.FAILED],
        uncertified_nodes_ref=ref[NR.UNCERTIFIED])
    condition = Condition(type=member, status=ConditionStatus.TRUE, reason="Done",
                          message="done", last_transition_time=at)
    return attrs.evolve(
        cert, metadata=attrs.evolve(cert.metadata, name=name),
        status=attrs.evolve(cert.status, conditions=(condition,),
                            category_statuses=(category,)))


def results(*, name: str = "cert", passed: Sequence[str] = (),
            failed: Sequence[NodeRecord] = (), uncertified: Sequence[NodeRecord] = ()
            ) -> dict[str, Mapping[str, bytes]]:
    """The binaryData of the three result ConfigMaps of :func:`ended`'s category."""
    return {
        f"{NR.SUCCEEDED}-{name}": {NR.data_key(NR.SUCCEEDED): NR.encode_names(passed)},
        f"{NR.FAILED}-{name}": {NR.data_key(NR.FAILED): NR.encode_records(failed)},
        f"{NR.UNCERTIFIED}-{name}": {NR.data_key(NR.UNCERTIFIED):
                                     NR.encode_records(uncertified)},
    }


def broken(node: str) -> NodeRecord:
    """A node the health monitor found broken."""
    return NodeRecord(name=node, reason="HardwareFailureDetected", message="XID 79",
                      scope="Node")


def aborted(node: str) -> NodeRecord:
    """A node an infrastructure abort left uncertified."""
    return NodeRecord(name=node, reason="PeerBroken", message="never judged", scope="Platform")


def gpu_nodes(*names: str) -> dict[str, NodeView]:
    """GPU nodes by name (resourceVersion ``1``)."""
    return {n: attrs.evolve(gpu_node(n), resource_version="1") for n in names}


def applied(obs: NodeCertificationObservation, plan: NodeCertificationPlan
            ) -> NodeCertificationObservation:
    """``obs`` once ``plan``'s records were written (the node patches are not applied)."""
    records = dict(obs.records)
    for write in plan.writes:
        if write.status is not None:
            held = records.get(write.node)
            version = int(held.metadata.resource_version or "0") if held else 0
            records[write.node] = NodeCertification(
                metadata=ObjectMeta(name=write.node, resource_version=str(version + 1)),
                spec=NodeCertificationSpec(node_name=write.node), status=write.status)
    return attrs.evolve(obs, records=records)


def later(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)
