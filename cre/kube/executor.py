"""Apply any kind's :class:`cre.core.common.plan.Plan` to the API server: the one executor.

Every controller (Job, Workflow, Certification, WorkloadRun, BandwidthMeasurement,
GoodputMeasurement) hands its core's Plan to a :class:`PlanExecutor`, which writes it in one
order:

1. **creates**, kind by kind in the order kinds first appear in the plan (a dependency before
   the Job that needs it, the measurements before the workload), up to
   :data:`CREATE_CONCURRENCY` of a kind in flight. Before the first create the owner is read
   live: a cache that kept a deleted owner (or an older copy of it) never gets children
   created for it. The read is skipped once when the server already vouched for the plan's
   copy: it is the copy (same uid and resourceVersion) that this executor's own last write of
   the owner returned, or its own last live read of it (a Job's first create pass follows its
   finalizer patch; a re-run after a conflict follows the live read). A deleted owner never
   gets such a copy (its writes answer 404), and each vouch serves one create pass, so the
   loop the read guards against needs a live read on every turn after the first.
   AlreadyExists is answered by reading the holder: one the owner controls (a create that
   worked on a pass whose status write then conflicted) counts as created; any other is a
   :class:`cre.core.common.plan.CreateConflict`. A create refused for good (schema validation
   400/422, an admission webhook's 403 denial) is a :class:`cre.core.common.plan.CreateError`.
   Either stops the plan after its kind's batch, before anything below, and goes back to the
   core. A ``replace`` create (the node-result ConfigMaps)
   replaces what holds its name. A transient failure raises :class:`CreateFailed`.
   Creates come first because the status about to be written refers to them: a status must
   never claim what a create did not do.
2. the **status**, through ``/status`` as a full replace guarded by the plan's
   ``resourceVersion``.
3. **events**, right after the status write they describe (at most one per transition, by
   construction). Not later: the next pass sees the transition written and would never
   announce it if a delete or patch below failed.
4. **deletes**, each with a UID precondition, so a same-named replacement created in the
   window is never deleted (a 404 or a failed precondition: the instance is gone, fine).
   After the status, so a status recording why (a cancelled group, a failed Job) lands before
   the objects vanish.
5. **patches** of the owner itself (its finalizers), guarded by the resourceVersion the status
   write returned. Last, because removing the last finalizer may delete the owner at once.

**The status-conflict rule** (one for every kind): a 409 on the owner's ``/status`` or patch,
or an owner read before the creates that is newer than the plan's copy, stops the plan; the
owner is read live and comes back in the :class:`Outcome` (``fresh``), and the shell runs the
core again on it. Nothing computed from a stale copy is written. A 404 (or a live owner with
another uid) is ``GONE``. Other API errors propagate; the controller backs off and retries.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Protocol, TypeVar, cast

import anyio
import attrs

from cre.api.converter import to_dict
from cre.core.common.plan import Create, CreateConflict, CreateError, Delete, Feedback, Plan
from cre.kube.client import (
    CONFIGMAPS,
    SECRETS,
    SERVICES,
    TRAINING_RUNTIMES,
    ApiError,
    KubeClient,
    Resource,
)
from cre.kube.events import EventRecorder
from cre.kube.runtime import DONE, Again, OwnStatusEcho, Result, TerminalError, key_of

#: Creates of one kind in flight at once: a Workflow launching 125 groups writes 250 objects,
#: which one at a time take the API round-trip 250 times over (docs/design/013, "Scale").
CREATE_CONCURRENCY: Final = 16
#: Owners whose last server-vouched copy an executor remembers (the oldest goes first; a
#: forgotten one only costs the live read before its next creates).
VOUCHED_OWNERS: Final = 4096

# Kinds whose plural is not the lower-cased kind plus "s".
_KNOWN: Final = {r.kind: r for r in (CONFIGMAPS, SECRETS, SERVICES, TRAINING_RUNTIMES)}
_CLUSTER_SCOPED_PREFIX: Final = "Cluster"


def resource_for(api_version: str, kind: str) -> Resource:
    """The API resource of ``kind`` in ``api_version`` (plans may write any kind: a
    TrainingRuntime, a ComputeDomain, a ResourceClaimTemplate, a TrainJob...)."""
    known = _KNOWN.get(kind)
    if known is not None and known.api_version == api_version:
        return known
    group, _, version = api_version.rpartition("/")
    lower = kind.lower()
    plural = lower[:-1] + "ies" if lower.endswith("y") else \
        lower + "es" if lower.endswith(("s", "x", "ch", "sh")) else lower + "s"
    return Resource(group, version, plural, kind=kind,
                    namespaced=not kind.startswith(_CLUSTER_SCOPED_PREFIX))


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether ``obj`` (a served object) has the object of ``uid`` as its controller."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(r, Mapping) and r.get("controller") and r.get("uid") == uid
               for r in refs)


def is_rejection(exc: ApiError) -> bool:
    """Whether a create was refused for good: schema validation (400/422) or an admission
    webhook that denied it (403 naming the webhook). RBAC 403s and server errors are not."""
    status, text = exc.status, exc.message.lower()
    return status in (400, 422) or (status == 403 and "admission webhook" in text
                                    and "denied" in text)


def kind_batches(creates: Sequence[Create]) -> list[list[Create]]:
    """``creates`` split by kind (and ``replace``), kinds in the order they first appear, each
    batch in plan order."""
    batches: dict[tuple[str, str, bool], list[Create]] = {}
    for create in creates:
        batches.setdefault((create.api_version, create.kind, create.replace), []).append(create)
    return list(batches.values())


class OutcomeKind(enum.StrEnum):
    """How applying a Plan ended."""

    APPLIED = "Applied"
    CONFLICT = "Conflict"  # the owner changed since it was read: ``fresh`` is the live copy
    CREATE_CONFLICTS = "CreateConflicts"  # names held by foreign objects: ``conflicts``
    CREATE_REJECTED = "CreateRejected"  # refused for good: ``rejections``
    GONE = "Gone"  # the owner no longer exists (or was replaced: another uid)


class CreateFailed(Exception):
    """A create failed for a transient reason (webhook not reachable, throttling, quota, a
    holder that vanished while it was read); the key is retried with backoff."""

    def __init__(self, create: Create, cause: Exception) -> None:
        super().__init__(f"creating {create.kind} {create.namespace}/{create.name}: {cause}")
        self.create = create
        self.cause = cause


@attrs.frozen(kw_only=True)
class Outcome:
    """The result of one ``apply``: how it ended, what was created, when the status landed."""

    kind: OutcomeKind
    created: tuple[dict[str, Any], ...] = ()  # the server's answers (or the owned holders)
    conflicts: tuple[CreateConflict, ...] = ()
    rejections: tuple[CreateError, ...] = ()
    fresh: dict[str, Any] | None = None  # CONFLICT: the owner as served now
    status_written_at: datetime | None = None
    # The owner's resourceVersion after its status write (None: no status write).
    status_resource_version: str | None = None


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _rv(obj: Mapping[str, Any], default: str) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or default)


class PlanExecutor:
    """Applies the Plans of one owner kind (``owner``) through ``client``; ``involved`` gives
    an Event's ``involvedObject`` for an owner; events go through ``recorder``."""

    def __init__(self, client: KubeClient, recorder: EventRecorder, *, owner: Resource,
                 involved: Callable[[Any], dict[str, Any]],
                 clock: Callable[[], datetime] = _utcnow) -> None:
        self.client = client
        self.recorder = recorder
        self.owner = owner
        self.involved = involved
        self._clock = clock
        # owner key -> (uid, resourceVersion) of the copy the server last answered with.
        self._vouched: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def _vouch(self, obj: Any, served: Mapping[str, Any]) -> None:
        """Remember ``served`` (the server's answer about the owner ``obj``) as its current
        copy, unless it is being deleted."""
        meta = served.get("metadata") or {}
        if meta.get("deletionTimestamp") or not meta.get("resourceVersion"):
            self._vouched.pop(key_of(obj), None)
            return
        key = key_of(obj)
        self._vouched[key] = (str(meta.get("uid") or ""), str(meta["resourceVersion"]))
        self._vouched.move_to_end(key)
        if len(self._vouched) > VOUCHED_OWNERS:
            self._vouched.popitem(last=False)

    def _vouched_for(self, obj: Any) -> bool:
        """Whether the server last answered with the very copy ``obj`` (used up by asking)."""
        meta = obj.metadata
        seen = self._vouched.pop(key_of(obj), None)
        return seen is not None and seen == (meta.uid or "", meta.resource_version or "")

    async def apply(self, obj: Any, plan: Plan[Any]) -> Outcome:
        """Apply ``plan``, computed from the owner ``obj`` (an attrs model with ``metadata``
        and ``status``), in the module's order, and report how it ended."""
        if plan.creates and not self._vouched_for(obj):
            stale = await self._check_owner(obj)
            if stale is not None:
                return stale
        created: list[dict[str, Any]] = []
        for batch in kind_batches(plan.creates):
            answers = await self._create_batch(obj, batch)
            created += [a for a in answers if isinstance(a, dict)]
            conflicts = tuple(a for a in answers if isinstance(a, CreateConflict))
            rejections = tuple(a for a in answers if isinstance(a, CreateError))
            if rejections:
                return Outcome(kind=OutcomeKind.CREATE_REJECTED, created=tuple(created),
                               rejections=rejections)
            if conflicts:
                return Outcome(kind=OutcomeKind.CREATE_CONFLICTS, created=tuple(created),
                               conflicts=conflicts)
        done = tuple(created)
        rv = plan.resource_version
        written_at = None
        written_rv = None
        if plan.status is not None:
            body = to_dict(attrs.evolve(obj, status=plan.status))
            body["metadata"]["resourceVersion"] = rv
            try:
                answer = await self.client.replace(self.owner, body, subresource="status")
            except ApiError as exc:
                return await self._stopped(obj, exc, created=done)
            written_at = self._clock()
            rv = written_rv = _rv(answer, rv)
            self._vouch(obj, answer)
        for event in plan.events:
            await self.recorder.emit(involved=self.involved(obj), type_=event.type,
                                     reason=event.reason, message=event.message)
        for delete in plan.deletes:
            await self._delete(delete)
        meta = obj.metadata
        for patch in plan.patches:
            body = {**patch.body, "metadata": {**dict(patch.body.get("metadata") or {}),
                                               "resourceVersion": rv}}
            try:
                answer = await self.client.patch(self.owner, meta.name, body,
                                                 namespace=meta.namespace)
            except ApiError as exc:
                return attrs.evolve(await self._stopped(obj, exc, created=done),
                                    status_written_at=written_at)
            rv = _rv(answer, rv)
            self._vouch(obj, answer)
        return Outcome(kind=OutcomeKind.APPLIED, created=done, status_written_at=written_at,
                       status_resource_version=written_rv)

    async def _stopped(self, obj: Any, exc: ApiError, *, created: tuple[dict[str, Any], ...]
                       ) -> Outcome:
        """The Outcome of a write of the owner that failed with ``exc`` (409: re-read live)."""
        if exc.not_found:
            return Outcome(kind=OutcomeKind.GONE, created=created)
        if not exc.conflict:
            raise exc
        fresh = await self.live(obj)
        if fresh is None:
            return Outcome(kind=OutcomeKind.GONE, created=created)
        return Outcome(kind=OutcomeKind.CONFLICT, created=created, fresh=fresh)

    async def live(self, obj: Any) -> dict[str, Any] | None:
        """The owner ``obj`` as served now (``None``: gone, or replaced by another uid)."""
        meta = obj.metadata
        try:
            raw = await self.client.get(self.owner, meta.name or "", namespace=meta.namespace)
        except ApiError as exc:
            if exc.not_found:
                self._vouched.pop(key_of(obj), None)
                return None
            raise
        if (raw.get("metadata") or {}).get("uid") != meta.uid:
            self._vouched.pop(key_of(obj), None)
            return None
        self._vouch(obj, raw)
        return raw

    async def _check_owner(self, obj: Any) -> Outcome | None:
        """Before any create: ``None`` when the copy the plan came from is current, else the
        Outcome that stops the plan (GONE, or CONFLICT with the live copy).

        A cache can keep a deleted owner (its watch expired with 410 and the DELETED event was
        never seen): every event of a child created for it, which the garbage collector removes
        at once (its owner's uid is gone), would bring the owner back to create it again
        (found by the chaos soak: hundreds of TrainJob creates for one deleted Job)."""
        fresh = await self.live(obj)
        if fresh is None:
            return Outcome(kind=OutcomeKind.GONE)
        if _rv(fresh, "") != (obj.metadata.resource_version or ""):
            return Outcome(kind=OutcomeKind.CONFLICT, fresh=fresh)
        return None

    async def _create_batch(self, owner: Any, batch: Sequence[Create]
                            ) -> list[dict[str, Any] | CreateConflict | CreateError]:
        """Create ``batch`` (one kind) with up to :data:`CREATE_CONCURRENCY` requests in flight;
        the answers in the batch's order. An error other than a conflict or a refusal
        propagates once the requests in flight have ended."""
        if len(batch) == 1:
            return [await self._create(owner, batch[0])]
        results: list[dict[str, Any] | CreateConflict | CreateError] = [{}] * len(batch)
        limiter = anyio.Semaphore(CREATE_CONCURRENCY)

        async def one(i: int, create: Create) -> None:
            async with limiter:
                results[i] = await self._create(owner, create)

        try:
            async with anyio.create_task_group() as tg:
                for i, create in enumerate(batch):
                    tg.start_soon(one, i, create)
        except BaseExceptionGroup as group:  # re-raise the first, as a sequential loop would
            raise group.exceptions[0] from None
        return results

    async def _create(self, owner: Any, create: Create
                      ) -> dict[str, Any] | CreateConflict | CreateError:
        """The created (or already the owner's) object, the conflict, or the refusal."""
        res = resource_for(create.api_version, create.kind)
        namespace = create.namespace if res.namespaced else None
        try:
            return await self.client.create(res, dict(create.body), namespace=namespace)
        except ApiError as exc:
            if exc.already_exists:
                return await self._held(owner, create, res, namespace, exc)
            if is_rejection(exc):
                return CreateError(kind=create.kind, name=create.name, namespace=namespace,
                                   code=exc.status, reason=exc.reason,
                                   message=exc.message or str(exc))
            raise CreateFailed(create, exc) from exc

    async def _held(self, owner: Any, create: Create, res: Resource, namespace: str | None,
                    exc: ApiError) -> dict[str, Any] | CreateConflict:
        try:
            holder = await self.client.get(res, create.name, namespace=namespace)
        except ApiError as again:
            if again.not_found:  # gone in between: the retry creates it again
                raise CreateFailed(create, exc) from exc
            raise
        if create.replace:
            replacement = {**create.body, "metadata": {
                **dict(create.body["metadata"]),
                "resourceVersion": (holder.get("metadata") or {}).get("resourceVersion")}}
            return await self.client.replace(res, replacement)
        if controlled_by(holder, owner.metadata.uid or ""):
            return holder
        return CreateConflict(kind=create.kind, name=create.name, holder=holder)

    async def _delete(self, delete: Delete) -> None:
        res = resource_for(delete.api_version, delete.kind)
        try:
            await self.client.delete(res, delete.name,
                                     namespace=delete.namespace if res.namespaced else None,
                                     uid=delete.uid or None, propagation_policy="Background")
        except ApiError as exc:
            if not (exc.not_found or exc.status == 409):
                raise


