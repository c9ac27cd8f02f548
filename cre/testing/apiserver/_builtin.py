"""Validation of built-in kinds against Kubernetes' published schemas, per release.

The real server validates built-ins with hand-written Go code; the closest public, per-release
artefact is the JSON schema set generated from each release's OpenAPI document, shipped by the
`kubernetes-validate` package (one directory per minor release). Checking an object against the
schema of the emulated release catches the structural differences between releases (for
example `podFailurePolicy.rules[].onPodConditions[].status`, required up to 1.34 and optional
from 1.35). Validators are compiled once per (release, apiVersion, kind).

On top of the schemas, the semantic rules a controller runs into are checked as the Go
validation does them: object names (DNS-1123 subdomain / label, DNS-1035 for Services), label
keys and values, a Pod's containers (non-empty, unique DNS-1123 label names, image required) and
restart policy, a Job's template restart policy, and what an update may not change (pod spec
beyond images, activeDeadlineSeconds, tolerations additions, terminationGracePeriodSeconds and
schedulingGates removal; a Job's selector, template and completion mode; an apps/v1 workload's
selector (required, non-empty, matching the template labels, immutable), replica count and
template restart policy). Everything else the Go validators check is left out.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from typing import Any

from kubernetes_validate import utils as kv

from cre.testing.apiserver import _causes as C
from cre.testing.apiserver import _godecode
from cre.testing.apiserver._causes import Cause
from cre.testing.apiserver._crd_schema import SchemaNode, check, compile_json_schema

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
             "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
             "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 "(e.g. 'example.com', regex used for validation is "
                 r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
               "start with an alphabetic character, and end with an alphanumeric character "
               "(e.g. 'my-name',  or 'abc-123', regex used for validation is "
               "'[a-z]([-a-z0-9]*[a-z0-9])?')")
QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                 "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                 "or '123-abc', regex used for validation is "
                 "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                   "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                   "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")

# Kinds whose names are DNS-1123 labels / DNS-1035 labels rather than subdomains.
_LABEL_NAMED = frozenset({"Namespace"})
_DNS1035_NAMED = frozenset({"Service"})
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)")


@functools.lru_cache(maxsize=32)
def schema_release(kubernetes_version: str) -> str:
    """The schema set used for a release: the newest the package has that is not newer."""
    wanted = C.parse_version(kubernetes_version)
    available = [C.parse_version(v) for v in kv.all_versions()]
    candidates = [v for v in available if v <= wanted] or [min(available)]
    major, minor = max(candidates)
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=8)
def _definitions(release: str) -> dict[str, Any]:
    raw = kv.schema_contents(
        f"kubernetes-json-schema/v{release}.0-local/_definitions.json", release)
    return dict(raw["$defs"])


@functools.lru_cache(maxsize=256)
def _compiled(release: str, api_version: str, kind: str) -> SchemaNode | None:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv.schema_contents(
            f"kubernetes-json-schema/v{release}.0-local/{kind.lower()}-{group_version}.json",
            release)
    except FileNotFoundError:
        return None
    return compile_json_schema(schema, _definitions(release))


def decode_error(obj: dict[str, Any], *, kubernetes_version: str,
                 old: dict[str, Any] | None = None) -> str | None:
    """The Go decoder's type error for a built-in body (:mod:`._godecode`), or None."""
    release = schema_release(kubernetes_version)
    schema = _raw_schema(release, str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if schema is None:
        return None
    return _godecode.decode_error(obj, schema, _definitions(release), old=old)


@functools.lru_cache(maxsize=256)
def _raw_schema(release: str, api_version: str, kind: str) -> dict[str, Any] | None:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema: dict[str, Any] = kv.schema_contents(
            f"kubernetes-json-schema/v{release}.0-local/{kind.lower()}-{group_version}.json",
            release)
    except FileNotFoundError:
        return None
    return schema


def _schema_causes(obj: dict[str, Any], release: str,
                   old: dict[str, Any] | None) -> list[Cause]:
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    node = _compiled(release, api_version, kind)
    if node is None:
        return []
    if old is not None and (old.get("apiVersion"), old.get("kind")) != (api_version, kind):
        old = None
    return check(node, obj, version=_version(release), old=old)


@functools.lru_cache(maxsize=32)
def _version(release: str) -> tuple[int, int]:
    return C.parse_version(release)


def _name_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind", ""))
    name = meta.get("name")
    if isinstance(name, str) and name:
        if kind in _LABEL_NAMED:
            pattern, message, limit = _DNS1123_LABEL, LABEL_MSG, 63
        elif kind in _DNS1035_NAMED:
            pattern, message, limit = _DNS1035_LABEL, DNS1035_MSG, 63
        else:
            pattern, message, limit = _DNS1123_SUBDOMAIN, SUBDOMAIN_MSG, 253
        if len(name) > limit:
            yield C.invalid("metadata.name", name, f"must be no more than {limit} characters")
        if not pattern.match(name):
            yield C.invalid("metadata.name", name, message)
    yield from _label_causes(meta.get("labels"), "metadata.labels")


def _label_causes(labels: Any, path: str) -> Iterator[Cause]:
    if not isinstance(labels, dict):
        return
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
            yield C.invalid(path, key, f"prefix part {SUBDOMAIN_MSG}")
        if not name:
            yield C.invalid(path, key, "name part must be non-empty")
        elif len(name) > 63:
            yield C.invalid(path, key, "name part must be no more than 63 characters")
        elif not _QUALIFIED_NAME.match(name):
            yield C.invalid(path, key, QUALIFIED_MSG)
        if isinstance(value, str):
            if len(value) > 63:
                yield C.invalid(f"{path}", value, "must be no more than 63 characters")
            elif not _LABEL_VALUE.match(value):
                yield C.invalid(f"{path}", value, LABEL_VALUE_MSG)


def _pod_spec_causes(spec: Any, path: str, *, require_image: bool) -> Iterator[Cause]:
    if not isinstance(spec, dict):
        return
    containers = spec.get("containers")
    if not containers:
        yield C.required(f"{path}.containers")
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(field) or ()):
            if not isinstance(container, dict):
                continue
            where = f"{path}.{field}[{index}]"
            name = container.get("name")
            if not name:
                yield C.required(f"{where}.name")
            elif not isinstance(name, str) or not _DNS1123_LABEL.match(name) or len(name) > 63:
                yield C.invalid(f"{where}.name", name, LABEL_MSG)
            elif name in names:
                yield C.duplicate(f"{where}.name", name)
            if isinstance(name, str):
                names.add(name)
            if require_image and not container.get("image"):
                yield C.required(f"{where}.image")
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in _RESTART_POLICIES:
        yield C.not_supported(f"{path}.restartPolicy", policy, _RESTART_POLICIES)
    yield from _label_causes(spec.get("nodeSelector"), f"{path}.nodeSelector")


