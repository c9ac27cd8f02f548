"""Shared set-up for the API tests."""

from __future__ import annotations

from cre.api.validate import validate

# Parse one CEL threshold up front: the CEL parser raises the recursion limit on first use,
# which hypothesis would otherwise report as a warning inside the first property test.
validate(
    {
        "apiVersion": "cre.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "warm-up"},
        "spec": {"workload": {"trainJob": {}}, "thresholds": {"busBandwidthGBps": "value > 1"}},
    }
)
