"""What the pure Workflow and Certification cores read and ask for (their Plans).

The same contract as the Job tier's ``cre.core.plan`` (whose ``Create``, ``Delete`` and
``EventSpec`` are reused): the core performs no I/O; the shell applies a Plan in this order:

1. ``patches`` of the object itself (the finalizer; a plan that adds it carries nothing else),
2. ``deletes`` (UID preconditions) and ``creates`` (AlreadyExists from a foreign holder is
   reported back as ``create_conflicts`` on the next Observation; a create the API server
   refuses for good, 400/403/422, as a :class:`CreateError` in ``create_errors``),
3. ``upserts`` (create-or-replace; the node-result ConfigMaps), *before* the status write, so a
   status that records a finished group never lands without its node results,
4. the ``status`` write (``resource_version`` precondition; a conflict re-reads and re-runs the
   core, nothing computed from the stale copy is written),
5. ``events``, only after the status write succeeded.

``confirm_live`` asks the shell to re-read the children live (cache lag must not drive an
irreversible decision) and run the core again with ``read_live=True``; such a plan carries no
writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import attrs

from cre.core.plan import Create, Delete, EventSpec

S = TypeVar("S")


@attrs.frozen(kw_only=True)
class SelfPatch:
    """A JSON merge patch of the reconciled object itself, guarded by ``resource_version``."""

    body: Mapping[str, Any]
    resource_version: str


@attrs.frozen(kw_only=True)
class Upsert:
    """Create ``body``, or replace the object of that name if it exists (ConfigMaps)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    body: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class CreateError:
    """A create the API server refused for good (validation 400/422, an admission webhook's
    403): the object, the HTTP code, the Status reason and the API's own message."""

    kind: str
    name: str
    namespace: str | None
    code: int
    reason: str
    message: str

    def describe(self) -> str:
        """``the API server refused TrainingRuntime ns/name (422 Invalid): <message>``."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        said = f"{self.code} {self.reason}".strip()
        return f"the API server refused {self.kind} {where} ({said}): {self.message}"


@attrs.frozen(kw_only=True)
class ObjectView:
    """A child object the tier created (a dependency or a Workflow): enough to delete it."""

    api_version: str
    kind: str
    name: str
    namespace: str | None
    uid: str
    owned: bool = True
    terminating: bool = False


@attrs.frozen(kw_only=True)
class TierPlan(Generic[S]):
    """The complete outcome of one pure Workflow or Certification reconcile."""

    resource_version: str = ""
    patches: tuple[SelfPatch, ...] = ()
    creates: tuple[Create, ...] = ()
    deletes: tuple[Delete, ...] = ()
    upserts: tuple[Upsert, ...] = ()
    status: S | None = None
    events: tuple[EventSpec, ...] = ()
    confirm_live: bool = False
    requeue_after: float | None = None

    @property
    def writes(self) -> bool:
        """Whether the plan changes anything in the cluster."""
        return bool(self.patches or self.creates or self.deletes or self.upserts
                    or self.status is not None or self.events)

    @property
    def quiet(self) -> bool:
        """Nothing to write and nothing to confirm: the object is at rest for now."""
        return not (self.writes or self.confirm_live)
