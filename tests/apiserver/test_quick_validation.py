"""The quick validity pass and update ratcheting never change what built-in validation reports.

`check` answers the common valid case with a quick pass and only walks for causes when that pass
fails; on updates it skips subtrees equal to the stored object. These tests compare it with the
plain full walk over many valid and broken objects, so a fast path can never hide an error.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from cre.testing.apiserver._builtin import _compiled, schema_release
from cre.testing.apiserver._causes import parse_version
from cre.testing.apiserver._crd_schema import _MISSING, _Run, check

Obj = dict[str, Any]

POD: Obj = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "default", "labels": {"app": "x"},
                 "annotations": {"a": "b"}, "ownerReferences": [
                     {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]},
    "spec": {
        "containers": [{"name": "main", "image": "busybox", "ports": [
            {"containerPort": 80, "protocol": "TCP"}],
            "resources": {"limits": {"cpu": "1", "memory": 1024}},
            "env": [{"name": "A", "value": "1"}]}],
        "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}],
        "terminationGracePeriodSeconds": 30,
    },
    "status": {"phase": "Pending", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
}


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Obj], None]:
    def mutate(obj: Obj) -> None:
        node: Any = obj
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
    return mutate


def _drop(path: tuple[Any, ...]) -> Callable[[Obj], None]:
    def mutate(obj: Obj) -> None:
        node: Any = obj
        for step in path[:-1]:
            node = node[step]
        del node[path[-1]]
    return mutate


MUTATIONS: list[Callable[[Obj], None]] = [
    lambda o: None,
    _set(("spec", "containers", 0, "ports", 0, "containerPort"), "eighty"),
    _set(("spec", "containers", 0, "ports", 0, "containerPort"), 80.5),
    _set(("spec", "containers", 0, "ports", 0, "containerPort"), 80.0),
    _set(("spec", "containers", 0, "ports", 0, "containerPort"), 2**40),
    _set(("spec", "containers", 0, "name"), 7),
    _set(("spec", "containers", 0, "resources", "limits", "cpu"), True),
    _set(("spec", "containers", 0, "resources", "limits", "cpu"), 1.5),
    _set(("spec", "containers", 0, "env", 0), {"value": "no name"}),
    _set(("spec", "containers", 0, "env"), [{"name": "A"}, {"name": "A"}]),
    _set(("spec", "tolerations", 0, "tolerationSeconds"), "5"),
    _set(("spec", "terminationGracePeriodSeconds"), None),
    _set(("spec", "containers"), {"name": "main"}),
    _set(("spec", "nodeSelector"), {"a": 1}),
    _set(("metadata", "labels"), ["a"]),
    _set(("metadata", "ownerReferences", 0, "uid"), None),
    _drop(("metadata", "ownerReferences", 0, "name")),
    _set(("status", "phase"), 3),
    _set(("status", "conditions", 0, "lastTransitionTime"), "yesterday"),
    _set(("status", "conditions"), [{"type": "Ready", "status": "True"},
                                    {"type": "Ready", "status": "False"}]),
    _set(("status", "conditions", 0, "status"), None),
    _set(("spec", "unknownField"), {"deep": [1, 2]}),
]


def _full_walk(obj: Obj, old: Obj | None) -> list[Any]:
    node = _compiled(schema_release("1.33"), "v1", "Pod")
    assert node is not None
    run = _Run(parse_version("1.33"), ratchet=old is not None)
    run.walk(obj, node, "", old if old is not None else _MISSING, root=True)
    return run.causes


@pytest.mark.parametrize("index", range(len(MUTATIONS)))
def test_check_matches_full_walk_on_create(index: int) -> None:
    """A create reports exactly the causes of the full schema walk, valid or not."""
    obj = copy.deepcopy(POD)
    MUTATIONS[index](obj)
    node = _compiled(schema_release("1.33"), "v1", "Pod")
    assert node is not None
    assert check(node, obj, version=parse_version("1.33")) == _full_walk(obj, None)


@pytest.mark.parametrize("index", range(len(MUTATIONS)))
def test_check_matches_unratcheted_walk_on_update(index: int) -> None:
    """An update of a valid object reports the same causes as validating it from scratch."""
    obj = copy.deepcopy(POD)
    MUTATIONS[index](obj)
    node = _compiled(schema_release("1.33"), "v1", "Pod")
    assert node is not None
    assert _full_walk(POD, None) == []
    assert check(node, obj, version=parse_version("1.33"), old=POD) == _full_walk(obj, None)
