"""``--dry-run=server``: send rendered objects to the API server with ``dryRun=All``.

The server validates (schema, CEL, admission) and defaults each object but stores nothing; each
object gets one line (``kind.group/name created (server dry run)``) or one problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cre.cli.cluster import Connection, api_failure, connect
from cre.kube.client import ApiError, Resource


def resource_of(doc: Mapping[str, Any]) -> Resource:
    """The REST resource of a manifest (plural: the kind in lower case plus ``s``)."""
    group, _, version = str(doc.get("apiVersion", "")).rpartition("/")
    kind = str(doc.get("kind", ""))
    return Resource(group, version, kind.lower() + "s", namespaced=True, kind=kind)


def _name(doc: Mapping[str, Any]) -> str:
    res = resource_of(doc)
    group = f".{res.group}" if res.group else ""
    return f"{res.kind.lower()}{group}/{doc.get('metadata', {}).get('name')}"


async def send(conn: Connection, docs: Sequence[Mapping[str, Any]]
               ) -> tuple[list[str], list[str]]:
    """(created lines, problems) of sending ``docs`` with ``dryRun=All``."""
    client = await connect(conn)
    lines: list[str] = []
    problems: list[str] = []
    try:
        for doc in docs:
            try:
                await client.create(resource_of(doc), dict(doc), query={"dryRun": "All"})
            except ApiError as exc:
                if exc.status in (0, 401, 403):
                    raise api_failure(exc, host=client.host, what=_name(doc)) from None
                problems.append(f"{_name(doc)}: {exc.status} {exc.reason}: {exc.message}")
                continue
            lines.append(f"{_name(doc)} created (server dry run)")
    finally:
        await client.close()
    return lines, problems
