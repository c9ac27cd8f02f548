"""The group-level fleet-relative rule: a Workflow group far slower than its peer groups.

With ``validation.performance.relativeThreshold.scope: Group`` the Workflow, not the Job,
applies the rule (the Job is one group and has no peers). When every group of an iteration has
finished, the groups that Succeeded with a busBW are compared with each other
(:func:`cre.core.job.fleet.find_group_outliers`: below ``percent`` % of the median of the other
groups, at least ``minPeers`` of them). An outlier group's nodes are listed in
``status.outliers`` (basis ``GroupMedian``, the group named), which the Certification copies
and ``cre report`` reads. ``Report`` changes no verdict; ``Fail`` turns the group Failed with
``ThresholdViolation`` and records its nodes Failed for it, as a missed static threshold does.

Judged once, in the pass where the last group finishes: a group that finished first is never
judged against peers that have not. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from cre.api.common import RelativeAction, RelativeScope, RelativeThreshold
from cre.api.conditions import FailedNodeReason, FailureScope, GroupPhase, OutlierBasis
from cre.api.job import NodeOutlier
from cre.api.workflow import GroupStatus
from cre.core.job.fleet import GroupOutlier, find_group_outliers
from cre.core.workflow import deferral as D


@attrs.frozen(kw_only=True)
class GroupJudgement:
    """What the group rule did to an iteration's groups."""

    groups: tuple[GroupStatus, ...]
    outliers: tuple[NodeOutlier, ...] = ()
    failed: tuple[D.NodeRecord, ...] = ()
    found: tuple[GroupOutlier, ...] = ()


def judge_groups(groups: Sequence[GroupStatus],
                 rule: RelativeThreshold | None) -> GroupJudgement:
    """``groups`` after the group rule (unchanged without a ``Group`` rule or while a group
    has not finished)."""
    if (rule is None or rule.scope != RelativeScope.GROUP
            or not all(g.phase.terminal for g in groups)):
        return GroupJudgement(groups=tuple(groups))
    values = {g.name: float(g.bus_bandwidth_gbps) for g in groups
              if g.phase == GroupPhase.SUCCEEDED and g.bus_bandwidth_gbps is not None}
    found = find_group_outliers(values, percent=rule.percent, min_peers=rule.min_peers)
    by_group = {o.group: o for o in found}
    outliers = tuple(NodeOutlier(node_name=node, bus_bw=f"{o.value:.2f}",
                                 reference=f"{o.reference:.2f}",
                                 basis=OutlierBasis.GROUP_MEDIAN, peers=o.peers, group=o.group,
                                 message=o.message)
                     for g in groups if (o := by_group.get(g.name)) is not None
                     for node in g.nodes)
    if rule.action != RelativeAction.FAIL:
        return GroupJudgement(groups=tuple(groups), outliers=outliers, found=found)
    failed = tuple(D.NodeRecord(name=node, reason=FailedNodeReason.THRESHOLD_VIOLATION,
                                message=by_group[g.name].message,
                                scope=str(FailureScope.WORKLOAD))
                   for g in groups if g.name in by_group for node in g.nodes)
    judged = tuple(attrs.evolve(g, phase=GroupPhase.FAILED,
                                failure_reason=FailedNodeReason.THRESHOLD_VIOLATION,
                                message=by_group[g.name].message)
                   if g.name in by_group else g for g in groups)
    return GroupJudgement(groups=judged, outliers=outliers, failed=failed, found=found)
