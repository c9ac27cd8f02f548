"""Every CRE kind survives model -> JSON -> model, and generated objects are valid."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cre.api.converter import from_dict, structure, to_dict
from cre.api.kinds import KINDS, KindInfo
from cre.api.validate import validate
from cre.testing.strategies.api import any_object, models

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_round_trip_through_json(info: KindInfo) -> None:
    """A generated object of each kind equals itself after a trip through JSON text."""

    @SETTINGS
    @given(models(info.model))
    def check(model: Any) -> None:
        text = json.dumps(to_dict(model))
        back: Any = structure(json.loads(text), info.model)
        assert back == model
        assert to_dict(back) == json.loads(text)

    check()


@pytest.mark.parametrize("info", KINDS, ids=lambda i: i.kind)
def test_generated_objects_are_valid(info: KindInfo) -> None:
    """The shipped strategies only produce objects that pass validation."""

    @SETTINGS
    @given(models(info.model))
    def check(model: Any) -> None:
        assert validate(model) == []
        assert validate(to_dict(model)) == []

    check()


@SETTINGS
@given(any_object())
def test_from_dict_dispatches_on_kind(model: Any) -> None:
    """``from_dict`` picks the model class from the ``kind`` of the document."""
    assert from_dict(to_dict(model)) == model


@SETTINGS
@given(any_object(), st.sampled_from(["managedFields", "selfLink", "somethingNew"]))
def test_unknown_metadata_is_ignored(model: Any, key: str) -> None:
    """Keys a server adds to metadata never make an object unreadable."""
    data = to_dict(model)
    data["metadata"][key] = [{"manager": "kubectl"}]
    assert from_dict(data) == model
