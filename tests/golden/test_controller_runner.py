"""The ``type: controller`` runner: a case is checked before it runs, a plain asyncio program
runs against the emulator, waits are bounded by simulated time and fail with the last state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from cre.testing.golden.controller import ControllerCaseError, WaitTimeout, read_case, run
from cre.testing.golden.controller.steps import merge_patch

CASE = """
type: controller
controller: {factory: "tests.golden.ctlprogram:main"}
namespaces: [default]
objects:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a}, data: {k: v}}
steps:
  - waitFor: {apiVersion: v1, kind: ConfigMap, name: a, jsonpath: $.metadata.labels.seen,
              equals: "yes"}
  - apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
  - waitFor: {apiVersion: v1, kind: ConfigMap, name: b, jsonpath: $.metadata.labels.seen,
              exists: true}
  - delete: {apiVersion: v1, kind: ConfigMap, name: a}
  - waitFor: {apiVersion: v1, kind: ConfigMap, name: a, absent: true}
output:
  kinds: [{apiVersion: v1, kind: ConfigMap, namespace: default}]
  events: false
"""


def _data(text: str = CASE, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe", pure=True).load(text)
    data.update(changes)
    return data


def test_a_plain_asyncio_program_runs_step_by_step(tmp_path: Path) -> None:
    """The factory gets the client and namespace it asks for; the output lists the kind."""
    out = run(tmp_path, _data())
    assert out == {"objects": {"ConfigMap": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": out["objects"]["ConfigMap"][0][
            "metadata"]}]}}
    meta = out["objects"]["ConfigMap"][0]["metadata"]
    assert (meta["name"], meta["labels"]) == ("b", {"seen": "yes"})


def test_a_wait_that_never_holds_fails_with_the_last_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded by simulated time (10 s at scale 100 = 0.1 s; the wall floor a loaded machine
    gets is switched off here), naming the object and its state."""
    monkeypatch.setattr("cre.testing.golden.controller.steps.WAIT_WALL_FLOOR", 0.0)
    data = _data(timeScale=100, steps=[{"waitFor": {
        "apiVersion": "v1", "kind": "ConfigMap", "name": "a", "jsonpath": "$.data.k",
        "equals": "never", "timeout": 10}}])
    with pytest.raises(WaitTimeout, match=r"steps\[0\]\.waitFor: ConfigMap default/a: waited 10 "
                                          r"simulated seconds for \$\.data\.k == \"never\"; "
                                          r"its last state:\n\{") as info:
        run(tmp_path, data)
    assert '"k": "v"' in str(info.value)


@pytest.mark.parametrize(("changes", "message"), [
    ({"controller": {"factory": "nomodule"}}, r"controller\.factory: expected 'module:callable'"),
    ({"controller": {"factory": "a:b", "kopf": "c"}}, "give exactly one of 'factory'"),
    ({"steps": [{"jump": 1}]}, r"steps\[0\]: unknown step 'jump'"),
    ({"steps": [{"advance": -1}]}, r"steps\[0\]\.advance: expected a positive number"),
    ({"steps": [{"waitFor": {"apiVersion": "v1", "kind": "Pod", "name": "p"}}]},
     r"steps\[0\]\.waitFor: give 'jsonpath'"),
    ({"steps": [{"waitFor": {"apiVersion": "v1", "kind": "Pod", "name": "p",
                             "jsonpath": "$.a["}}]}, r"waitFor\.jsonpath: JSONPath"),
    ({"crds": ["nowhere"]}, r"crds\[0\]: 'nowhere' is neither a file or folder"),
    ({"objects": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}]},
     r"objects\[0\]\.metadata: needs a name"),
    ({"output": {"kinds": []}}, r"output\.kinds: expected a non-empty list"),
    ({"clutser": {}}, r"unknown keys \['clutser'\]"),
])
def test_a_malformed_case_names_the_field(tmp_path: Path, changes: dict[str, Any],
                                           message: str) -> None:
    """Every problem is reported with the file and field path before anything starts."""
    with pytest.raises(ControllerCaseError, match=message):
        read_case(tmp_path, _data(**changes))


