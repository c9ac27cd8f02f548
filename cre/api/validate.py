"""Validate CRE objects and report every problem with its field path.

``validate`` first structures raw dicts (type errors, unknown and missing fields come back as
field errors), then walks the model: the ``Constraints`` declared on each field (lengths,
patterns, bounds, item and property counts), then the semantic rules no OpenAPI keyword can
say (threshold keys and CEL syntax, label key syntax and reserved keys, exclusive members,
requests within limits, JSON patch shape, regexes that compile and match their example,
the exclusive condition trio). Nothing stops at the first error.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import attrs

from cre.api.cel import CelError, compile_cel
from cre.api.certification import CategoryResources, ResourceValues
from cre.api.common import (
    CEL_MAX_LENGTH,
    LABEL_VALUE,
    QUALIFIED_NAME,
    THRESHOLD_KEYS,
    GangSchedulerSpec,
    NodeSelectorOperator,
    NodeSelectorRequirement,
    RelativeScope,
    WorkloadMetadata,
    is_reserved_label_key,
)
from cre.api.conditions import LIFECYCLE_CONDITIONS
from cre.api.converter import emitted, from_dict, structure
from cre.api.durations import duration_seconds
from cre.api.errors import FieldError, ValidationError, describe, join, map_key
from cre.api.fields import Constraints, constraints, json_name
from cre.api.job import JobSpec, JobStatus, NodeHealthMonitor
from cre.api.kinds import BY_KIND
from cre.api.labels import API_VERSION
from cre.api.measurement import LogPattern
from cre.api.meta import DNS_SUBDOMAIN, ConditionStatus, ObjectMeta
from cre.api.reportexport import RetryPolicy
from cre.api.schedule import (
    MIN_INTERVAL,
    NAME_MAX,
    CertificationSchedule,
    CertificationScheduleSpec,
    cron_error,
    time_zone_error,
)
from cre.api.schema import unwrap_optional
from cre.api.workflow import (
    OrchestrationSpec,
    OverrideSpec,
    TemplateMetadata,
    WhenSpec,
    WorkflowSpec,
)
from cre.api.workloadrun import ConfigSpec, TorchSpec

Check = Callable[[Any, str], Iterator[FieldError]]
_PATCH_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def validate(obj: Any) -> list[FieldError]:
    """Every problem of a CRE object (model or dict), in document order; empty when valid."""
    if isinstance(obj, Mapping):
        try:
            obj = from_dict(obj)
        except ValidationError as exc:
            return list(exc.errors)
    errors: list[FieldError] = []
    kind = getattr(type(obj), "KIND", None)
    if kind is not None:
        if obj.api_version != API_VERSION:
            errors.append(
                FieldError(
                    path="apiVersion", message=f"must be {API_VERSION!r}", value=obj.api_version
                )
            )
        if obj.kind != kind:
            errors.append(FieldError(path="kind", message=f"must be {kind!r}", value=obj.kind))
        info = BY_KIND.get(kind)
        if info is not None and not info.namespaced and obj.metadata.namespace:
            errors.append(
                FieldError(
                    path="metadata.namespace",
                    message=f"{kind} is cluster-scoped and takes no namespace",
                    value=obj.metadata.namespace,
                )
            )
    _walk_model(obj, "", errors)
    return errors


def validated(obj: Any) -> Any:
    """The model of ``obj`` when valid; otherwise ``ValidationError`` listing every problem."""
    errors = validate(obj)
    if errors:
        raise ValidationError(describe(obj), errors)
    return from_dict(obj) if isinstance(obj, Mapping) else obj


def _walk_model(model: Any, path: str, errors: list[FieldError]) -> None:
    for field in attrs.fields(type(model)):
        value = getattr(model, field.name)
        if value is None:
            continue
        _walk(value, field.type, constraints(field), join(path, json_name(field)), errors)
    for check in _CHECKS.get(type(model), ()):
        errors.extend(check(model, path))


def _walk(value: Any, tp: Any, cons: Constraints, path: str, errors: list[FieldError]) -> None:
    tp = unwrap_optional(tp)
    errors.extend(_constraint_errors(value, cons, path))
    if attrs.has(type(value)):
        _walk_model(value, path, errors)
    elif isinstance(value, tuple):
        item_tp = getattr(tp, "__args__", (Any,))[0]
        for i, item in enumerate(value):
            _walk(item, item_tp, Constraints(), join(path, i), errors)
        errors.extend(_list_map_errors(value, cons, path))
    elif isinstance(value, Mapping) and not cons.preserve_unknown:
        args = getattr(tp, "__args__", (str, Any))
        for key, item in value.items():
            if args[1] is not Any:
                _walk(item, args[1], cons.values or Constraints(), map_key(path, key), errors)


def _constraint_errors(value: Any, cons: Constraints, path: str) -> Iterator[FieldError]:
    if isinstance(value, str) and not isinstance(value, enum.Enum):
        if cons.min_length is not None and len(value) < cons.min_length:
            yield FieldError(
                path=path, message=f"must have at least {cons.min_length} characters", value=value
            )
        if cons.max_length is not None and len(value) > cons.max_length:
            yield FieldError(
                path=path, message=f"must have at most {cons.max_length} characters", value=value
            )
        if cons.pattern is not None and re.search(cons.pattern, value) is None:
            yield FieldError(path=path, message=f"must match {cons.pattern}", value=value)
        elif cons.max_duration is not None and _too_long(value, cons.max_duration):
            yield FieldError(path=path, message=f"must be at most {cons.max_duration}",
                             value=value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if cons.minimum is not None and value < cons.minimum:
            yield FieldError(path=path, message=f"must be >= {cons.minimum}", value=value)
        if cons.maximum is not None and value > cons.maximum:
            yield FieldError(path=path, message=f"must be <= {cons.maximum}", value=value)
    elif isinstance(value, tuple):
        if cons.min_items is not None and len(value) < cons.min_items:
            yield FieldError(path=path, message=f"must have at least {cons.min_items} items")
        if cons.max_items is not None and len(value) > cons.max_items:
            yield FieldError(path=path, message=f"must have at most {cons.max_items} items")
    else:
        count = _property_count(value)
        if count is None:
            return
        if cons.min_properties is not None and count < cons.min_properties:
            yield FieldError(path=path, message=f"must set at least {cons.min_properties} field(s)")
        if cons.max_properties is not None and count > cons.max_properties:
            yield FieldError(path=path, message=f"must set at most {cons.max_properties} field(s)")


def _too_long(value: str, bound: str) -> bool:
    try:
        return duration_seconds(value) > duration_seconds(bound)
    except ValueError:
        return False  # not a duration: the pattern check reports it


def _property_count(value: Any) -> int | None:
    if isinstance(value, Mapping):
        return len(value)
    if attrs.has(type(value)):
        return sum(1 for f in attrs.fields(type(value)) if emitted(f, getattr(value, f.name)))
    return None


def _list_map_errors(items: tuple[Any, ...], cons: Constraints, path: str) -> Iterator[FieldError]:
    if not cons.list_map_keys:
        return
    seen: dict[tuple[Any, ...], int] = {}
    for i, item in enumerate(items):
        key = tuple(str(getattr(item, _attr(type(item), k))) for k in cons.list_map_keys)
        if key in seen:
            shown = ", ".join(f"{k}={v}" for k, v in zip(cons.list_map_keys, key, strict=True))
            yield FieldError(
                path=join(path, i), message=f"duplicate entry ({shown}); first at index {seen[key]}"
            )
        seen.setdefault(key, i)


def _attr(cls: type, key: str) -> str:
    return next(str(f.name) for f in attrs.fields(cls) if json_name(f) == key)


# --- semantic rules -------------------------------------------------------------------------


def _thresholds(values: Mapping[str, str], path: str) -> Iterator[FieldError]:
    for key, expr in values.items():
        where = map_key(path, key)
        if key not in THRESHOLD_KEYS:
            yield FieldError(
                path=where,
                message="unknown threshold key (expected one of "
                f"{', '.join(sorted(THRESHOLD_KEYS))})",
                value=key,
            )
        if not expr.strip():
            yield FieldError(path=where, message="threshold expression is empty", value=expr)
            continue
        if len(expr) > CEL_MAX_LENGTH:
            continue  # reported by the length bound; never handed to the CEL library
        try:
            compile_cel(expr)
        except CelError as exc:  # the parser's message (a library panic included)
            yield FieldError(path=where, message=f"invalid CEL expression: {exc}", value=expr)


def _label_errors(labels: Mapping[str, str], path: str, *, reserved: bool) -> Iterator[FieldError]:
    for key, value in labels.items():
        where = map_key(path, key)
        prefix, _, name = key.rpartition("/")
        if re.fullmatch(QUALIFIED_NAME[1:-1], key) is None or len(name) > 63 or len(prefix) > 253:
            yield FieldError(
                path=where,
                message="label key must be a qualified name "
                "([prefix/]name, name at most 63 characters)",
                value=key,
            )
        if reserved and is_reserved_label_key(key):
            yield FieldError(path=where, message="label key is reserved for CRE", value=key)
        if len(value) > 63 or re.fullmatch(LABEL_VALUE[1:-1], value) is None:
            yield FieldError(
                path=where,
                message="label value must be at most 63 characters of "
                "[A-Za-z0-9-_.], starting and ending alphanumeric",
                value=value,
            )


def _check_workload_metadata(model: WorkloadMetadata, path: str) -> Iterator[FieldError]:
    yield from _label_errors(model.labels, join(path, "labels"), reserved=True)


def _check_template_metadata(model: TemplateMetadata, path: str) -> Iterator[FieldError]:
    yield from _label_errors(model.labels, join(path, "labels"), reserved=False)


def _check_gang(model: GangSchedulerSpec, path: str) -> Iterator[FieldError]:
    key = model.queue_label_key
    where = join(path, "queueLabelKey")
    if is_reserved_label_key(key):
        yield FieldError(path=where, message="label key is reserved for CRE", value=key)
    if len(key.rpartition("/")[0]) > 253:
        yield FieldError(
            path=where, message="label key prefix must be at most 253 characters", value=key
        )


def _check_requirement(model: NodeSelectorRequirement, path: str) -> Iterator[FieldError]:
    needs_values = model.operator in (NodeSelectorOperator.IN, NodeSelectorOperator.NOT_IN)
    if needs_values and not model.values:
        yield FieldError(path=join(path, "values"), message=f"{model.operator} needs values")
    if not needs_values and model.values:
        yield FieldError(path=join(path, "values"), message=f"{model.operator} takes no values")


def _relative_floor(relative: object, thresholds: Mapping[str, str] | None,
                    path: str) -> Iterator[FieldError]:
    """A fleet-relative rule judges busBW next to an absolute floor: it needs a
    ``busBandwidthGBps`` threshold (the Job waits for that key's final per-node values)."""
    if relative is not None and "busBandwidthGBps" not in (thresholds or {}):
        yield FieldError(path=path, message="needs a busBandwidthGBps threshold (the absolute "
                         "floor, e.g. value > 0)")


def _check_monitor(model: NodeHealthMonitor, path: str) -> Iterator[FieldError]:
    """A ``nodeHealthMonitor`` (on a Job, a Workflow or a Certification) whose CEL compiles."""
    cel = model.cel
    if cel is not None and 0 < len(cel.expression) <= CEL_MAX_LENGTH:
        try:
            compile_cel(cel.expression)
        except CelError as exc:
            yield FieldError(path=join(path, "cel.expression"),
                             message=f"invalid CEL expression: {exc}", value=cel.expression)


def _check_job_spec(model: JobSpec, path: str) -> Iterator[FieldError]:
    yield from _thresholds(model.thresholds, join(path, "thresholds"))
    yield from _relative_floor(model.relative_threshold, model.thresholds,
                               join(path, "relativeThreshold"))
    if (model.relative_threshold is not None
            and model.relative_threshold.scope == RelativeScope.GROUP):
        yield FieldError(path=join(join(path, "relativeThreshold"), "scope"),
                         message="a Job is one group: Group compares the groups of a Workflow "
                                 "(set it on the Workflow or the Certification)",
                         value=str(model.relative_threshold.scope))
    if model.stall_multiplier is not None and model.goodput_measurement is None:
        yield FieldError(
            path=join(path, "stallMultiplier"),
            message="needs goodputMeasurement (stall detection reads step times)",
        )


def _check_job_status(model: JobStatus, path: str) -> Iterator[FieldError]:
    true = [
        c.type
        for c in model.conditions
        if c.type in LIFECYCLE_CONDITIONS and c.status is ConditionStatus.TRUE
    ]
    if len(true) > 1:
        yield FieldError(
            path=join(path, "conditions"),
            message="at most one of InProgress, "
            f"Succeeded, Failed may be True (found {', '.join(true)})",
        )


def _check_workflow_spec(model: WorkflowSpec, path: str) -> Iterator[FieldError]:
    for i, dep in enumerate(model.dependencies):
        yield from _embedded_object(dep, join(join(path, "dependencies"), i))
    perf = model.validation.performance if model.validation else None
    if perf is not None and perf.thresholds is not None:
        yield from _thresholds(
            perf.thresholds.thresholds, join(path, "validation.performance.thresholds.thresholds")
        )
    if perf is not None:
        yield from _relative_floor(
            perf.relative_threshold, perf.thresholds.thresholds if perf.thresholds else None,
            join(path, "validation.performance.relativeThreshold"))


def _check_diagnose_overrides(model: WorkflowSpec, path: str) -> Iterator[FieldError]:
    """Under ``orchestration.diagnose`` an override may not set what the base may not have
    (more than one iteration, Unpinned placement): the rounds would silently run once."""
    if model.orchestration.diagnose is None:
        return
    for i, override in enumerate(model.overrides):
        orch = override.orchestration
        where = join(join(join(path, "overrides"), i), "orchestration")
        if orch is not None and orch.iterations is not None and orch.iterations > 1:
            yield FieldError(path=join(where, "iterations"), value=orch.iterations,
                             message="spec.orchestration.diagnose is set and diagnose runs its "
                                     "rounds once: iterations must be 1")
        if orch is not None and orch.placement == "Unpinned":
            yield FieldError(path=join(where, "placement"), value=orch.placement,
                             message="spec.orchestration.diagnose is set and diagnose needs "
                                     "Pinned placement")


def _check_template_nodes(model: WorkflowSpec, path: str) -> Iterator[FieldError]:
    """``trainer.numNodes`` of the template sets nodesPerJob: a positive integer when set."""
    train_job = model.job_template.spec.workload.train_job or {}
    trainer = train_job.get("trainer")
    if trainer is None:
        return
    where = join(path, "jobTemplate.spec.workload.trainJob.trainer")
    if not isinstance(trainer, Mapping):
        yield FieldError(path=where, message="must be an object", value=trainer)
        return
    value = trainer.get("numNodes")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or value < 1):
        yield FieldError(path=join(where, "numNodes"),
                         message="must be a positive integer (nodes per Job)", value=value)


