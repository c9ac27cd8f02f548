"""The type of a watch event, as the Kubernetes API sends it (``metav1.WatchEvent.type``).

One enum for every layer that speaks the watch protocol: the informers in ``cre.kube`` hand
``ADDED`` / ``MODIFIED`` / ``DELETED`` to their handlers, and the API emulator in ``cre.testing``
also sends ``BOOKMARK`` and ``ERROR``. Not to be confused with a core/v1 Event's ``type``
(``Normal`` / ``Warning``), which is :class:`cre.core.common.plan.EventSeverity`.
"""

from __future__ import annotations

import enum


class WatchEventType(enum.StrEnum):
    """What a watch event says happened (the wire value)."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"