def _job_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        yield C.required("spec")
        return
    template = spec.get("template")
    if not isinstance(template, dict):
        yield C.required("spec.template")
        return
    yield from _label_causes((template.get("metadata") or {}).get("labels"),
                             "spec.template.metadata.labels")
    pod_spec = template.get("spec")
    yield from _pod_spec_causes(pod_spec, "spec.template.spec", require_image=True)
    if isinstance(pod_spec, dict):
        policy = pod_spec.get("restartPolicy")
        if not policy:  # a Job's template gets no restartPolicy default
            yield C.required("spec.template.spec.restartPolicy",
                             'valid values: "OnFailure", "Never"')
        elif policy not in ("OnFailure", "Never"):
            yield C.not_supported("spec.template.spec.restartPolicy", policy,
                                  ("OnFailure", "Never"))


def _pod_update_causes(new: dict[str, Any], old: dict[str, Any]) -> Iterator[Cause]:
    new_spec = new.get("spec") or {}
    old_spec = old.get("spec") or {}
    if _mutable_view(new_spec, old_spec) != _mutable_view(old_spec, old_spec):
        yield C.forbidden("spec", _POD_UPDATE_FORBIDDEN)


def _mutable_view(spec: dict[str, Any], old: dict[str, Any]) -> str:
    """The pod spec with the fields an update may change replaced by the old values."""
    view = dict(spec)
    for field in ("containers", "initContainers"):
        olds = {c.get("name"): c for c in old.get(field) or () if isinstance(c, dict)}
        items = []
        for container in spec.get(field) or ():
            item = dict(container) if isinstance(container, dict) else container
            if isinstance(item, dict) and item.get("name") in olds:
                item["image"] = olds[item.get("name")].get("image")
            items.append(item)
        if field in spec:
            view[field] = items
    for field in ("activeDeadlineSeconds", "terminationGracePeriodSeconds"):
        view.pop(field, None)
    old_tolerations = old.get("tolerations") or []
    new_tolerations = spec.get("tolerations") or []
    if all(t in new_tolerations for t in old_tolerations):
        view.pop("tolerations", None)
    old_gates = old.get("schedulingGates") or []
    if all(g in old_gates for g in spec.get("schedulingGates") or ()):
        view.pop("schedulingGates", None)
    return json.dumps(view, sort_keys=True)  # nodeName: only through pods/binding


