"""The generated CRDs behave under the API emulator's admission exactly as the models expect."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from cre.api.converter import structure, to_dict
from cre.api.crdgen import build_crd
from cre.api.kinds import BY_KIND, KINDS, KindInfo
from cre.testing.apiserver.validation import CRDSchema, validate_crd_definition
from cre.testing.strategies.api import models

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_emulator_accepts_crd(info: KindInfo) -> None:
    """The emulator's CRD checks (structural schema, CEL compile) find nothing to refuse."""
    assert validate_crd_definition(build_crd(info)) == []


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_create_and_no_op_update_are_admitted(info: KindInfo) -> None:
    """Converter output is admitted unchanged: nothing pruned, defaults already present."""
    schema = CRDSchema.from_crd(build_crd(info), "v1alpha1")

    @SETTINGS
    @given(models(info.model))
    def check(model: Any) -> None:
        data = to_dict(model)
        kept, dropped = schema.prune_with_paths(copy.deepcopy(data))
        assert dropped == []
        stored = schema.default(kept)
        assert schema.validate(stored) == []
        assert schema.validate(stored, copy.deepcopy(stored)) == []
        assert structure(stored, info.model) == model

    check()


def test_emulator_refuses_changing_job_workload() -> None:
    """An update that changes a Job's workload is refused with the CRD's message."""
    schema = CRDSchema.from_crd(build_crd(BY_KIND["Job"]), "v1alpha1")
    old: dict[str, Any] = {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"workload": {"trainJob": {"runtimeRef": {"name": "a"}}}},
    }
    new = copy.deepcopy(old)
    new["spec"]["workload"]["trainJob"]["runtimeRef"]["name"] = "b"
    causes = schema.validate(schema.default(new), schema.default(copy.deepcopy(old)))
    assert len(causes) == 1
    assert causes[0].message.endswith("workload cannot change once set")
    assert causes[0].field == "spec.workload"
