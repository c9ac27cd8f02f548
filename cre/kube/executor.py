"""Apply a pure core's Plan to the API server, with the preconditions the Plan carries.

The executor is the only place a Plan turns into writes, in a fixed order:

1. creates (the status about to be written may refer to them). Every create's result is
   reported in the :class:`Outcome`, never raised: created (with the server's answer),
   AlreadyExists (with the live holder, so the core can decide between adopting it and a name
   collision), refused for good (schema validation or an admission webhook's denial: the
   message), or failed for a transient reason (the error, which the shell raises to back off);
2. the owner's status, through the ``/status`` subresource as a full replace guarded by its
   ``resourceVersion``. A 409 stops the plan: nothing computed from a stale copy is written, the
   caller re-reads live and re-runs the core;
3. events, right after the status write they describe succeeded (at most one per transition,
   by construction). Not later: the next pass sees the transition already written and would
   never announce it if a delete or patch below failed;
4. deletes, each with a UID precondition, so a same-named replacement created in the window is
   never deleted (a 404 or a failed precondition means the instance is already gone: fine);
5. patches of the owner itself (finalizers), guarded by ``resourceVersion`` in the patch body.

Other API errors propagate; the controller backs off and retries the key. The executor knows no
kind: the controller passes the owner's resource, the resources of the kinds its plans create
or delete, and how to name the owner in an Event.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from cre.api.converter import to_dict
from cre.core.plan import Create, Delete, Plan
from cre.kube.client import ApiError, KubeClient, Resource
from cre.kube.events import EventRecorder


class OutcomeKind(enum.StrEnum):
    """How applying a Plan ended."""

    APPLIED = "Applied"
    CONFLICT = "Conflict"  # the owner changed since it was read: re-read and recompute
    CREATE_EXISTS = "CreateExists"  # a create hit AlreadyExists: ``holder`` is the live object
    CREATE_REJECTED = "CreateRejected"  # a create was refused for good: ``rejected`` says why
    CREATE_FAILED = "CreateFailed"  # a create failed for a transient reason: ``error``
    GONE = "Gone"  # the owner no longer exists


class CreateFailed(Exception):
    """A create failed for a transient reason (webhook not reachable, throttling, quota); the
    shell raises it so the key is retried with backoff."""

    def __init__(self, create: Create, cause: ApiError) -> None:
        super().__init__(f"creating {create.kind} {create.namespace}/{create.name}: {cause}")
        self.create = create
        self.cause = cause


def is_rejection(exc: ApiError) -> bool:
    """Whether a create was refused for good: schema validation (400/422) or an admission
    webhook that denied it (403 naming the webhook). RBAC 403s and server errors are not."""
    status, text = exc.status, exc.message.lower()
    return status in (400, 422) or (status == 403 and "admission webhook" in text
                                    and "denied" in text)


@attrs.frozen(kw_only=True)
class Outcome:
    """The result of one ``apply``: how it ended, what was created, when the status landed."""

    kind: OutcomeKind
    created: tuple[dict[str, Any], ...] = ()  # the server's answers to the creates that worked
    holder: dict[str, Any] | None = None  # CREATE_EXISTS: the live holder ({} if it vanished)
    rejected: str | None = None  # CREATE_REJECTED: the server's message
    error: CreateFailed | None = None  # CREATE_FAILED
    status_written_at: datetime | None = None
    resource_version: str = ""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PlanExecutor:
    """Applies the Plans of one owner kind (``owner``) through one client; ``kinds`` maps each
    kind the plans create or delete to its resource, ``involved`` gives an Event's
    ``involvedObject`` for an owner; events go through ``recorder``."""

    def __init__(self, client: KubeClient, recorder: EventRecorder, *, owner: Resource,
                 kinds: Mapping[str, Resource], involved: Callable[[Any], dict[str, Any]],
                 clock: Callable[[], datetime] = _utcnow) -> None:
        self.client = client
        self.recorder = recorder
        self.owner = owner
        self.kinds = {**kinds, owner.kind: owner}
        self.involved = involved
        self._clock = clock

    def _resource(self, kind: str) -> Resource:
        try:
            return self.kinds[kind]
        except KeyError:
            raise ValueError(f"plan refers to kind {kind!r}, which the executor cannot write "
                             f"(known: {sorted(self.kinds)})") from None

    async def _create(self, create: Create) -> Outcome | dict[str, Any]:
        """The created object, or the Outcome that stops the plan."""
        res = self._resource(create.kind)
        try:
            return await self.client.create(res, dict(create.body), namespace=create.namespace)
        except ApiError as exc:
            if exc.already_exists:
                return Outcome(kind=OutcomeKind.CREATE_EXISTS,
                               holder=await self._holder(res, create))
            if is_rejection(exc):
                return Outcome(kind=OutcomeKind.CREATE_REJECTED,
                               rejected=exc.message or str(exc))
            return Outcome(kind=OutcomeKind.CREATE_FAILED, error=CreateFailed(create, exc))

    async def _holder(self, res: Resource, create: Create) -> dict[str, Any]:
        try:
            return await self.client.get(res, create.name, namespace=create.namespace)
        except ApiError as again:
            if again.not_found:
                return {}
            raise

    async def _delete(self, delete: Delete) -> None:
        try:
            await self.client.delete(self._resource(delete.kind), delete.name,
                                     namespace=delete.namespace, uid=delete.uid,
                                     propagation_policy="Background")
        except ApiError as exc:
            if not (exc.not_found or exc.status == 409):
                raise

    async def apply(self, obj: Any, plan: Plan) -> Outcome:
        """Apply ``plan`` (computed from the owner ``obj``, an attrs model with ``metadata``
        and ``status``) and report how it ended."""
        created: list[dict[str, Any]] = []
        for create in plan.creates:
            answer = await self._create(create)
            if isinstance(answer, Outcome):
                return attrs.evolve(answer, created=tuple(created))
            created.append(answer)
        done = tuple(created)
        rv = plan.resource_version
        written_at = None
        if plan.status is not None:
            body = to_dict(attrs.evolve(obj, status=plan.status))
            body["metadata"]["resourceVersion"] = plan.resource_version
            try:
                answer = await self.client.replace(self.owner, body, subresource="status")
            except ApiError as exc:
                if exc.conflict:
                    return Outcome(kind=OutcomeKind.CONFLICT, created=done)
                if exc.not_found:
                    return Outcome(kind=OutcomeKind.GONE, created=done)
                raise
            written_at = self._clock()
            rv = str((answer.get("metadata") or {}).get("resourceVersion") or rv)
        for event in plan.events:
            await self.recorder.emit(involved=self.involved(obj), type_=event.type,
                                     reason=event.reason, message=event.message)
        for delete in plan.deletes:
            await self._delete(delete)
        for patch in plan.patches:
            body = {**patch.body, "metadata": {**dict(patch.body.get("metadata") or {}),
                                               "resourceVersion": rv}}
            try:
                answer = await self.client.patch(self.owner, patch.name, body,
                                                 namespace=patch.namespace)
            except ApiError as exc:
                if exc.conflict:
                    return Outcome(kind=OutcomeKind.CONFLICT, created=done,
                                   status_written_at=written_at)
                if exc.not_found:
                    return Outcome(kind=OutcomeKind.GONE, created=done,
                                   status_written_at=written_at)
                raise
            rv = str((answer.get("metadata") or {}).get("resourceVersion") or rv)
        return Outcome(kind=OutcomeKind.APPLIED, created=done, status_written_at=written_at,
                       resource_version=rv)
