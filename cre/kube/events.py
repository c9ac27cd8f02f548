"""core/v1 Events about CRE objects, emitted after the write they describe succeeded.

Controllers emit at most one event per transition (the pure core decides which), so this
recorder does no aggregation or spam filtering of its own: it writes one Event per call, with
the note bounded to the events/v1 limit, and never lets a failed emit fail a reconcile (an
event is a best-effort notification; the status is the record).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cre.api.meta import format_time
from cre.core.trio import bound_note
from cre.kube.client import EVENTS, ApiError, KubeClient

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class EventRecorder:
    """Writes Events for one reporting component (``cre.dev/job-controller``, ...)."""

    def __init__(self, client: KubeClient, *, component: str, instance: str = "",
                 clock: Callable[[], datetime] = _utcnow) -> None:
        self.client = client
        self.component = component
        self.instance = instance or component
        self._clock = clock

    def manifest(self, *, involved: dict[str, Any], type_: str, reason: str, message: str
                 ) -> dict[str, Any]:
        """The Event object for ``involved`` (apiVersion, kind, name, namespace, uid)."""
        now = format_time(self._clock())
        name = f"{involved['name']}.{uuid.uuid4().hex[:16]}"
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": involved["namespace"]},
            "involvedObject": involved,
            "type": type_,
            "reason": reason,
            "message": bound_note(message),
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    async def emit(self, *, involved: dict[str, Any], type_: str, reason: str, message: str
                   ) -> bool:
        """Write one Event; ``False`` (logged, not raised) when the server refused it."""
        body = self.manifest(involved=involved, type_=type_, reason=reason, message=message)
        try:
            await self.client.create(EVENTS, body, namespace=involved["namespace"])
        except ApiError as exc:
            log.warning("event %s for %s/%s not recorded: %s", reason, involved.get("namespace"),
                        involved.get("name"), exc)
            return False
        return True
