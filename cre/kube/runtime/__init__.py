"""cre.kube.runtime: the generic controller runtime every CRE controller runs on.

The pieces, as controller-runtime names them: a :class:`Reconciler` (``async def
reconcile(key) -> Result``) holds one kind's logic; a :class:`Controller` owns the workqueue, the
workers, requeues and backoff, reconcile IDs, metrics and panic recovery; event handlers
(:func:`enqueue_object`, :func:`enqueue_owner`, :func:`enqueue_by_label`, :func:`enqueue_mapped`)
map a watched object's change to keys; predicates (:func:`generation_changed`,
:class:`OwnStatusEcho`) drop events not worth a pass; :func:`converge` is the bounded loop
between a pure core and its shell.

A second controller is a Reconciler plus its wiring::

    class WorkflowReconciler:
        def __init__(self, client: KubeClient, workflows: Informer[Workflow]) -> None:
            self.client, self.workflows = client, workflows

        async def reconcile(self, key: str) -> Result:
            wf = self.workflows.store.get(key)
            if wf is None:
                return DONE                     # deleted: nothing to do
            ...                                 # observe, run the core, apply the plan
            return Result(requeue_after=15.0)   # or DONE

    workflows = Informer(client, WORKFLOWS, transform=workflow_from_dict, name="workflows")
    jobs = Informer(client, JOBS, transform=job_from_dict, name="workflow-jobs")
    controller = Controller("workflow", WorkflowReconciler(client, workflows), workers=2,
                            metrics=metrics_for(registry))
    controller.watch(workflows, enqueue_object(), generation_changed)
    controller.watch(jobs, enqueue_owner(kind="Workflow", group="cre.dev"))
    await controller.run()                      # until cancelled, or stop() drained it

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
