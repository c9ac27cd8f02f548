"""The ``nodeHealthMonitor``: a user's CEL expression over each node of a running Job.

The reference runs a CEL detector with one variable, ``node`` (a corev1 Node), on the Job's
nodes while the Job is not terminal; true means the node is unhealthy. Here the expression is
evaluated on the nodes of the Observation (the group's nodes and those hosting the Job's pods) by
:func:`check_node`, with the program compiled once per expression (``cre.api.cel``, cached, no
I/O). The shell calls it once per node copy (a node's resourceVersion) and expression, not on
every pass of every Job, and the core reads the results (``Observation.node_checks``).

``node`` is the Node as the slim projection keeps it, in corev1 JSON shape: ``metadata`` (name,
uid, every label), ``spec`` (``unschedulable``, ``taints``, ``providerID``) and ``status``
(``conditions`` with type/status/reason/message, ``allocatable`` GPUs). Scalars a Go client
would see as zero values are present with those values (``spec.unschedulable`` is ``false``
on a node that omits it), so the catalog default ``node.spec.unschedulable == true`` means the
same thing here as on the typed Go object. Heartbeat times, images and volumes are not kept.

An expression that fails to evaluate on a node (a missing map key, a result that is not a bool)
does not flag it, as in the reference where such errors are only logged; here the errors are
returned so the Job's InProgress message can name them. A syntax error never gets this far:
validation rejects the spec (``InvalidSpec``) before any workload exists.

Besides the expression, a monitor can name the signals of broken hardware directly, each
judged on the node's slim view (one function per signal below):

* ``conditions``: the node has a condition of that type with that status (a GPU-health
  condition set by a node problem detector or a health agent);
* ``taints``: the node carries a matching taint (unset value or effect: any);
* ``labels``: the node has the label with that value;
* ``gpuAllocatableDrop``: the node's allocatable ``nvidia.com/gpu`` is below its count when the
  Workflow launched the group (the Job's ``cre.dev/group-gpus`` annotation, ``node=count`` comma
  separated; a Job without it has no baseline and this signal stays silent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from cre.api.cel import CelError, compile_cel
from cre.api.conditions import ConditionType, FailedNodeReason, JobReason
from cre.api.job import FailedNode, Job, JobStatus, NodeHealthMonitor
from cre.api.meta import Condition, ConditionStatus
from cre.core.common.lifecycle import bound_note
from cre.core.common.observed import NodeCheck, NodeView

GPU_RESOURCE: Final = "nvidia.com/gpu"
# ``node=count,...``: each group node's allocatable nvidia.com/gpu when the group launched.
GROUP_GPUS: Final = "cre.dev/group-gpus"


@attrs.frozen(kw_only=True)
class HealthVerdict:
    """The monitor's result on a set of nodes: the names it flagged, what it found on each
    (``(node, finding)``, empty for the expression alone) and the evaluation errors
    (``(node, message)``), all in node-name order."""

    expression: str = ""
    flagged: tuple[str, ...] = ()
    errors: tuple[tuple[str, str], ...] = ()
    findings: tuple[tuple[str, str], ...] = ()

    def message(self) -> str:
        """``Hardware failure detected on node(s) a, b: nodeHealthMonitor `<expr>` is true``
        (the expression), or the signals found on each node."""
        head = f"Hardware failure detected on node(s) {', '.join(self.flagged)}: "
        if not self.findings:
            return head + f"nodeHealthMonitor `{self.expression}` is true"
        return head + "; ".join(f"{node}: {what}" for node, what in self.findings)

    def note(self) -> str:
        """A sentence on the evaluation errors, or ``""``."""
        if not self.errors:
            return ""
        shown = "; ".join(f"{node}: {error}" for node, error in self.errors[:3])
        more = f" (and {len(self.errors) - 3} more)" if len(self.errors) > 3 else ""
        return f"; nodeHealthMonitor could not be evaluated on {shown}{more}"


def condition_signal(monitor: NodeHealthMonitor, view: NodeView) -> str | None:
    """The first ``conditions`` entry ``view`` matches, described, or ``None``."""
    for want in monitor.conditions:
        if any(c.type == want.type and c.status == want.status for c in view.conditions):
            return f"condition {want.type}={want.status}"
    return None


def taint_signal(monitor: NodeHealthMonitor, view: NodeView) -> str | None:
    """The first ``taints`` entry ``view`` carries, described, or ``None``."""
    for want in monitor.taints:
        for t in view.taints:
            if t.key == want.key and (want.value is None or t.value == want.value) \
                    and (want.effect is None or t.effect == want.effect):
                return f"taint {t.key}" + (f"={t.value}" if t.value else "") \
                    + (f":{t.effect}" if t.effect else "")
    return None


def label_signal(monitor: NodeHealthMonitor, view: NodeView) -> str | None:
    """The first ``labels`` entry ``view`` has with that value, described, or ``None``."""
    for key, value in sorted(monitor.labels.items()):
        if view.label(key) == value:
            return f"label {key}={value}"
    return None


def gpu_drop_signal(monitor: NodeHealthMonitor, view: NodeView,
                    baseline: dict[str, int]) -> str | None:
    """``view``'s allocatable ``nvidia.com/gpu`` below its count at the group's start."""
    start = baseline.get(view.name)
    if not monitor.gpu_allocatable_drop or start is None or view.allocatable_gpus >= start:
        return None
    return f"allocatable {GPU_RESOURCE} fell from {start} to {view.allocatable_gpus}"


def group_gpus(annotations: Mapping[str, str]) -> dict[str, int]:
    """The ``cre.dev/group-gpus`` baseline (malformed entries are skipped)."""
    out: dict[str, int] = {}
    for item in annotations.get(GROUP_GPUS, "").split(","):
        name, _, count = item.partition("=")
        if name and count.isdigit():
            out[name] = int(count)
    return out


def encode_group_gpus(nodes: Sequence[NodeView]) -> str:
    """The ``cre.dev/group-gpus`` annotation value for ``nodes`` (by name)."""
    return ",".join(f"{n.name}={n.allocatable_gpus}" for n in sorted(nodes, key=lambda n: n.name))


def node_object(view: NodeView) -> dict[str, Any]:
    """The ``node`` variable for ``view``: corev1 Node JSON with Go zero values."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": view.name, "uid": view.uid, "labels": dict(view.labels)},
        "spec": {
            "unschedulable": view.unschedulable,
            "providerID": view.provider_id or "",
            "taints": [{"key": t.key, "value": t.value or "", "effect": t.effect or ""}
                       for t in view.taints],
        },
        "status": {
            "conditions": [{"type": c.type, "status": c.status, "reason": c.reason or "",
                            "message": c.message or ""} for c in view.conditions],
            "allocatable": {GPU_RESOURCE: str(view.allocatable_gpus)},
        },
    }


