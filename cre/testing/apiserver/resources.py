"""The resource types the emulator serves: built-in kinds plus those that CRDs install.

A real API server decides per resource whether it has a status subresource, uses
``metadata.generation``, allows unconditional updates or create-on-update, returns the deleted
object, and which field selectors it supports. Those strategy flags live here, in one table, so
the request handlers stay generic. Creating a CRD adds :class:`ResourceType` entries (one per
served version) and deleting it removes them, as the apiextensions server does.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from .errors import Qualified

CRD_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")


@attrs.frozen
class ResourceType:
    """Serving facts about one resource in one group/version."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    uses_generation: bool = False
    allow_unconditional_update: bool = True
    allow_create_on_update: bool = False
    return_deleted_object: bool = False
    graceful_delete: bool = False
    field_selectors: frozenset[str] = frozenset()
    storage_group: str | None = None  # storage bucket group when it differs (events.k8s.io)
    crd_name: str = ""  # set for custom resources
    storage_version: str = ""  # for storageVersionHash

    @property
    def is_custom(self) -> bool:
        return bool(self.crd_name)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def bucket(self) -> tuple[str, str]:
        group = self.group if self.storage_group is None else self.storage_group
        return (group, self.plural)

    @property
    def qualified(self) -> Qualified:
        return Qualified(group=self.group, resource=self.plural, kind=self.kind)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def verbs(self) -> list[str]:
        return list(CRD_VERBS)

    @property
    def storage_version_hash(self) -> str:
        version = self.storage_version or self.version
        raw = f"{self.group}/{version}/{self.kind}".encode()
        return base64.b64encode(hashlib.sha256(raw).digest()[:8]).decode()

    def selectable(self, field: str) -> bool:
        if field == "metadata.name":
            return True
        if field == "metadata.namespace":
            return self.namespaced
        return field in self.field_selectors


_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.host",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)


def builtin_types() -> list[ResourceType]:
    """The built-in resources the emulator serves at every Kubernetes version."""
    return [
        ResourceType(
            group="",
            version="v1",
            plural="namespaces",
            singular="namespace",
            kind="Namespace",
            namespaced=False,
            subresources=frozenset({"status"}),
            short_names=("ns",),
            field_selectors=frozenset({"status.phase"}),
        ),
        ResourceType(
            group="",
            version="v1",
            plural="pods",
            singular="pod",
            kind="Pod",
            namespaced=True,
            subresources=frozenset({"status", "log", "eviction", "binding"}),
            short_names=("po",),
            categories=("all",),
            uses_generation=True,
            return_deleted_object=True,
            graceful_delete=True,
            field_selectors=_POD_FIELDS,
        ),
        ResourceType(
            group="",
            version="v1",
            plural="nodes",
            singular="node",
            kind="Node",
            namespaced=False,
            subresources=frozenset({"status"}),
            short_names=("no",),
            field_selectors=frozenset({"spec.unschedulable"}),
        ),
        ResourceType(
            group="",
            version="v1",
            plural="events",
            singular="event",
            kind="Event",
            namespaced=True,
            short_names=("ev",),
            allow_create_on_update=True,
            field_selectors=_EVENT_FIELDS,
        ),
        ResourceType(
            group="events.k8s.io",
            version="v1",
            plural="events",
            singular="event",
            kind="Event",
            namespaced=True,
            short_names=("ev",),
            allow_create_on_update=True,
            storage_group="",
            field_selectors=_EVENT_FIELDS,
        ),
        ResourceType(
            group="",
            version="v1",
            plural="configmaps",
            singular="configmap",
            kind="ConfigMap",
            namespaced=True,
            short_names=("cm",),
        ),
        ResourceType(
            group="",
            version="v1",
            plural="persistentvolumeclaims",
            singular="persistentvolumeclaim",
            kind="PersistentVolumeClaim",
            namespaced=True,
            subresources=frozenset({"status"}),
            short_names=("pvc",),
        ),
        ResourceType(  # DRA claim templates (AWS GB300 RoCE); no driver allocates them
            group="resource.k8s.io",
            version="v1",
            plural="resourceclaimtemplates",
            singular="resourceclaimtemplate",
            kind="ResourceClaimTemplate",
            namespaced=True,
        ),
        ResourceType(
            group="",
            version="v1",
            plural="secrets",
            singular="secret",
            kind="Secret",
            namespaced=True,
            field_selectors=frozenset({"type"}),
        ),
        ResourceType(
            group="",
            version="v1",
            plural="services",
            singular="service",
            kind="Service",
            namespaced=True,
            subresources=frozenset({"status"}),
            short_names=("svc",),
            categories=("all",),
            return_deleted_object=True,
            field_selectors=frozenset({"spec.clusterIP", "spec.type"}),
        ),
        ResourceType(
            group="",
            version="v1",
            plural="serviceaccounts",
            singular="serviceaccount",
            kind="ServiceAccount",
            namespaced=True,
            subresources=frozenset({"token"}),
            short_names=("sa",),
            return_deleted_object=True,
        ),
        ResourceType(
            group="",
            version="v1",
            plural="replicationcontrollers",
            singular="replicationcontroller",
            kind="ReplicationController",
            namespaced=True,
            subresources=frozenset({"status", "scale"}),
            short_names=("rc",),
            categories=("all",),
            uses_generation=True,
        ),
        ResourceType(
            group="batch",
            version="v1",
            plural="jobs",
            singular="job",
            kind="Job",
            namespaced=True,
            subresources=frozenset({"status"}),
            categories=("all",),
            uses_generation=True,
            field_selectors=frozenset({"status.successful"}),
        ),
        *_apps_types(),
        ResourceType(
            group="policy",
            version="v1",
            plural="poddisruptionbudgets",
            singular="poddisruptionbudget",
            kind="PodDisruptionBudget",
            namespaced=True,
            subresources=frozenset({"status"}),
            short_names=("pdb",),
            uses_generation=True,
        ),
        *_rbac_types(),
        ResourceType(  # a pod's priorityClassName names one (not resolved into priority here)
            group="scheduling.k8s.io",
            version="v1",
            plural="priorityclasses",
            singular="priorityclass",
            kind="PriorityClass",
            namespaced=False,
            short_names=("pc",),
        ),
        ResourceType(
            group="coordination.k8s.io",
            version="v1",
            plural="leases",
            singular="lease",
            kind="Lease",
            namespaced=True,
            allow_unconditional_update=False,
            allow_create_on_update=True,
        ),
        ResourceType(
            group="apiregistration.k8s.io",
            version="v1",
            plural="apiservices",
            singular="apiservice",
            kind="APIService",
            namespaced=False,
            subresources=frozenset({"status"}),
            categories=("api-extensions",),
        ),
        ResourceType(
            group="apiextensions.k8s.io",
            version="v1",
            plural="customresourcedefinitions",
            singular="customresourcedefinition",
            kind="CustomResourceDefinition",
            namespaced=False,
            subresources=frozenset({"status"}),
            short_names=("crd", "crds"),
            uses_generation=True,
        ),
    ]



