"""An in-memory object store that applies simulator actions, for fast deterministic tests.

The simulator's real home is the API emulator over HTTP; this backend exists so the controller
steps can be tested end to end (TrainJob to pod logs) as a discrete-event simulation: no
sockets, no wall clock, simulated time jumps straight to the next ``wake_at``. It keeps just the
API semantics the steps depend on: ``generateName``, UIDs, resourceVersions,
``creationTimestamp``, JSON merge patch, graceful pod deletion (``deletionTimestamp`` until the
kubelet deletes with grace 0), finalizers holding deleted objects, and owner-reference garbage
collection (cascading, without foreground ordering). Anything else (validation, watches,
selectors) is the emulator's job and is not imitated here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cre.kube.client import PODS
from cre.testing.apiserver.patching import apply_merge_patch
from cre.testing.cluster import engine
from cre.testing.cluster.clock import fmt_time, parse_time
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import (
    OTHER,
    WATCHED,
    Action,
    AppendLog,
    Bind,
    Create,
    Delete,
    Mark,
    Obj,
    Patch,
    RotateLog,
    World,
    deep,
    key_of,
)

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class MemoryCluster:
    """Objects by resource plural and key, pod logs, and the simulator's marks."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Obj]] = {r.plural: {} for r in (*WATCHED, *OTHER)}
        self.marks: dict[str, Any] = {}
        self.logs: dict[tuple[str, str, str], str] = {}
        self.previous_logs: dict[tuple[str, str, str], str] = {}
        self._seq = 0

    def snapshot(self) -> World:
        return World(objects=self.objects, marks=dict(self.marks))

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def add(self, obj: Obj, now: float = 0.0) -> Obj:
        """Create an object directly (test set-up), returning the stored copy."""
        kind = {r.kind: r for r in (*WATCHED, *OTHER)}[obj["kind"]]
        self.apply(Create(kind, obj), now)
        return self.objects[kind.plural][key_of(self._last)]

    def apply(self, action: Action, now: float) -> None:
        if isinstance(action, Mark):
            action.apply_to(self.marks)
        elif isinstance(action, AppendLog):
            log_key = (action.namespace, action.pod, action.container)
            self.logs[log_key] = self.logs.get(log_key, "") + action.text
        elif isinstance(action, RotateLog):
            log_key = (action.namespace, action.pod, action.container)
            self.previous_logs[log_key] = self.logs.pop(log_key, "")
        elif isinstance(action, Create):
            self._create(action, now)
        elif isinstance(action, Patch):
            store = self.objects[action.resource.plural]
            okey = f"{action.namespace}/{action.name}" if action.namespace else action.name
            if okey in store:
                store[okey] = apply_merge_patch(store[okey], action.patch)
                self._bump(store[okey])
                self._maybe_remove(action.resource.plural, okey)
        elif isinstance(action, Bind):
            pod = self.objects[PODS.plural].get(f"{action.namespace}/{action.pod}")
            if pod is not None:
                pod["spec"]["nodeName"] = action.node
                self._bump(pod)
        elif isinstance(action, Delete):
            self._delete(action, now)

    def _bump(self, obj: Obj) -> None:
        obj["metadata"]["resourceVersion"] = str(self._next())

    def _create(self, action: Create, now: float) -> None:
        body = deep(action.body)
        m = body.setdefault("metadata", {})
        if not m.get("name"):
            n = self._next()
            suffix = "".join(_ALPHABET[(n * 7 + i * 13) % len(_ALPHABET)] for i in range(5))
            m["name"] = f"{m['generateName']}{suffix}"
        store = self.objects[action.resource.plural]
        if key_of(body) in store:
            return  # AlreadyExists: the steps treat creation as idempotent
        m["uid"] = f"00000000-0000-4000-8000-{self._next():012d}"
        m["creationTimestamp"] = fmt_time(now)
        self._bump(body)
        store[key_of(body)] = body
        self._last = body

    def _delete(self, action: Delete, now: float) -> None:
        store = self.objects[action.resource.plural]
        key = f"{action.namespace}/{action.name}" if action.namespace else action.name
        obj = store.get(key)
        if obj is None or (action.uid and obj["metadata"].get("uid") != action.uid):
            return
        m = obj["metadata"]
        graceful = (action.resource.plural == PODS.plural and action.grace_seconds != 0
                    and obj.get("spec", {}).get("nodeName"))
        if graceful or m.get("finalizers"):
            m.setdefault("deletionTimestamp", fmt_time(now))
            if graceful:
                self._bump(obj)
                return
        self._maybe_remove(action.resource.plural, key, force=True)

    def _maybe_remove(self, plural: str, key: str, *, force: bool = False) -> None:
        obj = self.objects[plural].get(key)
        if obj is None:
            return
        m = obj["metadata"]
        if m.get("finalizers") or not (force or m.get("deletionTimestamp")):
            return
        if plural == PODS.plural and not force and m.get("deletionTimestamp") and obj.get(
                "spec", {}).get("nodeName") and obj.get("status", {}).get("phase") not in (
                    "Succeeded", "Failed"):
            return
        del self.objects[plural][key]
        self._collect(m["uid"], m.get("deletionTimestamp"))

    def _collect(self, owner_uid: str, when: str | None) -> None:
        now = 0.0
        if when:
            now = parse_time(when) or 0.0
        for plural, store in self.objects.items():
            for obj in list(store.values()):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == owner_uid for r in refs):
                    res = next(r for r in (*WATCHED, *OTHER) if r.plural == plural)
                    self._delete(Delete(res, obj["metadata"].get("namespace"),
                                        obj["metadata"]["name"]), now)

    def run(self, cfg: SimConfig, *, start: float, until: Callable[[MemoryCluster], bool],
            limit: float = 3600.0) -> float:
        """Advance simulated time event by event until ``until`` holds; the time reached.

        Raises ``TimeoutError`` if ``limit`` simulated seconds pass first (a test failure, not
        a wall-clock wait).
        """
        now = start
        while not until(self):
            wake = engine.tick(self, now, cfg)
            if until(self):
                break
            if wake is None or wake > start + limit:
                raise TimeoutError(f"simulation went quiet or passed {limit}s at t={now - start}")
            now = max(now, wake)
        return now
