"""A dependency's ``when``: the CEL expression is run through ``cre.api.cel`` (one door to the
CEL library), and an expression that cannot be evaluated is a DependencyError naming it."""

from __future__ import annotations

import pytest

from cre.core.workflow.deps import DependencyError, when_matches


def test_expression_over_the_platform_values_decides() -> None:
    """The expression sees platform, gpuArchitecture, workloadKind, topologyMode and
    domainCount."""
    when = {"expression": "platform == 'aws' && domainCount > 1 && topologyMode == 'simple'"}
    assert when_matches(when, platform="aws", arch="h100", domain_count=2) is True
    assert when_matches(when, platform="gcp", arch="h100", domain_count=2) is False
    assert when_matches({"platform": {"equals": "gcp"}, **when}, platform="aws",
                        arch="h100", domain_count=2) is False


def test_an_expression_that_cannot_be_evaluated_names_its_path() -> None:
    """An unknown variable, or a result that is not a bool, is a DependencyError with the
    path; a syntax error too (validation reports it first, this is the core's guard)."""
    with pytest.raises(DependencyError, match=r"^spec.dependencies\[2\].when.expression: "
                       r"cannot evaluate 'nosuch == 1'"):
        when_matches({"expression": "nosuch == 1"}, platform="aws", arch="h100",
                     path="spec.dependencies[2].when")
    with pytest.raises(DependencyError, match="must be a bool, got 'aws'"):
        when_matches({"expression": "platform"}, platform="aws", arch="h100")
    with pytest.raises(DependencyError, match="cannot evaluate 'platform == '"):
        when_matches({"expression": "platform == "}, platform="aws", arch="h100")
