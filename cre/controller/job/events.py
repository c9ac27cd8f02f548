"""How the Job controller maps cache events to Job keys, and what it keeps on the way.

A Job's key is enqueued for every change of the Job (but its own status echo), of the TrainJob
it controls, of its pods and of the GPU nodes of its group. The pod handlers do more than map:
a pod's new non-zero termination starts a log prefetch at once (JobSet deletes a failed launcher
about half a second after it exits), a failed pod seen deleted before the Job's failure was
recorded is kept as a tombstone, and a first failure is enqueued ahead of routine work
(``PRIORITY_URGENT``). Ordinary worker churn is coalesced for :data:`WORKER_POD_COALESCE`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from cre.api.job import Job
from cre.api.labels import JOB, LAUNCHER
from cre.api.watch import WatchEventType
from cre.controller.job.metrics import JobMetrics
from cre.controller.job.nodechecks import NodeChecks
from cre.controller.job.prefetch import LogPrefetcher
from cre.controller.job.tombstones import Tombstones
from cre.core.common.observed import NodeView, PodView, TrainJobView
from cre.core.job import failurelog as fl
from cre.core.job.reconcile import is_terminal
from cre.kube.informer import Informer
from cre.kube.pods import INDEX_NODE
from cre.kube.runtime import Controller, KeyQueue, OwnStatusEcho, WatchEvent, key_of, object_key
from cre.kube.workqueue import PRIORITY_URGENT

# Noisy worker pod updates are coalesced for this long; launcher failures skip the wait.
WORKER_POD_COALESCE: Final = 0.2
# Jobs informer index: the nodes of a Job's group (its ``cre.dev/group-nodes`` annotation).
INDEX_GROUP_NODE: Final = "group-node"


def has_failed_container(pod: PodView | None) -> bool:
    """Whether any init or regular container of ``pod`` has a non-zero termination that
    counts (current, or the ``lastState`` of a container not running again)."""
    return pod is not None and bool(fl.failed_terminations(pod))


def new_failures(old: PodView | None, new: PodView) -> list[tuple[str, bool]]:
    """The failed containers of ``new`` whose termination ``old`` did not show yet (a first
    exit, or one more crash of a container restarted in place), as ``(container, previous)``."""
    seen = {(name, state.finished_at, previous)
            for name, state, previous in (fl.failed_terminations(old) if old else [])}
    return [(name, previous) for name, state, previous in fl.failed_terminations(new)
            if (name, state.finished_at, previous) not in seen]


def node_changed(event: WatchEvent[NodeView]) -> bool:
    """A GPU node's readiness, schedulability, labels, conditions or taints changed (a
    heartbeat-only update does not count: the view keeps no heartbeat times; a deleted node has
    no Job left to tell). Conditions and taints are what a ``nodeHealthMonitor`` reads."""
    old, new = event.old, event.new
    if new is None or event.type == WatchEventType.DELETED:
        return False
    return old is None or (old.ready, old.unschedulable, old.labels, old.conditions,
                           old.taints) != (new.ready, new.unschedulable, new.labels,
                                           new.conditions, new.taints)


class JobEvents:
    """The Job controller's event handlers (mixed into
    :class:`cre.controller.job.controller.JobController`, which provides the caches, the runtime and
    the failure memory declared here)."""

    controller: Controller
    jobs: Informer[Job]
    workers: Informer[PodView]
    launchers: Informer[PodView]
    departed_launchers: Tombstones
    departed_workers: Tombstones
    prefetcher: LogPrefetcher
    metrics: JobMetrics
    status_echo: OwnStatusEcho
    node_checks: NodeChecks
    # Job key -> uid of its TrainJob that the cache saw deleted (a deletion is final for a uid).
    deleted_workloads: dict[str, str]

    def on_job(self, event: WatchEvent[Job], queue: KeyQueue) -> None:
        """A Job changed (its own status echo is filtered out before): reconcile it; a deleted
        one only has its memory dropped."""
        key = key_of(event.obj)
        if event.type == WatchEventType.DELETED:
            meta = event.obj.metadata
            self.metrics.forget_job(meta.namespace or "", meta.name or "")
            self.controller.queue.forget(key)
            self._forget_failures(key)
            self.status_echo.forget(key)
            self.deleted_workloads.pop(key, None)
            return
        queue.add(key)

    def on_trainjob_deleted(self, event: WatchEvent[TrainJobView], queue: KeyQueue) -> None:
        """A Job's TrainJob was deleted: remember its uid, so the Job's next "is the workload
        gone?" is answered without a live read (the owner is enqueued by ``owns``)."""
        del queue
        job = event.obj.label(JOB)
        if event.type == WatchEventType.DELETED and job:
            self.deleted_workloads[object_key(event.obj.namespace, job)] = event.obj.uid

    def on_worker(self, event: WatchEvent[PodView], queue: KeyQueue) -> None:
        """A worker pod changed: remember it if it was deleted failed, prefetch a new failure's
        log, enqueue its Job (at once on a first failure, coalesced otherwise)."""
        old, new = event.old, event.new
        job = event.obj.label(JOB)
        if not job:
            return
        key = object_key(event.obj.namespace, job)
        if self._settled(key):
            queue.add_after(key, WORKER_POD_COALESCE)
            return
        if event.type == WatchEventType.DELETED and has_failed_container(old):
            # Deleted (by JobSet, or by the worker Job past its backoffLimit) before the Job's
            # failure may have been recorded: keep its last state for the verdict.
            assert old is not None
            self.departed_workers.remember(key, old)
        if new is not None:
            # Read the log now: the pod may be gone by the time the workload is declared
            # failed. A single-pod workload's pod is its "launcher" and is captured early.
            self._prefetch(key, old, new)
        if has_failed_container(new) and not has_failed_container(old):
            queue.add(key, priority=PRIORITY_URGENT)
        else:
            queue.add_after(key, WORKER_POD_COALESCE)

    def on_launcher(self, event: WatchEvent[PodView], queue: KeyQueue) -> None:
        """A launcher pod changed: remember it if it was deleted failed, prefetch a new
        failure's log, and enqueue its Job at once (ahead of routine work on a new failure)."""
        old, new = event.old, event.new
        job = event.obj.label(LAUNCHER)
        if not job:
            return
        key = object_key(event.obj.namespace, job)
        settled = self._settled(key)
        if not settled and event.type == WatchEventType.DELETED and has_failed_container(old):
            assert old is not None
            self.departed_launchers.remember(key, old)
        failed = new is not None and not settled and self._prefetch(key, old, new)
        # Every launcher change, and above all its first non-zero exit, goes straight to a
        # worker (no delay, no rate limit).
        queue.add(key, priority=PRIORITY_URGENT if failed else 0)

    def on_node_deleted(self, event: WatchEvent[NodeView], queue: KeyQueue) -> None:
        """A GPU node was deleted: drop the nodeHealthMonitor results kept for it (no Job is
        enqueued: a deleted node has no Job left to tell)."""
        del queue
        if event.type == WatchEventType.DELETED:
            self.node_checks.forget(event.obj.name)

    def _prefetch(self, key: str, old: PodView | None, new: PodView) -> bool:
        """Start reading the log of every new failure of ``new``; whether there was one."""
        fresh = new_failures(old, new)
        for container, previous in fresh:
            self.prefetcher.request(new, container, previous=previous, owner=key, refresh=True)
        return bool(fresh)

    def jobs_on_node(self, event: WatchEvent[NodeView]) -> Iterable[str]:
        """The non-terminal Jobs whose group lists the node, and the Jobs with a pod on it."""
        name = event.obj.name
        for job in self.jobs.store.by_index(INDEX_GROUP_NODE, name):
            if not is_terminal(job):
                yield key_of(job)
        for pods, label in ((self.workers, JOB), (self.launchers, LAUNCHER)):
            for pod in pods.store.by_index(INDEX_NODE, name):
                value = pod.label(label)
                if value:
                    yield object_key(pod.namespace, value)

    def _settled(self, key: str) -> bool:
        """Whether the cached Job ``key`` already has its verdict or is being deleted (a pod
        failure of it will not be recorded: no tombstone, no log read)."""
        job = self.jobs.store.get(key)
        return job is not None and (is_terminal(job) or job.metadata.deletion_timestamp is not None)

    def _forget_failures(self, key: str) -> None:
        """Drop the tombstones and prefetched tails of Job ``key`` (terminal, being deleted or
        gone: no failure of it will be recorded any more)."""
        self.departed_launchers.forget(key)
        self.departed_workers.forget(key)
        self.prefetcher.forget(key)

    def tombstones(self, key: str) -> frozenset[str]:
        """The names of the failed pods of Job ``key`` kept after their deletion."""
        return frozenset(self.departed_launchers.pods(key)) | frozenset(
            self.departed_workers.pods(key))

