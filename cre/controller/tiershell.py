"""The tier controllers' shell (Workflow, Certification, WorkloadRun): applying a ``TierPlan``.

The Job tier's :class:`cre.kube.executor.PlanExecutor` applies a Job ``Plan``; the tiers above
write more kinds (Jobs, dependency objects of any kind, ConfigMaps, Workflows) and in another
order, the one :mod:`cre.core.tierplan` documents:

1. ``patches`` of the object itself (its finalizer), guarded by ``resourceVersion``;
2. ``deletes`` with UID preconditions (gone already, or replaced: fine);
3. ``creates`` (only once the object was read live with the same uid and resourceVersion,
   unless a patch above proved it: a cache that kept a deleted object creates nothing),
   kind by kind in the order kinds first appear, up to 16 of a kind in flight
   (a dependency's kind precedes the Job's); AlreadyExists is answered by reading the holder:
   one this object controls (a create that worked on a pass whose status write then
   conflicted) counts as created, any other is a *foreign* holder and goes back to the core
   as ``Kind/name`` in ``create_conflicts``, nothing further is written;
4. ``upserts`` (create, or replace what holds the name), *before* the status, so a status never
   records a finished group without its node results;
5. the ``status`` through ``/status``, guarded by ``resourceVersion`` (409: the caller re-reads
   and runs the core again on the fresh copy);
6. ``events``, only once the status write succeeded.

A create the API server refuses for good (schema validation 400/422, an admission webhook's
403 denial) stops the plan there and goes back to the core as a :class:`CreateError` in
``create_errors`` (the Workflow fails ``DependencyCreationError`` with the API's message). A
tier whose core does not read refusals raises :class:`cre.kube.runtime.TerminalError`: a
Warning ``CreateRefused`` event, a metric, a log line, and no requeue (retrying cannot help).
Transient API errors propagate and back off.

:class:`TierController` is the rest of the shell the tier controllers (Workflow,
Certification, WorkloadRun) share on top of :class:`cre.kube.runtime.CoreReconciler`: the step
around the core: a ``confirm_live`` plan is answered by the controller's live read, any other is
applied; a create whose name a foreign object holds goes back to the core, a status write that
conflicts re-reads the object live, a gone object ends the reconcile, an applied status is
remembered so its own watch echo does not enqueue the key again.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Protocol, TypeVar

import anyio
import attrs
from prometheus_client import CollectorRegistry

from cre.api.converter import to_dict
from cre.api.meta import ObjectMeta
from cre.core.plan import Create
from cre.core.tierplan import CreateError, TierPlan
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
from cre.kube.executor import is_rejection
from cre.kube.factory import InformerFactory
from cre.kube.informer import Informer
from cre.kube.runtime import (
    DONE,
    Again,
    Builder,
    CoreReconciler,
    Result,
    TerminalError,
    converge,
    key_of,
)

# Kinds whose plural is not the lower-cased kind plus "s".
_KNOWN: Final = {r.kind: r for r in (CONFIGMAPS, SECRETS, SERVICES, TRAINING_RUNTIMES)}
_CLUSTER_SCOPED_PREFIX: Final = "Cluster"


def resource_for(api_version: str, kind: str) -> Resource:
    """The API resource of ``kind`` in ``api_version`` (dependencies may be of any kind: a
    TrainingRuntime, a ComputeDomain, a ResourceClaimTemplate...)."""
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


class TierOutcomeKind(enum.StrEnum):
    """How applying a TierPlan ended."""

    APPLIED = "Applied"
    CONFLICT = "Conflict"  # the object changed since it was read: re-read, run the core again
    CREATE_CONFLICTS = "CreateConflicts"  # names held by foreign objects: ``conflicts``
    CREATE_REFUSED = "CreateRefused"  # refused for good (400/403/422): ``refused``
    GONE = "Gone"  # the object no longer exists


@attrs.frozen(kw_only=True)
class TierOutcome:
    """The result of one ``apply``."""

    kind: TierOutcomeKind
    conflicts: tuple[str, ...] = ()
    created: tuple[dict[str, Any], ...] = ()
    refused: tuple[CreateError, ...] = ()


#: Creates of one kind in flight at once: a Workflow launching 125 groups writes 250 objects,
#: which one at a time take the API round-trip 250 times over (docs/design/013, "Scale").
CREATE_CONCURRENCY: Final = 16


def kind_batches(creates: Sequence[Create]) -> list[list[Create]]:
    """``creates`` split by kind, kinds in the order they first appear (a group's dependency
    comes before its Job, so every dependency batch precedes the Job batch), each batch in
    plan order."""
    batches: dict[tuple[str, str], list[Create]] = {}
    for create in creates:
        batches.setdefault((create.api_version, create.kind), []).append(create)
    return list(batches.values())


class TierExecutor:
    """Applies the TierPlans of one owner kind (``owner``) through ``client``."""

    def __init__(self, client: KubeClient, recorder: EventRecorder, *, owner: Resource,
                 involved: Callable[[Any], dict[str, Any]]) -> None:
        self.client = client
        self.recorder = recorder
        self.owner = owner
        self.involved = involved

    async def apply(self, obj: Any, plan: TierPlan[Any]) -> TierOutcome:
        """Apply ``plan``, computed from ``obj`` (an attrs model with metadata and status)."""
        meta = obj.metadata
        rv = plan.resource_version
        for patch in plan.patches:
            body = {**patch.body, "metadata": {**dict(patch.body.get("metadata") or {}),
                                               "resourceVersion": patch.resource_version}}
            try:
                answer = await self.client.patch(self.owner, meta.name, body,
                                                 namespace=meta.namespace)
            except ApiError as exc:
                if exc.conflict:
                    return TierOutcome(kind=TierOutcomeKind.CONFLICT)
                if exc.not_found:
                    return TierOutcome(kind=TierOutcomeKind.GONE)
                raise
            rv = str((answer.get("metadata") or {}).get("resourceVersion") or rv)
        for delete in plan.deletes:
            try:
                await self.client.delete(resource_for(delete.api_version, delete.kind),
                                         delete.name, namespace=delete.namespace or None,
                                         uid=delete.uid or None,
                                         propagation_policy="Background")
            except ApiError as exc:
                if not (exc.not_found or exc.status == 409):
                    raise
        if plan.creates and not plan.patches:
            # Never create from the cache alone (a patch above proved the object live): a
            # cache that kept a deleted object would create its children again and again,
            # each collected at once with its owner's uid gone.
            stale = await self._stale(obj)
            if stale is not None:
                return TierOutcome(kind=stale)
        created: list[dict[str, Any]] = []
        conflicts: list[str] = []
        refused: list[CreateError] = []
        for batch in kind_batches(plan.creates):
            made = await self._create_batch(obj, batch)
            created += [m for m in made if isinstance(m, dict)]
            conflicts += [f"{c.kind}/{c.name}" for c, m in zip(batch, made, strict=True)
                          if m is None]
            refused += [m for m in made if isinstance(m, CreateError)]
            if conflicts or refused:
                break
        if refused:
            return TierOutcome(kind=TierOutcomeKind.CREATE_REFUSED, refused=tuple(refused),
                               created=tuple(created))
        if conflicts:
            return TierOutcome(kind=TierOutcomeKind.CREATE_CONFLICTS,
                               conflicts=tuple(conflicts), created=tuple(created))
        for upsert in plan.upserts:
            await self._upsert(upsert.api_version, upsert.kind, upsert.namespace, upsert.name,
                               dict(upsert.body))
        if plan.status is not None:
            body = to_dict(attrs.evolve(obj, status=plan.status))
            body["metadata"]["resourceVersion"] = rv
            try:
                await self.client.replace(self.owner, body, subresource="status")
            except ApiError as exc:
                if exc.conflict:
                    return TierOutcome(kind=TierOutcomeKind.CONFLICT, created=tuple(created))
                if exc.not_found:
                    return TierOutcome(kind=TierOutcomeKind.GONE, created=tuple(created))
                raise
        for event in plan.events:
            await self.recorder.emit(involved=self.involved(obj), type_=event.type,
                                     reason=event.reason, message=event.message)
        return TierOutcome(kind=TierOutcomeKind.APPLIED, created=tuple(created))

    async def _stale(self, obj: Any) -> TierOutcomeKind | None:
        """``obj`` as served now: ``GONE`` (deleted, or replaced by another uid), ``CONFLICT``
        (the copy the plan came from is behind), ``None`` (current)."""
        meta = obj.metadata
        try:
            live = await self.client.get(self.owner, meta.name, namespace=meta.namespace)
        except ApiError as exc:
            if exc.not_found:
                return TierOutcomeKind.GONE
            raise
        live_meta = live.get("metadata") or {}
        if live_meta.get("uid") != meta.uid:
            return TierOutcomeKind.GONE
        if str(live_meta.get("resourceVersion") or "") != (meta.resource_version or ""):
            return TierOutcomeKind.CONFLICT
        return None

    async def _create_batch(self, owner: Any, batch: Sequence[Create]
                            ) -> list[dict[str, Any] | CreateError | None]:
        """Create ``batch`` (one kind) with up to :data:`CREATE_CONCURRENCY` requests in flight;
        the answers in the batch's order. An error other than a foreign holder or a refusal
        propagates once the requests in flight have ended."""
        results: list[dict[str, Any] | CreateError | None] = [None] * len(batch)
        limiter = anyio.Semaphore(CREATE_CONCURRENCY)

        async def one(i: int, create: Create) -> None:
            async with limiter:
                results[i] = await self._create(owner, create)

        if len(batch) == 1:
            results[0] = await self._create(owner, batch[0])
            return results
        try:
            async with anyio.create_task_group() as tg:
                for i, create in enumerate(batch):
                    tg.start_soon(one, i, create)
        except BaseExceptionGroup as group:  # re-raise the first, as a sequential loop would
            raise group.exceptions[0] from None
        return results

    async def _create(self, owner: Any, create: Create) -> dict[str, Any] | CreateError | None:
        """The created (or already ours) object; ``None`` when a foreign object holds the name;
        a :class:`CreateError` when the API server refused it for good."""
        res = resource_for(create.api_version, create.kind)
        namespace = create.namespace if res.namespaced else None
        try:
            return await self.client.create(res, dict(create.body), namespace=namespace)
        except ApiError as exc:
            if exc.already_exists:
                try:
                    holder = await self.client.get(res, create.name, namespace=namespace)
                except ApiError as again:
                    if again.not_found:  # gone in between: the retry creates it again
                        raise RuntimeError(f"{create.kind} {create.namespace}/{create.name} "
                                           "existed and vanished during its create; "
                                           "retrying") from exc
                    raise
                return holder if controlled_by(holder, owner.metadata.uid or "") else None
            if is_rejection(exc):
                return CreateError(kind=create.kind, name=create.name, namespace=namespace,
                                   code=exc.status, reason=exc.reason,
                                   message=exc.message or str(exc))
            raise

    async def _upsert(self, api_version: str, kind: str, namespace: str, name: str,
                      body: dict[str, Any]) -> None:
        res = resource_for(api_version, kind)
        try:
            await self.client.create(res, body, namespace=namespace)
            return
        except ApiError as exc:
            if not exc.already_exists:
                raise
        current = await self.client.get(res, name, namespace=namespace)
        replacement = {**body, "metadata": {**body["metadata"], "resourceVersion":
                                            current["metadata"].get("resourceVersion")}}
        await self.client.replace(res, replacement)


# --- the controller shell ---------------------------------------------------------------------

class TierObject(Protocol):
    """What the shell reads of a tier object (a Workflow, Certification, WorkloadRun)."""

    @property
    def metadata(self) -> ObjectMeta: ...


K = TypeVar("K", bound=TierObject)
B = TypeVar("B")

#: Passes of the core one reconcile may take (live reads, name conflicts, a fresh copy).
MAX_PASSES: Final = 8


class TierController(CoreReconciler[K, B, Any]):
    """The shell of one tier kind ``K`` whose core reads observations ``B`` and returns a
    :class:`TierPlan`. A subclass asks for its caches after ``__init__`` here, wires them
    starting with :meth:`managed_for`, and says how to observe and plan."""

    def __init__(self, client: KubeClient, *, name: str, component: str, owner: Resource,
                 decode: Callable[[dict[str, Any]], K], involved: Callable[[Any], dict[str, Any]],
                 workers: int, clock: Callable[[], datetime],
                 informers: InformerFactory | None, namespaces: Sequence[str] | None,
                 registry: CollectorRegistry | None) -> None:
        """``name`` names the controller (metrics, logs, errors)."""
        super().__init__(client, name=name, component=component, workers=workers, clock=clock,
                         informers=informers, namespaces=namespaces, registry=registry)
        self._name = name
        self._decode = decode
        self.executor = TierExecutor(client, self.recorder, owner=owner, involved=involved)
        self._involved = involved
        self._owners: Informer[K] | None = None

    def managed_for(self, owners: Informer[K]) -> Builder[K]:
        """Reconcile the objects of ``owners`` (their own status writes echo quietly); the
        builder to wire the other caches with."""
        self._owners = owners
        return self.managed().for_(owners)

    # --- what a tier says ------------------------------------------------------------------

    @abc.abstractmethod
    def plan(self, obj: K, obs: B, now: datetime) -> TierPlan[Any]:
        """The core's plan for ``obj`` seen through ``obs`` at ``now``."""

    @abc.abstractmethod
    async def first_observation(self, obj: K) -> B:
        """The observation a reconcile starts from (the caches)."""

    @abc.abstractmethod
    async def observe_live(self, obj: K, obs: B) -> B:
        """``obs`` with what the core asked to confirm read live (``read_live`` set)."""

    @abc.abstractmethod
    def with_create_conflicts(self, obs: B, conflicts: tuple[str, ...]) -> B:
        """``obs`` telling the core that foreign objects hold ``conflicts`` (``Kind/name``)."""

    def with_create_errors(self, obs: B, errors: tuple[CreateError, ...]) -> B | None:
        """``obs`` telling the core that creates were refused for good; ``None`` (the default)
        for a core that does not read refusals: the reconcile then ends in a
        :class:`TerminalError` (recorded, not requeued)."""
        return None

    def applied(self, obj: K, plan: TierPlan[Any]) -> None:
        """Called once ``plan`` was applied in full (for a subclass's log)."""

    # --- the Reconciler --------------------------------------------------------------------

    async def reconcile(self, key: str) -> Result:
        """One pass over the object ``namespace/name``."""
        assert self._owners is not None, "managed_for was not called"
        obj = self._owners.store.get(key)
        if obj is None:
            return DONE
        return await converge(self._step, obj, await self.first_observation(obj),
                              what=f"{self._name} {key}", max_passes=MAX_PASSES)

    async def fresh(self, obj: K) -> K | None:
        """``obj`` as served now (``None``: gone)."""
        meta = obj.metadata
        try:
            return self._decode(await self.client.get(self.executor.owner, meta.name or "",
                                                      namespace=meta.namespace))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _step(self, obj: K, obs: B) -> Again[K, B] | Result:
        plan = self.plan(obj, obs, self._clock())
        if plan.confirm_live:
            return Again(obj, await self.observe_live(obj, obs), "live read")
        outcome = await self.executor.apply(obj, plan)
        if outcome.kind == TierOutcomeKind.CREATE_CONFLICTS:
            return Again(obj, self.with_create_conflicts(obs, outcome.conflicts), "name taken")
        if outcome.kind == TierOutcomeKind.CREATE_REFUSED:
            told = self.with_create_errors(obs, outcome.refused)
            if told is None or told == obs:  # the core cannot say it (or did not): stop here
                raise TerminalError("; ".join(e.describe() for e in outcome.refused),
                                    reason="CreateRefused", involved=self._involved(obj))
            return Again(obj, told, "create refused")
        if outcome.kind == TierOutcomeKind.CONFLICT:
            fresh = await self.fresh(obj)
            return DONE if fresh is None else Again(fresh, obs, "write conflicted")
        if outcome.kind == TierOutcomeKind.GONE:
            return DONE
        if plan.status is not None:
            self.status_echo.remember(key_of(obj), plan.status)
        self.applied(obj, plan)
        return Result(requeue_after=plan.requeue_after)
