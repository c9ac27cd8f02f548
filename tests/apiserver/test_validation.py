"""CRD structural-schema defaulting, pruning and validation (OpenAPI and CEL), and built-in
validation per release, from the Kubernetes docs on CustomResourceDefinitions (validation,
defaulting, pruning, validation rules) and the API conventions on 422 causes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cre.testing.apiserver.validation import (
    Cause,
    CRDSchema,
    aggregate_message,
    schema_release,
    validate_builtin,
    validate_crd_definition,
)


def _crd(spec_schema: dict[str, Any], *, status: dict[str, Any] | None = None,
         root: dict[str, Any] | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                             "metadata": {"type": "object"}, "spec": spec_schema}
    if status is not None:
        props["status"] = status
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                           "listKind": "WidgetList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": props, **(root or {})}}}]},
    }


def _schema(spec_props: dict[str, Any], *, kubernetes_version: str = "1.34",
            **spec_extra: Any) -> CRDSchema:
    crd = _crd({"type": "object", "properties": spec_props, **spec_extra})
    return CRDSchema.from_crd(crd, "v1", kubernetes_version=kubernetes_version)


def _obj(spec: Any, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": spec, **extra}


def _texts(causes: list[Cause]) -> list[str]:
    return [c.text() for c in causes]


# --- OpenAPI value validation -------------------------------------------------------------


def test_wrong_type_is_worded_as_kube_openapi() -> None:
    """A string where an integer belongs names the found type, in `in body` wording."""
    causes = _schema({"replicas": {"type": "integer"}}).validate(_obj({"replicas": "3"}))
    assert causes[0] == Cause(
        "FieldValueTypeInvalid",
        'Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        "spec.replicas")
    assert causes[0].to_status_cause() == {
        "reason": "FieldValueTypeInvalid", "field": "spec.replicas",
        "message": 'Invalid value: "string": spec.replicas in body must be of type integer: '
                   '"string"'}


def test_required_fields() -> None:
    """A missing required property is `<path>: Required value`."""
    causes = _schema({"foo": {"type": "string"}}, required=["foo"]).validate(_obj({}))
    assert _texts(causes)[0] == "spec.foo: Required value"


def test_enum_lists_supported_values() -> None:
    """A value outside an enum is Unsupported with the quoted supported values."""
    causes = _schema({"mode": {"type": "string", "enum": ["A", "B"]}}).validate(
        _obj({"mode": "C"}))
    assert _texts(causes)[0] == 'spec.mode: Unsupported value: "C": supported values: "A", "B"'


@pytest.mark.parametrize(("prop", "value", "text"), [
    ({"type": "integer", "minimum": 1}, 0,
     "spec.v: Invalid value: 0: spec.v in body should be greater than or equal to 1"),
    ({"type": "integer", "minimum": 1, "exclusiveMinimum": True}, 1,
     "spec.v: Invalid value: 1: spec.v in body should be greater than 1"),
    ({"type": "integer", "maximum": 5}, 6,
     "spec.v: Invalid value: 6: spec.v in body should be less than or equal to 5"),
    ({"type": "integer", "multipleOf": 2}, 3,
     "spec.v: Invalid value: 3: spec.v in body should be a multiple of 2"),
    ({"type": "string", "minLength": 2}, "a",
     'spec.v: Invalid value: "a": spec.v in body should be at least 2 chars long'),
    ({"type": "string", "maxLength": 2}, "abc", "spec.v: Too long: may not be more than 2 bytes"),
    ({"type": "string", "pattern": "^[a-z]+$"}, "A1",
     "spec.v: Invalid value: \"A1\": spec.v in body should match '^[a-z]+$'"),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 1}, [1, 2],
     "spec.v: Too many: 2: must have at most 1 item"),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1],
     "spec.v: Invalid value: [1]: spec.v in body should have at least 2 items"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, [1, 1],
     "spec.v: Invalid value: [1,1]: spec.v in body shouldn't contain duplicates"),
    ({"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 1},
     {"a": "1", "b": "2"}, "spec.v: Too many: 2: must have at most 1 item"),
    ({"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1}, {},
     "spec.v: Invalid value: {}: spec.v in body should have at least 1 properties"),
    ({"type": "string", "format": "date-time"}, "yesterday",
     'spec.v: Invalid value: "yesterday": spec.v in body must be of type date-time: '
     '"yesterday"'),
    ({"type": "integer", "format": "int32"}, 2**31,
     "spec.v: Invalid value: 2147483648: spec.v in body must be of type int32: 2147483648"),
])
def test_value_constraints(prop: dict[str, Any], value: Any, text: str) -> None:
    """Each OpenAPI value constraint fails with the server's message."""
    assert _texts(_schema({"v": prop}).validate(_obj({"v": value}))) [:1] == [text]


