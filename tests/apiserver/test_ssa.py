"""Server-side apply and managedFields, from the Kubernetes docs on server-side apply
(field management, conflicts, merge strategy) and the ManagedFieldsEntry API reference."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.testing.apiserver.patching import ApplyConflict, record_update, server_side_apply


def _cm(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d", **meta}, "data": data}


def _pod(containers: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta},
            "spec": {"containers": containers}}


def _entry(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    entries = [e for e in obj["metadata"]["managedFields"] if e["manager"] == manager]
    assert len(entries) == 1, obj["metadata"].get("managedFields")
    entry: dict[str, Any] = entries[0]
    return entry


def test_create_records_an_update_entry_in_fieldsv1_encoding() -> None:
    """A create gives its manager an Update entry: f: fields, k: list items, `.` on owned nodes."""
    pod = _pod([{"name": "c", "image": "i"}], labels={"app": "x"})
    out = record_update(None, pod, manager="kubectl-create", operation="Update",
                        subresource=None, now="2026-01-02T03:04:05Z")
    entry = _entry(out, "kubectl-create")
    assert entry == {
        "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
        "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {'k:{"name":"c"}': {
                ".": {}, "f:image": {}, "f:name": {}}}},
        },
    }
    assert list(entry) == ["manager", "operation", "apiVersion", "time", "fieldsType",
                           "fieldsV1"]


def test_apply_creates_and_owns_the_applied_fields() -> None:
    """Applying to no object creates it and records an Apply entry for exactly what was sent."""
    out = server_side_apply(None, _cm({"a": "1"}), manager="kubectl", force=False, now="t")
    assert out["data"] == {"a": "1"}
    assert out["metadata"]["name"] == "c"
    entry = _entry(out, "kubectl")
    assert entry["operation"] == "Apply"
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_apply_same_value_shares_ownership_without_conflict() -> None:
    """Two appliers setting the same value both own the field; no conflict."""
    first = server_side_apply(None, _cm({"a": "1"}), manager="one", force=False, now="t")
    second = server_side_apply(first, _cm({"a": "1"}), manager="two", force=False, now="t")
    assert _entry(second, "one")["fieldsV1"] == _entry(second, "two")["fieldsV1"]


def test_apply_conflict_with_an_update_manager_has_the_real_message() -> None:
    """Changing a field an Update manager owns fails with the 409 message and causes shape."""
    live = record_update(None, _cm({"a": "1"}), manager="kubectl-client-side-apply",
                         operation="Update", subresource=None, now="t")
    with pytest.raises(ApplyConflict) as err:
        server_side_apply(live, _cm({"a": "2"}), manager="kubectl", force=False, now="t")
    assert err.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: '
        ".data.a")
    assert err.value.conflicts == [('"kubectl-client-side-apply" using v1', ".data.a")]
    assert err.value.causes() == [{
        "reason": "FieldManagerConflict",
        "message": 'conflict with "kubectl-client-side-apply" using v1', "field": ".data.a"}]


def test_several_conflicts_are_grouped_per_manager() -> None:
    """Several conflicts list each manager (sorted) with its paths on `- ` lines."""
    live = record_update(None, _cm({"a": "1", "b": "1"}), manager="zeta", operation="Update",
                         subresource=None, now="t")
    live = server_side_apply(live, _cm({"c": "1"}), manager="alpha", force=False, now="t")
    with pytest.raises(ApplyConflict) as err:
        server_side_apply(live, _cm({"a": "2", "b": "2", "c": "2"}), manager="me", force=False,
                          now="t")
    assert err.value.message == (
        'Apply failed with 3 conflicts: conflicts with "alpha":\n- .data.c\n'
        'conflicts with "zeta" using v1:\n- .data.a\n- .data.b')


def test_force_takes_ownership() -> None:
    """force=true applies the value and moves the field to the applier."""
    live = record_update(None, _cm({"a": "1", "b": "1"}), manager="old", operation="Update",
                         subresource=None, now="t")
    out = server_side_apply(live, _cm({"a": "2"}), manager="new", force=True, now="t2")
    assert out["data"] == {"a": "2", "b": "1"}
    assert _entry(out, "old")["fieldsV1"] == {"f:data": {".": {}, "f:b": {}}}
    assert _entry(out, "new")["fieldsV1"] == {"f:data": {"f:a": {}}}


def test_fields_dropped_from_the_applied_config_are_removed() -> None:
    """A field the manager applied before and omits now is removed when nobody else owns it."""
    first = server_side_apply(None, _cm({"a": "1", "b": "1"}), manager="m", force=False, now="t")
    out = server_side_apply(first, _cm({"a": "1"}), manager="m", force=False, now="t")
    assert out["data"] == {"a": "1"}


def test_dropped_fields_another_manager_owns_are_kept() -> None:
    """A field also owned by another manager survives when one applier stops applying it."""
    first = server_side_apply(None, _cm({"a": "1", "b": "1"}), manager="m", force=False, now="t")
    shared = server_side_apply(first, _cm({"b": "1"}), manager="other", force=False, now="t")
    out = server_side_apply(shared, _cm({"a": "1"}), manager="m", force=False, now="t")
    assert out["data"] == {"a": "1", "b": "1"}


def test_containers_merge_per_name_and_conflict_paths_use_keys() -> None:
    """Containers are a map list: applying one container keeps others; conflicts name the key."""
    live = record_update(None, _pod([{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]),
                         manager="creator", operation="Update", subresource=None, now="t")
    out = server_side_apply(live, _pod([{"name": "c", "image": "2"}]), manager="m", force=False,
                            now="t")
    assert [c["name"] for c in out["spec"]["containers"]] == ["a", "b", "c"]
    with pytest.raises(ApplyConflict) as err:
        server_side_apply(live, _pod([{"name": "a", "image": "2"}]), manager="m", force=False,
                          now="t")
    assert err.value.conflicts == [('"creator" using v1', '.spec.containers[name="a"].image')]


def test_container_ports_are_keyed_by_port_and_protocol() -> None:
    """Container ports are keyed by containerPort and protocol (protocol defaults to TCP)."""
    out = server_side_apply(
        None, _pod([{"name": "a", "ports": [{"containerPort": 80}]}]), manager="m", force=False,
        now="t")
    fields = _entry(out, "m")["fieldsV1"]["f:spec"]["f:containers"]['k:{"name":"a"}']
    assert 'k:{"containerPort":80,"protocol":"TCP"}' in fields["f:ports"]


def test_tolerations_are_atomic() -> None:
    """An atomic list (tolerations) is owned and replaced as a whole."""
    pod = _pod([{"name": "a"}])
    pod["spec"]["tolerations"] = [{"key": "x"}]
    first = server_side_apply(None, pod, manager="m", force=False, now="t")
    assert _entry(first, "m")["fieldsV1"]["f:spec"]["f:tolerations"] == {}
    pod["spec"]["tolerations"] = [{"key": "y"}]
    second = server_side_apply(first, pod, manager="m", force=False, now="t")
    assert second["spec"]["tolerations"] == [{"key": "y"}]


def test_finalizers_are_a_set() -> None:
    """finalizers are a set: each value is owned separately (`v:` entries)."""
    out = server_side_apply(None, _cm({}, finalizers=["a", "b"]), manager="m", force=False,
                            now="t")
    assert _entry(out, "m")["fieldsV1"]["f:metadata"] == {
        "f:finalizers": {'v:"a"': {}, 'v:"b"': {}}}
    other = server_side_apply(out, _cm({}, finalizers=["c"]), manager="o", force=False, now="t")
    assert other["metadata"]["finalizers"] == ["a", "b", "c"]


def test_update_takes_changed_fields_away_from_other_managers() -> None:
    """An update that changes a field applied by someone else moves its ownership."""
    applied = server_side_apply(None, _cm({"a": "1", "b": "1"}), manager="m", force=False,
                                now="t")
    updated = _cm({"a": "2", "b": "1"})
    updated["metadata"]["managedFields"] = applied["metadata"]["managedFields"]
    out = record_update(applied, updated, manager="editor", operation="Update",
                        subresource=None, now="t")
    assert _entry(out, "m")["fieldsV1"] == {"f:data": {"f:b": {}}}
    assert _entry(out, "editor")["fieldsV1"] == {"f:data": {"f:a": {}}}
    with pytest.raises(ApplyConflict):
        server_side_apply(out, _cm({"a": "3", "b": "1"}), manager="m", force=False, now="t")


def test_removed_fields_leave_every_manager() -> None:
    """A field deleted by an update is no longer owned by anyone."""
    live = record_update(None, _cm({"a": "1", "b": "1"}), manager="m", operation="Update",
                         subresource=None, now="t")
    out = record_update(live, {**_cm({"a": "1"}), "metadata": live["metadata"]},
                        manager="m", operation="Update", subresource=None, now="t")
    assert _entry(out, "m")["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}


def test_subresource_entries_are_separate_and_printed_in_conflicts() -> None:
    """A status writer gets its own entry with `subresource`, named so in conflicts."""
    pod = _pod([{"name": "a"}])
    live = record_update(None, pod, manager="kubelet", operation="Update", subresource=None,
                         now="t")
    with_status = {**live, "status": {"phase": "Running"}}
    out = record_update(live, with_status, manager="kubelet", operation="Update",
                        subresource="status", now="t")
    status_entries = [e for e in out["metadata"]["managedFields"] if e.get("subresource")]
    assert status_entries[0]["fieldsV1"] == {"f:status": {"f:phase": {}}}
    assert list(status_entries[0])[-1] == "subresource"
    with pytest.raises(ApplyConflict) as err:
        server_side_apply(out, {**pod, "status": {"phase": "Failed"}}, manager="m",
                          force=False, now="t", subresource="status")
    assert err.value.conflicts == [('"kubelet" with subresource "status" using v1',
                                    ".status.phase")]


def test_reset_fields_are_neither_merged_nor_owned() -> None:
    """Fields the endpoint resets (status on the main endpoint) are ignored by apply."""
    pod = {**_pod([{"name": "a"}]), "status": {"phase": "Running"}}
    out = server_side_apply(None, pod, manager="m", force=False, now="t",
                            reset_fields=("status",))
    assert "status" not in out
    assert "f:status" not in _entry(out, "m")["fieldsV1"]


def test_requests_can_clear_managed_fields() -> None:
    """Writing `managedFields: [{}]` clears the history, leaving only the writer's changes."""
    live = record_update(None, _cm({"a": "1"}), manager="m", operation="Update",
                         subresource=None, now="t")
    cleared = _cm({"a": "1"}, managedFields=[{}])
    out = record_update(live, cleared, manager="x", operation="Update", subresource=None,
                        now="t")
    assert "managedFields" not in out["metadata"]