def _check_when(model: WhenSpec, path: str) -> Iterator[FieldError]:
    """A dependency's ``when`` (an opaque object the schema walk does not reach): the
    expression's length bound, then its CEL syntax (an over-long one is never compiled)."""
    if model.expression is None:
        return
    where = join(path, "expression")
    bound = constraints(attrs.fields(WhenSpec).expression)
    too_long = list(_constraint_errors(model.expression, bound, where))
    if too_long:
        yield from too_long
        return
    try:
        compile_cel(model.expression)
    except CelError as exc:  # the parser's message (a library panic included)
        yield FieldError(path=where, message=f"invalid CEL expression: {exc}",
                         value=model.expression)


def _check_dependency_when(model: WorkflowSpec, path: str) -> Iterator[FieldError]:
    for i, dep in enumerate(model.dependencies):
        when = dep.get("when")
        if when is None:
            continue
        where = join(join(join(path, "dependencies"), i), "when")
        if not isinstance(when, Mapping):
            yield FieldError(path=where, message="must be an object", value=when)
            continue
        try:
            parsed = structure(when, WhenSpec)
        except ValidationError as exc:
            yield from (attrs.evolve(e, path=join(where, e.path)) for e in exc.errors)
            continue
        yield from _check_when(parsed, where)


def _check_orchestration(model: OrchestrationSpec, path: str) -> Iterator[FieldError]:
    if model.placement == "Unpinned" and model.diagnose is not None:
        yield FieldError(path=join(path, "diagnose"), message="diagnose needs Pinned placement")
    if model.diagnose is not None and model.iterations > 1:
        yield FieldError(path=join(path, "iterations"),
                         message="diagnose runs its rounds once: iterations must be 1")
    if model.placement == "Unpinned" and model.topology and model.topology.strict_domain:
        yield FieldError(
            path=join(path, "topology.strictDomain"), message="strictDomain needs Pinned placement"
        )


