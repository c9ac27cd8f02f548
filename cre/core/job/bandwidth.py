"""The Job's side of bandwidth measurement: its BandwidthMeasurement, and its threshold verdict.

A Job whose spec asks for ``bandwidthMeasurement`` owns one BandwidthMeasurement, named
``<job>-bandwidth``, controlled by the Job (owner reference with the Job's uid, so garbage
collection removes it with the Job) and annotated with the Job's uid (``cre.dev/job-uid``). It is
created in the same Plan as the workload and before it, and only there: a create on a cache miss
later would race the cluster's own creations (and an AlreadyExists still costs the API server a
uid), so the point where a Job's objects come into being stays fixed. A group retry re-creates a
Job under the same name; a measurement left by the previous Job (its uid differs) is deleted with
a uid precondition before the workload is created, so numbers of two attempts never mix (the
GoodputMeasurement is created the same way: :mod:`cre.core.measure.logread`).

Once the Job succeeded, thresholds are judged by :func:`cre.core.job.thresholds.judge` on the
measurement's final values (the training keys on its GoodputMeasurement's, design record
025); the verdict is the additive ``ValidationFailed`` condition (the trio
stays Succeeded), written once: a Job that already carries ``ValidationFailed`` is never judged
again. Until the verdict, the Job waits: its deadline is ``measurementTimeout`` after the
Job's Succeeded transition (``COMPLETION_GRACE`` later while its measurement has not completed),
read on the injected clock; it looks again at most every ``cap`` seconds (the Job settings'
poll interval) and when the measurement changes. This is the one clock that decides: the
Workflow waits for this verdict and never counts a group with thresholds Passed without it
(cre.core.workflow.run). A measurement that says it cannot run as configured (its LogProfile
missing or invalid, its jobRef naming another kind) is judged at once: ``ThresholdNoData`` with
``failureClass`` scope ``Configuration`` and the measurement's message (e.g. "LogProfile
nccl-loopback not found").

Job status fields for the tiers above (documented in docs/design/015-measurement.md):
``ValidationFailed`` (True: reason ThresholdViolated / ThresholdNoData / UnknownThresholdKey
/ InvalidThresholdExpression, message with the measured value and expression; False:
ThresholdsMet), ``status.failureClass`` for a verdict that is not the measured figures'
(Configuration, or the cause a ThresholdNoData ended on) and ``status.busBandwidthGBps``
(the measured value, a ``"%.2f"`` string, shown
as the printer column ``BusBW``). A per-node measurement (``nccl-loopback``) is judged per node:
``busBandwidthGBps`` is then the **lowest** node's peak (the number that explains a miss), and
each node that missed is listed in ``status.failedNodes`` with reason ``ThresholdViolation``, so
the Workflow blames only those nodes.

With ``spec.relativeThreshold`` the per-node values are also compared with each other when the
verdict is given (:mod:`cre.core.job.fleet`; node domains from the observed nodes' labels): the
outliers are written to ``status.outliers`` whatever the action; ``Report`` changes nothing
else, ``Fail`` lists each outlier the thresholds passed in ``failedNodes``
(``ThresholdViolation``, the comparison as message) and the verdict is ``ThresholdViolated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from cre.api.common import RelativeAction
from cre.api.conditions import ConditionType, FailedNodeReason, FailureScope, JobReason
from cre.api.goodput import GoodputMeasurement
from cre.api.job import FailedNode, Job, JobStatus, NodeOutlier
from cre.api.labels import GROUP
from cre.api.measurement import BandwidthMeasurement
from cre.api.meta import Condition, TypedLocalObjectReference
from cre.core.common.lifecycle import true_member
from cre.core.common.observed import NodeView
from cre.core.common.plan import Create, Delete, EventSeverity, EventSpec
from cre.core.job.fleet import Outlier, find_outliers
from cre.core.job.thresholds import (
    BANDWIDTH_KEYS,
    GOODPUT_KEYS,
    AnyMeasurement,
    MetricKey,
    Verdict,
    Wait,
    configuration_problem,
    goodput_values,
    judge,
    judge_nodes,
    measured_values,
    measurement_completed,
    measurement_state,
    no_data_scope,
    node_values,
)
from cre.core.measure import logread as logmeasure
from cre.core.measure.logread import JOB_UID_ANNOTATION as JOB_UID_ANNOTATION
from cre.core.measure.logread import belongs_to as belongs_to
from cre.core.measure.logread import child_manifest, child_writes

BANDWIDTH_KIND: Final = "BandwidthMeasurement"
SUFFIX: Final = "-bandwidth"


def bandwidth_name(job_name: str) -> str:
    """The name of a Job's BandwidthMeasurement."""
    return f"{job_name}{SUFFIX}"


