"""Read the Events about one object, live (no cache holds Events).

A workload that never starts says why only in Events: Trainer reports a missing runtime as a
``TrainJobResourcesCreationFailed`` Warning on the TrainJob and sets no condition. The pure
core asks for them (``Plan.read_workload_events``) when it is about to fail such a Job, and the
controller reads them here: one list, scoped by field selector to the object's kind and name in
its namespace (and filtered by UID, so a same-named predecessor's Events are left out), oldest
first, at most ``limit`` of the most recent. A failed read raises ``ApiError``: the reconcile is
retried with backoff, as for any other live read.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from cre.api.meta import parse_time
from cre.core.common.observed import ObjectEvent
from cre.kube.client import EVENTS, KubeClient

LIMIT: Final = 20
_EARLIEST: Final = datetime.min.replace(tzinfo=UTC)


def _time(value: Any) -> datetime | None:
    try:
        return parse_time(value) if value else None
    except (TypeError, ValueError):
        return None


def _event(raw: dict[str, Any]) -> ObjectEvent:
    when: datetime | None = None
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        when = _time(raw.get(key))
        if when is not None:
            break
    if when is None:
        when = _time((raw.get("metadata") or {}).get("creationTimestamp"))
    count = raw.get("count")
    return ObjectEvent(type=str(raw.get("type") or ""), reason=str(raw.get("reason") or ""),
                       message=str(raw.get("message") or raw.get("note") or ""),
                       count=count if isinstance(count, int) and count > 0 else 1,
                       last_timestamp=when)


async def read_object_events(client: KubeClient, *, namespace: str, kind: str, name: str,
                             uid: str = "", limit: int = LIMIT) -> tuple[ObjectEvent, ...]:
    """The Events about ``kind`` ``namespace/name`` (of instance ``uid`` when given), oldest
    first, the most recent ``limit`` of them."""
    page = await client.list(EVENTS, namespace=namespace, query={
        "fieldSelector": f"involvedObject.kind={kind},involvedObject.name={name}"})
    items = [e for e in page.get("items") or []
             if not uid or not (e.get("involvedObject") or {}).get("uid")
             or (e.get("involvedObject") or {}).get("uid") == uid]
    events = [_event(e) for e in items]
    events.sort(key=lambda e: (e.last_timestamp is None, e.last_timestamp or _EARLIEST))
    return tuple(events[-limit:])
