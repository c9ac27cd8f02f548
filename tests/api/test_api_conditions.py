"""The condition vocabulary: trio, phases and reasons."""

from __future__ import annotations

import pytest

from cre.api.conditions import (
    ADDITIVE,
    LIFECYCLE_CONDITIONS,
    CommonReason,
    ConditionType,
    JobReason,
    Phase,
    phase_of,
)


def test_phase_mirrors_true_trio_member() -> None:
    """Succeeded/Failed map to their phase; InProgress is Running or Pending."""
    assert phase_of(ConditionType.SUCCEEDED, running=False) is Phase.SUCCEEDED
    assert phase_of(ConditionType.FAILED, running=True) is Phase.FAILED
    assert phase_of(ConditionType.IN_PROGRESS, running=True) is Phase.RUNNING
    assert phase_of(ConditionType.IN_PROGRESS, running=False) is Phase.PENDING


def test_phase_of_rejects_additive_conditions() -> None:
    """An additive condition has no phase."""
    with pytest.raises(ValueError, match="not a member of the exclusive trio"):
        phase_of(ConditionType.HARDWARE_FAILED, running=False)


def test_terminal_phases() -> None:
    """Only Succeeded and Failed are terminal."""
    assert [p for p in Phase if p.terminal] == [Phase.SUCCEEDED, Phase.FAILED]


def test_vocabulary_is_plain_strings() -> None:
    """Enums compare equal to the strings a server returns."""
    lookup: dict[str, str] = {JobReason.WORKLOAD_FAILED: "job", CommonReason.NOT_APPLICABLE: "any"}
    assert lookup["WorkloadFailed"] == "job"
    assert lookup["NotApplicable"] == "any"
    assert set(LIFECYCLE_CONDITIONS).isdisjoint(ADDITIVE)
    assert {str(t) for t in LIFECYCLE_CONDITIONS} == {"InProgress", "Succeeded", "Failed"}
