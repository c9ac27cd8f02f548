"""The only way CRE reads Pods: two label-scoped caches, live reads and log reads.

Caching every pod of a large GPU cluster is what made the reference controller's memory
unbounded. CRE needs two kinds of pod only: worker pods, labelled ``cre.dev/job``, and MPI
launcher pods, labelled ``cre.dev/launcher`` (never both, so both caches are needed). This module
asks an :class:`cre.kube.factory.InformerFactory` for exactly those two informers (in its
namespaces; every controller asking gets the same two), the one wider cache the
CertificationSchedule needs (:func:`gpu_pod_informer`: every pod CRE did not make, each reduced
to its node, GPU count and phase, so a schedule can leave busy nodes alone), the uncached reads
the Job controller
confirms irreversible decisions with, and container log tails (one
:class:`cre.core.common.plan.ReadLog` in, one tail out). Every Pod list and watch goes through
:func:`cre.kube.guard.require_pod_scope`; ``tests/kube/test_pod_read_policy.py`` fails if any
other module lists or watches Pods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import anyio

from cre.api import labels as L
from cre.core.common.observed import LogTail, PodView
from cre.core.common.plan import LIMIT_BYTES, ReadLog
from cre.core.common.projections import pod_view
from cre.core.job.failurelog import ERROR_BYTES
from cre.core.job.logtext import bounded_tail, first_bytes, sanitize
from cre.core.schedule.nodes import GpuPodView, gpu_pod_view
from cre.kube.client import PODS, ApiError, KubeClient
from cre.kube.factory import InformerFactory
from cre.kube.guard import require_pod_scope
from cre.kube.informer import Informer, ReflectorConfig
from cre.kube.store import (
    Indexer,
    namespaced_label_indexer,
    node_name_indexer,
    owner_uid_indexer,
)

#: Index of the worker cache: ``namespace/<cre.dev/job value>`` (the Job's reconcile key).
INDEX_JOB: Final = "job"
#: Index of the launcher cache: ``namespace/<cre.dev/launcher value>``.
INDEX_LAUNCHER: Final = "launcher"
#: ``spec.nodeName``.
INDEX_NODE: Final = "node"
#: uid of each owner reference (the batch Job owning the pod).
INDEX_OWNER: Final = "owner"

WORKER_SELECTOR: Final = L.JOB
LAUNCHER_SELECTOR: Final = L.LAUNCHER
#: Every pod CRE did not make (the GPU-pod cache of the CertificationSchedule).
FOREIGN_SELECTOR: Final = f"!{L.JOB},!{L.LAUNCHER}"


def _indexers(label: str, index_name: str) -> dict[str, Indexer[PodView]]:
    return {index_name: namespaced_label_indexer(label), INDEX_NODE: node_name_indexer,
            INDEX_OWNER: owner_uid_indexer}


def job_key(pod: PodView) -> str | None:
    """The reconcile key (``namespace/<job>``) of the CRE Job a worker or launcher pod serves."""
    value = pod.label(L.JOB) or pod.label(L.LAUNCHER)
    return f"{pod.namespace}/{value}" if value else None


def worker_pod_informer(informers: InformerFactory, *, name: str = "worker-pods"
                        ) -> Informer[PodView]:
    """The worker-pod cache: pods with a ``cre.dev/job`` label (indexes job, node, owner),
    shared by every controller asking ``informers`` for it."""
    return informers.informer(PODS, transform=pod_view, label_selector=WORKER_SELECTOR,
                              indexers=_indexers(L.JOB, INDEX_JOB), name=name,
                              caller=f"{__name__}.worker_pod_informer")


def launcher_pod_informer(informers: InformerFactory, *, name: str = "launcher-pods"
                          ) -> Informer[PodView]:
    """The launcher-pod cache: pods with a ``cre.dev/launcher`` label (indexes launcher, node,
    owner), shared by every controller asking ``informers`` for it."""
    return informers.informer(PODS, transform=pod_view, label_selector=LAUNCHER_SELECTOR,
                              indexers=_indexers(L.LAUNCHER, INDEX_LAUNCHER), name=name,
                              caller=f"{__name__}.launcher_pod_informer")


def _holding_node(pod: GpuPodView) -> list[str]:
    return [pod.node] if pod.gpus > 0 and pod.node else []


def gpu_pod_informer(informers: InformerFactory, *, name: str = "foreign-gpu-pods"
                     ) -> Informer[GpuPodView]:
    """Pods CRE did not make (``!cre.dev/job,!cre.dev/launcher``), each kept as its node, the
    GPUs it requests and its phase (:func:`cre.core.schedule.nodes.gpu_pod_view`), indexed by
    the node whose GPUs it holds (:data:`INDEX_NODE`: its values are the busy nodes).

    The one pod cache that is not scoped to CRE's own pods: a label cannot say "requests a
    GPU", so every other pod is listed. Its cost stays small: a pod holding no GPU (most of a
    cluster's: daemons, CPU work, ended pods) is stored as the one shared
    :data:`cre.core.schedule.nodes.NO_GPU` value, so it costs its key and resourceVersion only
    (about 150 bytes); a GPU pod, one small frozen object more."""
    return informers.informer(PODS, transform=gpu_pod_view, label_selector=FOREIGN_SELECTOR,
                              indexers={INDEX_NODE: _holding_node}, name=name,
                              caller=f"{__name__}.gpu_pod_informer")


def busy_nodes_of(informer: Informer[GpuPodView]) -> frozenset[str]:
    """The nodes whose GPUs a pod of someone else holds, from the informer's node index."""
    return informer.store.index_values(INDEX_NODE)


