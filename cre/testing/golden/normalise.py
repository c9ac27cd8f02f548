"""Make a captured object stable enough to compare byte for byte with a reviewed golden.

Server-assigned identity and clocks (uids, resourceVersions, timestamps, managedFields) change
on every run and say nothing about behaviour, so they are removed or nulled here, once, for
every suite. Serialisation is fixed too: sorted keys, 2-space indent, trailing newline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

DROPPED_METADATA = frozenset(
    {
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    }
)
# Keys whose value is a point in time wherever they appear; kept (as null) so presence shows.
TIME_KEYS = frozenset(
    {
        "lastTransitionTime",
        "lastUpdateTime",
        "lastProbeTime",
        "lastHeartbeatTime",
        "startTime",
        "completionTime",
        "startedAt",
        "finishedAt",
        "firstTimestamp",
        "lastTimestamp",
        "eventTime",
        "workloadStartTime",
        "schedulingBlockedSince",
        "time",
    }
)


def normalise(value: Any) -> Any:
    """A copy of ``value`` without uids, resourceVersions and timestamps (times become null)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "metadata" and isinstance(item, Mapping):
                out[key] = _metadata(item)
            elif key in TIME_KEYS and item is not None:
                out[key] = None
            else:
                out[key] = normalise(item)
        return out
    if isinstance(value, list | tuple):
        return [normalise(v) for v in value]
    return value


def _metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: normalise(v) for k, v in meta.items() if k not in DROPPED_METADATA}
    if "ownerReferences" in out:
        out["ownerReferences"] = [
            {k: v for k, v in ref.items() if k != "uid"} for ref in out["ownerReferences"]
        ]
    return out


def to_json(value: Any) -> str:
    """The golden file text: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
