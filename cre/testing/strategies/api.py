"""Hypothesis strategies for every CRE model, shipped so other packages' tests reuse them.

Strategies are derived from the models themselves (field types and declared constraints), so
a new field is covered without touching this module. Where validity needs more than one field
(exclusive members, the condition trio, requests within limits, reserved label keys), a
hand-written strategy replaces the derived one, so every generated object passes
``cre.api.validate``. Requires the ``test`` extra (hypothesis); nothing in ``cre`` imports it.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar, cast, get_args, get_origin

import attrs
from hypothesis import strategies as st

from cre.api import common, conditions, meta
from cre.api.certification import (
    RESOURCE_QUANTITY,
    CategoryOptions,
    CategoryResources,
    CertificationSpec,
    ResourceValues,
)
from cre.api.common import (
    NodeSelectorOperator,
    NodeSelectorRequirement,
    RelativeScope,
    WorkloadMetadata,
)
from cre.api.conditions import LIFECYCLE_CONDITIONS, ConditionType
from cre.api.durations import duration_seconds
from cre.api.fields import Constraints, constraints
from cre.api.job import CelExpression, JobSpec, NodeConditionSignal, NodeHealthMonitor, WorkloadSpec
from cre.api.kinds import KINDS
from cre.api.labels import API_VERSION
from cre.api.measurement import DECIMAL, LogPattern, LogPatterns, LogProfile, TimeUnit
from cre.api.meta import Condition, ConditionStatus, ObjectMeta
from cre.api.nodecertification import NodeCertification
from cre.api.reportexport import RetryPolicy
from cre.api.schedule import NAME_MAX, CertificationSchedule, CertificationScheduleSpec
from cre.api.schema import unwrap_optional
from cre.api.workflow import (
    OrchestrationSpec,
    OverrideSpec,
    PerformanceSpec,
    TemplateMetadata,
    WorkflowSpec,
)
from cre.api.workloadrun import ConfigSpec, ExecSpec, FrameworkSpec, MpiSpec, TorchSpec

T = TypeVar("T")
_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789"
_INT32 = 2**31 - 1


def dns_labels(max_size: int = 12) -> st.SearchStrategy[str]:
    """DNS-1123 labels (lower case alphanumerics and '-', alphanumeric at both ends)."""
    return st.from_regex(rf"\A[a-z0-9]([-a-z0-9]{{0,{max_size - 2}}}[a-z0-9])?\Z")


def dns_names() -> st.SearchStrategy[str]:
    """DNS-1123 subdomain names of one or two labels."""
    return st.lists(dns_labels(), min_size=1, max_size=2).map(".".join)


def label_values() -> st.SearchStrategy[str]:
    """Valid label values, including the empty one."""
    return st.just("") | st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?\Z")


def label_keys(*, reserved: bool = False) -> st.SearchStrategy[str]:
    """Qualified label keys; ``reserved=False`` never yields a key reserved for CRE."""
    name = st.from_regex(r"\A[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?\Z")
    prefixed = st.builds(lambda p, n: f"{p}/{n}", dns_names(), name)
    keys = name | prefixed
    if reserved:
        return keys
    return keys.filter(lambda k: not common.is_reserved_label_key(k))


def labels(max_size: int = 4) -> st.SearchStrategy[dict[str, str]]:
    """Label maps CRE accepts in workloadMetadata."""
    return st.dictionaries(label_keys(), label_values(), max_size=max_size)


def thresholds() -> st.SearchStrategy[dict[str, str]]:
    """Threshold maps over the registered metric keys with valid CEL."""
    expr = st.builds(
        lambda op, n: f"value {op} {n}",
        st.sampled_from([">=", ">", "<=", "<"]),
        st.integers(0, 999),
    )
    return st.dictionaries(st.sampled_from(sorted(common.THRESHOLD_KEYS)), expr, max_size=3)


def node_health_expressions() -> st.SearchStrategy[str]:
    """``nodeHealthMonitor`` expressions over ``node`` that compile."""
    return st.sampled_from([
        "node.spec.unschedulable == true",
        "node.status.conditions.exists(c, c.type == 'Ready' && c.status != 'True')",
        "node.spec.taints.exists(t, t.effect == 'NoExecute')",
        "'nvidia.com/gpu.health' in node.metadata.labels && "
        "node.metadata.labels['nvidia.com/gpu.health'] != 'ok'",
    ])


def times() -> st.SearchStrategy[datetime]:
    """Aware UTC datetimes between 2000 and 2100 (with and without fractional seconds)."""
    return st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    )


def json_values(depth: int = 2) -> st.SearchStrategy[Any]:
    """Small JSON values (objects, arrays, strings, integers, booleans)."""
    scalars = st.text(_LOWER, max_size=6) | st.integers(-1000, 1000) | st.booleans()
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(_LOWER, max_size=6), inner, max_size=3)
        ),
        max_leaves=6,
    )


def json_objects() -> st.SearchStrategy[dict[str, Any]]:
    """Small opaque JSON objects."""
    return st.dictionaries(st.text(_LOWER, min_size=1, max_size=6), json_values(), max_size=3)


def embedded_objects() -> st.SearchStrategy[dict[str, Any]]:
    """Inline Kubernetes objects (dependencies): apiVersion, kind, metadata.name and data."""
    return st.builds(
        lambda name, data: {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name},
            "data": data,
        },
        dns_names(),
        st.dictionaries(st.text(_LOWER, min_size=1, max_size=6), st.text(_LOWER), max_size=2),
    )


def patch_ops() -> st.SearchStrategy[dict[str, Any]]:
    """RFC 6902 operations of the shapes CRE accepts."""
    path = st.lists(st.text(_LOWER, min_size=1, max_size=5), min_size=1, max_size=3).map(
        lambda parts: "/" + "/".join(parts)
    )
    return (
        st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, path, json_values(1))
        | st.builds(lambda p: {"op": "remove", "path": p}, path)
        | st.builds(lambda p, f: {"op": "copy", "path": p, "from": f}, path, path)
    )


@st.composite
def _conditions(draw: st.DrawFn) -> tuple[Condition, ...]:
    kinds = draw(st.lists(st.sampled_from(list(ConditionType)), unique=True, max_size=4))
    true_trio = draw(st.sampled_from([None, *LIFECYCLE_CONDITIONS]))
    out = []
    for kind in kinds:
        if kind in LIFECYCLE_CONDITIONS:
            status = ConditionStatus.TRUE if kind == true_trio else ConditionStatus.FALSE
        else:
            status = draw(st.sampled_from(list(ConditionStatus)))
        out.append(
            Condition(
                type=kind,
                status=status,
                reason=draw(st.sampled_from(_REASONS)),
                message=draw(st.text(max_size=20)),
                last_transition_time=draw(times()),
                observed_generation=draw(st.none() | st.integers(0, 100)),
            )
        )
    return tuple(out)


def conditions_lists() -> st.SearchStrategy[tuple[Condition, ...]]:
    """Condition lists with unique types and at most one True member of the trio."""
    return _conditions()


_REASONS = sorted(
    {
        m.value
        for e in vars(conditions).values()
        if isinstance(e, type) and issubclass(e, enum.Enum) and e.__name__.endswith("Reason")
        for m in e
    }
)


def _numbers(n: st.SearchStrategy[int], suffixes: list[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda v, s: f"{v}{s}", n, st.sampled_from(suffixes))


_PATTERNS: dict[str, Callable[[], st.SearchStrategy[str]]] = {
    # Within every duration field's bound (720h).
    common.DURATION: lambda: _numbers(st.integers(0, 720), ["ms", "s", "m", "h"]),
    common.QUANTITY_SIZE: lambda: _numbers(st.integers(1, 999), ["", "Ki", "Mi", "Gi", "Ti"]),
    common.QUALIFIED_NAME: lambda: label_keys(),
    common.LABEL_VALUE: label_values,
    RESOURCE_QUANTITY: lambda: _numbers(st.integers(1, 999), ["", "m", "Mi", "Gi", "k"]),
    DECIMAL: lambda: st.builds(
        lambda a, b: f"{a}.{b:02d}", st.integers(0, 999), st.integers(0, 99)
    ),
    meta.DNS_SUBDOMAIN: dns_names,
    r"^[0-9]+(K|M|G|T)?$": lambda: _numbers(st.integers(1, 999), ["", "K", "M", "G"]),
    r"^$|^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$": lambda: st.just("") | dns_labels(),
}


def _string(cons: Constraints) -> st.SearchStrategy[str]:
    if cons.pattern is not None:
        maker = _PATTERNS.get(cons.pattern)
        base = maker() if maker else st.from_regex(cons.pattern, fullmatch=True)
        return base.filter(
            lambda s: len(s) >= (cons.min_length or 0) and len(s) <= (cons.max_length or 10**9)
        )
    low = cons.min_length or 0
    return st.text(min_size=low, max_size=max(low, min(cons.max_length or 12, 12)))


def _for_type(tp: Any, cons: Constraints) -> st.SearchStrategy[Any]:
    tp = unwrap_optional(tp)
    origin, args = get_origin(tp), get_args(tp)
    if attrs.has(tp):
        return models(tp)
    if origin in (dict, Mapping):
        if args[1] is Any:
            return json_objects()
        return st.dictionaries(
            st.text(_LOWER, min_size=1, max_size=8), _for_type(args[1], Constraints()), max_size=3
        )
    if origin is tuple:
        inner = _for_type(args[0], Constraints())
        keys = cons.list_map_keys
        return st.lists(
            inner,
            min_size=cons.min_items or 0,
            max_size=min(cons.max_items or 3, 3),
            unique_by=(lambda m: tuple(str(getattr(m, _attr_of(m, k))) for k in keys))
            if keys
            else None,
        ).map(tuple)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if tp is bool:
        return st.booleans()
    if tp is int:
        low = int(cons.minimum) if cons.minimum is not None else -_INT32 - 1
        high = int(cons.maximum) if cons.maximum is not None else _INT32
        return st.integers(max(low, -1000), min(high, max(low, -1000) + 100_000))
    if tp is str:
        return _string(cons)
    if tp is datetime:
        return times()
    raise TypeError(f"no strategy for {tp!r}")


def _attr_of(model: Any, key: str) -> str:
    from cre.api.fields import json_name

    return next(str(f.name) for f in attrs.fields(type(model)) if json_name(f) == key)


def _field(cls: type, field: attrs.Attribute[Any]) -> st.SearchStrategy[Any]:
    if field.name == "api_version" and hasattr(cls, "KIND"):
        return st.just(API_VERSION)
    if field.name == "kind" and hasattr(cls, "KIND"):
        return st.just(cls.KIND)
    special = _FIELDS.get((cls, field.name))
    if special is None and get_origin(unwrap_optional(field.type)) in (dict, Mapping, tuple):
        special = _FIELDS.get((None, field.name))
    base = special() if special else _for_type(field.type, constraints(field))
    if field.default is attrs.NOTHING:
        return base
    return st.none() | base if unwrap_optional(field.type) is not field.type else base


def _derived(cls: Any) -> st.SearchStrategy[Any]:
    attrs.resolve_types(cls)
    kwargs = {f.name: _field(cls, f) for f in attrs.fields(cls)}
    built = st.fixed_dictionaries(kwargs).map(
        lambda kw: cls(**{k: v for k, v in kw.items() if v is not None or _nullable(cls, k)})
    )
    fix = _FIXUPS.get(cls)
    return built.map(fix) if fix else built


def _nullable(cls: type, name: str) -> bool:
    return any(f.name == name and unwrap_optional(f.type) is not f.type for f in attrs.fields(cls))


def models(cls: type[T]) -> st.SearchStrategy[T]:
    """A strategy for any CRE model class (top-level kinds and every fragment)."""
    return cast("st.SearchStrategy[T]", _models(cast(Any, cls)))


@functools.cache
def _models(cls: Any) -> st.SearchStrategy[Any]:
    special = _CLASSES.get(cls)
    return special() if special else _derived(cls)


def objects(cls: type[T]) -> st.SearchStrategy[T]:
    """Top-level objects of kind ``cls`` (same as ``models``, named for readability)."""
    return models(cls)


def any_object() -> st.SearchStrategy[Any]:
    """An object of any CRE kind."""
    return st.one_of([models(info.model) for info in KINDS])


def dicts(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    """JSON dicts of kind ``cls`` as the converter writes them."""
    from cre.api.converter import to_dict

    return models(cls).map(to_dict)


# --- cross-field validity ------------------------------------------------------------------


def _object_meta() -> st.SearchStrategy[ObjectMeta]:
    return st.builds(
        ObjectMeta,
        name=dns_names(),
        namespace=st.none() | dns_labels(),
        uid=st.none() | st.uuids().map(str),
        resource_version=st.none() | st.integers(1, 10**6).map(str),
        generation=st.none() | st.integers(1, 100),
        creation_timestamp=st.none() | times(),
        deletion_timestamp=st.none() | times(),
        labels=labels(),
        annotations=st.dictionaries(label_keys(), st.text(max_size=10), max_size=2),
        finalizers=st.lists(
            st.sampled_from(["cre.dev/finalizer", "example.com/x"]), unique=True
        ).map(tuple),
    )


def _requirement() -> st.SearchStrategy[NodeSelectorRequirement]:
    values = st.lists(label_values(), min_size=1, max_size=3).map(tuple)
    with_values = st.builds(
        NodeSelectorRequirement,
        key=label_keys(),
        operator=st.sampled_from([NodeSelectorOperator.IN, NodeSelectorOperator.NOT_IN]),
        values=values,
    )
    without = st.builds(
        NodeSelectorRequirement,
        key=label_keys(),
        operator=st.sampled_from(
            [NodeSelectorOperator.EXISTS, NodeSelectorOperator.DOES_NOT_EXIST]
        ),
    )
    return with_values | without


def _resources() -> st.SearchStrategy[CategoryResources]:
    values = models(ResourceValues)
    return values.flatmap(
        lambda lim: st.builds(
            CategoryResources, limits=st.just(lim), requests=st.sampled_from([None, lim])
        )
    )


def _log_patterns() -> st.SearchStrategy[LogPatterns]:
    pattern = st.sampled_from(
        [
            LogPattern(
                regex=r"^\s*(?P<size>\d+)\s+\d+\s+\w+\s+(?P<algBW>[\d.]+)\s+(?P<busBW>[\d.]+)",
                example="  8  2  float  1.50  0.75",
            ),
            LogPattern(
                regex=r"iteration\s+(?P<globalStep>\d+).*?(?P<stepTiming>[\d.]+) ms",
                example="iteration 10 | elapsed 12.5 ms",
                units={"stepTiming": TimeUnit.MILLISECONDS},
            ),
        ]
    )
    slots = [f.name for f in attrs.fields(LogPatterns)]
    return st.dictionaries(st.sampled_from(slots), pattern, min_size=1, max_size=3).map(
        lambda kw: LogPatterns(**kw)
    )


def _framework() -> st.SearchStrategy[FrameworkSpec]:
    members: dict[str, type] = {"torch": TorchSpec, "mpi": MpiSpec, "exec": ExecSpec}
    return st.sampled_from(sorted(members)).flatmap(
        lambda m: st.builds(FrameworkSpec, **{m: models(members[m])})
    )


def _torch() -> st.SearchStrategy[TorchSpec]:
    name = st.text(_LOWER, min_size=1, max_size=8)
    args = st.lists(st.text(max_size=6), max_size=3).map(tuple)
    return st.builds(TorchSpec, script=name, args=args) | st.builds(
        TorchSpec, module=name, args=args
    )


_FLOOR = "busBandwidthGBps"


def _fix_job_spec(spec: JobSpec) -> JobSpec:
    if spec.stall_multiplier is not None and spec.goodput_measurement is None:
        spec = attrs.evolve(spec, stall_multiplier=None)
    if _FLOOR not in spec.thresholds:  # a relative rule needs the absolute floor
        spec = attrs.evolve(spec, relative_threshold=None)
    if spec.relative_threshold is not None and spec.relative_threshold.scope != \
            RelativeScope.NODE:  # a Job is one group: only the Node rule is a Job's
        spec = attrs.evolve(spec, relative_threshold=attrs.evolve(
            spec.relative_threshold, scope=RelativeScope.NODE))
    return spec


def _fix_performance(spec: PerformanceSpec) -> PerformanceSpec:
    if spec.thresholds is None or _FLOOR not in spec.thresholds.thresholds:
        return attrs.evolve(spec, relative_threshold=None)
    return spec


def _fix_certification_spec(spec: CertificationSpec) -> CertificationSpec:
    """Relative rules only where the category's thresholds (its own, else the global ones)
    carry the busBW floor."""
    def floor(own: CategoryOptions | None) -> bool:
        mine = own.thresholds if own is not None else None
        return _FLOOR in (mine if mine is not None else spec.thresholds or {})

    categories = tuple(c if c.options is None or floor(c.options) else attrs.evolve(
        c, options=attrs.evolve(c.options, relative_threshold=None)) for c in spec.categories)
    everywhere = all(floor(c.options) for c in categories)
    return attrs.evolve(spec, categories=categories,
                        relative_threshold=spec.relative_threshold if everywhere else None)


def _fix_orchestration(spec: OrchestrationSpec) -> OrchestrationSpec:
    if spec.placement is common.Placement.UNPINNED:
        topology = spec.topology and attrs.evolve(spec.topology, strict_domain=False)
        return attrs.evolve(spec, diagnose=None, topology=topology)
    if spec.diagnose is not None and spec.iterations > 1:  # diagnose runs its rounds once
        return attrs.evolve(spec, iterations=1)
    return spec


def _fix_workflow_spec(spec: WorkflowSpec) -> WorkflowSpec:
    """Under diagnose, no override repeats the rounds or unpins the groups."""
    if spec.orchestration.diagnose is None:
        return spec
    return attrs.evolve(spec, overrides=tuple(
        attrs.evolve(o, orchestration=attrs.evolve(o.orchestration, iterations=None,
                                                   placement=None))
        if o.orchestration is not None else o for o in spec.overrides))


def _fix_config(spec: ConfigSpec) -> ConfigSpec:
    return attrs.evolve(spec, config_map_ref=None) if spec.inline is not None else spec


def _fix_schedule_spec(spec: CertificationScheduleSpec) -> CertificationScheduleSpec:
    """Exactly one of a readable cron schedule (with or without its time zone) and an interval
    of at least a minute."""
    if spec.interval is not None and spec.schedule is None:
        return attrs.evolve(spec, interval="90m", time_zone=None)
    return attrs.evolve(spec, schedule="*/15 2-4 * * 1-5", interval=None,
                        time_zone="Europe/Paris" if spec.time_zone is not None else None)


def _fix_schedule_name(obj: CertificationSchedule) -> CertificationSchedule:
    name = obj.metadata.name
    if name is None or len(name) <= NAME_MAX:
        return obj
    return attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, name=name[:NAME_MAX - 1] + "s"))


_CLASSES: dict[type, Callable[[], st.SearchStrategy[Any]]] = {
    ObjectMeta: _object_meta,
    NodeSelectorRequirement: _requirement,
    CategoryResources: _resources,
    LogPatterns: _log_patterns,
    FrameworkSpec: _framework,
    TorchSpec: _torch,
    WorkloadSpec: lambda: st.builds(WorkloadSpec, train_job=json_objects()),
    WorkloadMetadata: lambda: st.builds(WorkloadMetadata, labels=labels()),
    TemplateMetadata: lambda: st.builds(TemplateMetadata, labels=labels(), annotations=labels()),
}


def _fix_retry(retry: RetryPolicy) -> RetryPolicy:
    if duration_seconds(retry.backoff_max) < duration_seconds(retry.backoff_base):
        return attrs.evolve(retry, backoff_max=retry.backoff_base)
    return retry


def _fix_cluster_scoped(obj: Any) -> Any:
    return attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, namespace=None))


_FIXUPS: dict[type, Callable[[Any], Any]] = {
    LogProfile: _fix_cluster_scoped,
    NodeCertification: _fix_cluster_scoped,
    JobSpec: _fix_job_spec,
    PerformanceSpec: _fix_performance,
    CertificationSpec: _fix_certification_spec,
    OrchestrationSpec: _fix_orchestration,
    WorkflowSpec: _fix_workflow_spec,
    ConfigSpec: _fix_config,
    CertificationScheduleSpec: _fix_schedule_spec,
    CertificationSchedule: _fix_schedule_name,
    RetryPolicy: _fix_retry,
}
_FIELDS: dict[tuple[type | None, str], Callable[[], st.SearchStrategy[Any]]] = {
    (None, "conditions"): conditions_lists,
    (None, "thresholds"): thresholds,
    (CelExpression, "expression"): node_health_expressions,
    (NodeHealthMonitor, "conditions"): lambda: st.lists(
        st.builds(NodeConditionSignal, type=label_keys(),
                  status=st.sampled_from(ConditionStatus)), max_size=2).map(tuple),
    (WorkflowSpec, "dependencies"): lambda: st.lists(embedded_objects(), max_size=2).map(tuple),
    (OverrideSpec, "dependencies"): lambda: st.lists(embedded_objects(), max_size=2).map(tuple),
    (OverrideSpec, "job_template_patch"): lambda: st.lists(patch_ops(), max_size=2).map(tuple),
    (common.GangSchedulerSpec, "queue_label_key"): lambda: label_keys(),
}
