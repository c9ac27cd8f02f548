"""Garbage collection, namespace termination and CRD instance cleanup, as background controllers.

On a real cluster these are controllers running next to the API server (the garbage collector
in kube-controller-manager, the namespace controller, the apiextensions finalizer controller):
they react to changes asynchronously and write through the API, so clients see the same watch
events they would see here. The rules follow ``pkg/controller/garbagecollector``:

* an object whose owner references are *all* dangling (owner missing, or its uid differs, or a
  namespaced owner in another namespace) is deleted; if only some are dangling, those references
  are removed;
* ``orphan`` on a deleting owner: the owner's reference is removed from every dependent, then the
  finalizer; ``foregroundDeletion``: dependents are deleted, and the finalizer is removed once no
  dependent with ``blockOwnerDeletion: true`` remains.

Left out: the GC's uid-vs-name cache races, ``OwnerRefInvalidNamespace`` events, and the
per-resource delete permission check behind ``blockOwnerDeletion``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cre.api.watch import WatchEventType as EventType

from .deletion import CRD_CLEANUP_FINALIZER, DeleteOptions
from .objects import Objects, WriteOptions
from .resources import ResourceType
from .store import Event, Key, Obj

Ref = tuple[tuple[str, str], Key]  # (bucket, key)
GC_MANAGER = WriteOptions(
    manager="generic-garbage-collector", field_validation="Ignore"
)
NS_MANAGER = WriteOptions(manager="namespace-controller", field_validation="Ignore")
CRD_BUCKET = ("apiextensions.k8s.io", "customresourcedefinitions")


class GarbageCollector:
    """Index of owners and dependents plus a worker that settles them."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.by_uid: dict[str, Ref] = {}
        self.dependents: dict[str, set[Ref]] = {}
        self._dirty_deps: set[Ref] = set()
        self._dirty_owners: set[str] = set()
        self._dirty_ns: set[str] = set()
        self._dirty_crds: set[str] = set()
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        objects.store.listeners.append(self.observe)

    # -- indexing ------------------------------------------------------------------------------

    def observe(self, bucket: tuple[str, str], ev: Event) -> None:
        ref: Ref = (bucket, ev.key)
        obj, prev = ev.obj, ev.prev
        meta = obj["metadata"]
        uid = str(meta.get("uid", ""))
        old_refs = _owner_uids(prev)
        if ev.type is EventType.DELETED:
            self.by_uid.pop(uid, None)
            for o in old_refs:
                self._unlink(o, ref)
                self._dirty_owners.add(o)
            for dep in self.dependents.get(uid, ()):
                self._dirty_deps.add(dep)
            if ev.key[0]:
                self._dirty_ns.add(ev.key[0])
            crd = self._crd_of_bucket(bucket)
            if crd:
                self._dirty_crds.add(crd)
        else:
            self.by_uid[uid] = ref
            new_refs = _owner_uids(obj)
            if new_refs != old_refs:
                for o in old_refs - new_refs:
                    self._unlink(o, ref)
                for o in new_refs - old_refs:
                    self.dependents.setdefault(o, set()).add(ref)
                if new_refs:
                    self._dirty_deps.add(ref)
            if meta.get("deletionTimestamp"):
                fins = meta.get("finalizers") or []
                if "orphan" in fins or "foregroundDeletion" in fins:
                    self._dirty_owners.add(uid)
                if bucket == ("", "namespaces"):
                    self._dirty_ns.add(ev.key[1])
                if bucket == CRD_BUCKET:
                    self._dirty_crds.add(ev.key[1])
        # wake the worker only with work to do: most writes (every plain create) leave nothing
        if self._dirty_deps or self._dirty_owners or self._dirty_ns or self._dirty_crds:
            self._wake.set()
            self.idle.clear()

    def _unlink(self, owner: str, ref: Ref) -> None:
        deps = self.dependents.get(owner)
        if deps is not None:
            deps.discard(ref)
            if not deps:
                del self.dependents[owner]

    def _crd_of_bucket(self, bucket: tuple[str, str]) -> str:
        group, plural = bucket
        if not group or "." not in group:
            return ""
        name = f"{plural}.{group}"
        return name if self.objects.store.get(CRD_BUCKET, ("", name)) is not None else ""

    # -- worker --------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self.settle()
            await asyncio.sleep(0)

    def settle(self) -> None:
        """Process everything pending (repeats until nothing changes)."""
        for _ in range(10_000):
            if not (self._dirty_deps or self._dirty_owners or self._dirty_ns or self._dirty_crds):
                break
            deps, self._dirty_deps = self._dirty_deps, set()
            owners, self._dirty_owners = self._dirty_owners, set()
            nss, self._dirty_ns = self._dirty_ns, set()
            crds, self._dirty_crds = self._dirty_crds, set()
            for ref in sorted(deps):
                self._process_dependent(ref)
            for uid in sorted(owners):
                self._process_owner(uid)
            for ns in sorted(nss):
                self._process_namespace(ns)
            for crd in sorted(crds):
                self._process_crd(crd)
        self._wake.clear()
        self.idle.set()

    def _rt(self, bucket: tuple[str, str]) -> ResourceType | None:
        kinds = self.objects.registry.kinds_in_bucket(bucket)
        for rt in kinds:
            if (not rt.is_custom or rt.version == rt.storage_version) and rt.group == bucket[0]:
                return rt
        return kinds[0] if kinds else None

    def _owner_state(self, dep: Obj, ref: dict[str, Any]) -> str:
        """``absent``, ``foreground`` (owner waiting on dependents) or ``present``."""
        loc = self.by_uid.get(str(ref.get("uid", "")))
        if loc is None:
            return "absent"
        owner = self.objects.store.get(*loc)
        if owner is None:
            return "absent"
        dep_ns = dep["metadata"].get("namespace", "")
        owner_ns = owner["metadata"].get("namespace", "")
        if owner_ns and owner_ns != dep_ns:
            return "absent"
        if owner.get("kind") != ref.get("kind") or owner["metadata"].get("name") != ref.get("name"):
            return "absent"
        om = owner["metadata"]
        if om.get("deletionTimestamp") and "foregroundDeletion" in (om.get("finalizers") or []):
            return "foreground"
        return "present"

    def _process_dependent(self, ref: Ref) -> None:
        bucket, key = ref
        obj = self.objects.store.get(bucket, key)
        rt = self._rt(bucket)
        if obj is None or rt is None:
            return
        refs = obj["metadata"].get("ownerReferences") or []
        if not refs:
            return
        states = [self._owner_state(obj, r) for r in refs]
        if "present" not in states:
            if obj["metadata"].get("deletionTimestamp"):
                return
            fg = "foreground" in states and str(obj["metadata"].get("uid")) in self.dependents
            policy = "Foreground" if fg else None
            self._delete(rt, key, DeleteOptions(propagation=policy))
        elif any(s != "present" for s in states):
            keep = [r for r, s in zip(refs, states, strict=True) if s == "present"]
            self._update(rt, key, lambda o: _set_refs(o, keep))

    def _process_owner(self, uid: str) -> None:
        loc = self.by_uid.get(uid)
        if loc is None:
            return
        bucket, key = loc
        owner = self.objects.store.get(bucket, key)
        rt = self._rt(bucket)
        if owner is None or rt is None or not owner["metadata"].get("deletionTimestamp"):
            return
        fins = list(owner["metadata"].get("finalizers") or [])
        deps = sorted(self.dependents.get(uid, ()))
        if "orphan" in fins:
            for dbucket, dkey in deps:
                drt = self._rt(dbucket)
                dep = self.objects.store.get(dbucket, dkey)
                if drt is None or dep is None:
                    continue
                keep = [r for r in dep["metadata"].get("ownerReferences") or []
                        if r.get("uid") != uid]
                self._update(drt, dkey, lambda o, k=keep: _set_refs(o, k))
            self._update(rt, key, lambda o: _drop_finalizer(o, "orphan"))
        elif "foregroundDeletion" in fins:
            blocking = False
            for dref in deps:
                dep = self.objects.store.get(*dref)
                if dep is None:
                    continue
                self._process_dependent(dref)
                dep = self.objects.store.get(*dref)
                if dep is None:
                    continue
                for r in dep["metadata"].get("ownerReferences") or []:
                    if r.get("uid") == uid and r.get("blockOwnerDeletion"):
                        blocking = True
            if not blocking:
                self._update(rt, key, lambda o: _drop_finalizer(o, "foregroundDeletion"))

    def _process_namespace(self, ns: str) -> None:
        store = self.objects.store
        nsobj = store.get(("", "namespaces"), ("", ns))
        if nsobj is None or not nsobj["metadata"].get("deletionTimestamp"):
            return
        remaining = False
        for bucket_name, bucket in list(store.buckets.items()):
            rt = self._rt(bucket_name)
            if rt is None or not rt.namespaced:
                continue
            for key in [k for k in bucket.objects if k[0] == ns]:
                remaining = True
                obj = bucket.objects[key]
                if not obj["metadata"].get("deletionTimestamp"):
                    self._delete(rt, key, DeleteOptions(grace_period=None))
        if remaining:
            return
        ns_rt = self._rt(("", "namespaces"))
        assert ns_rt is not None
        if (nsobj.get("spec") or {}).get("finalizers"):
            new = {**nsobj, "spec": {**nsobj["spec"], "finalizers": []}}
            store.put(("", "namespaces"), ("", ns), new)
            nsobj = new
        if not nsobj["metadata"].get("finalizers"):
            store.remove(("", "namespaces"), ("", ns))

    def _process_crd(self, name: str) -> None:
        store = self.objects.store
        crd = store.get(CRD_BUCKET, ("", name))
        if crd is None or not crd["metadata"].get("deletionTimestamp"):
            return
        plural, _, group = name.partition(".")
        bucket = store.buckets.get((group, plural))
        rt = self._rt((group, plural))
        if bucket is not None and bucket.objects and rt is not None:
            for key in list(bucket.objects):
                if not bucket.objects[key]["metadata"].get("deletionTimestamp"):
                    self._delete(rt, key, DeleteOptions())
            if bucket.objects:
                return
        crd_rt = self._rt(CRD_BUCKET)
        assert crd_rt is not None
        self._update(crd_rt, ("", name), lambda o: _drop_finalizer(o, CRD_CLEANUP_FINALIZER))

    # -- writes --------------------------------------------------------------------------------

    def _delete(self, rt: ResourceType, key: Key, opts: DeleteOptions) -> None:
        try:
            self.objects.delete(rt, key[0], key[1], opts)
        except Exception:
            return

    def _update(self, rt: ResourceType, key: Key, mutate: Any) -> None:
        old = self.objects.store.get(rt.bucket, key)
        if old is None:
            return
        new = mutate({**old, "metadata": dict(old["metadata"])})
        self.objects._commit(rt, key, old, new, GC_MANAGER)


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {str(r.get("uid", "")) for r in obj["metadata"].get("ownerReferences") or []}


def _set_refs(obj: Obj, refs: list[dict[str, Any]]) -> Obj:
    if refs:
        obj["metadata"]["ownerReferences"] = refs
    else:
        obj["metadata"].pop("ownerReferences", None)
    return obj


def _drop_finalizer(obj: Obj, name: str) -> Obj:
    fins = [f for f in obj["metadata"].get("finalizers") or [] if f != name]
    if fins:
        obj["metadata"]["finalizers"] = fins
    else:
        obj["metadata"].pop("finalizers", None)
    return obj
