"""The Workflow core's shell: the slim views its caches hold and the live reads it answers with.

What :func:`cre.core.workflow.run.reconcile_workflow` reads besides the Workflow itself:

* the CRE Jobs labelled ``cre.dev/workflow`` (the full model: the core reads their conditions,
  failure class and failed nodes);
* its dependency objects and node-result ConfigMaps, held as :class:`Owned`: the
  :class:`cre.core.common.observed.ObjectView` (``owned`` when the Workflow is the controller, so a
  same-named object someone else made is never deleted) plus, for a result ConfigMap only, its
  decoded ``binaryData``. TrainingRuntimes and ConfigMaps are cached by the tracking label;
  dependency kinds without a cache (a ComputeDomain, a ResourceClaimTemplate: their CRDs may
  not even be installed where no Workflow needs them) are listed live, by the same label, only
  for a Workflow whose status refers to that kind;
* the number of active pods per Job, from the two label-scoped pod caches of
  :mod:`cre.kube.pods` (never an unscoped pod list), or listed live by Job label when the core
  asked for a live read.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.converter import structure
from cre.api.job import Job
from cre.api.workflow import Workflow
from cre.controller.job.shell import involved_object, job_from_dict
from cre.core.common.observed import ObjectView, PodView
from cre.core.workflow import noderesults as NR
from cre.kube.client import CONFIGMAPS, JOBS, TRAINING_RUNTIMES, ApiError, KubeClient
from cre.kube.executor import resource_for
from cre.kube.pods import live_list_pods

#: Index of the Workflow-labelled caches: ``namespace/<cre.dev/workflow value>``.
INDEX_WORKFLOW: Final = "workflow"
#: Dependency kinds held in a cache (the others are listed live when a Workflow uses them).
CACHED_KINDS: Final = frozenset({TRAINING_RUNTIMES.kind, CONFIGMAPS.kind})
_RESULT_PREFIXES: Final = (NR.SUCCEEDED, NR.FAILED, NR.UNCERTIFIED)
_DONE_PHASES: Final = ("Succeeded", "Failed")


def workflow_from_dict(raw: dict[str, Any]) -> Workflow:
    """The Workflow model of a served object (the informer drops objects that do not read)."""
    return structure(raw, Workflow)


def involved_workflow(wf: Workflow) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``wf``."""
    return involved_object("Workflow", wf.metadata)


@attrs.frozen(kw_only=True, slots=True)
class Owned:
    """A dependency object or result ConfigMap of a Workflow, as its caches keep it."""

    view: ObjectView
    namespace: str
    workflow: str
    owner_uid: str
    binary: Mapping[str, bytes] | None = None

    def label(self, key: str) -> str | None:
        """The tracking label (for the namespaced label indexer)."""
        return self.workflow if key == L.WORKFLOW else None


def _owner_uid(raw: Mapping[str, Any]) -> str:
    for ref in (raw.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def _binary(raw: Mapping[str, Any]) -> dict[str, bytes]:
    out = {}
    for key, value in (raw.get("binaryData") or {}).items():
        try:
            out[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            continue  # not ours to judge: the core reads a missing blob as "no records"
    return out


def owned_view(raw: dict[str, Any], *, api_version: str = "", kind: str = "") -> Owned:
    """The slim view of a dependency object or result ConfigMap (``binaryData`` kept only for
    the node-result ConfigMaps)."""
    meta = raw.get("metadata") or {}
    kind = str(raw.get("kind") or kind)
    name = str(meta.get("name") or "")
    result = kind == "ConfigMap" and name.startswith(_RESULT_PREFIXES)
    return Owned(
        view=ObjectView(api_version=str(raw.get("apiVersion") or api_version), kind=kind,
                        name=name, namespace=meta.get("namespace"),
                        uid=str(meta.get("uid") or ""), owned=True,
                        terminating=meta.get("deletionTimestamp") is not None),
        namespace=str(meta.get("namespace") or ""),
        workflow=str((meta.get("labels") or {}).get(L.WORKFLOW) or ""),
        owner_uid=_owner_uid(raw), binary=_binary(raw) if result else None)


def configmap_view(raw: dict[str, Any]) -> Owned:
    """:func:`owned_view` of a ConfigMap (a list's items carry no kind)."""
    return owned_view(raw, api_version="v1", kind="ConfigMap")


def runtime_view(raw: dict[str, Any]) -> Owned:
    """:func:`owned_view` of a TrainingRuntime."""
    return owned_view(raw, api_version=TRAINING_RUNTIMES.api_version,
                      kind=TRAINING_RUNTIMES.kind)


def job_workflow_index(job: Job) -> list[str]:
    """Index function of the Jobs cache: ``namespace/<cre.dev/workflow>``."""
    value = job.metadata.labels.get(L.WORKFLOW)
    return [f"{job.metadata.namespace or ''}/{value}"] if value else []


def views_for(owned: Iterable[Owned], uid: str) -> tuple[ObjectView, ...]:
    """The ObjectViews of ``owned``, ``owned=True`` only where ``uid`` is the controller."""
    return tuple(sorted((attrs.evolve(o.view, owned=o.owner_uid == uid) for o in owned),
                        key=lambda v: (v.kind, v.name)))


def results_of(owned: Iterable[Owned], uid: str) -> dict[str, Mapping[str, bytes]]:
    """The ``binaryData`` of the node-result ConfigMaps this Workflow controls, by name."""
    return {o.view.name: o.binary for o in owned
            if o.binary is not None and o.owner_uid == uid}


def active_count(pods: Iterable[PodView]) -> int:
    """How many of ``pods`` are neither Succeeded nor Failed (a pod being deleted counts)."""
    return sum(1 for p in pods if p.phase not in _DONE_PHASES)


class WorkflowReads:
    """Live reads that answer the Workflow core's ``ListLive`` ask."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client

    async def jobs(self, namespace: str, workflow: str) -> tuple[Job, ...]:
        """The Workflow's Jobs as served now, by name."""
        page = await self.client.list(JOBS, namespace=namespace,
                                      query={"labelSelector": f"{L.WORKFLOW}={workflow}"})
        jobs = []
        for item in page.get("items") or []:
            try:
                jobs.append(job_from_dict({"apiVersion": L.API_VERSION, "kind": "Job", **item}))
            except Exception:  # an unreadable Job is skipped as the cache skips it
                continue
        return tuple(sorted(jobs, key=lambda j: j.metadata.name or ""))

    async def owned(self, namespace: str, workflow: str, *, api_version: str,
                    kind: str) -> tuple[Owned, ...]:
        """Objects of one kind labelled for the Workflow, as served now (an uninstalled kind
        has none)."""
        res = resource_for(api_version, kind)
        try:
            page = await self.client.list(res, namespace=namespace if res.namespaced else None,
                                          query={"labelSelector": f"{L.WORKFLOW}={workflow}"})
        except ApiError as exc:
            if exc.not_found:
                return ()
            raise
        return tuple(owned_view(item, api_version=api_version, kind=kind)
                     for item in page.get("items") or [])

    async def active_pods(self, namespace: str, job: str) -> int:
        """The Job's pods (workers and launchers) not yet finished, as served now."""
        caller = f"{__name__}.WorkflowReads"
        workers = await live_list_pods(self.client, label_selector=f"{L.JOB}={job}",
                                       namespace=namespace, caller=caller)
        launchers = await live_list_pods(self.client, label_selector=f"{L.LAUNCHER}={job}",
                                         namespace=namespace, caller=caller)
        return active_count(workers) + active_count(launchers)

