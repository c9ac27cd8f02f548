"""The fan-out Reconciler and its wiring on CRE's generic controller runtime.

Two informers: source ConfigMaps (label ``fanout.example.dev/source=true``) and copies (label
``fanout.example.dev/copy-of=<namespace>.<name>``). A change to either enqueues the source's
key; one reconcile makes the copies match the source. Writes that fail raise, and the runtime
retries with backoff; events are written only after the write they describe succeeded, and a
copy is only updated after a live read shows it differs, so retries never repeat an event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
from prometheus_client import CollectorRegistry

from cre.kube.client import CONFIGMAPS, ApiError, KubeClient
from cre.kube.events import EventRecorder
from cre.kube.informer import Informer
from cre.kube.metrics import metrics_for
from cre.kube.runtime import DONE, Controller, Result, WatchEvent, enqueue_mapped, enqueue_object

SOURCE = "fanout.example.dev/source"
TARGETS = "fanout.example.dev/targets"
COPY_OF = "fanout.example.dev/copy-of"
FINALIZER = "fanout.example.dev/copies"


@attrs.frozen(kw_only=True)
class ConfigMapView:
    """The fields of a ConfigMap the controller reads."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    finalizers: tuple[str, ...]
    deleting: bool
    data: Mapping[str, str]

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> ConfigMapView:
        meta = raw.get("metadata") or {}
        return cls(namespace=str(meta.get("namespace", "")), name=str(meta["name"]),
                   uid=str(meta.get("uid", "")),
                   resource_version=str(meta.get("resourceVersion", "")),
                   labels=dict(meta.get("labels") or {}),
                   annotations=dict(meta.get("annotations") or {}),
                   finalizers=tuple(meta.get("finalizers") or ()),
                   deleting=bool(meta.get("deletionTimestamp")),
                   data=dict(raw.get("data") or {}))

    @property
    def targets(self) -> list[str]:
        raw = self.annotations.get(TARGETS, "")
        return sorted({t.strip() for t in raw.split(",") if t.strip()} - {self.namespace})


def _source_key(copy: ConfigMapView) -> Iterable[str]:
    namespace, _, name = copy.labels.get(COPY_OF, "").partition(".")
    return [f"{namespace}/{name}"] if namespace and name else []


class FanOut:
    """The Reconciler: one source key in, its copies made to match."""

    def __init__(self, client: KubeClient, *, sources: Informer[ConfigMapView],
                 copies: Informer[ConfigMapView], events: EventRecorder) -> None:
        self.client, self.sources, self.copies, self.events = client, sources, copies, events

    async def reconcile(self, key: str) -> Result:
        source = self.sources.store.get(key)
        if source is None:
            return DONE  # the finalizer made sure its copies went first
        namespace, name = source.namespace, source.name
        mine = [c for c in self.copies.store.list()
                if c.labels.get(COPY_OF) == f"{namespace}.{name}"]
        if source.deleting:
            for copy in mine:
                await self._delete(copy)
            await self._set_finalizer(source, present=False)
            await self._event(source, "Cleaned", f"deleted {len(mine)} copies")
            return DONE
        if FINALIZER not in source.finalizers:
            await self._set_finalizer(source, present=True)
        for target in source.targets:
            await self._ensure_copy(source, target)
        for copy in mine:
            if copy.namespace not in source.targets:
                await self._delete(copy)
                await self._event(source, "Pruned", f"deleted the copy in {copy.namespace}")
        return DONE

    async def _ensure_copy(self, source: ConfigMapView, target: str) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": source.name, "namespace": target,
                             "labels": {COPY_OF: f"{source.namespace}.{source.name}"}},
                "data": dict(source.data)}
        cached = self.copies.store.get(f"{target}/{source.name}")
        if cached is None:
            try:
                await self.client.create(CONFIGMAPS, body, namespace=target)
            except ApiError as exc:
                if not exc.already_exists:
                    raise
                # Created by an earlier pass the cache has not seen yet: compare below.
            else:
                await self._event(source, "Copied", f"copied to {target}")
                return
        live = await self.client.get(CONFIGMAPS, source.name, namespace=target)
        if (live.get("data") or {}) == body["data"]:
            return
        await self.client.patch(CONFIGMAPS, source.name, {
            "metadata": {"resourceVersion": live["metadata"]["resourceVersion"]},
            "data": {**{k: None for k in live.get("data") or {}}, **body["data"]}},
            namespace=target)
        await self._event(source, "Updated", f"updated the copy in {target}")

    async def _delete(self, copy: ConfigMapView) -> None:
        try:
            await self.client.delete(CONFIGMAPS, copy.name, namespace=copy.namespace,
                                     uid=copy.uid)
        except ApiError as exc:
            if not exc.not_found:
                raise

    async def _set_finalizer(self, source: ConfigMapView, *, present: bool) -> None:
        rest = [f for f in source.finalizers if f != FINALIZER]
        finalizers = [*rest, FINALIZER] if present else rest
        await self.client.patch(CONFIGMAPS, source.name, {"metadata": {
            "finalizers": finalizers, "resourceVersion": source.resource_version}},
            namespace=source.namespace)

    async def _event(self, source: ConfigMapView, reason: str, message: str) -> None:
        await self.events.emit(involved={"apiVersion": "v1", "kind": "ConfigMap",
                                         "name": source.name, "namespace": source.namespace,
                                         "uid": source.uid},
                               type_="Normal", reason=reason, message=message)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def build(client: KubeClient, *, now: Callable[[], datetime] = _utcnow,
          workers: int = 2) -> Controller:
    """The fan-out controller, wired and ready to ``run()`` (watching every namespace)."""
    metrics = metrics_for(CollectorRegistry())
    sources = Informer(client, CONFIGMAPS, transform=ConfigMapView.of,
                       label_selector=f"{SOURCE}=true", name="fanout-sources", metrics=metrics)
    copies = Informer(client, CONFIGMAPS, transform=ConfigMapView.of, label_selector=COPY_OF,
                      name="fanout-copies", metrics=metrics)
    events = EventRecorder(client, component="fanout-controller", clock=now)
    controller = Controller("fanout", FanOut(client, sources=sources, copies=copies,
                                             events=events), workers=workers, metrics=metrics,
                            runs_informers=True)
    controller.watch(sources, enqueue_object())
    controller.watch(copies, enqueue_mapped(lambda e: _source_key(e.obj)))
    return controller


__all__ = ["COPY_OF", "FINALIZER", "SOURCE", "TARGETS", "ConfigMapView", "FanOut", "WatchEvent",
           "build"]
