"""Performance thresholds: a Job's CEL expressions judged against its final measurement.

A Job whose workload exited 0 has run, not passed: ``spec.thresholds`` maps a metric key to a
CEL expression over ``value`` (a double), e.g. ``{"busBandwidthGBps": "value >= 300"}``. This
module is the judge, pure (the clock is a parameter, CEL is evaluated through the one door,
:mod:`cre.api.cel`):

* Values come only from a **final** measurement: a BandwidthMeasurement whose ``Complete``
  condition is True with reason ``JobSucceeded`` and which has results. ``busBandwidthGBps`` is
  the maximum ``busBW`` over message sizes, ``algBandwidthGBps`` the maximum ``algBW``. The
  training keys come from a GoodputMeasurement completed ``JobSucceeded`` (the reference's
  rule): ``goodputRatio`` is ``status.result`` when above 0, ``avgTFLOPsPerGPU`` and
  ``avgStepTimeSec`` its fields of those names (:func:`goodput_values`).
  Provisional samples (``Measuring``) never count; neither do ``NoDataCollected``,
  ``LogsUnavailable`` or ``JobFailed`` (unmeasured).
* Precedence, first that applies: a key outside the registry -> ``UnknownThresholdKey``; an
  expression that does not compile, or does not give a bool -> ``InvalidThresholdExpression``
  (the message carries the expression and the parser's error); a measured value the expression
  rejects -> ``ThresholdViolated`` (``Threshold "<key>" violated: measured <%.4f>,
  expression: <expr>``, one clause per key); a key still without a value -> wait until
  ``measurementTimeout`` after the Job succeeded, then ``ThresholdNoData`` (fails closed,
  the message says what the measurement ended as); else ``ThresholdsMet``. A measurement that
  has not completed by then is still reading the Job's final log: the verdict waits for it,
  at most :data:`COMPLETION_GRACE` more, so what the message names depends on the measurement's
  outcome, not on which controller ran first.
* **Unevaluated is never met.** Only ``ThresholdsMet`` passes, and it needs a measured value
  for every key. Every verdict that fails says whom it is attributed to
  (:attr:`Verdict.failure_class`): an unknown key, a bad expression, or a measurement that
  cannot run as configured (its LogProfile missing or invalid, its jobRef naming another kind:
  :func:`configuration_problem`) are the user's ``Configuration``, given at once, without
  waiting for the deadline; no data by the deadline is the cause the measurement ended on
  (:func:`no_data_scope`).
* A per-node measurement (a ``Multi`` LogProfile such as ``nccl-loopback``: every node ran its
  own test, ``status.nodeResults``) is judged **per node** (:func:`judge_nodes`): each node's
  values are its own peak busBW / algBW; a node that misses, or whose log held no table, is
  named in :attr:`Verdict.nodes` (the Job lists it in ``failedNodes``), so only that node is
  blamed.
* The verdict is the additive ``ValidationFailed`` condition: True with one of the failure
  reasons, False with ``ThresholdsMet``. A violation is the test's signal: a Workload-class
  failure of the group, judged by the Workflow (cre.core.workflow.deferral reads the condition).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final

import attrs

from cre.api.cel import CelError, compile_cel
from cre.api.common import THRESHOLD_KEYS
from cre.api.conditions import ConditionType, FailureScope, JobReason, MeasurementReason
from cre.api.goodput import GoodputMeasurement
from cre.api.job import FailureClass
from cre.api.measurement import BandwidthMeasurement
from cre.api.meta import ConditionStatus


class MetricKey(enum.StrEnum):
    """The threshold keys: a BandwidthMeasurement gives the first two, a GoodputMeasurement
    the others."""

    BUS_BANDWIDTH = "busBandwidthGBps"
    ALG_BANDWIDTH = "algBandwidthGBps"
    GOODPUT_RATIO = "goodputRatio"
    AVG_TFLOPS = "avgTFLOPsPerGPU"
    AVG_STEP_TIME = "avgStepTimeSec"


BANDWIDTH_KEYS: Final = frozenset({MetricKey.BUS_BANDWIDTH, MetricKey.ALG_BANDWIDTH})
GOODPUT_KEYS: Final = frozenset({MetricKey.GOODPUT_RATIO, MetricKey.AVG_TFLOPS,
                                 MetricKey.AVG_STEP_TIME})
#: Either measurement a threshold may read (both carry the conditions read here).
AnyMeasurement = BandwidthMeasurement | GoodputMeasurement


DEFAULT_MEASUREMENT_TIMEOUT: Final = timedelta(minutes=5)
#: How much longer than ``measurementTimeout`` a verdict waits for a measurement that has not
#: completed (it completes once it has seen the Job succeed and read the final log). Kept below
#: the Workflow's wait for a verdict (cre.core.workflow.run.VALIDATION_GRACE).
COMPLETION_GRACE: Final = timedelta(seconds=30)


def _condition(bm: AnyMeasurement, type_: ConditionType) -> tuple[str, str] | None:
    for cond in bm.status.conditions:
        if cond.type == type_ and cond.status == ConditionStatus.TRUE:
            return cond.reason or "", cond.message or ""
    return None


def is_final(bm: BandwidthMeasurement) -> bool:
    """Whether ``bm`` completed with a final read of a succeeded Job and has results."""
    done = _condition(bm, ConditionType.COMPLETE)
    return (done is not None and done[0] == MeasurementReason.JOB_SUCCEEDED
            and bool(bm.status.results))


def measured_values(bm: BandwidthMeasurement | None) -> dict[str, float]:
    """Threshold key -> value from a final measurement (empty: nothing measured yet)."""
    if bm is None or not is_final(bm):
        return {}
    return {MetricKey.BUS_BANDWIDTH: max(float(r.bus_bw) for r in bm.status.results),
            MetricKey.ALG_BANDWIDTH: max(float(r.alg_bw) for r in bm.status.results)}


def goodput_values(gm: GoodputMeasurement | None) -> dict[str, float]:
    """Threshold key -> value from a GoodputMeasurement completed ``JobSucceeded`` (empty
    before); ``goodputRatio`` only when the ratio is above 0, each field only when set."""
    done = None if gm is None else _condition(gm, ConditionType.COMPLETE)
    if gm is None or done is None or done[0] != MeasurementReason.JOB_SUCCEEDED:
        return {}
    out: dict[str, float] = {}
    st = gm.status
    if st.result is not None and float(st.result) > 0:
        out[MetricKey.GOODPUT_RATIO] = float(st.result)
    if st.avg_tflops_per_gpu is not None:
        out[MetricKey.AVG_TFLOPS] = float(st.avg_tflops_per_gpu)
    if st.avg_step_time_sec is not None:
        out[MetricKey.AVG_STEP_TIME] = float(st.avg_step_time_sec)
    return out


def measurement_state(bm: AnyMeasurement | None, *,
                      kind: str = BandwidthMeasurement.KIND) -> str:
    """A phrase for messages: what the measurement (of ``kind`` when absent) is or ended as."""
    if bm is None:
        return f"no {kind} exists"
    name = f"{bm.KIND} {bm.metadata.name or ''}"
    done = _condition(bm, ConditionType.COMPLETE)
    if done is not None:
        return f"{name} ended {done[0]}: {done[1]}".rstrip(": ")
    return f"{name} has not completed"


def measurement_completed(bm: AnyMeasurement | None) -> bool:
    """Whether nothing more will come from ``bm``: it completed, or there is none."""
    return bm is None or _condition(bm, ConditionType.COMPLETE) is not None


#: Measurement reasons that mean the measurement cannot run as the user configured it.
CONFIGURATION_REASONS: Final = frozenset({MeasurementReason.LOG_PROFILE_NOT_FOUND,
                                          MeasurementReason.LOG_PROFILE_INVALID,
                                          MeasurementReason.INVALID_JOB_REF})


def configuration_problem(bm: AnyMeasurement | None) -> tuple[str, str] | None:
    """(reason, message) when ``bm`` says it cannot run as configured (a LogProfile missing
    or invalid, a jobRef naming another kind), else ``None``. Read from any of its conditions:
    ``Measuring=False`` while it waits for the profile, ``Complete=True`` once terminal."""
    if bm is None:
        return None
    for cond in bm.status.conditions:
        if cond.reason in CONFIGURATION_REASONS and cond.type in (ConditionType.MEASURING,
                                                                  ConditionType.COMPLETE):
            name = bm.metadata.name or ""
            return cond.reason, f"{bm.KIND} {name}: {cond.message or cond.reason}"
    return None


def no_data_scope(bm: AnyMeasurement | None) -> FailureScope:
    """Whom a threshold left without data by the deadline is attributed to: the measurement
    controller when there is no measurement or it never completed (ControlPlane), the platform
    when the logs could not be read (LogsUnavailable), the workload when its log held no table
    (NoDataCollected, or a node without figures)."""
    done = None if bm is None else _condition(bm, ConditionType.COMPLETE)
    if done is None:
        return FailureScope.CONTROL_PLANE
    if done[0] == MeasurementReason.LOGS_UNAVAILABLE:
        return FailureScope.PLATFORM
    return FailureScope.WORKLOAD


@attrs.frozen(kw_only=True)
class Verdict:
    """A threshold verdict: ``ValidationFailed`` status, reason, message."""

    failed: bool
    reason: JobReason
    message: str
    # Per-node verdicts only: node -> why it missed (the nodes to blame).
    nodes: tuple[tuple[str, str], ...] = ()
    # Whom a failed verdict is attributed to when it is not the nodes' measured figures
    # (Configuration for the user's mistakes; the measurement's cause for ThresholdNoData).
    scope: FailureScope | None = None

    @property
    def failure_class(self) -> FailureClass | None:
        if self.scope is None:
            return None
        return FailureClass(scope=self.scope, reason=self.reason, message=self.message)

    @property
    def status(self) -> ConditionStatus:
        return ConditionStatus.TRUE if self.failed else ConditionStatus.FALSE


@attrs.frozen(kw_only=True)
class Wait:
    """No verdict yet: ask again at ``deadline`` (or when the measurement changes)."""

    deadline: datetime
    missing: tuple[str, ...]


def _check(expr: str, value: float) -> bool:
    result = compile_cel(expr).run({"value": float(value)})
    if not isinstance(result, bool):
        raise CelError(f"gives {type(result).__name__} {result!r}, not a bool")
    return result


def judge(thresholds: Mapping[str, str], measured: Mapping[str, float], *,
          succeeded_at: datetime, now: datetime,
          timeout: timedelta = DEFAULT_MEASUREMENT_TIMEOUT,
          state: str = "", completed: bool = True,
          no_data: FailureScope = FailureScope.CONTROL_PLANE) -> Verdict | Wait:
    """The verdict on ``thresholds`` given ``measured`` values, or how long to wait for them;
    ``completed`` is False while the measurement exists and has not completed; ``no_data`` is
    whom a key left without a value at the deadline is attributed to (:func:`no_data_scope`)."""
    keys = sorted(thresholds)
    unknown = [k for k in keys if k not in THRESHOLD_KEYS]
    if unknown:
        return Verdict(failed=True, reason=JobReason.UNKNOWN_THRESHOLD_KEY,
                       message=f"Unknown threshold key(s) {', '.join(map(repr, unknown))} "
                       f"(expected one of {', '.join(sorted(THRESHOLD_KEYS))})",
                       scope=FailureScope.CONFIGURATION)
    bad: list[str] = []
    violated: list[str] = []
    for key in keys:
        expr = thresholds[key]
        try:
            compile_cel(expr)
        except CelError as exc:
            bad.append(f"Threshold {key!r} expression {expr!r} is invalid: {exc}")
            continue
        if key not in measured:
            continue
        try:
            ok = _check(expr, measured[key])
        except CelError as exc:
            bad.append(f"Threshold {key!r} expression {expr!r} cannot be evaluated: {exc}")
            continue
        if not ok:
            violated.append(f"Threshold \"{key}\" violated: measured {measured[key]:.4f}, "
                            f"expression: {expr}")
    if bad:
        return Verdict(failed=True, reason=JobReason.INVALID_THRESHOLD_EXPRESSION,
                       message="; ".join(bad), scope=FailureScope.CONFIGURATION)
    if violated:
        return Verdict(failed=True, reason=JobReason.THRESHOLD_VIOLATED,
                       message="; ".join(violated))
    missing = tuple(k for k in keys if k not in measured)
    if missing:
        deadline = succeeded_at + timeout + (timedelta(0) if completed else COMPLETION_GRACE)
        if now < deadline:
            return Wait(deadline=deadline, missing=missing)
        why = f"; {state}" if state else ""
        return Verdict(failed=True, reason=JobReason.THRESHOLD_NO_DATA,
                       message=f"No measured value for {', '.join(missing)} within "
                       f"{_fmt(timeout)} after the Job succeeded{why}", scope=no_data)
    met = ", ".join(f"{k}={measured[k]:.4f} ({thresholds[k]})" for k in keys)
    return Verdict(failed=False, reason=JobReason.THRESHOLDS_MET,
                   message=f"All thresholds met: {met}")


def node_values(bm: BandwidthMeasurement | None) -> dict[str, dict[str, float]] | None:
    """Node -> threshold key -> value of a final per-node measurement (``None``: the
    measurement is not per node, or not final; a node without figures maps to ``{}``)."""
    if bm is None or not bm.status.node_results or not is_final(bm):
        return None
    out: dict[str, dict[str, float]] = {}
    for n in bm.status.node_results:
        values: dict[str, float] = {}
        if n.bus_bw is not None:
            values[MetricKey.BUS_BANDWIDTH] = float(n.bus_bw)
        if n.alg_bw is not None:
            values[MetricKey.ALG_BANDWIDTH] = float(n.alg_bw)
        out[n.node_name] = values
    return out


#: Nodes named in a per-node verdict's message (all of them are in ``Verdict.nodes``).
MESSAGE_NODES: Final = 5


def judge_nodes(thresholds: Mapping[str, str], nodes: Mapping[str, Mapping[str, float]], *,
                why_missing: Mapping[str, str] | None = None,
                outliers: Mapping[str, str] | None = None) -> Verdict:
    """The verdict on ``thresholds`` for every node of a final per-node measurement;
    ``outliers`` (node -> why) fail too when the thresholds pass them (the fleet-relative rule
    with ``action: Fail``, cre.core.job.fleet)."""
    blamed: list[tuple[str, str]] = []
    for node in sorted(nodes):
        values = nodes[node]
        if not values:
            blamed.append((node, f"No measured value on node {node}"
                           + (f": {why_missing[node]}" if why_missing and node in why_missing
                              else "")))
            continue
        verdict = judge(thresholds, values, succeeded_at=datetime.min, now=datetime.min)
        if not isinstance(verdict, Verdict):  # a key this measurement does not give
            blamed.append((node, f"No measured value for {', '.join(verdict.missing)} on "
                                 f"node {node}"))
        elif verdict.reason == JobReason.THRESHOLD_VIOLATED:
            blamed.append((node, verdict.message.replace(" violated:",
                                                         f" violated on node {node}:")))
        elif verdict.failed:
            return verdict  # unknown key / invalid expression: the same for every node
        elif outliers and node in outliers:
            blamed.append((node, outliers[node]))
    if blamed:
        shown = "; ".join(m for _, m in blamed[:MESSAGE_NODES])
        more = len(blamed) - MESSAGE_NODES
        return Verdict(failed=True, reason=JobReason.THRESHOLD_VIOLATED,
                       message=f"{len(blamed)} of {len(nodes)} node(s) missed: {shown}"
                       + (f"; and {more} more (status.failedNodes)" if more > 0 else ""),
                       nodes=tuple(blamed))
    lows = {k: min(v[k] for v in nodes.values()) for k in sorted(thresholds)}
    met = ", ".join(f"{k} lowest {lows[k]:.4f} ({thresholds[k]})" for k in sorted(lows))
    return Verdict(failed=False, reason=JobReason.THRESHOLDS_MET,
                   message=f"All thresholds met on {len(nodes)} node(s): {met}")


def _fmt(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 60 == 0 and seconds:
        return f"{seconds // 60}m"
    return f"{seconds}s"