def _embedded_object(obj: Mapping[str, Any], path: str) -> Iterator[FieldError]:
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            yield FieldError(path=join(path, key), message="required string is missing")
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or re.fullmatch(DNS_SUBDOMAIN[1:-1], name) is None:
        yield FieldError(
            path=join(path, "metadata.name"), message="must be a DNS subdomain name", value=name
        )


def _check_override(model: OverrideSpec, path: str) -> Iterator[FieldError]:
    for i, op in enumerate(model.job_template_patch):
        where = join(join(path, "jobTemplatePatch"), i)
        kind = op.get("op")
        if kind not in _PATCH_OPS:
            yield FieldError(
                path=join(where, "op"),
                message=f"must be one of {', '.join(sorted(_PATCH_OPS))}",
                value=kind,
            )
        target = op.get("path")
        if not isinstance(target, str) or (target and not target.startswith("/")):
            yield FieldError(
                path=join(where, "path"), message="must be a JSON pointer", value=target
            )
        if kind in ("move", "copy") and not isinstance(op.get("from"), str):
            yield FieldError(path=join(where, "from"), message=f"{kind} needs from")
        if kind in ("add", "replace", "test") and "value" not in op:
            yield FieldError(path=join(where, "value"), message=f"{kind} needs value")
    for i, dep in enumerate(model.dependencies):
        yield from _embedded_object(dep, join(join(path, "dependencies"), i))


