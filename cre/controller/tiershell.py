"""The shell shared by the Workflow and Certification controllers: applying a ``TierPlan``.

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

A create the API server refuses for good (schema validation, an admission webhook's denial) is
raised as :class:`CreateRefused` after a Warning event: the key backs off and the message
names the object; transient API errors propagate the same way.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import anyio
import attrs

from cre.api.converter import to_dict
from cre.core.plan import Create
from cre.core.tierplan import TierPlan
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


class CreateRefused(Exception):
    """The API server refused a create for good; the message names the object and why."""


class TierOutcomeKind(enum.StrEnum):
    """How applying a TierPlan ended."""

    APPLIED = "Applied"
    CONFLICT = "Conflict"  # the object changed since it was read: re-read, run the core again
    CREATE_CONFLICTS = "CreateConflicts"  # names held by foreign objects: ``conflicts``
    GONE = "Gone"  # the object no longer exists


@attrs.frozen(kw_only=True)
class TierOutcome:
    """The result of one ``apply``."""

    kind: TierOutcomeKind
    conflicts: tuple[str, ...] = ()
    created: tuple[dict[str, Any], ...] = ()


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
        for batch in kind_batches(plan.creates):
            made = await self._create_batch(obj, batch)
            created += [m for m in made if m is not None]
            conflicts += [f"{c.kind}/{c.name}" for c, m in zip(batch, made, strict=True)
                          if m is None]
            if conflicts:
                break
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
                            ) -> list[dict[str, Any] | None]:
        """Create ``batch`` (one kind) with up to :data:`CREATE_CONCURRENCY` requests in flight;
        the answers in the batch's order. An error other than a foreign holder propagates once
        the requests in flight have ended."""
        results: list[dict[str, Any] | None] = [None] * len(batch)
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

    async def _create(self, owner: Any, create: Create) -> dict[str, Any] | None:
        """The created (or already ours) object; ``None`` when a foreign object holds the name."""
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
                message = (f"the API server refused {create.kind} {create.namespace}/"
                           f"{create.name}: {exc.message or exc}")
                await self.recorder.emit(involved=self.involved(owner), type_="Warning",
                                         reason="CreateRefused", message=message)
                raise CreateRefused(message) from exc
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
