"""Write semantics of the generic registry: create, update, patch, status, delete.

This is the part of ``k8s.io/apiserver/pkg/registry/generic/registry/store.go`` and the
per-kind strategies that a controller can observe: server-set metadata, optimistic concurrency,
the status subresource split, ``generation`` moving only on spec changes, no-op writes that do
not bump the revision, finalizers holding a deleted object, graceful pod deletion, and
``dryRun=All``. HTTP parsing lives in :mod:`.httpio`; PATCH and apply in :mod:`.patchverb`;
DELETE in :mod:`.deletion`; garbage collection in :mod:`.gc`. The first two get this registry
as a :class:`~.writectx.WriteContext` (they never import this module).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime
from typing import Any

from . import crdstatus, deletion, errors, patching, patchverb
from ._builtin import decode_error
from .admission import Admission
from .convert import core_event_defaults, drop_empty_fields, from_storage, to_storage
from .defaults import ServiceAllocator, admit_new_pod, generate_job_selector
from .deletion import CRD_CLEANUP_FINALIZER, DeleteOptions
from .errors import StatusCause
from .meta import (
    NameStreams,
    dedup_owner_refs,
    micro_time,
    quote,
    rfc3339,
    spec_changed,
    validate_metadata,
)
from .resources import Registry, ResourceType
from .store import Key, Obj, Store
from .writectx import WriteOptions

__all__ = ["Objects", "WriteOptions"]


class Objects:
    """Stored-object operations with the real server's rules; shared by HTTP and the control API."""

    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        admission: Admission,
        clock: Callable[[], datetime],
        rng: random.Random,
    ) -> None:
        self.store = store
        self.registry = registry
        self.admission = admission
        self.clock = clock
        self.rng = rng
        # generateName suffixes come from their own stream per (resource, namespace, prefix),
        # so one more object elsewhere (a CRD installed, a child created) shifts no name.
        self._names = NameStreams(rng.getrandbits(64))
        self.crd_listeners: list[Callable[[Obj, bool], None]] = []
        self.services = ServiceAllocator()

    # -- helpers -------------------------------------------------------------------------------

    def now(self) -> str:
        return rfc3339(self.clock())

    def key_of(self, rt: ResourceType, namespace: str, name: str) -> Key:
        return (namespace if rt.namespaced else "", name)

    def storage_api_version(self, rt: ResourceType) -> str:
        if rt.is_custom and rt.storage_version:
            return f"{rt.group}/{rt.storage_version}"
        if rt.storage_group == "":
            return "v1"
        return rt.api_version

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.bucket, self.key_of(rt, namespace, name))
        if obj is None:
            raise errors.not_found(rt.qualified, name)
        return obj

    def _check_namespace(self, rt: ResourceType, namespace: str) -> None:
        if not rt.namespaced:
            return
        ns = self.store.get(("", "namespaces"), ("", namespace))
        if ns is None:
            raise errors.not_found(errors.Qualified("", "namespaces", "Namespace"), namespace)
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            name = ""
            raise errors.forbidden(
                rt.qualified,
                name,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
            )

    def check_body_identity(self, rt: ResourceType, namespace: str, body: Obj) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind})"
            )
        api_version = body.get("apiVersion")
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({rt.api_version})"
            )
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f'kind "{kind}" does not match'
            )
        body["apiVersion"] = rt.api_version
        body["kind"] = rt.kind
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict) and not rt.is_custom:
            error = decode_error(body, kubernetes_version=self.admission.kubernetes_version)
            if error:
                raise errors.bad_request(
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                    f"{error}")
        if not isinstance(meta, dict):
            meta = body["metadata"] = {}
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            if namespace:
                meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return meta

    # -- create --------------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str, body: Obj, opts: WriteOptions) -> Obj:
        meta = self.check_body_identity(rt, namespace, body)
        # etcd3's Create refuses only a resourceVersion that parses as a non-zero uint64; any
        # other value ("v1", "0", "") is dropped with the rest of the storage-owned fields.
        if _parsed_rv(meta.pop("resourceVersion", None)):
            raise errors.unknown_500("resourceVersion should not be set on objects to be created")
        if rt.namespaced:
            self._check_namespace(rt, str(meta.get("namespace", "")))
        if rt.crd_name and crdstatus.crd_terminating(self, rt.crd_name):
            raise errors.forbidden(
                rt.qualified,
                str(meta.get("name", "")),
                "create not allowed while custom resource definition is terminating",
            )
        for f in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generation"):
            meta.pop(f, None)
        meta["uid"] = self._names.uid(rt.bucket, namespace if rt.namespaced else None,
                                      str(meta.get("name") or meta.get("generateName") or ""))
        meta["creationTimestamp"] = self.now()
        if rt.uses_generation:
            meta["generation"] = 1
        dedup_owner_refs(meta)
        self._reset_status_on_create(rt, body)
        generated = False
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._names.next(rt.bucket, namespace, str(meta["generateName"]))
            generated = True
        if rt.kind == "Job" and rt.group == "batch":
            generate_job_selector(body)
        if rt.kind == "Service" and rt.group == "" and not opts.dry_run:
            self.services.allocate(body)
        causes = validate_metadata(body, namespaced=rt.namespaced)
        if causes:
            raise errors.invalid_object(rt.qualified, str(meta.get("name", "")), causes)
        body = drop_empty_fields(rt, self._admit(rt, body, None, opts))
        if rt.kind == "Pod" and rt.group == "":
            admit_new_pod(body)
        body = patching.record_update(
            None, body, manager=opts.manager, operation="Update", subresource=None,
            now=self.now(), schema=self.admission.schema_of(rt),
        )
        meta = body["metadata"]
        key = self.key_of(rt, namespace, str(meta["name"]))
        attempts = 0
        while self.store.get(rt.bucket, key) is not None:
            if not generated or attempts >= 7:
                raise errors.already_exists(rt.qualified, key[1], generated=generated)
            attempts += 1
            meta["name"] = self._names.next(rt.bucket, namespace, str(meta["generateName"]))
            key = self.key_of(rt, namespace, str(meta["name"]))
        if rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io":
            crdstatus.crd_created(self, body)
        if opts.dry_run:
            return body
        stored = self.store.put(rt.bucket, key, to_storage(rt, body, self.storage_api_version(rt)))
        if rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io":
            for fn in self.crd_listeners:
                fn(stored, True)
        return from_storage(rt, stored)

    def _reset_status_on_create(self, rt: ResourceType, body: Obj) -> None:
        if rt.is_custom:
            if "status" in rt.subresources:
                body.pop("status", None)
            return
        if rt.group == "" and rt.kind == "Pod":
            body["status"] = {"phase": "Pending", "qosClass": _qos_class(body)}
            spec = body.setdefault("spec", {})
            spec.setdefault("terminationGracePeriodSeconds", 30)
            spec.setdefault("restartPolicy", "Always")
        elif "status" in rt.subresources and (rt.group in ("batch", "apps", "policy") or (
                rt.group, rt.kind) in (("", "ReplicationController"),
                                       ("apiregistration.k8s.io", "APIService"))):
            body["status"] = {}  # admission's defaults add the kind's always-present counters
        elif rt.kind == "Service" and rt.group == "":
            body["status"] = {"loadBalancer": {}}
        elif rt.kind == "Namespace" and rt.group == "":
            body["status"] = {"phase": "Active"}
            body.setdefault("spec", {})["finalizers"] = ["kubernetes"]
            labels = body["metadata"].setdefault("labels", {})
            labels["kubernetes.io/metadata.name"] = body["metadata"].get("name", "")
        elif rt.kind == "Event" and rt.group == "":
            core_event_defaults(body)

    def _admit(self, rt: ResourceType, obj: Obj, old: Obj | None, opts: WriteOptions) -> Obj:
        if rt.group == "events.k8s.io":
            return obj
        if not rt.is_custom and not opts.patch:
            # decoding into the Go struct comes first: a value of the wrong JSON type is a 400
            error = decode_error(obj, kubernetes_version=self.admission.kubernetes_version,
                                 old=old)
            if error:
                raise errors.bad_request(
                    f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                    f"{error}")
        old_view = None if old is None else from_storage(rt, old)
        if opts.binding and old_view is not None:  # the one write that may set spec.nodeName
            old_view = {**old_view, "spec": {**(old_view.get("spec") or {}),
                                             "nodeName": (obj.get("spec") or {}).get("nodeName")}}
        obj, dropped = self.admission.admit(rt, obj, old_view)
        unknown = [f'unknown field "{path}"' for path in dropped]
        if unknown and opts.field_validation == "Strict":
            detail = "strict decoding error: " + ", ".join(unknown)
            if opts.patch:
                raise errors.bad_request(f"error decoding patch: {detail}")
            raise errors.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {detail}'
            )
        if unknown and opts.field_validation == "Warn":
            opts.warnings.extend(unknown)
        return obj

    # -- update --------------------------------------------------------------------------------

    def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Obj,
        opts: WriteOptions,
        *,
        subresource: str | None = None,
    ) -> tuple[Obj, bool]:
        """PUT: returns (object, created)."""
        meta = self.check_body_identity(rt, namespace, body)
        body_name = meta.get("name")
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        key = self.key_of(rt, namespace, name)
        old = self.store.get(rt.bucket, key)
        if old is None:
            if rt.allow_create_on_update and subresource is None:
                meta.pop("resourceVersion", None)
                return self.create(rt, namespace, body, opts), True
            raise errors.not_found(rt.qualified, name)
        body_rv = str(meta.get("resourceVersion") or "")
        if body_rv in ("", "0"):
            if not rt.allow_unconditional_update:
                raise errors.invalid(
                    kind_name=rt.qualified.resource_name,
                    name=name,
                    group=rt.group,
                    details_kind=rt.plural,
                    causes=[
                        StatusCause(
                            "FieldValueInvalid",
                            "Invalid value: 0: must be specified for an update",
                            "metadata.resourceVersion",
                        )
                    ],
                )
        elif body_rv != old["metadata"].get("resourceVersion"):
            raise errors.conflict(rt.qualified, name)
        new = self.merge_for_write(rt, old, body, subresource)
        new = patching.record_update(
            from_storage(rt, old),
            new,
            manager=opts.manager,
            operation="Update",
            subresource=subresource,
            now=self.now(),
            schema=self.admission.schema_of(rt),
        )
        return self.commit(rt, key, old, new, opts), False

    def merge_for_write(
        self, rt: ResourceType, old: Obj, body: Obj, subresource: str | None
    ) -> Obj:
        """Restore server-owned metadata and split status from the rest (§4.2, §4.5)."""
        old_meta = old["metadata"]
        if subresource == "status":
            new: Obj = {**from_storage(rt, old)}
            new["status"] = body.get("status")
            if new["status"] is None:
                new.pop("status")
            meta = dict(old_meta)
            if rt.kind == "Pod" and rt.group == "":
                body_meta = body.get("metadata") or {}
                for f in ("labels", "annotations"):
                    if f in body_meta:
                        meta[f] = body_meta[f]
                    else:
                        meta.pop(f, None)
            if "managedFields" in (body.get("metadata") or {}):
                meta["managedFields"] = body["metadata"]["managedFields"]
            new["metadata"] = meta
            return new
        new = body
        meta = new["metadata"]
        body_uid = meta.get("uid")
        if body_uid and body_uid != old_meta.get("uid"):
            raise errors.invalid_object(
                rt.qualified,
                str(meta.get("name", "")),
                [
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {quote(body_uid)}: field is immutable",
                        "metadata.uid",
                    )
                ],
            )
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if f in old_meta:
                meta[f] = old_meta[f]
            else:
                meta.pop(f, None)
        if "deletionGracePeriodSeconds" in old_meta:
            meta["deletionGracePeriodSeconds"] = old_meta["deletionGracePeriodSeconds"]
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if "managedFields" not in meta and "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
        dedup_owner_refs(meta)
        if "status" in rt.subresources:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if rt.kind == "Namespace" and rt.group == "" and "spec" in old:
            new["spec"] = old["spec"]
        return new

    def commit(self, rt: ResourceType, key: Key, old: Obj, new: Obj, opts: WriteOptions) -> Obj:
        """Validate and store an update of ``old`` to ``new``; no-ops store nothing."""
        meta = new["metadata"]
        old_meta = old["metadata"]
        if old_meta.get("deletionTimestamp"):
            added = [f for f in meta.get("finalizers") or [] if f not in
                     (old_meta.get("finalizers") or [])]
            if added:
                cause = StatusCause(
                    "FieldValueForbidden",
                    "Forbidden: no new finalizers can be added if the object is being "
                    f"deleted, found new finalizers {_go_strings(added)}",
                    "metadata.finalizers",
                )
                # A built-in kind's update validation checks ObjectMeta twice (its own
                # ValidateObjectMetaUpdate and the generic one): kube-apiserver 1.34 lists
                # this cause twice for a ConfigMap.
                causes = [cause] if rt.is_custom else [cause, cause]
                raise errors.invalid_object(rt.qualified, key[1], causes)
        causes = validate_metadata(new, namespaced=rt.namespaced)
        if causes:
            raise errors.invalid_object(rt.qualified, key[1], causes)
        new = drop_empty_fields(rt, self._admit(rt, new, old, opts))
        meta = new["metadata"]
        old_view = from_storage(rt, old)
        if rt.uses_generation and old_meta.get("generation") is not None and not opts.binding \
                and spec_changed(
            old_view, new, ignore_status="status" in rt.subresources
        ):
            meta["generation"] = int(old_meta["generation"]) + 1
        if _same_ignoring_managed(old_view, new):
            return old_view
        if rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io":
            crdstatus.crd_updated(self, old_view, new)
        if opts.dry_run:
            meta["resourceVersion"] = old_meta.get("resourceVersion")
            return new
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
            final = self.store.remove(rt.bucket, key)
            assert final is not None
            deletion.after_remove(self, rt, final)
            # The answer is the update that emptied the finalizers, at the removal's revision.
            gone = {**meta, "resourceVersion": final["metadata"].get("resourceVersion")}
            return from_storage(rt, {**new, "metadata": gone})
        stored = self.store.put(rt.bucket, key, to_storage(rt, new, self.storage_api_version(rt)))
        if rt.kind == "CustomResourceDefinition" and rt.group == "apiextensions.k8s.io":
            for fn in self.crd_listeners:
                fn(stored, True)
        return from_storage(rt, stored)

    def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        patch: Any,
        opts: WriteOptions,
        *,
        subresource: str | None = None,
    ) -> tuple[Obj, bool]:
        """PATCH by content type: ``json``, ``merge``, ``strategic`` or ``apply``; see
        :mod:`.patchverb`. Returns (object, created)."""
        return patchverb.patch(self, rt, namespace, name, patch_type, patch, opts,
                               subresource=subresource)

    def delete(
        self, rt: ResourceType, namespace: str, name: str, opts: DeleteOptions
    ) -> tuple[Obj, bool]:
        """DELETE: returns (object, removed-now); see :mod:`.deletion`."""
        return deletion.delete(self, rt, namespace, name, opts)


def _qos_class(pod: Obj) -> str:
    containers = list((pod.get("spec") or {}).get("containers") or [])
    containers += list((pod.get("spec") or {}).get("initContainers") or [])
    any_set = False
    guaranteed = bool(containers)
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _same_ignoring_managed(old: Obj, new: Obj) -> bool:
    if old.keys() != new.keys():
        return False
    for k in old:
        if k == "metadata":
            a = {x: y for x, y in old[k].items() if x not in ("managedFields", "resourceVersion")}
            b = {x: y for x, y in new[k].items() if x not in ("managedFields", "resourceVersion")}
            if a != b:
                return False
        elif old[k] != new[k]:
            return False
    return True


def _go_strings(values: list[str]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


__all__ = ["CRD_CLEANUP_FINALIZER", "DeleteOptions", "Objects", "WriteOptions", "micro_time"]


def _parsed_rv(raw: Any) -> int:
    """``strconv.ParseUint(rv, 10, 64)`` as the storage versioner reads it; 0 when it fails."""
    text = str(raw) if isinstance(raw, str | int) and not isinstance(raw, bool) else ""
    if not text.isascii() or not text.isdigit():
        return 0
    value = int(text)
    return value if value < 1 << 64 else 0
