"""Merge patch, JSON patch and strategic merge patch, from RFC 7386, RFC 6902 and the
Kubernetes docs on `kubectl patch` (strategic merge patch)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.testing.apiserver.patching import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


# --- RFC 7386 merge patch ----------------------------------------------------------------


def test_merge_patch_null_deletes_and_maps_merge() -> None:
    """A null removes a key, nested maps merge and lists replace wholesale."""
    obj = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v"}
    out = apply_merge_patch(obj, {"a": {"b": None, "d": 3}, "l": [3]})
    assert out == {"a": {"c": 2, "d": 3}, "l": [3], "k": "v"}


def test_merge_patch_does_not_change_its_inputs() -> None:
    """The stored object and the patch are left untouched; the result shares nothing."""
    obj = {"a": {"b": [1]}}
    patch = {"a": {"c": {"d": 1}}}
    before = copy.deepcopy((obj, patch))
    out = apply_merge_patch(obj, patch)
    out["a"]["b"].append(2)
    out["a"]["c"]["d"] = 9
    assert (obj, patch) == before


def test_merge_patch_rfc7386_appendix_examples() -> None:
    """The RFC's test vectors hold (nested nulls into missing objects leave empty objects)."""
    assert apply_merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert apply_merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert apply_merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert apply_merge_patch({}, {"a": {"bb": {"ccc": None}}}) == {"a": {"bb": {}}}


def test_merge_patch_rejects_a_non_object_body_with_400() -> None:
    """A merge patch that is not a JSON object is a bad request."""
    with pytest.raises(PatchError) as err:
        apply_merge_patch({}, [1])  # type: ignore[arg-type]
    assert err.value.code == 400


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abcd"), inner,
                                                                max_size=3),
    max_leaves=8,
)
_objects = st.dictionaries(st.sampled_from("abcde"), _json, max_size=4)


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def _diff(old: Any, new: Any) -> Any:
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    patch: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        if key not in old or old[key] != value:
            patch[key] = _diff(old.get(key), value)
    return patch


@settings(max_examples=200, deadline=None)
@given(_objects.map(_no_nulls), _objects.map(_no_nulls))
def test_merge_patch_of_a_diff_reproduces_the_target(old: dict[str, Any],
                                                     new: dict[str, Any]) -> None:
    """Applying the merge-patch diff of two null-free objects turns the first into the second."""
    assert apply_merge_patch(old, _diff(old, new)) == new


# --- RFC 6902 JSON patch -----------------------------------------------------------------


def test_json_patch_supports_every_operation() -> None:
    """add (with `-`), remove, replace, move, copy and test all apply in order."""
    obj = {"metadata": {"labels": {"app.kubernetes.io/name": "x"}}, "l": [1]}
    ops = [
        {"op": "add", "path": "/l/-", "value": 2},
        {"op": "test", "path": "/l/1", "value": 2},
        {"op": "copy", "from": "/l", "path": "/m"},
        {"op": "move", "from": "/m", "path": "/n"},
        {"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "y"},
        {"op": "remove", "path": "/l/0"},
    ]
    out = apply_json_patch(obj, ops)
    assert out == {"metadata": {"labels": {"app.kubernetes.io/name": "y"}}, "l": [2],
                   "n": [1, 2]}
    assert obj["l"] == [1]


@pytest.mark.parametrize("ops", [
    [{"op": "test", "path": "/a", "value": 2}],
    [{"op": "remove", "path": "/missing"}],
    [{"op": "replace", "path": "/x/y", "value": 1}],
    [{"op": "frobnicate", "path": "/a"}],
    [{"path": "/a"}],
])
def test_json_patch_failures_are_422(ops: list[Any]) -> None:
    """A failed test, a missing path or an unknown operation is a 422 PatchError."""
    with pytest.raises(PatchError) as err:
        apply_json_patch({"a": 1}, ops)
    assert err.value.code == 422


def test_json_patch_body_must_be_a_list() -> None:
    """A JSON patch body that is not an array is a bad request (400)."""
    with pytest.raises(PatchError) as err:
        apply_json_patch({}, {"op": "add"})  # type: ignore[arg-type]
    assert err.value.code == 400


# --- strategic merge patch ---------------------------------------------------------------


def test_smp_merges_containers_by_name() -> None:
    """Containers merge by name: a patched container keeps its other fields; order follows the
    patch, interleaved with live-only containers by their live position."""
    pod = _pod(containers=[{"name": "a", "image": "i1", "args": ["x"]},
                           {"name": "b", "image": "i"}])
    out = apply_strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "a", "image": "i2"}, {"name": "c", "image": "j"}]}},
        kind="Pod")
    assert out["spec"]["containers"] == [
        {"name": "a", "image": "i2", "args": ["x"]}, {"name": "c", "image": "j"},
        {"name": "b", "image": "i"}]


