"""The fleet demo's node table: rows from nodes and NodeCertifications, and when it is settled."""

from __future__ import annotations

from typing import Any

from cre.testing.demo_fleet import FAULTY_NODE, NODES, TAINT, node_rows, settled

RUN = "fleet-29942556"


def _node(name: str, *, label: str | None = None, tainted: bool = False) -> dict[str, Any]:
    taints = [{"key": TAINT, "value": "true", "effect": "NoSchedule"}] if tainted else []
    return {"metadata": {"name": name, "labels": {"cre.dev/certification": label} if label
                         else {}}, "spec": {"taints": taints}}


def _record(node: str, state: str, *, run: str = RUN) -> dict[str, Any]:
    return {"spec": {"nodeName": node}, "status": {
        "state": state, "categoriesPassed": "1/1" if state == "Passed" else "0/1",
        "validUntil": "2026-12-13T10:37:13Z" if state == "Passed" else None,
        "lastCertification": {"namespace": "default", "name": run}}}


def _fleet(*, run: str = RUN, failed: str = FAULTY_NODE) -> tuple[list[Any], list[Any]]:
    names = [f"aws-h100-node-{i}" for i in range(NODES)]
    nodes = [_node(n, label="failed" if n == failed else "passed", tainted=n == failed)
             for n in reversed(names)]
    return nodes, [_record(n, "Failed" if n == failed else "Passed", run=run) for n in names]


def test_rows_join_each_node_with_its_record_by_name() -> None:
    """A row per node, sorted by name, with its record's state, count, expiry and run, and the
    node's own label and taint; a node without a record shows dashes."""
    nodes, records = _fleet()
    rows = node_rows([*nodes, _node("aws-h100-node-8")], records)
    assert [r.node for r in rows][:2] == ["aws-h100-node-0", "aws-h100-node-1"]
    bad = next(r for r in rows if r.node == FAULTY_NODE)
    assert (bad.state, bad.passed, bad.valid_until, bad.judged_by, bad.label, bad.tainted) == (
        "Failed", "0/1", "-", RUN, "failed", True)
    assert (rows[0].state, rows[0].valid_until, rows[0].tainted) == (
        "Passed", "2026-12-13T10:37:13Z", False)
    assert (rows[-1].state, rows[-1].label, rows[-1].judged_by) == ("-", "-", "-")


def test_settled_needs_every_node_judged_by_the_run_as_expected() -> None:
    """The table is settled when every node was judged by the run, the failed nodes Failed,
    labelled failed and tainted and the others Passed and untainted; not before."""
    rows = node_rows(*_fleet())
    assert settled(rows, run=RUN, failed={FAULTY_NODE})
    assert not settled(rows, run=RUN, failed=set())
    assert not settled(rows, run="fleet-29942561", failed={FAULTY_NODE})
    assert not settled(rows[1:], run=RUN, failed={FAULTY_NODE})
    testing = node_rows([_node(f"aws-h100-node-{i}", label="testing") for i in range(NODES)],
                        _fleet()[1])
    assert not settled(testing, run=RUN, failed={FAULTY_NODE})