def scoped_pod_informer(client: KubeClient, *, label_selector: str,
                        namespaces: Sequence[str] | None = None, name: str,
                        indexers: dict[str, Indexer[PodView]] | None = None,
                        config: ReflectorConfig | None = None,
                        caller: str | None = None) -> Informer[PodView]:
    """Another label-scoped pod cache (benchmarks, tools); an empty selector is refused."""
    return Informer(client, PODS, transform=pod_view, namespace=namespaces,
                    label_selector=label_selector, indexers=indexers, name=name, config=config,
                    caller=caller)


async def live_get_pod(client: KubeClient, *, namespace: str, name: str) -> PodView | None:
    """One pod read from the API server now (not the cache); ``None`` if it does not exist."""
    try:
        return pod_view(await client.get(PODS, name, namespace=namespace))
    except ApiError as exc:
        if exc.not_found:
            return None
        raise


async def live_list_pods(client: KubeClient, *, label_selector: str,
                         namespace: str | None = None, page_size: int = 500,
                         caller: str | None = None) -> tuple[PodView, ...]:
    """Pods matching ``label_selector`` read from the API server now (all pages)."""
    require_pod_scope(PODS, label_selector, caller=caller, what="list")
    out: list[PodView] = []
    cont = ""
    while True:
        query: dict[str, str | int] = {"labelSelector": label_selector, "limit": page_size}
        if cont:
            query["continue"] = cont
        page = await client.list(PODS, namespace=namespace, query=query)
        out.extend(pod_view(item) for item in page.get("items") or [])
        cont = str((page.get("metadata") or {}).get("continue") or "")
        if not cont:
            return tuple(out)


async def read_pod_log(client: KubeClient, request: ReadLog, *,
                       timeout: float = 10.0, keep_bytes: int = LIMIT_BYTES) -> LogTail:
    """The tail ``request`` asks for: its container's log (of the previous run when
    ``request.previous``), at most ``request.tail_lines`` lines and ``request.limit_bytes``
    bytes (streamed and cut there whatever the server sends), within ``timeout`` seconds. The
    text kept is sanitized and its last ``keep_bytes`` only
    (:func:`cre.core.job.logtext.bounded_tail`). Failures come back as ``LogTail.error``, not
    raised; the tail carries the request's pod UID and ``previous`` flag, so the core matches
    it to the container run it asked about."""
    namespace, pod, container = request.namespace, request.pod, request.container
    query: dict[str, str | int | bool] = {"container": container,
                                          "tailLines": request.tail_lines,
                                          "limitBytes": request.limit_bytes}
    if request.previous:
        query["previous"] = True
    path = PODS.path(namespace=namespace, name=pod, subresource="log")
    error: str | None = None
    text = ""
    with anyio.move_on_after(timeout) as scope:
        try:
            text = await client.read_text(path, query=query, timeout=timeout,
                                          limit_bytes=request.limit_bytes)
        except ApiError as exc:
            error = (f"pod {namespace}/{pod} not found" if exc.not_found
                     else f"reading log of {namespace}/{pod} container {container}: {exc}")
    if scope.cancelled_caught:
        error = f"reading log of {namespace}/{pod} container {container}: timed out after " \
                f"{timeout:g}s"
    # What is kept is what a status may hold (escape sequences out, the last keep_bytes): a
    # prefetched tail held for minutes costs that bound, not the read's.
    return LogTail(namespace=namespace, pod=pod, container=container,
                   text=bounded_tail(text, keep_bytes),
                   error=None if error is None else first_bytes(sanitize(error), ERROR_BYTES),
                   pod_uid=request.pod_uid, previous=request.previous)


async def stream_pod_log(client: KubeClient, *, namespace: str, pod: str,
                         container: str | None, on_line: Callable[[str], None],
                         since_time: datetime | None = None, limit_bytes: int,
                         timeout: float = 120.0) -> tuple[int, bool, str | None]:
    """Stream a container's log with kubelet timestamps, one complete line at a time into
    ``on_line`` (never holding the log): at most ``limit_bytes`` (asked of the server and
    enforced here) within ``timeout`` seconds, from ``since_time`` (whole seconds) if given.
    A trailing line without its newline (cut by the limit) is dropped. Returns ``(bytes read,
    truncated, error)``; failures come back as the error text, not raised."""
    query: dict[str, str | int | bool] = {"timestamps": True, "limitBytes": limit_bytes}
    if container:
        query["container"] = container
    if since_time is not None:
        query["sinceTime"] = since_time.strftime("%Y-%m-%dT%H:%M:%SZ")
    path = PODS.path(namespace=namespace, name=pod, subresource="log")
    where = f"log of {namespace}/{pod}" + (f" container {container}" if container else "")
    read, truncated, error = 0, False, None
    with anyio.move_on_after(timeout) as scope:
        try:
            async with client.stream_lines(path, query=query, timeout=timeout) as lines:
                async for raw in lines:
                    read += len(raw)
                    if read > limit_bytes or not raw.endswith(b"\n"):
                        truncated = read >= limit_bytes
                        break
                    on_line(raw[:-1].decode("utf-8", "replace").rstrip("\r"))
        except ApiError as exc:
            error = f"pod {namespace}/{pod} not found" if exc.not_found else \
                f"reading {where}: {exc}"
        except ValueError as exc:  # a line longer than the stream reader's buffer
            error = f"reading {where}: {exc}"
    if scope.cancelled_caught:
        error = f"reading {where}: timed out after {timeout:g}s"
    return read, truncated, error
