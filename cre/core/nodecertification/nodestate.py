"""The node labels and taint a NodeCertification asks for, as a JSON patch of the Node.

Opt-in, per Certification (``spec.nodeState``):

* ``labels``: ``cre.dev/certification`` = ``passed`` | ``failed`` | ``expired`` (from the
  record's state) and ``cre.dev/certified-until`` = the record's ``validUntil`` in a label-safe
  form (``2026-12-13T07.30.00Z``; removed when the record has none). An Uncertified record
  changes no label.
* ``taint``: ``cre.dev/certification-failed:NoSchedule`` on a Failed node.

While a node's group runs, ``labels`` also puts ``cre.dev/certification=testing`` on it (so a
scheduler can be told to keep off); once the group is no longer running the label goes back to
what the record says, or away when the record is Uncertified or absent (:func:`testing_patch`).

The taint is removed from a node that passed again (Passed or Expired) whether or not the
judging Certification opted in: it is CRE's own, and a node that passed must not stay fenced
off.

The patch touches nothing but those two labels and that one taint: it is a JSON patch whose
first operation tests the Node's ``resourceVersion`` (the copy the decision was made from; a
newer Node fails the patch, and the next pass decides again), and whose other operations each
name one of CRE's labels or the index of CRE's taint in that very copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from cre.api.nodecertification import NodeCertificationStatus, NodeState
from cre.core.common.observed import NodeView

STATE_LABEL: Final = "cre.dev/certification"
UNTIL_LABEL: Final = "cre.dev/certified-until"
TAINT_KEY: Final = "cre.dev/certification-failed"
TAINT_EFFECT: Final = "NoSchedule"

_LABEL_OF: Final = {NodeState.PASSED: "passed", NodeState.FAILED: "failed",
                    NodeState.EXPIRED: "expired"}

JsonPatch = tuple[Mapping[str, Any], ...]


def until_label(value: datetime) -> str:
    """``validUntil`` as a label value (no colons): ``YYYY-MM-DDTHH.MM.SSZ`` in UTC."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H.%M.%SZ")


def _pointer(key: str) -> str:
    return "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")


def desired_labels(status: NodeCertificationStatus) -> dict[str, str | None] | None:
    """CRE's labels for a node with ``status`` (``None`` value: absent); ``None``: leave them."""
    value = _LABEL_OF.get(status.state)
    if value is None:
        return None
    return {STATE_LABEL: value,
            UNTIL_LABEL: until_label(status.valid_until) if status.valid_until else None}


TESTING: Final = "testing"


def testing_patch(node: NodeView, status: NodeCertificationStatus | None, *,
                  running: bool) -> JsonPatch:
    """The label patch of a node of an unfinished Certification: ``testing`` while its group
    runs, else (when it says ``testing``) back to the record's label, or removed."""
    have = node.label(STATE_LABEL)
    if running:
        want: str | None = TESTING
    elif have != TESTING:
        return ()
    else:
        labels = desired_labels(status) if status is not None else None
        want = labels[STATE_LABEL] if labels is not None else None
    if want == have:
        return ()
    op: Mapping[str, Any] = {"op": "remove", "path": _pointer(STATE_LABEL)} if want is None \
        else {"op": "add", "path": _pointer(STATE_LABEL), "value": want}
    return ({"op": "test", "path": "/metadata/resourceVersion",
             "value": node.resource_version}, op)


def node_patch(node: NodeView, status: NodeCertificationStatus, *, labels: bool,
               taint: bool) -> JsonPatch:
    """The JSON patch that gives ``node`` CRE's labels and taint for ``status`` (``()``: none
    needed). ``labels`` / ``taint``: what the judging Certification opted in to."""
    ops: list[Mapping[str, Any]] = []
    want = desired_labels(status) if labels else None
    if labels and want is None and node.label(STATE_LABEL) == TESTING:
        want = {STATE_LABEL: None}  # the group ended without a judgement: testing goes
    if want is not None:
        have = dict(node.labels)
        if not have:
            ops.append({"op": "add", "path": "/metadata/labels", "value": {}})
        for key, value in sorted(want.items()):
            if value is None and key in have:
                ops.append({"op": "remove", "path": _pointer(key)})
            elif value is not None and have.get(key) != value:
                ops.append({"op": "add", "path": _pointer(key), "value": value})
    ours = [i for i, t in enumerate(node.taints) if t.key == TAINT_KEY]
    failed = status.state == NodeState.FAILED
    if failed and taint and not ours:
        entry = {"key": TAINT_KEY, "value": "true", "effect": TAINT_EFFECT}
        ops.append({"op": "add", "path": "/spec/taints/-", "value": entry} if node.taints
                   else {"op": "add", "path": "/spec/taints", "value": [entry]})
    elif status.state in (NodeState.PASSED, NodeState.EXPIRED) and ours:
        if len(ours) == len(node.taints):  # no list left behind, as the API server omits it
            ops.append({"op": "remove", "path": "/spec/taints"})
        else:
            ops.extend({"op": "remove", "path": f"/spec/taints/{i}"} for i in reversed(ours))
    if not ops:
        return ()
    return ({"op": "test", "path": "/metadata/resourceVersion",
             "value": node.resource_version}, *ops)
