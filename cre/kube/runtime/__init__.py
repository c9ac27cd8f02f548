"""cre.kube.runtime: the generic controller runtime every CRE controller runs on.

The pieces, as controller-runtime names them: a :class:`Reconciler` (``async def
reconcile(key) -> Result``) holds one kind's logic; a :class:`Controller` owns the workqueue, the
workers, requeues and backoff, reconcile IDs, metrics and panic recovery (it never runs an
informer: it waits for those it watches, which their factory runs); event handlers
(:func:`enqueue_object`, :func:`enqueue_owner`, :func:`enqueue_by_label`, :func:`enqueue_mapped`)
map a watched object's change to keys; predicates (:func:`generation_changed`,
:class:`OwnStatusEcho`) drop events not worth a pass; :func:`converge` is the bounded loop
between a pure core and its shell.

A controller of CRE's is a :class:`CoreReconciler` (the queue, the workers, the caches from an
:class:`cre.kube.factory.InformerFactory`, run and stop are its own) plus its wiring, said with
a :class:`Builder` as controller-runtime's ``For().Owns().Watches()``::

    class WorkflowController(CoreReconciler[Workflow, WorkflowObservation, WorkflowStatus]):
        def __init__(self, client: KubeClient, *, informers: InformerFactory | None = None):
            super().__init__(client, name="workflow", component="cre.dev/workflow-controller",
                             workers=2, clock=utcnow, informers=informers, namespaces=None,
                             registry=None)
            self.workflows = self.cache(WORKFLOWS, transform=workflow_from_dict)
            self.jobs = self.cache(JOBS, transform=job_from_dict, label_selector=WORKFLOW)
            self.managed().for_(self.workflows).owns(self.jobs)

        async def reconcile(self, key: str) -> Result:
            wf = self.workflows.store.get(key)
            if wf is None:
                return DONE                     # deleted: nothing to do
            ...                                 # observe, run the core, apply the plan
            return Result(requeue_after=15.0)   # or DONE

    await WorkflowController(client).run()      # until cancelled, or stop() drained it

``controller.queue``, ``has_synced()``, ``run()`` and ``stop()`` are what the manager's
supervision needs (:class:`cre_manager.runnable.Draining`).
"""

from cre.kube.runtime.base import CoreReconciler
from cre.kube.runtime.builder import Builder
from cre.kube.runtime.controller import Controller, must_propagate
from cre.kube.runtime.feedback import DEFAULT_MAX_PASSES, Again, PassesExhausted, converge
from cre.kube.runtime.handlers import (
    EventHandler,
    KeyQueue,
    WatchEvent,
    enqueue_by_label,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    key_of,
)
from cre.kube.runtime.predicates import OwnStatusEcho, Predicate, generation_changed
from cre.kube.runtime.reconcile import (
    DONE,
    Reconciler,
    Result,
    TerminalError,
    object_key,
    split_key,
)

__all__ = [
    "DEFAULT_MAX_PASSES",
    "DONE",
    "Again",
    "Builder",
    "Controller",
    "CoreReconciler",
    "EventHandler",
    "KeyQueue",
    "OwnStatusEcho",
    "PassesExhausted",
    "Predicate",
    "Reconciler",
    "Result",
    "TerminalError",
    "WatchEvent",
    "converge",
    "enqueue_by_label",
    "enqueue_mapped",
    "enqueue_object",
    "enqueue_owner",
    "generation_changed",
    "key_of",
    "must_propagate",
    "object_key",
    "split_key",
]