class WithFeedback(Protocol):
    """An Observation: every kind's carries the :class:`cre.core.common.plan.Feedback` block."""

    @property
    def feedback(self) -> Feedback: ...


K = TypeVar("K")
B = TypeVar("B", bound=WithFeedback)


def told(obs: B, feedback: Feedback) -> B:
    """``obs`` (a frozen attrs Observation) with ``feedback``."""
    return cast(B, attrs.evolve(cast(Any, obs), feedback=feedback))


def refused_again(obj: Any, obs: WithFeedback, plan: Plan[Any],
                  involved: Callable[[Any], dict[str, Any]]) -> None:
    """Raise :class:`cre.kube.runtime.TerminalError` when ``plan`` creates again what the API
    server refused for good (the core does not read refusals: retrying cannot help)."""
    refusals = [r for r in map(obs.feedback.refused, plan.creates) if r is not None]
    if refusals:
        raise TerminalError("; ".join(r.describe() for r in refusals), reason="CreateRefused",
                            involved=involved(obj))


def remember_applied(echo: OwnStatusEcho, obj: Any, plan: Plan[Any], outcome: Outcome) -> None:
    """After ``plan`` (about ``obj``, an attrs model) was applied in full: the status it wrote
    is the watch echo to drop, and until that echo arrives ``obj`` with that status and the
    resourceVersion the write returned stands in for the cache's older copy
    (:meth:`OwnStatusEcho.latest`). Not after a patch of the owner (its finalizers): the
    patch's precondition guards a plan made on the older copy, and removing the last finalizer
    may have deleted the owner."""
    rv = outcome.status_resource_version
    if plan.status is None:
        return
    copy = None if rv is None or plan.patches else (rv, lambda: attrs.evolve(
        obj, status=plan.status, metadata=attrs.evolve(obj.metadata, resource_version=rv)))
    echo.remember(key_of(obj), plan.status, replaced=plan.resource_version, copy=copy)


def answer(obj: K, obs: B, outcome: Outcome, *, decode: Callable[[dict[str, Any]], K],
           stale: Callable[[B], B] | None = None) -> Again[K, B] | Result | None:
    """The shell's answer to ``outcome`` (``None``: applied, the caller finishes the pass).

    A create conflict or refusal goes back to the core in ``feedback``; a conflict runs the
    core again on the live copy (``stale`` drops the answers that were tied to the old copy);
    a gone owner ends the reconcile."""
    fb = obs.feedback
    if outcome.kind == OutcomeKind.CREATE_CONFLICTS:
        fb = attrs.evolve(fb, create_conflicts=(*fb.create_conflicts, *outcome.conflicts))
        return Again(obj, told(obs, fb), "name taken")
    if outcome.kind == OutcomeKind.CREATE_REJECTED:
        fb = attrs.evolve(fb, create_rejections=(*fb.create_rejections, *outcome.rejections))
        return Again(obj, told(obs, fb), "create refused")
    if outcome.kind == OutcomeKind.CONFLICT:
        assert outcome.fresh is not None
        return Again(decode(outcome.fresh), obs if stale is None else stale(obs),
                     "write conflicted")
    if outcome.kind == OutcomeKind.GONE:
        return DONE
    return None