def expression_of(job: Job) -> str | None:
    """The Job's ``nodeHealthMonitor`` expression, if it has one."""
    monitor = job.spec.node_health_monitor
    return monitor.cel.expression if monitor is not None and monitor.cel is not None else None


def check_node(expression: str, view: NodeView) -> NodeCheck:
    """``expression`` evaluated on ``view``: unhealthy when the result is ``true``; an error
    when it fails or is not a bool, or on node ``"*"`` when it does not compile."""
    try:
        program = compile_cel(expression)
    except CelError as exc:  # validation reports it before any workload; never raise here
        return NodeCheck(node="*", expression=expression, error=str(exc))
    try:
        result = program.run({"node": node_object(view)})
    except CelError as exc:
        return NodeCheck(node=view.name, expression=expression, error=str(exc))
    if result is True or result is False:
        return NodeCheck(node=view.name, expression=expression, unhealthy=result)
    return NodeCheck(node=view.name, expression=expression,
                     error=f"must return a bool, got {type(result).__name__}")


def check_nodes(expression: str, nodes: Sequence[NodeView]) -> tuple[NodeCheck, ...]:
    """``expression`` evaluated on every node (:func:`check_node`), without a cache."""
    return tuple(check_node(expression, view) for view in nodes)


def cel_verdict(expression: str, checks: Sequence[NodeCheck]) -> HealthVerdict:
    """The verdict of ``expression`` from its ``checks`` (those of other expressions are
    ignored): a node is flagged when the result was ``true``; a compile error is the only error
    said."""
    mine = sorted((c for c in checks if c.expression == expression), key=lambda c: c.node)
    broken = next((c for c in mine if c.node == "*"), None)
    if broken is not None:
        return HealthVerdict(expression=expression, errors=(("*", broken.error or ""),))
    return HealthVerdict(expression=expression,
                         flagged=tuple(c.node for c in mine if c.unhealthy),
                         errors=tuple((c.node, c.error) for c in mine if c.error is not None))


