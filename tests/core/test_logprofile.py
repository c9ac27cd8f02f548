"""Shipped LogProfiles and the check of a profile's bandwidth regex."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from ruamel.yaml import YAML

from cre.api.converter import structure, to_dict
from cre.api.measurement import LogPattern, LogPatterns, LogProfile
from cre.core.measure.logprofile import ProfileError, compile_profile, shipped_profiles
from cre.core.measure.ncclparse import parse_lines

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "logprofiles"


@pytest.mark.parametrize("profile", shipped_profiles(), ids=lambda p: p.metadata.name)
def test_deploy_yaml_is_the_model(profile: LogProfile) -> None:
    """deploy/logprofiles/<name>.yaml is the shipped model serialised, and listed."""
    raw = YAML(typ="safe").load((DEPLOY / f"{profile.metadata.name}.yaml").read_text())
    assert structure(raw, LogProfile) == profile
    assert raw == to_dict(profile)
    assert f"{profile.metadata.name}.yaml" in (DEPLOY / "kustomization.yaml").read_text()


@pytest.mark.parametrize("profile", shipped_profiles(), ids=lambda p: p.metadata.name)
def test_shipped_profiles_compile_and_parse_their_example(profile: LogProfile) -> None:
    """Each shipped profile compiles and its example is a row."""
    compiled = compile_profile(profile)
    example = profile.spec.patterns.bandwidth_result
    assert example is not None and example.example is not None
    assert parse_lines([example.example], pattern=compiled.pattern).rows == 1


def _with_regex(regex: str, example: str | None = None) -> LogProfile:
    base = shipped_profiles()[0]
    return attrs.evolve(base, metadata=attrs.evolve(base.metadata, name="mine"),
                        spec=attrs.evolve(base.spec, patterns=LogPatterns(
                            bandwidth_result=LogPattern(regex=regex, example=example))))


@pytest.mark.parametrize(("regex", "example", "message"), [
    ("(?P<size>\\d+", None, "LogProfile mine: spec.patterns.bandwidthResult.regex does not "
                            "compile"),
    ("(?P<size>\\d+) (?P<algBW>\\d+)", None, "lacks the named group(s) (?P<busBW>...)"),
    ("(?P<size>\\d+) (?P<algBW>\\d+) (?P<busBW>\\d+)", "nope", "does not match its own example"),
])
def test_bad_profile_named(regex: str, example: str | None, message: str) -> None:
    """A bad regex is refused with the profile's name and the key."""
    with pytest.raises(ProfileError) as info:
        compile_profile(_with_regex(regex, example))
    assert message in str(info.value)


def test_profile_without_bandwidth_pattern() -> None:
    """A profile with no bandwidthResult pattern names the missing key."""
    base = shipped_profiles()[0]
    profile = attrs.evolve(base, spec=attrs.evolve(base.spec, patterns=LogPatterns(
        training_step=LogPattern(regex="step (?P<globalStep>\\d+)"))))
    with pytest.raises(ProfileError, match=r"spec\.patterns\.bandwidthResult is not set"):
        compile_profile(profile)
