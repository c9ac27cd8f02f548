"""The shape every simulated controller shares: a world snapshot in, actions out.

Each simulated controller (Trainer, JobSet, batch Job, scheduler, kubelet, node lifecycle) is a
pure function ``step(world, now, config) -> Step``. ``World`` is a read-only snapshot of the
objects the cluster holds (plain dicts, exactly as the API server returns them) plus
``marks``: small facts the simulator remembers that the API objects cannot carry at the
precision it needs (``metav1.Time`` has whole seconds; a 0.5 s deletion delay does not), and
the stub program chosen for each container instance. Actions are data: the async driver
(:mod:`cre.testing.cluster.runtime`) applies them over HTTP; unit tests just read them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from cre.kube.client import (
    BATCH_JOBS,
    CLUSTER_TRAINING_RUNTIMES,
    CONFIGMAPS,
    JOBSETS,
    NODES,
    PODS,
    SECRETS,
    SERVICES,
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Resource,
)

Obj = dict[str, Any]

WATCHED: tuple[Resource, ...] = (
    TRAINJOBS, TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES, JOBSETS, BATCH_JOBS, PODS, NODES,
)
OTHER: tuple[Resource, ...] = (CONFIGMAPS, SECRETS, SERVICES)


def key_of(obj: Mapping[str, Any]) -> str:
    """The store key ``namespace/name`` (``name`` for cluster-scoped objects)."""
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


@attrs.frozen(slots=True)
class World:
    """A snapshot of the simulated cluster: objects by resource plural then key, and marks."""

    objects: Mapping[str, Mapping[str, Obj]] = attrs.field(factory=dict)
    marks: Mapping[str, Any] = attrs.field(factory=dict)
    # Indexes built on first use (sorted lists, owner and label maps). A World is read by one
    # controller step while nothing writes, so they stay valid for its lifetime; a 1,000-node
    # cluster would otherwise rescan every pod once per Job, group and container.
    _cache: dict[Any, Any] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    def with_marks(self, marks: Mapping[str, Any]) -> World:
        """The same objects (and their indexes) with other marks."""
        out = World(objects=self.objects, marks=marks)
        out._cache.update(self._cache)
        return out

    def all(self, res: Resource) -> list[Obj]:
        """Every object of ``res``, sorted by key so steps are deterministic."""
        found: list[Obj] | None = self._cache.get(res.plural)
        if found is None:
            store = self.objects.get(res.plural, {})
            found = self._cache[res.plural] = [store[k] for k in sorted(store)]
        return found

    def get(self, res: Resource, key: str) -> Obj | None:
        return self.objects.get(res.plural, {}).get(key)

    def owned_by(self, res: Resource, owner_uid: str) -> list[Obj]:
        """Objects of ``res`` whose controller owner reference has ``owner_uid``."""
        index: dict[str | None, list[Obj]] | None = self._cache.get(("owner", res.plural))
        if index is None:
            index = self._cache[("owner", res.plural)] = {}
            for o in self.all(res):
                index.setdefault(controller_uid(o), []).append(o)
        return list(index.get(owner_uid, ()))

    def labelled(self, res: Resource, namespace: str, key: str, value: str) -> list[Obj]:
        """Objects of ``res`` in ``namespace`` whose label ``key`` is ``value`` (key order)."""
        index: dict[tuple[str, str], list[Obj]] | None = self._cache.get(
            ("label", res.plural, key))
        if index is None:
            index = self._cache[("label", res.plural, key)] = {}
            for o in self.all(res):
                found = labels_of(o).get(key)
                if found is not None:
                    index.setdefault((ns_of(o), found), []).append(o)
        return list(index.get((namespace, value), ()))

    @classmethod
    def of(cls, objects: Iterable[Obj], marks: Mapping[str, Any] | None = None) -> World:
        """A snapshot from a flat list of objects (tests), filed by their ``kind``."""
        by_kind = {r.kind: r.plural for r in (*WATCHED, *OTHER)}
        out: dict[str, dict[str, Obj]] = {}
        for obj in objects:
            plural = by_kind[obj["kind"]]
            out.setdefault(plural, {})[key_of(obj)] = obj
        return cls(objects=out, marks=dict(marks or {}))


@attrs.frozen(slots=True)
class Create:
    """Create ``body`` (``metadata.generateName`` allowed).

    ``on_failure`` marks are applied when the write fails (a controller lowering its
    expectations, as the real one does when a create errors).
    """

    resource: Resource
    body: Obj
    on_failure: tuple[Mark, ...] = ()


@attrs.frozen(slots=True)
class Patch:
    """JSON merge patch of one object, or of its ``status`` subresource."""

    resource: Resource
    namespace: str | None
    name: str
    patch: Obj
    subresource: str | None = None


@attrs.frozen(slots=True)
class Delete:
    """Delete one object, with an optional UID precondition, propagation and grace period.

    ``on_failure`` marks are applied when the delete fails (e.g. forgetting a "deleted" mark so
    the next tick deletes again, as the kubelet's status manager retries).
    """

    resource: Resource
    namespace: str | None
    name: str
    uid: str | None = None
    propagation: str | None = None
    grace_seconds: int | None = None
    on_failure: tuple[Mark, ...] = ()


@attrs.frozen(slots=True)
class Bind:
    """Bind a pod to a node (the ``pods/binding`` subresource sets ``spec.nodeName``)."""

    namespace: str
    pod: str
    node: str


@attrs.frozen(slots=True)
class AppendLog:
    """Text a container wrote to stdout/stderr, appended to the pod's log; ``at`` is the
    simulated time it was written (``None``: when the action is applied). A step that runs late
    writes several timed lines at once: each keeps its own time, so the kubelet timestamps a
    log reader sees are the program's schedule, not the simulator's lag."""

    namespace: str
    pod: str
    container: str
    text: str
    at: float | None = None


@attrs.frozen(slots=True)
class RotateLog:
    """A container restarted in place: its current log becomes the ``previous=true`` log."""

    namespace: str
    pod: str
    container: str


@attrs.frozen(slots=True)
class Mark:
    """Remember ``value`` under ``key`` in ``World.marks`` (None forgets the key)."""

    key: str
    value: Any

    def apply_to(self, marks: dict[str, Any]) -> None:
        """Record this mark in ``marks``, the way every backend keeps them."""
        if self.value is None:
            marks.pop(self.key, None)
        else:
            marks[self.key] = self.value


Action = Create | Patch | Delete | Bind | AppendLog | RotateLog | Mark


@attrs.frozen(slots=True)
class Step:
    """What one controller wants done now, and when it next wants to run (simulated time)."""

    actions: tuple[Action, ...] = ()
    wake_at: float | None = None


class StepBuilder:
    """Collects actions and the earliest wake-up while a step walks the world."""

    def __init__(self) -> None:
        self.actions: list[Action] = []
        self.wake_at: float | None = None

    def add(self, *actions: Action) -> None:
        self.actions.extend(actions)

    def wake(self, at: float) -> None:
        self.wake_at = at if self.wake_at is None else min(self.wake_at, at)

    def build(self) -> Step:
        return Step(actions=tuple(self.actions), wake_at=self.wake_at)


# -- small object helpers shared by the steps --------------------------------------------------

def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    m = obj.get("metadata")
    if type(m) is dict:  # the common case, without the slow ABC check
        return m
    return m if isinstance(m, Mapping) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name", ""))


def ns_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace", ""))


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid", ""))


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    lab = meta(obj).get("labels")
    if type(lab) is dict:
        return lab
    return lab if isinstance(lab, Mapping) else {}


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def owner_ref(owner: Mapping[str, Any], *, block: bool = True) -> Obj:
    """A controller owner reference to ``owner``."""
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": name_of(owner),
            "uid": uid_of(owner), "controller": True, "blockOwnerDeletion": block}


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def conditions(obj: Mapping[str, Any]) -> list[Obj]:
    conds = (obj.get("status") or {}).get("conditions")
    return list(conds) if isinstance(conds, list) else []


def condition(obj: Mapping[str, Any], ctype: str) -> Obj | None:
    for c in conditions(obj):
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(obj: Mapping[str, Any], ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def set_condition(conds: list[Obj], new: Obj) -> list[Obj]:
    """Upsert ``new`` by type; keep ``lastTransitionTime`` when the status did not change."""
    out: list[Obj] = []
    replaced = False
    for c in conds:
        if c.get("type") == new["type"]:
            merged = dict(new)
            if c.get("status") == new.get("status") and c.get("lastTransitionTime"):
                merged["lastTransitionTime"] = c["lastTransitionTime"]
            out.append(merged)
            replaced = True
        else:
            out.append(c)
    if not replaced:
        out.append(dict(new))
    return out


def deep(obj: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars; several times faster than
    ``copy.deepcopy``); other containers fall back to ``copy.deepcopy``."""
    kind = type(obj)
    if kind is dict:
        return {k: deep(v) for k, v in obj.items()}
    if kind is list:
        return [deep(v) for v in obj]
    if kind in (str, int, float, bool) or obj is None:
        return obj
    return copy.deepcopy(obj)