def test_valid_formats_pass() -> None:
    """Well-formed date-time and int32 values are accepted; unknown formats are ignored."""
    schema = _schema({"t": {"type": "string", "format": "date-time"},
                      "n": {"type": "integer", "format": "int32"},
                      "x": {"type": "string", "format": "no-such-format"}})
    assert schema.validate(_obj({"t": "2026-01-02T03:04:05Z", "n": 5, "x": "?"})) == []


def test_int_or_string() -> None:
    """x-kubernetes-int-or-string accepts integers and strings and nothing else."""
    schema = _schema({"port": {"x-kubernetes-int-or-string": True,
                               "anyOf": [{"type": "integer"}, {"type": "string"}]}})
    assert schema.validate(_obj({"port": 80})) == []
    assert schema.validate(_obj({"port": "http"})) == []
    assert _texts(schema.validate(_obj({"port": {}})))[0] == (
        'spec.port: Invalid value: "object": spec.port in body must be of type integer,string: '
        '"object"')


def test_nullable() -> None:
    """`nullable: true` accepts null; otherwise null is a type error."""
    schema = _schema({"a": {"type": "string", "nullable": True}, "b": {"type": "string"}})
    assert schema.validate(_obj({"a": None})) == []
    assert _texts(schema.validate(_obj({"b": None})))[0] == (
        'spec.b: Invalid value: "null": spec.b in body must be of type string: "null"')


def test_list_type_set_and_map_duplicates() -> None:
    """Duplicate items of a set list and duplicate keys of a map list are Duplicate values."""
    schema = _schema({
        "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "m": {"type": "array", "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "properties": {"name": {"type": "string"}}}}})
    causes = schema.validate(_obj({"s": ["a", "a"], "m": [{"name": "x"}, {"name": "x"}]}))
    assert sorted(_texts(causes)) == ['spec.m[1]: Duplicate value: {"name":"x"}',
                                      'spec.s[1]: Duplicate value: "a"']


# --- pruning and defaulting ---------------------------------------------------------------


def test_prune_drops_unknown_fields_but_keeps_identity_and_metadata() -> None:
    """Undeclared fields go; apiVersion, kind and ObjectMeta stay; unknown metadata keys go."""
    schema = _schema({"a": {"type": "string"}})
    obj = _obj({"a": "x", "b": 1}, extra=True)
    obj["metadata"]["labels"] = {"k": "v"}
    obj["metadata"]["bogus"] = 1
    pruned, dropped = schema.prune_with_paths(obj)
    assert pruned == {"apiVersion": "example.com/v1", "kind": "Widget",
                      "metadata": {"name": "w", "labels": {"k": "v"}}, "spec": {"a": "x"}}
    assert sorted(dropped) == ["extra", "metadata.bogus", "spec.b"]