def _job_update_causes(new: dict[str, Any], old: dict[str, Any]) -> Iterator[Cause]:
    new_spec = new.get("spec") or {}
    old_spec = old.get("spec") or {}
    for field in ("selector", "template", "completionMode", "podFailurePolicy",
                  "backoffLimitPerIndex"):
        if new_spec.get(field) != old_spec.get(field) and field in old_spec:
            yield C.invalid(f"spec.{field}", new_spec.get(field), "field is immutable")



_WORKLOADS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"})


def _selector_matches(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    """A `metav1.LabelSelector` (matchLabels, matchExpressions) against a label map."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or ():
        if not isinstance(expr, dict):
            return False
        key, op, values = str(expr.get("key")), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _workload_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    """apps/v1 rules: a non-empty selector matching the template labels, Always restart."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        yield C.required("spec")
        return
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        yield C.invalid("spec.replicas", replicas, "must be greater than or equal to 0")
    selector = spec.get("selector")
    raw_template = spec.get("template")
    template: dict[str, Any] = raw_template if isinstance(raw_template, dict) else {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if not isinstance(selector, dict):
        yield C.required("spec.selector")
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        yield C.invalid("spec.selector", selector,
                        f"empty selector is invalid for {str(obj.get('kind')).lower()}")
    elif isinstance(labels, dict) and not _selector_matches(selector, labels):
        yield C.invalid("spec.template.metadata.labels", labels,
                        "`selector` does not match template `labels`")
    yield from _label_causes(labels, "spec.template.metadata.labels")
    pod_spec = template.get("spec")
    yield from _pod_spec_causes(pod_spec, "spec.template.spec", require_image=True)
    if isinstance(pod_spec, dict):
        policy = pod_spec.get("restartPolicy") or "Always"
        if policy != "Always":
            yield C.not_supported("spec.template.spec.restartPolicy", policy, ("Always",))
    yield from _replica_status_causes(obj)


_STATUS_COUNTS = {
    "Deployment": ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                   "availableReplicas", "unavailableReplicas", "terminatingReplicas",
                   "collisionCount"),
    "ReplicaSet": ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas",
                   "terminatingReplicas", "observedGeneration"),
}


def _replica_status_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    """``ValidateDeploymentStatus``/``ValidateReplicaSetStatus``: counts are not negative, none
    exceeds ``status.replicas`` and available ones do not exceed ready ones."""
    status, kind = obj.get("status"), str(obj.get("kind"))
    if not isinstance(status, dict) or kind not in _STATUS_COUNTS:
        return
    counts = {k: v for k, v in status.items() if isinstance(v, int)}
    for key in _STATUS_COUNTS[kind]:
        if counts.get(key, 0) < 0:
            yield C.invalid(f"status.{key}", counts[key], "must be greater than or equal to 0")
    replicas = counts.get("replicas", 0)
    bounded = ("updatedReplicas" if kind == "Deployment" else "fullyLabeledReplicas",
               "readyReplicas", "availableReplicas")
    for key in bounded:
        if counts.get(key, 0) > replicas:
            yield C.invalid(f"status.{key}", counts.get(key, 0),
                            "cannot be greater than status.replicas")
    if counts.get("availableReplicas", 0) > counts.get("readyReplicas", 0):
        yield C.invalid("status.availableReplicas", counts.get("availableReplicas", 0),
                        "cannot be greater than readyReplicas")