def test_smp_added_container_goes_first() -> None:
    """As in the `kubectl patch` docs, a container added by a patch lands before existing ones."""
    pod = _pod(containers=[{"name": "patch-demo-ctr", "image": "nginx"}])
    out = apply_strategic_merge_patch(pod, {"spec": {"containers": [
        {"name": "patch-demo-ctr-2", "image": "redis"}]}}, kind="Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["patch-demo-ctr-2",
                                                              "patch-demo-ctr"]


def test_smp_nested_merge_keys_env_ports_volume_mounts() -> None:
    """env merges by name, ports by containerPort and volumeMounts by mountPath."""
    pod = _pod(containers=[{
        "name": "a", "env": [{"name": "A", "value": "1"}],
        "ports": [{"containerPort": 80, "name": "http"}],
        "volumeMounts": [{"mountPath": "/d", "name": "v"}]}])
    out = apply_strategic_merge_patch(pod, {"spec": {"containers": [{
        "name": "a", "env": [{"name": "B", "value": "2"}],
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "volumeMounts": [{"mountPath": "/d", "readOnly": True}]}]}}, kind="Pod")
    container = out["spec"]["containers"][0]
    assert container["env"] == [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    assert container["ports"] == [{"containerPort": 80, "name": "http", "protocol": "TCP"}]
    assert container["volumeMounts"] == [{"mountPath": "/d", "name": "v", "readOnly": True}]


def test_smp_replaces_tolerations_and_args() -> None:
    """Lists without a patch strategy (tolerations, args) are replaced wholesale."""
    pod = _pod(tolerations=[{"key": "a"}], containers=[{"name": "c", "args": ["1", "2"]}])
    out = apply_strategic_merge_patch(pod, {"spec": {
        "tolerations": [{"key": "b"}], "containers": [{"name": "c", "args": ["3"]}]}}, kind="Pod")
    assert out["spec"]["tolerations"] == [{"key": "b"}]
    assert out["spec"]["containers"][0]["args"] == ["3"]


def test_smp_pod_conditions_merge_by_type() -> None:
    """A status patch with one condition updates that condition and keeps the others."""
    pod = _pod()
    pod["status"] = {"conditions": [{"type": "Ready", "status": "False"},
                                    {"type": "PodScheduled", "status": "True"}]}
    out = apply_strategic_merge_patch(
        pod, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, kind="Pod")
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"},
                                           {"type": "PodScheduled", "status": "True"}]


def test_smp_finalizers_are_a_set_and_delete_from_primitive_list() -> None:
    """finalizers merge as a union (new values first); $deleteFromPrimitiveList removes some."""
    obj = {"kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["a", "b"]}}
    added = apply_strategic_merge_patch(obj, {"metadata": {"finalizers": ["b", "c"]}},
                                        kind="ConfigMap")
    assert added["metadata"]["finalizers"] == ["a", "b", "c"]
    first = apply_strategic_merge_patch(obj, {"metadata": {"finalizers": ["z"]}},
                                        kind="ConfigMap")
    assert first["metadata"]["finalizers"] == ["z", "a", "b"]
    removed = apply_strategic_merge_patch(
        added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c"]}}, kind="ConfigMap")
    assert removed["metadata"]["finalizers"] == ["b"]


def test_smp_owner_references_merge_by_uid() -> None:
    """ownerReferences merge by uid."""
    obj = {"metadata": {"name": "p", "ownerReferences": [{"uid": "1", "name": "a"}]}}
    out = apply_strategic_merge_patch(
        obj, {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"},
                                               {"uid": "1", "controller": True}]}}, kind="Pod")
    assert out["metadata"]["ownerReferences"] == [
        {"uid": "2", "name": "b"}, {"uid": "1", "name": "a", "controller": True}]