def test_preserve_unknown_fields_keeps_undeclared_fields() -> None:
    """Under x-kubernetes-preserve-unknown-fields undeclared fields survive."""
    schema = _schema({"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                               "properties": {"n": {"type": "integer"}}}})
    obj = _obj({"free": {"n": 1, "anything": {"deep": [1]}}})
    assert schema.prune(obj) == obj


def test_embedded_resource_keeps_identity_and_requires_it() -> None:
    """An embedded resource keeps apiVersion/kind/metadata and must state apiVersion and kind."""
    schema = _schema({"tmpl": {"type": "object", "x-kubernetes-embedded-resource": True,
                               "properties": {"spec": {"type": "object"}}}})
    obj = _obj({"tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                         "spec": {}, "junk": 1}})
    pruned = schema.prune(obj)
    assert pruned["spec"]["tmpl"] == {"apiVersion": "v1", "kind": "Pod",
                                      "metadata": {"name": "x"}, "spec": {}}
    causes = schema.validate(_obj({"tmpl": {"spec": {}}}))
    assert {"spec.tmpl.apiVersion: Required value", "spec.tmpl.kind: Required value"} <= set(
        _texts(causes))


def test_defaults_apply_to_absent_fields_and_inside_existing_objects_only() -> None:
    """Defaults fill absent fields, recurse into defaulted objects and skip absent parents."""
    schema = _schema({
        "replicas": {"type": "integer", "default": 1},
        "policy": {"type": "object", "default": {},
                   "properties": {"mode": {"type": "string", "default": "Fast"}}},
        "opt": {"type": "object", "properties": {"x": {"type": "integer", "default": 3}}},
    })
    assert schema.default(_obj({}))["spec"] == {"replicas": 1, "policy": {"mode": "Fast"}}
    assert schema.default(_obj({"replicas": 4, "opt": {}}))["spec"] == {
        "replicas": 4, "policy": {"mode": "Fast"}, "opt": {"x": 3}}


def test_defaults_replace_non_nullable_null_and_nulls_without_default_go() -> None:
    """A null on a non-nullable field takes the default, or is dropped when there is none."""
    schema = _schema({"a": {"type": "integer", "default": 2}, "b": {"type": "integer"},
                      "c": {"type": "integer", "nullable": True, "default": 5}})
    assert schema.default(_obj({"a": None, "b": None, "c": None}))["spec"] == {"a": 2, "c": None}


def test_defaults_apply_to_list_items() -> None:
    """Defaults in an array's item schema apply to every item."""
    schema = _schema({"items": {"type": "array", "items": {"type": "object", "properties": {
        "w": {"type": "integer", "default": 1}}}}})
    assert schema.default(_obj({"items": [{}, {"w": 3}]}))["spec"]["items"] == [{"w": 1},
                                                                               {"w": 3}]


_values = st.recursive(
    st.none() | st.integers(0, 3) | st.text("ab", max_size=2),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
        st.sampled_from(["a", "free", "list", "junk"]), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "free", "list", "junk"]), _values, max_size=4))
def test_prune_is_idempotent(spec: dict[str, Any]) -> None:
    """Pruning a pruned object changes nothing."""
    schema = _schema({"a": {"type": "object", "properties": {"a": {"type": "string"}}},
                      "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                      "list": {"type": "array", "items": {"type": "object", "properties": {
                          "a": {"type": "integer"}}}}})
    once = schema.prune(_obj(spec))
    assert schema.prune(once) == once


# --- CEL rules ----------------------------------------------------------------------------


def _cel_schema(rules: list[dict[str, Any]], *, version: str = "1.34") -> CRDSchema:
    return _schema({"replicas": {"type": "integer"}, "max": {"type": "integer"},
                    "name": {"type": "string"}},
                   kubernetes_version=version, **{"x-kubernetes-validations": rules})


def test_cel_rule_failure_shows_the_type_name_up_to_1_34() -> None:
    """A failing rule on an object reports `Invalid value: "object": <message>` (<= 1.34)."""
    schema = _cel_schema([{"rule": "self.replicas <= self.max",
                           "message": "replicas must not exceed max"}])
    assert schema.validate(_obj({"replicas": 1, "max": 2})) == []
    assert _texts(schema.validate(_obj({"replicas": 3, "max": 2}))) == [
        'spec: Invalid value: "object": replicas must not exceed max']


