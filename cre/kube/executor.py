"""Apply a pure core's Plan to the API server, with the preconditions the Plan carries.

The executor is the only place a Job Plan turns into writes, in a fixed order:

1. creates (the status about to be written may refer to them). AlreadyExists stops the plan and
   reports the live holder so the core can decide between adopting it and a name collision;
2. the status, through the ``/status`` subresource as a full replace guarded by the Job's
   ``resourceVersion``. A 409 stops the plan: nothing computed from a stale copy is written, the
   caller re-reads live and re-runs the core;
3. events, right after the status write they describe succeeded (at most one per transition,
   by construction). Not later: the next pass sees the transition already written and would
   never announce it if a delete or patch below failed;
4. deletes, each with a UID precondition, so a same-named replacement created in the window is
   never deleted (a 404 or a failed precondition means the instance is already gone: fine);
5. patches of the Job itself (finalizers), guarded by ``resourceVersion`` in the patch body.

Other API errors propagate; the controller backs off and retries the key.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import attrs

from cre.api.converter import to_dict
from cre.api.job import Job
from cre.api.labels import API_VERSION, GROUP, VERSION
from cre.core.plan import Create, Delete, Plan
from cre.core.workload import TRAINJOB_KIND
from cre.kube.client import TRAINJOBS, ApiError, KubeClient, Resource
from cre.kube.events import EventRecorder

JOBS: Final = Resource(GROUP, VERSION, "jobs", kind="Job")

_BY_KIND: Final = {TRAINJOB_KIND: TRAINJOBS, "Job": JOBS}


class OutcomeKind(enum.StrEnum):
    """How applying a Plan ended."""

    APPLIED = "Applied"
    CONFLICT = "Conflict"  # the Job changed since it was read: re-read and recompute
    CREATE_CONFLICT = "CreateConflict"  # a create hit AlreadyExists: ``holder`` is the live object
    JOB_GONE = "JobGone"  # the Job no longer exists


@attrs.frozen(kw_only=True)
class Outcome:
    """The result of one ``apply``: what happened and when the status landed."""

    kind: OutcomeKind
    holder: dict[str, Any] | None = None
    status_written_at: datetime | None = None
    resource_version: str = ""


class WorkloadCreateError(Exception):
    """Creating a child failed for a reason other than AlreadyExists. Transient causes (webhook
    not reachable, throttling, quota) are retried with backoff; a :attr:`rejected` one will fail
    the same way every time."""

    def __init__(self, create: Create, cause: ApiError) -> None:
        super().__init__(f"creating {create.kind} {create.namespace}/{create.name}: {cause}")
        self.create = create
        self.cause = cause

    @property
    def rejected(self) -> bool:
        """The object itself was refused: schema validation (400/422) or an admission webhook
        that denied it (403 naming the webhook). RBAC 403s and server errors are not."""
        status, text = self.cause.status, self.cause.message.lower()
        return status in (400, 422) or (status == 403 and "admission webhook" in text
                                        and "denied" in text)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _resource(kind: str) -> Resource:
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise ValueError(f"plan refers to kind {kind!r}, which the executor cannot write") from None


def involved(job: Job) -> dict[str, Any]:
    """The ``involvedObject`` of an Event about ``job``."""
    meta = job.metadata
    return {"apiVersion": API_VERSION, "kind": "Job", "name": meta.name,
            "namespace": meta.namespace, "uid": meta.uid}


class PlanExecutor:
    """Applies Job Plans through one client; events go through ``recorder``."""

    def __init__(self, client: KubeClient, recorder: EventRecorder, *,
                 clock: Callable[[], datetime] = _utcnow) -> None:
        self.client = client
        self.recorder = recorder
        self._clock = clock

    async def _create(self, create: Create) -> dict[str, Any] | None:
        """Create; on AlreadyExists return the live holder (``{}`` if it vanished since)."""
        res = _resource(create.kind)
        try:
            await self.client.create(res, dict(create.body), namespace=create.namespace)
        except ApiError as exc:
            if not exc.already_exists:
                raise WorkloadCreateError(create, exc) from exc
            try:
                return await self.client.get(res, create.name, namespace=create.namespace)
            except ApiError as again:
                if again.not_found:
                    return {}
                raise
        return None

    async def _delete(self, delete: Delete) -> None:
        try:
            await self.client.delete(_resource(delete.kind), delete.name,
                                     namespace=delete.namespace, uid=delete.uid,
                                     propagation_policy="Background")
        except ApiError as exc:
            if not (exc.not_found or exc.status == 409):
                raise

    async def apply(self, job: Job, plan: Plan) -> Outcome:
        """Apply ``plan`` (computed from ``job``) and report how it ended."""
        for create in plan.creates:
            holder = await self._create(create)
            if holder is not None:
                return Outcome(kind=OutcomeKind.CREATE_CONFLICT, holder=holder)
        rv = plan.resource_version
        written_at = None
        if plan.status is not None:
            body = to_dict(attrs.evolve(job, status=plan.status))
            body["metadata"]["resourceVersion"] = plan.resource_version
            try:
                answer = await self.client.replace(JOBS, body, subresource="status")
            except ApiError as exc:
                if exc.conflict:
                    return Outcome(kind=OutcomeKind.CONFLICT)
                if exc.not_found:
                    return Outcome(kind=OutcomeKind.JOB_GONE)
                raise
            written_at = self._clock()
            rv = str((answer.get("metadata") or {}).get("resourceVersion") or rv)
        for event in plan.events:
            await self.recorder.emit(involved=involved(job), type_=event.type,
                                     reason=event.reason, message=event.message)
        for delete in plan.deletes:
            await self._delete(delete)
        for patch in plan.patches:
            body = {**patch.body, "metadata": {**dict(patch.body.get("metadata") or {}),
                                               "resourceVersion": rv}}
            try:
                answer = await self.client.patch(JOBS, patch.name, body,
                                                 namespace=patch.namespace)
            except ApiError as exc:
                if exc.conflict:
                    return Outcome(kind=OutcomeKind.CONFLICT, status_written_at=written_at)
                if exc.not_found:
                    return Outcome(kind=OutcomeKind.JOB_GONE, status_written_at=written_at)
                raise
            rv = str((answer.get("metadata") or {}).get("resourceVersion") or rv)
        return Outcome(kind=OutcomeKind.APPLIED, status_written_at=written_at,
                       resource_version=rv)