def job_name_of(measurement_name: str) -> str | None:
    """The Job a measurement name belongs to (``None``: not a Job's measurement name)."""
    return logmeasure.job_name_of(measurement_name, SUFFIX)


def bandwidth_manifest(job: Job) -> dict[str, Any]:
    """The BandwidthMeasurement ``job`` asks for (its spec must carry the request)."""
    request = job.spec.bandwidth_measurement
    assert request is not None
    name = job.metadata.name or ""
    spec = request.for_job(TypedLocalObjectReference(api_group=GROUP, kind="Job", name=name))
    body: dict[str, Any] = {"jobRef": {"apiGroup": GROUP, "kind": "Job", "name": name},
                            "logProfileRef": spec.log_profile_ref,
                            "sampleInterval": spec.sample_interval}
    if spec.test_type:
        body["testType"] = spec.test_type
    return child_manifest(job, kind=BANDWIDTH_KIND, name=bandwidth_name(name), spec=body)


def bandwidth_writes(job: Job, bm: BandwidthMeasurement | None
                       ) -> tuple[tuple[Create, ...], tuple[Delete, ...]]:
    """The create (or the delete of a previous Job's leftover) the Job's measurement needs."""
    wanted = job.spec.bandwidth_measurement is not None
    return child_writes(job, bm, kind=BANDWIDTH_KIND,
                        manifest=bandwidth_manifest if wanted else None)


def own_bandwidth(job: Job, bm: BandwidthMeasurement | None) -> BandwidthMeasurement | None:
    """``bm`` if it measures this Job, else ``None``."""
    return bm if bm is not None and belongs_to(bm, job) else None


@attrs.frozen(kw_only=True)
class Validation:
    """What judging the thresholds gives: the new status and event, or when to look again."""

    status: JobStatus
    event: EventSpec | None = None
    requeue_after: float | None = None


def has_verdict(job: Job) -> bool:
    return any(c.type == ConditionType.VALIDATION_FAILED for c in job.status.conditions)


def outliers_of(job: Job, per_node: dict[str, dict[str, float]] | None,
                nodes: Sequence[NodeView]) -> tuple[Outlier, ...]:
    """The fleet-relative outliers of a final per-node measurement (none without
    ``spec.relativeThreshold``); a node without a busBW value is never one."""
    rule = job.spec.relative_threshold
    if rule is None or per_node is None:
        return ()
    values = {n: v[MetricKey.BUS_BANDWIDTH] for n, v in per_node.items()
              if MetricKey.BUS_BANDWIDTH in v}
    key = rule.topology_key
    domains = {n.name: n.label(key) for n in nodes} if key else {}
    return find_outliers(values, domains=domains, percent=rule.percent,
                         min_peers=rule.min_peers)


def validate_succeeded(job: Job, bm: BandwidthMeasurement | None, now: datetime, *,
                       timeout: timedelta, cap: float,
                       nodes: Sequence[NodeView] = (),
                       gm: GoodputMeasurement | None = None) -> Validation:
    """The threshold verdict of a Succeeded Job (status unchanged while it waits);
    ``timeout`` is the Job's ``measurementTimeout``, ``cap`` the longest requeue while it
    waits (seconds of the injected clock), ``nodes`` the observed nodes (their labels are the
    topology domains of the relative rule), ``gm`` its GoodputMeasurement (the training
    keys' values)."""
    status = job.status
    own = own_bandwidth(job, bm)
    own_gm = gm if gm is not None and belongs_to(gm, job) else None
    values = {**measured_values(own), **goodput_values(own_gm)}
    per_node = node_values(own)
    bus = values.get(MetricKey.BUS_BANDWIDTH)
    if per_node is not None:
        buses = [v[MetricKey.BUS_BANDWIDTH] for v in per_node.values()
                 if MetricKey.BUS_BANDWIDTH in v]
        bus = min(buses) if buses else None
    if bus is not None and status.bus_bandwidth_gbps is None:
        status = attrs.evolve(status, bus_bandwidth_gbps=f"{bus:.2f}")
    if not job.spec.thresholds or has_verdict(job):
        return Validation(status=status)
    member = true_member(status.conditions)
    succeeded_at = (member.last_transition_time if member is not None
                    and member.last_transition_time is not None else now)
    outliers = outliers_of(job, per_node, nodes)
    rule = job.spec.relative_threshold
    failing = ({o.node: o.message for o in outliers}
               if rule is not None and rule.action == RelativeAction.FAIL else {})
    verdict = _verdict(job, own, own_gm, values, per_node, succeeded_at=succeeded_at,
                       now=now, timeout=timeout, outliers=failing)
    if not isinstance(verdict, Verdict):
        left = max((verdict.deadline - now).total_seconds(), 0.0)
        return Validation(status=status, requeue_after=min(left, cap))
    cond = Condition(type=ConditionType.VALIDATION_FAILED, status=verdict.status,
                     reason=verdict.reason, message=verdict.message, last_transition_time=now,
                     observed_generation=job.metadata.generation)
    status = attrs.evolve(status, conditions=(*status.conditions, cond), outliers=tuple(
        NodeOutlier(node_name=o.node, bus_bw=f"{o.value:.2f}", reference=f"{o.reference:.2f}",
                    basis=o.basis, peers=o.peers, domain=o.domain, message=o.message)
        for o in outliers))
    if verdict.failure_class is not None and status.failure_class is None:
        status = attrs.evolve(status, failure_class=verdict.failure_class)
    if verdict.nodes:
        named = {(f.name, f.reason) for f in status.failed_nodes}
        status = attrs.evolve(status, failed_nodes=(*status.failed_nodes, *(
            FailedNode(name=node, reason=FailedNodeReason.THRESHOLD_VIOLATION, message=why)
            for node, why in verdict.nodes
            if (node, FailedNodeReason.THRESHOLD_VIOLATION) not in named)))
    severity = EventSeverity.WARNING if verdict.failed else EventSeverity.NORMAL
    return Validation(status=status, event=EventSpec(type=severity, reason=verdict.reason,
                                                     message=verdict.message))