def test_smp_patch_delete_removes_a_list_item() -> None:
    """`$patch: delete` on an item with the merge key removes that item."""
    pod = _pod(containers=[{"name": "a"}, {"name": "b"}])
    out = apply_strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}, kind="Pod")
    assert out["spec"]["containers"] == [{"name": "b"}]


def test_smp_patch_replace_on_a_list_and_on_a_map() -> None:
    """`$patch: replace` replaces a whole merge list, or a whole map."""
    pod = _pod(containers=[{"name": "a"}, {"name": "b"}], nodeSelector={"x": "1"})
    out = apply_strategic_merge_patch(pod, {"spec": {
        "containers": [{"name": "c"}, {"$patch": "replace"}],
        "nodeSelector": {"y": "2", "$patch": "replace"}}}, kind="Pod")
    assert out["spec"]["containers"] == [{"name": "c"}]
    assert out["spec"]["nodeSelector"] == {"y": "2"}


def test_smp_patch_delete_on_a_map_removes_it() -> None:
    """`$patch: delete` inside a map removes the map."""
    pod = _pod(nodeSelector={"x": "1"}, containers=[])
    out = apply_strategic_merge_patch(pod, {"spec": {"nodeSelector": {"$patch": "delete"}}},
                                      kind="Pod")
    assert "nodeSelector" not in out["spec"]


def test_smp_set_element_order() -> None:
    """`$setElementOrder/containers` fixes the final order of the merged list."""
    pod = _pod(containers=[{"name": "a"}, {"name": "b"}])
    out = apply_strategic_merge_patch(pod, {"spec": {
        "$setElementOrder/containers": [{"name": "c"}, {"name": "b"}, {"name": "a"}],
        "containers": [{"name": "c"}]}}, kind="Pod")
    assert [c["name"] for c in out["spec"]["containers"]] == ["c", "b", "a"]


def test_smp_retain_keys_clears_other_volume_source_members() -> None:
    """`$retainKeys` on a volume drops keys it does not list (switching the volume source)."""
    pod = _pod(containers=[], volumes=[{"name": "v", "emptyDir": {}}])
    out = apply_strategic_merge_patch(pod, {"spec": {"volumes": [{
        "name": "v", "hostPath": {"path": "/x"}, "$retainKeys": ["name", "hostPath"]}]}},
        kind="Pod")
    assert out["spec"]["volumes"] == [{"name": "v", "hostPath": {"path": "/x"}}]


def test_smp_job_pod_template_uses_pod_merge_keys() -> None:
    """A Job's pod template merges containers and env by name like a Pod's spec."""
    job = {"kind": "Job", "spec": {"template": {"spec": {"containers": [
        {"name": "a", "env": [{"name": "A", "value": "1"}]}]}}}}
    out = apply_strategic_merge_patch(job, {"spec": {"template": {"spec": {"containers": [
        {"name": "a", "env": [{"name": "B", "value": "2"}]}]}}}}, kind="Job")
    assert out["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "B", "value": "2"}, {"name": "A", "value": "1"}]


def test_smp_invalid_directive_value() -> None:
    """An unknown `$patch` value is rejected with the server's wording."""
    with pytest.raises(PatchError, match=r"invalid value for special key: \$patch"):
        apply_strategic_merge_patch(_pod(), {"spec": {"$patch": "frob"}}, kind="Pod")


def test_smp_merge_list_item_without_the_key_is_rejected() -> None:
    """An item of a merge list that lacks the merge key cannot be placed."""
    with pytest.raises(PatchError, match="merge key"):
        apply_strategic_merge_patch(_pod(containers=[]), {"spec": {"containers": [{"image": "x"}]}},
                                    kind="Pod")


_maps = st.recursive(
    st.none() | st.integers(0, 3) | st.text("xy", max_size=2),
    lambda inner: st.dictionaries(st.sampled_from(["data", "k", "labels", "z"]), inner,
                                  max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["data", "k", "labels"]), _maps, max_size=3),
       st.dictionaries(st.sampled_from(["data", "k", "labels"]), _maps, max_size=3))
def test_smp_on_maps_without_directives_equals_merge_patch(obj: dict[str, Any],
                                                           patch: dict[str, Any]) -> None:
    """With only maps and scalars, a strategic merge patch behaves as a JSON merge patch."""
    assert (apply_strategic_merge_patch(obj, patch, kind="ConfigMap")
            == apply_merge_patch(obj, patch))
