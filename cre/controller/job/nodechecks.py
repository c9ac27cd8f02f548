"""The ``nodeHealthMonitor`` evaluated once per node copy, not on every pass of every Job.

A Job's monitor expression (``cre.core.job.health``) is read on each of its nodes on every
pass while the Job runs, and a group's Jobs are reconciled many times while their nodes do not
change. Evaluating the CEL program is the costly part (it converts the node to the library's
values first), so the Job controller keeps each result until the node changes: by expression
and node name, with the node copy it was computed on; a new copy (a new resourceVersion) is
evaluated again. The pure core receives the results in ``Observation.node_checks``.

The table holds one entry per (expression, node) pair seen. A deleted node's entries go with
it (:meth:`NodeChecks.forget`, from the Job controller's node watch), so a fleet whose nodes come
and go keeps only the live nodes' results; the table is also emptied when it passes
:data:`MAX_ENTRIES` (a stream of distinct expressions cannot grow memory without bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from cre.core.common.observed import NodeCheck, NodeView
from cre.core.job.health import check_node

#: Results kept before the table is emptied (an expression on 5,000 nodes takes 5,000).
MAX_ENTRIES: Final = 65536


class NodeChecks:
    """Results of monitor expressions on node copies, evaluated on first use."""

    def __init__(self) -> None:
        # node name -> expression -> (the node copy, the result on it)
        self._seen: dict[str, dict[str, tuple[NodeView, NodeCheck]]] = {}
        self._size = 0
        self.evaluations = 0

    def checks(self, expression: str, nodes: Sequence[NodeView]) -> tuple[NodeCheck, ...]:
        """``expression`` on each of ``nodes``: the kept result when the node is the copy it
        was computed on, else evaluated now (and kept)."""
        out: list[NodeCheck] = []
        for view in nodes:
            kept = self._seen.get(view.name)
            hit = None if kept is None else kept.get(expression)
            if hit is None or hit[0] != view:
                if hit is None and self._size >= MAX_ENTRIES:
                    self._seen.clear()
                    self._size = 0
                hit = (view, check_node(expression, view))
                per_node = self._seen.setdefault(view.name, {})
                self._size += expression not in per_node
                per_node[expression] = hit
                self.evaluations += 1
            out.append(hit[1])
        return tuple(out)

    def forget(self, node: str) -> None:
        """Drop every result kept for ``node`` (it was deleted)."""
        self._size -= len(self._seen.pop(node, {}))

    def __len__(self) -> int:
        return self._size