def test_cel_rule_failure_omits_object_values_from_1_35() -> None:
    """From 1.35 an object node's value is omitted and a scalar's value is shown."""
    schema = _schema({"n": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self <= 5"}]}}, kubernetes_version="1.35",
        **{"x-kubernetes-validations": [{"rule": "self.n >= 0", "message": "negative"}]})
    assert _texts(schema.validate(_obj({"n": 7}))) == [
        "spec.n: Invalid value: 7: failed rule: self <= 5"]
    assert _texts(schema.validate(_obj({"n": -1}))) == ["spec: Invalid value: negative"]


def test_cel_default_message_is_failed_rule() -> None:
    """Without a message the detail is `failed rule: <rule>`."""
    schema = _cel_schema([{"rule": "  self.name.startsWith('a')  "}])
    assert _texts(schema.validate(_obj({"name": "b"}))) == [
        "spec: Invalid value: \"object\": failed rule: self.name.startsWith('a')"]


def test_cel_message_expression_reason_and_field_path() -> None:
    """messageExpression, reason and fieldPath shape the cause."""
    schema = _cel_schema([{"rule": "self.replicas <= self.max",
                           "messageExpression": "'replicas ' + string(self.replicas) + ' > max'",
                           "reason": "FieldValueForbidden", "fieldPath": ".replicas"}])
    causes = schema.validate(_obj({"replicas": 3, "max": 2}))
    assert causes == [Cause("FieldValueForbidden", "Forbidden: replicas 3 > max",
                            "spec.replicas")]


def test_cel_required_reason() -> None:
    """reason FieldValueRequired words the cause as `Required value: <message>`."""
    schema = _cel_schema([{"rule": "has(self.name)", "message": "name is needed",
                           "reason": "FieldValueRequired"}])
    assert _texts(schema.validate(_obj({}))) == ["spec: Required value: name is needed"]


def test_cel_transition_rules_only_run_on_update_with_an_old_value() -> None:
    """`self == oldSelf` is skipped on create and enforced on update."""
    schema = _schema({"image": {"type": "string", "x-kubernetes-validations": [
        {"rule": "self == oldSelf", "message": "field is immutable"}]}})
    assert schema.validate(_obj({"image": "a"})) == []
    assert _texts(schema.validate(_obj({"image": "b"}), _obj({"image": "a"}))) == [
        'spec.image: Invalid value: "string": field is immutable']
    assert schema.validate(_obj({"image": "b"}), _obj({})) == []


def test_cel_optional_old_self_runs_on_create_with_an_optional() -> None:
    """With optionalOldSelf the rule also runs on create, oldSelf being an empty optional."""
    schema = _schema({"n": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "!oldSelf.hasValue() ? self <= 5 : self >= oldSelf.value()",
         "optionalOldSelf": True, "message": "bad n"}]}})
    assert schema.validate(_obj({"n": 3})) == []
    assert _texts(schema.validate(_obj({"n": 7}))) == ['spec.n: Invalid value: "integer": bad n']
    assert schema.validate(_obj({"n": 9}), _obj({"n": 8})) == []
    assert len(schema.validate(_obj({"n": 1}), _obj({"n": 8}))) == 1


def test_cel_transition_rules_correlate_map_list_items_by_key() -> None:
    """In a map list, oldSelf is the old item with the same key; new items are not checked."""
    schema = _schema({"jobs": {"type": "array", "x-kubernetes-list-type": "map",
                               "x-kubernetes-list-map-keys": ["name"],
                               "items": {"type": "object", "properties": {
                                   "name": {"type": "string"}, "n": {"type": "integer"}},
                                   "x-kubernetes-validations": [
                                       {"rule": "self.n >= oldSelf.n", "message": "shrunk"}]}}})
    old = _obj({"jobs": [{"name": "a", "n": 2}]})
    assert schema.validate(_obj({"jobs": [{"name": "b", "n": 0}, {"name": "a", "n": 3}]}),
                           old) == []
    assert _texts(schema.validate(_obj({"jobs": [{"name": "a", "n": 1}]}), old)) == [
        'spec.jobs[0]: Invalid value: "object": shrunk']


def test_schema_errors_stop_cel_and_add_the_nil_cause() -> None:
    """A Required/type error skips CEL and adds the `<nil>` "rules were not checked" cause."""
    schema = _cel_schema([{"rule": "self.replicas <= self.max", "message": "never shown"}])
    causes = schema.validate(_obj({"replicas": "x", "max": 2}))
    assert _texts(causes)[-1] == (
        "<nil>: Invalid value: null: some validation rules were not checked because the object "
        "was invalid; correct the existing errors to complete validation")
    assert "never shown" not in " ".join(_texts(causes))


def test_cel_runtime_error_is_reported_with_the_rule() -> None:
    """A rule that fails to evaluate (missing key) says so and names the rule."""
    schema = _cel_schema([{"rule": "self.name == 'x'"}])
    text = _texts(schema.validate(_obj({})))[0]
    assert text.startswith('spec: Invalid value: "object": no such key: name')
    assert text.endswith("evaluating rule: self.name == 'x'")


def test_cel_kubernetes_string_and_list_library() -> None:
    """Kubernetes CEL library functions (split, lowerAscii, join, isSorted, sum) are available."""
    schema = _cel_schema([
        {"rule": "self.name.split('-').size() == 2", "message": "two parts"},
        {"rule": "self.name.lowerAscii() == self.name", "message": "lower"},
        {"rule": "[self.replicas, self.max].isSorted() && [1, 2].sum() == 3", "message": "s"},
    ])
    assert schema.validate(_obj({"name": "a-b", "replicas": 1, "max": 2})) == []
    assert len(schema.validate(_obj({"name": "A", "replicas": 3, "max": 2}))) == 3


