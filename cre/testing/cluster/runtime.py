"""The simulated cluster running against an API server over HTTP, driven by watches.

This is the thin async shell around the pure steps (:mod:`cre.testing.cluster.engine`): it
registers the profile's nodes, mirrors the objects the simulated controllers read with one
:class:`cre.kube.informer.Informer` per resource (CRE's own reflector: paginated list, watch with
bookmarks, relist on 410 with synthetic deletions, backoff), runs a tick whenever a watch event
arrives or the earliest simulated deadline (``wake_at``) comes due, and applies the actions with
:class:`cre.kube.client.KubeClient`. Writes are reflected into the mirror at once from the
server's answer (newer resourceVersion wins, as client-go's mutation cache does), so the next
controller in the same tick sees them without waiting for the watch. Container output goes to
the emulator's log store: in process through ``Emulator.append_log``, across processes through
``POST /_emulator/logs/...``.

Its pod informer is unscoped: the simulator plays the kubelet and the scheduler, which see
every pod. That is the one waived caller of :func:`cre.kube.guard.require_pod_scope`
(``WAIVED_CALLERS`` there names this module and why); CRE's own code may not do it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
import attrs
from anyio.abc import TaskStatus

from cre.api.watch import WatchEventType as EventType
from cre.kube.client import JSON, NODES, PODS, ApiError, KubeClient, Resource
from cre.kube.informer import Informer, ReflectorConfig
from cre.testing.cluster import engine
from cre.testing.cluster.clock import SimClock, fmt_time
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.model import (
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
    key_of,
)
from cre.testing.cluster.profiles import node_manifest
from cre.testing.cluster.program import Role
from cre.testing.cluster.stubs import Behaviour, Override

log = logging.getLogger("cre.testing.cluster")
RETRY_WALL_MIN = 0.02  # seconds before retrying after a failed write (simulated 1 s if longer)
# The simulated cluster reconnects fast after a fault (a kubelet does not wait 30 s to resume).
# Deleted uids remembered so a write answered after the deletion cannot resurrect the object.
TOMBSTONES = 50_000
SIM_REFLECTOR = ReflectorConfig(backoff_initial=0.05, backoff_max=1.0, backoff_jitter=0.0)


class LogSink(Protocol):
    """Where container output goes (the emulator's log store)."""

    async def append(self, namespace: str, pod: str, container: str, text: str, *,
                     at: float | None = None) -> None: ...

    async def rotate(self, namespace: str, pod: str, container: str) -> None: ...


class HttpLogSink:
    """Logs through the emulator's ``/_emulator/logs`` control API (cross-process)."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def append(self, namespace: str, pod: str, container: str, text: str, *,
                     at: float | None = None) -> None:
        # The emulator in another process stamps with its own clock (``at`` is simulated
        # time, which that clock need not follow).
        await self._client.request("POST", f"/_emulator/logs/{namespace}/{pod}/{container}",
                                   body=text.encode(), content_type="text/plain")

    async def rotate(self, namespace: str, pod: str, container: str) -> None:
        await self._client.request("POST",
                                   f"/_emulator/logs/{namespace}/{pod}/{container}/rotate",
                                   body=b"", content_type="text/plain")


class EmulatorLogSink:
    """Logs straight into an in-process emulator (``emu.append_log`` / ``emu.rotate_log``)."""

    def __init__(self, emu: Any) -> None:
        self._emu = emu

    async def append(self, namespace: str, pod: str, container: str, text: str, *,
                     at: float | None = None) -> None:
        when = datetime.fromtimestamp(at, tz=UTC) if at is not None else None
        self._emu.append_log(namespace, pod, container, text, at=when)

    async def rotate(self, namespace: str, pod: str, container: str) -> None:
        self._emu.rotate_log(namespace, pod, container)


def _rv(obj: Obj) -> int:
    raw = str(obj.get("metadata", {}).get("resourceVersion", "0"))
    return int(raw) if raw.isdigit() else 0


class SimulatedCluster:
    """Nodes of one profile plus the simulated controllers, against one API server."""

    def __init__(self, client: KubeClient, *, config: SimConfig, clock: SimClock, nodes: int,
                 logs: LogSink, node_status: Mapping[str, Any] | None = None) -> None:
        self.client = client
        self.node_status = dict(node_status or {})
        """More node status fields (a real apiserver's way to the kubelet's logs)."""
        self.config = config
        self.clock = clock
        self.node_count = nodes
        self.logs = logs
        self.marks: dict[str, Any] = {}
        self.stores: dict[str, dict[str, Obj]] = {r.plural: {} for r in WATCHED}
        self.errors: list[str] = []
        self._dirty = anyio.Event()
        self._changed = anyio.Event()
        self._failed_writes = False
        # Uids seen deleted (insertion-ordered, bounded): a late write answer for one is dropped.
        self._deleted_uids: dict[str, None] = {}

    # -- engine.AsyncBackend --------------------------------------------------------------

    def snapshot(self) -> World:
        return World(objects=self.stores, marks=self.marks)

    async def apply(self, action: Action, now: float) -> None:
        c = self.client
        if isinstance(action, Mark):
            action.apply_to(self.marks)
        elif isinstance(action, AppendLog):
            await self.logs.append(action.namespace, action.pod, action.container, action.text,
                                   at=action.at)
        elif isinstance(action, RotateLog):
            await self.logs.rotate(action.namespace, action.pod, action.container)
        elif isinstance(action, Create):
            ns = action.body.get("metadata", {}).get("namespace")
            try:
                self._reflect(action.resource, await c.create(action.resource, action.body,
                                                              namespace=ns))
            except ApiError as exc:
                if not exc.already_exists:
                    raise
        elif isinstance(action, Patch):
            try:
                got = await c.patch(action.resource, action.name, action.patch,
                                    namespace=action.namespace, subresource=action.subresource)
            except ApiError as exc:
                if exc.not_found:
                    return
                raise
            self._reflect(action.resource, got)
        elif isinstance(action, Bind):  # as kube-scheduler binds: the pods/binding subresource
            await c.request("POST", PODS.path(namespace=action.namespace, name=action.pod,
                                              subresource="binding"),
                            body={"apiVersion": "v1", "kind": "Binding",
                                  "metadata": {"name": action.pod},
                                  "target": {"apiVersion": "v1", "kind": "Node",
                                             "name": action.node}})
            self._reflect(PODS, await c.get(PODS, action.pod, namespace=action.namespace))
        elif isinstance(action, Delete):
            try:
                got = await c.delete(action.resource, action.name, namespace=action.namespace,
                                     uid=action.uid, propagation_policy=action.propagation,
                                     grace_period_seconds=action.grace_seconds)
            except ApiError as exc:
                # Gone already, or the UID precondition names an object since replaced: done.
                # Any other error (an injected 409, 429, 5xx) fails the write so it is retried.
                if exc.not_found or (exc.conflict and "precondition" in exc.message.lower()):
                    return
                raise
            if got.get("kind") == action.resource.kind and got.get("metadata", {}).get(
                    "deletionTimestamp"):
                self._reflect(action.resource, got)

    def _reflect(self, res: Resource, obj: Obj, *, deleted: bool = False) -> None:
        """Mirror ``obj`` (or its deletion). A deletion is final for its uid: it removes the
        object whatever resourceVersion it carries (a relist's synthetic deletion carries the
        informer's last known version, older than the simulator's own last write) and a write's
        answer that arrives after it (a patch in flight) cannot bring the object back; a stale
        deletion of an older object under the same name (another uid) leaves the new one."""
        store = self.stores.get(res.plural)
        meta = obj.get("metadata", {})
        if store is None or not meta.get("name"):
            return
        key = key_of(obj)
        old = store.get(key)
        uid = meta.get("uid")
        same = old is not None and old.get("metadata", {}).get("uid") == uid
        if deleted:
            if uid:
                self._tombstone(str(uid))
            if old is not None and (same or _rv(obj) > _rv(old)):
                store.pop(key, None)
            return
        if uid and uid in self._deleted_uids:
            return
        if same and old is not None and _rv(old) > _rv(obj):
            return
        store[key] = obj

    def _tombstone(self, uid: str) -> None:
        self._deleted_uids[uid] = None
        while len(self._deleted_uids) > TOMBSTONES:
            del self._deleted_uids[next(iter(self._deleted_uids))]

    # -- watches ------------------------------------------------------------------------------

    def _informer(self, res: Resource) -> Informer[Obj]:
        """CRE's informer for ``res``, feeding this cluster's mirror through a handler."""
        def with_kind(raw: JSON) -> Obj:
            return {**raw, "apiVersion": res.api_version, "kind": res.kind}

        def on_event(etype: EventType, old: Obj | None, new: Obj | None) -> None:
            if etype is EventType.DELETED:
                if old is not None:
                    self._reflect(res, old, deleted=True)
            elif new is not None:
                self._reflect(res, new)
            self._poke()

        # Unscoped for pods on purpose: see the module docstring and cre.kube.guard.
        informer: Informer[Obj] = Informer(self.client, res, transform=with_kind,
                                           name=f"sim-{res.plural}", config=SIM_REFLECTOR)
        informer.add_handler(on_event)
        return informer

    def _poke(self) -> None:
        self._dirty.set()
        self._notify()

    # -- the loop -----------------------------------------------------------------------------

    async def add_nodes(self, count: int) -> None:
        """Register ``count`` more nodes of the profile (the node lifecycle step makes them
        Ready), as a cluster that scales up would."""
        first = self.node_count
        self.node_count += count
        await self.register_nodes(start=first)

    async def register_nodes(self, start: int = 0) -> None:
        for i in range(start, self.node_count):
            body = node_manifest(self.config.profile, i)
            try:
                await self.client.create(NODES, body)
            except ApiError as exc:
                if not exc.already_exists:
                    raise
            status = {k: v for k, v in body["status"].items() if k != "conditions"}
            status.update(self.node_status)
            await self.client.patch(NODES, body["metadata"]["name"], {"status": status},
                                    subresource="status")

    async def _on_error(self, controller: str, action: Action | None, exc: Exception) -> None:
        if action is None:  # the step itself raised: report it once with its traceback
            text = f"{controller}: step failed: {exc!r}"
            self._failed_writes = True
            if text in self.errors:
                return
            log.warning("%s", text, exc_info=exc)
        else:
            text = f"{controller}: {type(action).__name__} failed: {exc}"
            log.info("%s", text)
        self.errors.append(text)
        self._failed_writes = True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Register nodes, sync the mirrors, then simulate until cancelled."""
        await self.register_nodes()
        async with anyio.create_task_group() as tg:
            informers = [self._informer(res) for res in WATCHED]
            for informer in informers:
                tg.start_soon(informer.run)
            for informer in informers:
                await informer.wait_synced()
            self._poke()
            task_status.started()
            while True:
                self._dirty = anyio.Event()
                self._failed_writes = False
                wake = await engine.atick(self, self.clock.now, self.config, self._on_error)
                self._notify()
                if self._dirty.is_set():
                    continue
                delay = math.inf if wake is None else self.clock.wall_delay(
                    wake - self.clock.now())
                if self._failed_writes:  # level-triggered: the next tick retries the writes
                    delay = min(delay, max(RETRY_WALL_MIN, self.clock.wall_delay(1.0)))
                with anyio.move_on_after(delay):
                    await self._dirty.wait()

    def _notify(self) -> None:
        """Wake every ``wait_for`` once; the next waiters park on a fresh event (re-using a set
        event made each waiter spin until the next tick replaced it)."""
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, predicate: Callable[[World], bool]) -> World:
        """Wait (on watch events and ticks, never on a timer) until ``predicate`` holds."""
        while True:
            world = self.snapshot()
            if predicate(world):
                return world
            changed = self._changed
            await changed.wait()

    # -- fault injection ------------------------------------------------------------------------

    def add_override(self, override: Override) -> None:
        """Make matching containers started from now on behave as ``override`` says."""
        ov = override if override.id else attrs.evolve(
            override, id=f"api-{len(self.config.overrides)}")
        self.config = attrs.evolve(self.config, overrides=(*self.config.overrides, ov))

    def fail_launcher(self, *, after: float = 5.0, times: int | None = 1,
                      message: str = "") -> None:
        """The next ``times`` launcher containers exit 1 with an NCCL error after ``after`` s."""
        self.add_override(Override(behaviour=Behaviour.FAIL, role=Role.LAUNCHER, after=after,
                                   times=times, message=message))

    def mark_node_bad(self, node: str, *, factor: float = 0.4) -> None:
        """Scale the bandwidth the NCCL stubs see on ``node`` (0.4 = a degraded link)."""
        rest = tuple((n, f) for n, f in self.config.node_bandwidth if n != node)
        self.config = attrs.evolve(self.config, node_bandwidth=(*rest, (node, factor)))
        self._poke()

    def repair_node(self, node: str) -> None:
        """``node`` is repaired: the overrides aimed at it (its ``node``, or a broken node's
        ``group_touches`` of that node alone) and its bandwidth factor are dropped, so the
        containers started there from now on run their normal programs."""
        keep = tuple(ov for ov in self.config.overrides
                     if ov.node != node and ov.group_touches != ((node,),))
        rest = tuple((n, f) for n, f in self.config.node_bandwidth if n != node)
        self.config = attrs.evolve(self.config, overrides=keep, node_bandwidth=rest)
        self._poke()

    def set_image_pull(self, image: str, *, available: bool,
                       nodes: Sequence[str] | None = None, message: str = "") -> None:
        """Make pulls of ``image`` (an image, a repository or a registry host) fail on
        ``nodes`` (default: every node) with ``message`` as the runtime's error, or succeed
        again (``available=True``): see :mod:`cre.testing.cluster.kubelet`."""
        from cre.testing.cluster.kubelet import unavailable_key

        if not image:
            raise ValueError("set_image_pull: image must name an image, repository or registry")
        if available:
            self.marks.pop(unavailable_key(image), None)
        else:
            self.marks[unavailable_key(image)] = (tuple(nodes or ()), message)
        self._poke()

    async def evict_pod(self, namespace: str, name: str) -> None:
        """Evict through the Eviction API (DisruptionTarget ``EvictionByEvictionAPI``)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        await self.client.request("POST", PODS.path(namespace=namespace, name=name,
                                                    subresource="eviction"), body=body)

    async def preempt_pod(self, namespace: str, name: str) -> None:
        """Preempt as kube-scheduler does: DisruptionTarget ``PreemptionByScheduler``, delete."""
        pod = await self.client.get(PODS, name, namespace=namespace)
        conds = [c for c in pod.get("status", {}).get("conditions") or []
                 if c.get("type") != "DisruptionTarget"]
        conds.append({"type": "DisruptionTarget", "status": "True",
                      "reason": "PreemptionByScheduler",
                      "message": "default-scheduler: preempting to accommodate a higher "
                                 "priority pod", "lastTransitionTime": fmt_time(self.clock.now())})
        await self.client.patch(PODS, name, {"status": {"conditions": conds}},
                                namespace=namespace, subresource="status")
        await self.client.delete(PODS, name, namespace=namespace)

    async def set_node_ready(self, node: str, ready: bool, *, reachable: bool = True) -> None:
        """Flip the node's Ready condition (False: kubelet says NotReady; Unknown: unreachable)."""
        status = "True" if ready else ("False" if reachable else "Unknown")
        reason = "KubeletReady" if ready else "KubeletNotReady"
        now = fmt_time(self.clock.now())
        await self.client.patch(NODES, node, {"status": {"conditions": [{
            "type": "Ready", "status": status, "reason": reason,
            "message": "kubelet is posting ready status" if ready else
            "container runtime network not ready", "lastHeartbeatTime": now,
            "lastTransitionTime": now}]}}, subresource="status")
        if reachable:
            self.marks.pop(f"kubelet-down/{node}", None)
        else:
            self.marks[f"kubelet-down/{node}"] = True
        self._poke()


