"""The node-result ConfigMaps of a Workflow, encoded and decoded without I/O.

A large run lists thousands of nodes, too many for a status (etcd value limit), so results go
into ConfigMaps owned by the Workflow, named after the first 8 characters of its UID:

* ``succeeded-nodes-<uid8>``: ``binaryData["succeeded-nodes.csv.gz"]``, gzip of the sorted,
  de-duplicated node names joined by commas (the reference's format, read by NVSentinel);
* ``failed-nodes-<uid8>``: ``binaryData["failed-nodes.json.gz"]``, gzip of a JSON array of
  ``{name, reason, message, scope}`` keyed by (name, reason), sorted by name then reason;
* ``uncertified-nodes-<uid8>``: the same shape for nodes that were not certified (an
  infrastructure abort or a FailFast cancellation): kept apart so a consumer that remediates
  failed nodes never acts on a node the cluster, not the test, took away.

gzip runs with ``mtime=0`` so the same records always give the same bytes.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from cre.api import labels as L
from cre.core.workflow.deferral import NodeRecord

SUCCEEDED: Final = "succeeded-nodes"
FAILED: Final = "failed-nodes"
UNCERTIFIED: Final = "uncertified-nodes"
_KEYS: Final = {SUCCEEDED: "succeeded-nodes.csv.gz", FAILED: "failed-nodes.json.gz",
                UNCERTIFIED: "uncertified-nodes.json.gz"}


def configmap_name(kind: str, uid: str) -> str:
    """``<kind>-<first 8 characters of the Workflow UID>``."""
    return f"{kind}-{uid[:8]}"


def data_key(kind: str) -> str:
    """The ``binaryData`` key of a result ConfigMap kind."""
    return _KEYS[kind]


def _gz(raw: bytes) -> bytes:
    return gzip.compress(raw, mtime=0)


def encode_names(names: Iterable[str]) -> bytes:
    """gzip of the sorted, de-duplicated names joined by commas."""
    return _gz(",".join(sorted(set(names))).encode())


def decode_names(blob: bytes) -> tuple[str, ...]:
    """The names of a succeeded-nodes blob."""
    text = gzip.decompress(blob).decode()
    return tuple(n for n in text.split(",") if n)


def merge_records(*groups: Iterable[NodeRecord]) -> tuple[NodeRecord, ...]:
    """Records de-duplicated by (name, reason) (the first message wins), sorted."""
    out: dict[tuple[str, str], NodeRecord] = {}
    for records in groups:
        for r in records:
            out.setdefault((r.name, r.reason), r)
    return tuple(out[k] for k in sorted(out))


def encode_records(records: Iterable[NodeRecord]) -> bytes:
    """gzip of the JSON array of ``{name, reason, message, scope}``."""
    rows = [{"name": r.name, "reason": r.reason, "message": r.message, "scope": r.scope}
            for r in merge_records(records)]
    return _gz(json.dumps(rows, separators=(",", ":"), sort_keys=True).encode())


def decode_records(blob: bytes) -> tuple[NodeRecord, ...]:
    """The records of a failed- or uncertified-nodes blob (ValueError when malformed)."""
    rows = json.loads(gzip.decompress(blob))
    if not isinstance(rows, list):
        raise ValueError("node results must be a JSON array")
    return merge_records(
        NodeRecord(name=str(r["name"]), reason=str(r.get("reason", "")),
                   message=str(r.get("message", "")), scope=str(r.get("scope", "")))
        for r in rows)


def configmap(*, kind: str, uid: str, namespace: str, workflow: str, blob: bytes
              ) -> dict[str, Any]:
    """The ConfigMap manifest (owned by the Workflow) holding ``blob``."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap_name(kind, uid),
            "namespace": namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, L.WORKFLOW: workflow},
            "ownerReferences": [{"apiVersion": L.API_VERSION, "kind": "Workflow",
                                 "name": workflow, "uid": uid, "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "binaryData": {data_key(kind): base64.b64encode(blob).decode()},
    }


def read_records(binary_data: Mapping[str, bytes] | None, kind: str) -> tuple[NodeRecord, ...]:
    """The records held by an observed ConfigMap's binaryData (empty when absent/unreadable)."""
    blob = (binary_data or {}).get(data_key(kind))
    if not blob:
        return ()
    try:
        return decode_records(blob)
    except (ValueError, KeyError, OSError, EOFError):
        return ()