def _sources(job: Job, own: BandwidthMeasurement | None, gm: GoodputMeasurement | None
             ) -> tuple[tuple[frozenset[str], AnyMeasurement | None, str, str | None], ...]:
    """Per measurement the thresholds read, bandwidth first: (its keys among the thresholds,
    the measurement, its kind, the Job spec field that should ask for it when the Job
    neither asks for one nor has one, else ``None``)."""
    keys = frozenset(job.spec.thresholds)
    out: list[tuple[frozenset[str], AnyMeasurement | None, str, str | None]] = []
    for family, m, kind, field, asked in (
            (BANDWIDTH_KEYS, own, BandwidthMeasurement.KIND, "bandwidthMeasurement",
             job.spec.bandwidth_measurement is not None),
            (GOODPUT_KEYS, gm, GoodputMeasurement.KIND, "goodputMeasurement",
             job.spec.goodput_measurement is not None)):
        if keys & family:
            out.append((keys & family, m, kind, None if asked or m is not None else field))
    return tuple(out)


def _verdict(job: Job, own: BandwidthMeasurement | None, gm: GoodputMeasurement | None,
             values: dict[str, float], per_node: dict[str, dict[str, float]] | None, *,
             succeeded_at: datetime, now: datetime, timeout: timedelta,
             outliers: dict[str, str]) -> Verdict | Wait:
    thresholds = job.spec.thresholds
    # The user's own mistakes in the thresholds come first (judged without any value).
    early = judge(thresholds, {}, succeeded_at=succeeded_at, now=succeeded_at,
                  timeout=timedelta(days=1))
    if isinstance(early, Verdict):
        return early
    sources = _sources(job, own, gm)
    for keys, m, _, missing in sources:
        if missing is not None:
            return Verdict(failed=True, reason=JobReason.THRESHOLD_NO_DATA,
                           message=f"Threshold(s) {', '.join(sorted(keys))} cannot be "
                           f"evaluated: the Job has no spec.{missing}",
                           scope=FailureScope.CONFIGURATION)
        problem = configuration_problem(m)
        if problem is not None:
            return Verdict(failed=True, reason=JobReason.THRESHOLD_NO_DATA,
                           message=f"Threshold(s) {', '.join(sorted(thresholds))} cannot be "
                           f"evaluated: {problem[1]}", scope=FailureScope.CONFIGURATION)
    if per_node is not None and own is not None:
        return judge_nodes(thresholds, per_node, why_missing={
            n.node_name: n.message for n in own.status.node_results if n.message},
            outliers=outliers)
    # Messages and the no-data cause name the first measurement still missing a value.
    _, m, kind, _ = next((s for s in sources if not s[0] <= values.keys()), sources[0])
    return judge(thresholds, values, succeeded_at=succeeded_at, now=now, timeout=timeout,
                 state=measurement_state(m, kind=kind),
                 completed=all(measurement_completed(s[1]) for s in sources),
                 no_data=no_data_scope(m))