@asynccontextmanager
async def simulate(emu: Any = None, *, kubeconfig: str | None = None, profile: str = "aws-h100",
                   nodes: int = 2, scale: float = 1.0, config: SimConfig | None = None,
                   clock: SimClock | None = None, logs: LogSink | None = None,
                   node_status: Mapping[str, Any] | None = None
                   ) -> AsyncIterator[SimulatedCluster]:
    """Run a simulated cluster against ``emu`` (in-process emulator) or a kubeconfig.

    ``logs`` replaces the default log sink (the emulator's), and ``node_status`` adds node
    status fields, e.g. a real kube-apiserver's way to
    :class:`~cre.testing.cluster.kubelet_logs.KubeletLogs`.

    ``async with simulate(emu, profile="aws-h100", nodes=2, scale=50) as cluster:`` -- the
    nodes exist and every mirror has synced when the block starts; leaving it stops the
    simulation (objects stay in the API server).
    """
    from cre.testing.cluster.profiles import get_profile

    cfg = config or SimConfig(profile=get_profile(profile))
    if config is None or config.profile.name != profile:
        cfg = attrs.evolve(cfg, profile=get_profile(profile))
    path = str(emu.kubeconfig_path) if emu is not None else kubeconfig
    client = await KubeClient.from_kubeconfig(path)
    sink: LogSink = logs or (EmulatorLogSink(emu) if emu is not None else HttpLogSink(client))
    cluster = SimulatedCluster(client, config=cfg, clock=clock or SimClock(scale=scale,
                                                                           start=_wall_now()),
                               nodes=nodes, logs=sink, node_status=node_status)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(cluster.run)
            try:
                yield cluster
            finally:
                tg.cancel_scope.cancel()
    finally:
        await client.close()


def _wall_now() -> float:
    import time

    return time.time()