def _check_torch(model: TorchSpec, path: str) -> Iterator[FieldError]:
    if (model.script is None) == (model.module is None):
        yield FieldError(path=path, message="set exactly one of script, module")


def _check_config(model: ConfigSpec, path: str) -> Iterator[FieldError]:
    if model.inline is not None and model.config_map_ref is not None:
        yield FieldError(path=path, message="inline and configMapRef are mutually exclusive")


_SUFFIX: dict[str, Decimal | int] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (``500m``, ``48Gi``, ``2``) as a Decimal."""
    match = re.fullmatch(r"([+]?[0-9.]+)([a-zA-Z]*)", text)
    if match is None or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {text!r}")
    try:
        return Decimal(match.group(1)) * _SUFFIX[match.group(2)]
    except InvalidOperation as exc:
        raise ValueError(f"not a quantity: {text!r}") from exc


def _check_resources(model: CategoryResources, path: str) -> Iterator[FieldError]:
    req, lim = model.requests or ResourceValues(), model.limits or ResourceValues()
    for name in ("cpu", "memory"):
        want, cap = getattr(req, name), getattr(lim, name)
        if want is None or cap is None:
            continue
        try:
            too_big = parse_quantity(want) > parse_quantity(cap)
        except ValueError:
            continue  # the pattern check already reported it
        if too_big:
            yield FieldError(
                path=join(path, f"requests.{name}"),
                message=f"request {want} exceeds limit {cap}",
                value=want,
            )


def _check_log_pattern(model: LogPattern, path: str) -> Iterator[FieldError]:
    try:
        compiled = re.compile(model.regex)
    except re.error as exc:
        yield FieldError(
            path=join(path, "regex"), message=f"invalid regex: {exc}", value=model.regex
        )
        return
    if model.example is not None and compiled.search(model.example) is None:
        yield FieldError(
            path=join(path, "example"),
            message="regex does not match the example",
            value=model.example,
        )
    for capture in model.units:
        if capture not in compiled.groupindex:
            yield FieldError(
                path=map_key(join(path, "units"), capture),
                message="no capture group of that name in regex",
            )


def _check_thresholds_attr(model: Any, path: str) -> Iterator[FieldError]:
    if model.thresholds:
        yield from _thresholds(model.thresholds, join(path, "thresholds"))


def _check_certification_relative(model: Any, path: str) -> Iterator[FieldError]:
    """Each category's relative rule (its own, else the global one) meets a busBW threshold
    (its own map, else the global one: a per-category value replaces the global)."""
    for i, category in enumerate(model.categories):
        own = category.options
        relative = (own.relative_threshold if own is not None
                    and own.relative_threshold is not None else model.relative_threshold)
        thresholds = (own.thresholds if own is not None and own.thresholds is not None
                      else model.thresholds)
        where = (join(join(join(path, "categories"), i), "options.relativeThreshold")
                 if own is not None and own.relative_threshold is not None
                 else join(path, "relativeThreshold"))
        yield from _relative_floor(relative, thresholds, where)


def _check_meta(model: ObjectMeta, path: str) -> Iterator[FieldError]:
    if model.name is None and model.generate_name is None:
        yield FieldError(path=join(path, "name"), message="name or generateName is required")
    if model.name is not None and (
        len(model.name) > 253 or re.fullmatch(DNS_SUBDOMAIN[1:-1], model.name) is None
    ):
        yield FieldError(
            path=join(path, "name"),
            message="must be a DNS subdomain name (lower case alphanumerics, '-' and '.')",
            value=model.name,
        )
    yield from _label_errors(model.labels, join(path, "labels"), reserved=False)


def _check_schedule_spec(model: CertificationScheduleSpec, path: str) -> Iterator[FieldError]:
    """Exactly one of schedule and interval; a cron expression croniter reads; an interval of
    at least a minute; an IANA time zone, with a schedule only."""
    if (model.schedule is None) == (model.interval is None):
        yield FieldError(path=path, message="set exactly one of schedule, interval")
    if model.schedule is not None:
        problem = cron_error(model.schedule)
        if problem is not None:
            yield FieldError(path=join(path, "schedule"), message=problem, value=model.schedule)
    if model.interval is not None:
        try:
            short = duration_seconds(model.interval) < duration_seconds(MIN_INTERVAL)
        except ValueError:
            short = False  # the pattern check reports it
        if short:
            yield FieldError(path=join(path, "interval"),
                             message=f"must be at least {MIN_INTERVAL}", value=model.interval)
    if model.time_zone is not None:
        problem = time_zone_error(model.time_zone)
        if problem is not None:
            yield FieldError(path=join(path, "timeZone"), message=problem,
                             value=model.time_zone)
        if model.schedule is None:
            yield FieldError(path=join(path, "timeZone"),
                             message="timeZone applies to schedule only")


def _check_schedule_name(model: CertificationSchedule, path: str) -> Iterator[FieldError]:
    """A run's name, ``<schedule>-<unix minutes>``, must stay a label value (63 characters)."""
    name = model.metadata.name
    if name is not None and len(name) > NAME_MAX:
        yield FieldError(path=join(path, "metadata.name"),
                         message=f"must be at most {NAME_MAX} characters (runs are named "
                         "<name>-<unix minutes>)", value=name)