def _service_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    """``ValidateService``: when a Service has more than one port, each needs a name."""
    ports = (obj.get("spec") or {}).get("ports")
    if isinstance(ports, list) and len(ports) > 1:
        for i, port in enumerate(ports):
            if isinstance(port, dict) and not port.get("name"):
                yield C.required(f"spec.ports[{i}].name")


def _replication_controller_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    """core/v1 ReplicationController: a non-empty label-map selector matching the template."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        yield C.required("spec")
        return
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        yield C.invalid("spec.replicas", replicas, "must be greater than or equal to 0")
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not selector:
        yield C.required("spec.selector")
        selector = {}
    raw_template = spec.get("template")
    if not isinstance(raw_template, dict):
        yield C.required("spec.template")
        return
    labels = (raw_template.get("metadata") or {}).get("labels") or {}
    if selector and isinstance(labels, dict) and not _selector_matches(
            {"matchLabels": selector}, labels):
        yield C.invalid("spec.template.metadata.labels", labels,
                        "`selector` does not match template `labels`")
    yield from _label_causes(labels, "spec.template.metadata.labels")
    pod_spec = raw_template.get("spec")
    yield from _pod_spec_causes(pod_spec, "spec.template.spec", require_image=True)
    if isinstance(pod_spec, dict):
        policy = pod_spec.get("restartPolicy") or "Always"
        if policy != "Always":
            yield C.not_supported("spec.template.spec.restartPolicy", policy, ("Always",))


def _apiservice_causes(obj: dict[str, Any]) -> Iterator[Cause]:
    """apiregistration/v1 APIService: named ``<version>.<group>``, positive priorities."""
    raw_spec = obj.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    name = str((obj.get("metadata") or {}).get("name", ""))
    version, group = str(spec.get("version", "")), str(spec.get("group", ""))
    if name and name != f"{version}.{group}":
        yield C.invalid("metadata.name", name, f'must be `spec.version+"."+spec.group`: '
                                               f'"{version}.{group}"')
    if not version:
        yield C.required("spec.version")
    for field, top in (("groupPriorityMinimum", 20000), ("versionPriority", None)):
        value = spec.get(field)
        if not isinstance(value, int) or value <= 0:
            yield C.invalid(f"spec.{field}", value if value is not None else 0,
                            "must be positive and less than 20000" if top else
                            "must be positive")
        elif top is not None and value > top:
            yield C.invalid(f"spec.{field}", value, "must be positive and less than 20000")


def _workload_update_causes(new: dict[str, Any], old: dict[str, Any]) -> Iterator[Cause]:
    new_selector = (new.get("spec") or {}).get("selector")
    if new_selector != (old.get("spec") or {}).get("selector"):
        yield C.invalid("spec.selector", new_selector, "field is immutable")

def validate_builtin(obj: dict[str, Any], *, kubernetes_version: str,
                     old: dict[str, Any] | None = None) -> list[Cause]:
    """Causes why a built-in object is invalid at `kubernetes_version` (empty: valid)."""
    release = schema_release(kubernetes_version)
    # The stored old object passed this same check when it was written, so on an update only
    # the subtrees that differ from it are walked (a status write walks `status` and metadata).
    causes = list(_schema_causes(obj, release, old))
    causes.extend(_name_causes(obj))
    kind = obj.get("kind")
    if kind == "Pod":
        causes.extend(_pod_spec_causes(obj.get("spec"), "spec", require_image=True))
        if old is not None:
            causes.extend(_pod_update_causes(obj, old))
    elif kind == "Job":
        causes.extend(_job_causes(obj))
        if old is not None:
            causes.extend(_job_update_causes(obj, old))
    elif kind == "ReplicationController" and obj.get("apiVersion") == "v1":
        causes.extend(_replication_controller_causes(obj))
    elif kind == "Service" and obj.get("apiVersion") == "v1":
        causes.extend(_service_causes(obj))
    elif kind == "APIService":
        causes.extend(_apiservice_causes(obj))
    elif kind in _WORKLOADS and str(obj.get("apiVersion", "")).startswith("apps/"):
        causes.extend(_workload_causes(obj))
        if old is not None:
            causes.extend(_workload_update_causes(obj, old))
    unique: list[Cause] = []
    for cause in causes:
        if cause not in unique:
            unique.append(cause)
    return unique