def test_a_factory_argument_the_runner_cannot_give(tmp_path: Path) -> None:
    """A required factory parameter that is neither offered nor in args is named."""
    data = _data(controller={"factory": "tests.golden.ctlprogram:needs_secret"})
    with pytest.raises(ControllerCaseError, match="the factory needs 'secret'"):
        run(tmp_path, data)


def test_bundled_crd_sets_by_name(tmp_path: Path) -> None:
    """``trainer`` and ``jobset`` name the vendored upstream CRDs."""
    case = read_case(tmp_path, _data(crds=["trainer", "jobset"]))
    assert [p.name for p in case.crds] == ["trainer-latest", "jobset-latest"]


def test_merge_patch() -> None:
    """RFC 7386: null removes, maps merge, anything else replaces."""
    assert merge_patch({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": None, "e": 3},
                                                          "d": [2]}) == {
        "a": {"c": 2, "e": 3}, "d": [2]}


KUBELET_CASE = """
type: controller
controller: {factory: "tests.golden.ctlprogram:idle"}
timeScale: 50
namespaces: [default]
objects:
  - {apiVersion: v1, kind: Node, metadata: {name: aws-h100-node-0}}
  - {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: default},
     spec: {containers: [{name: main, image: busybox}, {name: side, image: busybox}]}}
steps:
  - podPhase: {pod: web, phase: Running}
  - containerExit: {pod: web, container: main, exitCode: 0}
  - waitFor: {apiVersion: v1, kind: Pod, name: web, jsonpath: $.status.phase, equals: Running}
  - containerExit: {pod: web, container: side, exitCode: 3, log: "boom\\n"}
  - waitFor: {apiVersion: v1, kind: Pod, name: web, jsonpath: $.status.phase, equals: Failed}
  - nodeCondition: {node: aws-h100-node-0, type: Ready, status: "False", reason: KubeletNotReady}
  - advance: 5
  - waitFor: {apiVersion: v1, kind: Node, name: aws-h100-node-0,
              jsonpath: "$.status.conditions[?(@.type == 'Ready')].status", equals: "False"}
settle: 0
output:
  kinds: [{apiVersion: v1, kind: Pod}]
  events: false
"""


def test_the_steps_play_kubelet_and_node(tmp_path: Path) -> None:
    """Pod phase, container exits (the pod fails once every container ended, one non-zero)
    and a node condition."""
    out = run(tmp_path, _data(KUBELET_CASE))
    (pod,) = out["objects"]["Pod"]
    status = pod["status"]
    assert status["phase"] == "Failed"
    codes = {s["name"]: s["state"]["terminated"]["exitCode"]
             for s in status["containerStatuses"]}
    assert codes == {"main": 0, "side": 3}


def test_a_simulated_cluster_serves_its_nodes(tmp_path: Path) -> None:
    """With ``cluster:`` the simulator's nodes exist (its Trainer/JobSet CRDs are added) and
    a node condition step lands on one."""
    out = run(tmp_path, _data(
        controller={"factory": "tests.golden.ctlprogram:idle"}, objects=[],
        cluster={"profile": "aws-h100", "nodes": 1, "scale": 50},
        steps=[{"nodeCondition": {"node": "aws-h100-node-0", "type": "Ready",
                                  "status": "False", "reason": "KubeletNotReady"}},
               {"waitFor": {"apiVersion": "v1", "kind": "Node", "name": "aws-h100-node-0",
                            "jsonpath": "$.status.conditions[?(@.type == 'Ready')].status",
                            "equals": "False"}}],
        output={"kinds": [{"apiVersion": "v1", "kind": "Node"}], "events": False}))
    assert [n["metadata"]["name"] for n in out["objects"]["Node"]] == ["aws-h100-node-0"]