def check_monitor(monitor: NodeHealthMonitor, nodes: Sequence[NodeView], *,
                  checks: Sequence[NodeCheck] = (),
                  baseline: Mapping[str, int] | None = None) -> HealthVerdict:
    """Every signal of ``monitor`` on every node: a node is flagged when one holds (the
    expression's results are ``checks``, evaluated by the shell)."""
    expression = monitor.cel.expression if monitor.cel is not None else ""
    verdict = cel_verdict(expression, checks) if expression else HealthVerdict()
    by_cel = set(verdict.flagged)
    start = dict(baseline or {})
    findings: list[tuple[str, str]] = []
    flagged: list[str] = []
    for view in sorted(nodes, key=lambda n: n.name):
        found = [f for f in (condition_signal(monitor, view), taint_signal(monitor, view),
                             label_signal(monitor, view), gpu_drop_signal(monitor, view, start))
                 if f is not None]
        if view.name in by_cel and found:
            found.insert(0, f"nodeHealthMonitor `{expression}` is true")
        if found or view.name in by_cel:
            flagged.append(view.name)
        if found:
            findings.append((view.name, ", ".join(found)))
    if findings:
        # Nodes flagged by the expression alone are said too once other signals are listed.
        said = {n for n, _ in findings}
        findings += [(n, f"nodeHealthMonitor `{expression}` is true")
                     for n in by_cel if n not in said]
        findings.sort()
    return attrs.evolve(verdict, expression=expression, flagged=tuple(flagged),
                        findings=tuple(findings))


def check_job(job: Job, nodes: Sequence[NodeView], checks: Sequence[NodeCheck]
              ) -> HealthVerdict | None:
    """The monitor's verdict on ``nodes`` for ``job`` (``None``: the Job has no monitor)."""
    monitor = job.spec.node_health_monitor
    if monitor is None:
        return None
    return check_monitor(monitor, nodes, checks=checks,
                         baseline=group_gpus(job.metadata.annotations))


def mark_hardware_failed(status: JobStatus, verdict: HealthVerdict, *, now: datetime,
                         generation: int | None) -> JobStatus:
    """``status`` with ``HardwareFailed=True`` (reason ``HardwareFailureDetected``; never
    cleared) and a ``HardwareFailureDetected`` entry in ``failedNodes`` for each flagged node
    (additive: an entry is never removed)."""
    message = bound_note(verdict.message())
    failed = list(status.failed_nodes)
    keys = {(f.name, f.reason) for f in failed}
    for name in verdict.flagged:
        if (name, FailedNodeReason.HARDWARE_FAILURE_DETECTED) not in keys:
            failed.append(FailedNode(name=name, reason=FailedNodeReason.HARDWARE_FAILURE_DETECTED,
                                     message=message))
    conditions = status.conditions
    current = next((c for c in conditions if c.type == ConditionType.HARDWARE_FAILED), None)
    if current is None or current.status != ConditionStatus.TRUE:
        fresh = Condition(type=ConditionType.HARDWARE_FAILED, status=ConditionStatus.TRUE,
                          reason=JobReason.HARDWARE_FAILURE_DETECTED, message=message,
                          last_transition_time=now, observed_generation=generation)
        conditions = tuple(c for c in conditions if c.type != ConditionType.HARDWARE_FAILED)
        conditions = (*conditions, fresh)
    return attrs.evolve(status, conditions=conditions, failed_nodes=tuple(failed))