def _apps_types() -> list[ResourceType]:
    """apps/v1 workloads: status (and, but for DaemonSets, scale) subresources, generation."""
    out = []
    for kind, short in (("Deployment", "deploy"), ("ReplicaSet", "rs"), ("StatefulSet", "sts"),
                        ("DaemonSet", "ds")):
        subs = {"status"} if kind == "DaemonSet" else {"status", "scale"}
        out.append(ResourceType(
            group="apps",
            version="v1",
            plural=f"{kind.lower()}s",
            singular=kind.lower(),
            kind=kind,
            namespaced=True,
            subresources=frozenset(subs),
            short_names=(short,),
            categories=("all",),
            uses_generation=True,
        ))
    out.append(ResourceType(group="apps", version="v1", plural="controllerrevisions",
                            singular="controllerrevision", kind="ControllerRevision",
                            namespaced=True))
    return out


def _rbac_types() -> list[ResourceType]:
    """rbac.authorization.k8s.io/v1: Roles and bindings, namespaced and cluster-wide."""
    return [
        ResourceType(group="rbac.authorization.k8s.io", version="v1", plural=f"{kind.lower()}s",
                     singular=kind.lower(), kind=kind, namespaced=not kind.startswith("Cluster"))
        for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]

def crd_types(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The served versions of a CRD, as resource types."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    storage = ""
    for v in spec.get("versions") or []:
        if v.get("storage"):
            storage = str(v.get("name", ""))
    out: list[ResourceType] = []
    for v in spec.get("versions") or []:
        if not v.get("served", False):
            continue
        subs = set((v.get("subresources") or {}).keys())
        selectable = {
            str(f.get("jsonPath", "")).lstrip(".") for f in v.get("selectableFields") or []
        }
        out.append(
            ResourceType(
                group=group,
                version=str(v.get("name", "")),
                plural=str(names.get("plural", "")),
                singular=str(names.get("singular") or str(names.get("kind", "")).lower()),
                kind=str(names.get("kind", "")),
                namespaced=spec.get("scope") == "Namespaced",
                subresources=frozenset(subs),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                uses_generation=True,
                allow_unconditional_update=False,
                field_selectors=frozenset(selectable),
                crd_name=str((crd.get("metadata") or {}).get("name", "")),
                storage_version=storage,
            )
        )
    return out


@attrs.define
class Registry:
    """Lookup of resource types by group/version/plural, kind, and group."""

    _types: dict[tuple[str, str, str], ResourceType] = attrs.field(factory=dict)
    _group_order: list[str] = attrs.field(factory=list)

    def add(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt
        if rt.group not in self._group_order:
            self._group_order.append(rt.group)

    def remove_crd(self, crd_name: str) -> list[ResourceType]:
        gone = [rt for rt in self._types.values() if rt.crd_name == crd_name]
        for rt in gone:
            del self._types[(rt.group, rt.version, rt.plural)]
        groups = {rt.group for rt in self._types.values()}
        self._group_order = [g for g in self._group_order if g in groups]
        return gone

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self._types.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def kinds_in_bucket(self, bucket: tuple[str, str]) -> list[ResourceType]:
        return [rt for rt in self._types.values() if rt.bucket == bucket]

    def groups(self) -> list[str]:
        return list(self._group_order)

    def versions(self, group: str) -> list[str]:
        seen: list[str] = []
        for rt in self._types.values():
            if rt.group == group and rt.version not in seen:
                seen.append(rt.version)
        return sorted(seen, key=_version_priority)

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._types.values() if rt.group == group and rt.version == version]

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._types.values()))

    def __contains__(self, key: object) -> bool:
        return key in self._types


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA > beta > alpha, higher numbers first."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {"": 0, "beta": 1, "alpha": 2}[m.group(2) or ""]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)