def test_crd_list_types_come_from_the_schema() -> None:
    """With a CRD schema, `x-kubernetes-list-type: map` lists merge per key; others are atomic."""
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "jobs": {"type": "array", "x-kubernetes-list-type": "map",
                 "x-kubernetes-list-map-keys": ["name"],
                 "items": {"type": "object", "properties": {
                     "name": {"type": "string"}, "n": {"type": "integer"}}}},
        "args": {"type": "array", "items": {"type": "string"}}}}}}
    obj = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "k"},
           "spec": {"jobs": [{"name": "a", "n": 1}], "args": ["x"]}}
    first = server_side_apply(None, obj, manager="one", force=False, now="t", schema=schema)
    second_cfg = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "k"},
                  "spec": {"jobs": [{"name": "b", "n": 2}]}}
    second = server_side_apply(first, second_cfg, manager="two", force=False, now="t",
                               schema=schema)
    assert [j["name"] for j in second["spec"]["jobs"]] == ["a", "b"]
    assert _entry(second, "one")["fieldsV1"]["f:spec"]["f:args"] == {}


_names = st.sampled_from(["a", "b", "c"])


def _item_name(item: dict[str, Any]) -> str:
    return str(item["name"])


_env: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"name": _names, "value": st.just("v")})
_limits: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {}, optional={"limits": st.dictionaries(_names, st.integers(0, 2), max_size=2)})
_container: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"name": _names},
    optional={"image": st.sampled_from(["x", "y"]),
              "env": st.lists(_env, max_size=2, unique_by=_item_name),
              "args": st.lists(st.text("ab", max_size=1), max_size=2),
              "resources": _limits})
_containers = st.lists(_container, max_size=3, unique_by=_item_name)


@settings(max_examples=150, deadline=None)
@given(_containers, st.dictionaries(_names, st.just("v"), max_size=2),
       st.lists(_names, max_size=2, unique=True))
def test_create_fast_path_matches_the_diff_path(containers: list[dict[str, Any]],
                                                labels: dict[str, str],
                                                finalizers: list[str]) -> None:
    """The field set a create records equals the one computed by diffing from nothing."""
    meta: dict[str, Any] = {"labels": labels} if labels else {}
    if finalizers:
        meta["finalizers"] = finalizers
    pod = _pod(containers, **meta)
    created = record_update(None, pod, manager="m", operation="Update", subresource=None,
                            now="t")
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    diffed = record_update(bare, pod, manager="m", operation="Update", subresource=None, now="t")
    assert created["metadata"].get("managedFields") == diffed["metadata"].get("managedFields")