def test_root_rules_report_the_nil_field() -> None:
    """A rule on the root schema reports its errors at field `<nil>`."""
    crd = _crd({"type": "object"}, root={"x-kubernetes-validations": [
        {"rule": "size(self.metadata.name) <= 3", "message": "short names only"}]})
    schema = CRDSchema.from_crd(crd, "v1")
    assert _texts(schema.validate({**_obj({}), "metadata": {"name": "long-name"}})) == [
        '<nil>: Invalid value: "object": short names only']


def test_root_rules_see_only_name_and_generate_name_of_metadata() -> None:
    """CEL on the root sees metadata.name and generateName only, not labels or namespace."""
    crd = _crd({"type": "object"}, root={"x-kubernetes-validations": [
        {"rule": "!has(self.metadata.labels) && !has(self.metadata.namespace) && "
                 "self.metadata.name == 'w'"}]})
    obj = _obj({})
    obj["metadata"].update(labels={"a": "b"}, namespace="d")
    assert CRDSchema.from_crd(crd, "v1").validate(obj) == []


def test_ratcheting_skips_unchanged_invalid_values_on_update() -> None:
    """On update an unchanged invalid value is accepted; a changed one is still rejected."""
    schema = _schema({"a": {"type": "string", "maxLength": 1}, "b": {"type": "integer"}})
    old = _obj({"a": "long", "b": 1})
    assert schema.validate(_obj({"a": "long", "b": 2}), old) == []
    assert _texts(schema.validate(_obj({"a": "longer", "b": 1}), old)) == [
        "spec.a: Too long: may not be more than 1 byte"]


def test_aggregate_message() -> None:
    """The Status message joins several errors in brackets and de-duplicates them."""
    one = Cause("FieldValueRequired", "Required value", "spec.a")
    two = Cause("FieldValueRequired", "Required value", "spec.b")
    assert aggregate_message([one]) == "spec.a: Required value"
    assert aggregate_message([one, two, one]) == (
        "[spec.a: Required value, spec.b: Required value]")


# --- the CRD itself -----------------------------------------------------------------------


def test_valid_crd_definition_has_no_causes() -> None:
    """A well-formed structural CRD passes."""
    assert validate_crd_definition(_crd({"type": "object"})) == []


def test_crd_definition_errors() -> None:
    """Names, scope, storage versions, types, items, list-map keys and CEL are checked."""
    crd = _crd({"type": "object", "properties": {
        "untyped": {"description": "no type"},
        "arr": {"type": "array"},
        "m": {"type": "array", "x-kubernetes-list-type": "map",
              "items": {"type": "object"}},
        "cel": {"type": "string", "x-kubernetes-validations": [{"rule": "self >"}]},
    }})
    crd["metadata"]["name"] = "wrong"
    crd["spec"]["scope"] = "Galaxy"
    crd["spec"]["versions"].append({**crd["spec"]["versions"][0], "name": "v2"})
    fields = {c.field for c in validate_crd_definition(crd)}
    base = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties"
    assert {"metadata.name", "spec.scope", "spec.versions", f"{base}[untyped].type",
            f"{base}[arr].items", f"{base}[m].x-kubernetes-list-map-keys",
            f"{base}[cel].x-kubernetes-validations[0].rule"} <= fields


def test_from_crd_unknown_version() -> None:
    """Asking for a version the CRD does not have names the CRD and the version."""
    with pytest.raises(ValueError, match=r"widgets\.example\.com.*v9"):
        CRDSchema.from_crd(_crd({"type": "object"}), "v9")


# --- built-in kinds -----------------------------------------------------------------------