def _check_retry(model: RetryPolicy, path: str) -> Iterator[FieldError]:
    try:
        base, cap = duration_seconds(model.backoff_base), duration_seconds(model.backoff_max)
    except ValueError:
        return  # the pattern reports it
    if cap < base:
        yield FieldError(path=join(path, "backoffMax"),
                         message="backoffMax must not be shorter than backoffBase",
                         value=model.backoff_max)


def _checks() -> dict[type, tuple[Check, ...]]:
    from cre.api.certification import CategoryOptions, CertificationSpec
    from cre.api.workloadrun import WorkloadRunSpec

    return {
        ObjectMeta: (_check_meta,),
        WorkloadMetadata: (_check_workload_metadata,),
        TemplateMetadata: (_check_template_metadata,),
        GangSchedulerSpec: (_check_gang,),
        NodeSelectorRequirement: (_check_requirement,),
        JobSpec: (_check_job_spec,),
        NodeHealthMonitor: (_check_monitor,),
        JobStatus: (_check_job_status,),
        WorkflowSpec: (_check_workflow_spec, _check_template_nodes, _check_dependency_when,
                       _check_diagnose_overrides),
        OrchestrationSpec: (_check_orchestration,),
        OverrideSpec: (_check_override,),
        TorchSpec: (_check_torch,),
        ConfigSpec: (_check_config,),
        CategoryResources: (_check_resources,),
        LogPattern: (_check_log_pattern,),
        CategoryOptions: (_check_thresholds_attr,),
        CertificationSpec: (_check_thresholds_attr, _check_certification_relative),
        WorkloadRunSpec: (_check_thresholds_attr,),
        CertificationScheduleSpec: (_check_schedule_spec,),
        CertificationSchedule: (_check_schedule_name,),
        RetryPolicy: (_check_retry,),
    }


_CHECKS = _checks()