def _pod(**spec: Any) -> dict[str, Any]:
    base = {"containers": [{"name": "c", "image": "busybox"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"},
            "spec": {**base, **spec}}


def _job(*, status_in_condition: bool) -> dict[str, Any]:
    pattern = {"type": "DisruptionTarget", **({"status": "True"} if status_in_condition else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [pattern]}]},
                "template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "c", "image": "i"}]}}}}


def test_valid_pod_passes() -> None:
    """A minimal valid pod has no causes."""
    assert validate_builtin(_pod(), kubernetes_version="1.33") == []


def test_pod_semantic_errors() -> None:
    """restartPolicy, image, duplicate container names and bad names are reported as real."""
    pod = _pod(restartPolicy="Sometimes",
               containers=[{"name": "c", "image": "i"}, {"name": "c"}])
    pod["metadata"]["name"] = "Bad_Name"
    texts = _texts(validate_builtin(pod, kubernetes_version="1.33"))
    assert ('spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
            '"OnFailure", "Never"') in texts
    assert "spec.containers[1].image: Required value" in texts
    assert 'spec.containers[1].name: Duplicate value: "c"' in texts
    assert any(t.startswith('metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 '
                            "subdomain") for t in texts)


def test_pod_without_containers() -> None:
    """A pod spec with an empty container list is `spec.containers: Required value`."""
    assert "spec.containers: Required value" in _texts(
        validate_builtin(_pod(containers=[]), kubernetes_version="1.33"))


def test_builtin_schema_type_errors() -> None:
    """The published schema catches wrong types with the field path."""
    pod = _pod(containers=[{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}])
    assert _texts(validate_builtin(pod, kubernetes_version="1.33")) == [
        'spec.containers[0].ports[0].containerPort: Invalid value: "string": '
        'spec.containers[0].ports[0].containerPort in body must be of type integer: "string"']


def test_label_syntax() -> None:
    """Label keys and values must be qualified names / label values."""
    pod = _pod()
    pod["metadata"]["labels"] = {"bad key": "ok", "good": "bad value!"}
    fields = [c.field for c in validate_builtin(pod, kubernetes_version="1.33")]
    assert fields == ["metadata.labels", "metadata.labels"]


@pytest.mark.parametrize(("version", "rejected"), [
    ("1.33", True), ("1.34", True), ("1.35", False), ("1.36", False)])
def test_pod_failure_policy_condition_status_flips_at_1_35(version: str, rejected: bool) -> None:
    """onPodConditions[].status is required by the published schema up to 1.34 only."""
    causes = validate_builtin(_job(status_in_condition=False), kubernetes_version=version)
    expected = [Cause("FieldValueRequired", "Required value",
                      "spec.podFailurePolicy.rules[0].onPodConditions[0].status")]
    assert causes == (expected if rejected else [])
    assert validate_builtin(_job(status_in_condition=True), kubernetes_version=version) == []


def test_schema_release_clamps_to_the_package_range() -> None:
    """Newer releases use the newest schema set, older ones the oldest."""
    assert schema_release("1.33") == "1.33"
    assert schema_release("v1.36.2") == "1.36"
    assert schema_release("1.99") == schema_release("1.99.0")
    assert schema_release("1.1") == schema_release("1.2")


def test_job_restart_policy_must_be_never_or_on_failure() -> None:
    """A Job template with restartPolicy Always is rejected, and so is one without: a Job's
    template gets no default, so the value is required (kube-apiserver 1.34.4's answer in the
    differential, cre/testing/controlplane/scripts.py job_defaulting)."""
    job = _job(status_in_condition=True)
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert _texts(validate_builtin(job, kubernetes_version="1.33")) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
        '"OnFailure", "Never"']
    del job["spec"]["template"]["spec"]["restartPolicy"]
    assert _texts(validate_builtin(job, kubernetes_version="1.33")) == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']


def test_job_without_template() -> None:
    """A Job spec needs a template."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {}}
    assert "spec.template: Required value" in _texts(
        validate_builtin(job, kubernetes_version="1.33"))


def test_pod_update_may_change_images_but_not_other_spec_fields() -> None:
    """Image changes and toleration additions are allowed; other spec changes are Forbidden."""
    old = _pod(tolerations=[{"key": "a"}])
    new_image = _pod(tolerations=[{"key": "a"}, {"key": "b"}],
                     containers=[{"name": "c", "image": "other"}])
    assert validate_builtin(new_image, kubernetes_version="1.33", old=old) == []
    changed = _pod(tolerations=[{"key": "a"}], restartPolicy="Never")
    causes = validate_builtin(changed, kubernetes_version="1.33", old=old)
    assert [(c.type, c.field) for c in causes] == [("FieldValueForbidden", "spec")]
    assert causes[0].message.startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`")


def test_job_selector_and_template_are_immutable() -> None:
    """Changing a Job's selector or template on update is `field is immutable`."""
    old = _job(status_in_condition=True)
    old["spec"]["selector"] = {"matchLabels": {"a": "1"}}
    new = _job(status_in_condition=True)
    new["spec"]["selector"] = {"matchLabels": {"a": "2"}}
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "j"
    fields = [c.field for c in validate_builtin(new, kubernetes_version="1.33", old=old)]
    assert fields == ["spec.selector", "spec.template"]
