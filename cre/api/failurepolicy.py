"""How a Workflow treats a failed group: run on (``Continue``) or stop early (``FailFast``),
and whether an infrastructure abort is deferred instead of counted as a test failure.

Kept in its own module because the Workflow spec, the Certification's category options and
the WorkloadRun spec carry it (a Certification or WorkloadRun copies it into each Workflow it
creates). The deferral
rules themselves live in ``cre.core.workflow.deferral``; see
docs/design/013-workflow-certification.md.
"""

from __future__ import annotations

import enum
from typing import Final

import attrs

from cre.api.fields import c

DEFAULT_INFRA_RETRIES: Final = 1
MAX_INFRA_RETRIES: Final = 10
# How long a NotReady node a Job's failure names may take to come back Ready before the
# Workflow counts it broken (Failed, scope Node); capped at a day like the other waits.
DEFAULT_NODE_NOT_READY_GRACE_SECONDS: Final = 300
MAX_NODE_NOT_READY_GRACE_SECONDS: Final = 86400
# SuspectedClusterOutage needs at least 2 infra-aborted groups and at least this percentage of
# the iteration's groups.
DEFAULT_OUTAGE_THRESHOLD_PERCENT: Final = 50
#: The description of a ``failurePolicy`` field on a kind that runs Workflows (a
#: Certification's category options, a WorkloadRun): one text, so the CRDs say the same.
FAILURE_POLICY_DOC: Final = (
    "What a failed group does to the rest of the Workflow (fail fast or continue) and how "
    "infrastructure aborts are retried.")


class FailureMode(enum.StrEnum):
    """What one genuine (Workload-class) group failure does to its siblings."""

    CONTINUE = "Continue"  # every group runs to its end (the reference's only behaviour)
    FAIL_FAST = "FailFast"  # stop launching, cancel running siblings


@attrs.frozen(kw_only=True)
class FailurePolicy:
    """Fail-fast and infra-abort deferral of one Workflow.

    ``infraRetries`` re-runs a group whose Job ended on a Node, Platform or ControlPlane class
    failure without spending ``retryFailedGroups``. ``infraScopedFailFast`` overrides the
    manager's ``--infra-scoped-failfast`` switch for this Workflow: ``false`` turns deferral off
    and every failure counts the same (the plain behaviour); unset follows the manager.
    ``nodeNotReadyGraceSeconds``: a node a failed Job names NotReady is blamed (Failed, scope
    Node) only when it is still not Ready this long after the failure; one that comes back is
    not. ``outageThresholdPercent``: ``SuspectedClusterOutage`` is raised when at least 2 groups
    and at least this percentage of an iteration's groups ended on an infrastructure abort.
    """

    mode: FailureMode = attrs.field(default=FailureMode.CONTINUE, metadata=c(doc=(
        "Continue: every group runs to its end. FailFast: the first genuine (Workload-class) "
        "group failure stops launching groups and cancels running ones.")))
    infra_retries: int = attrs.field(
        default=DEFAULT_INFRA_RETRIES,
        metadata=c(
            minimum=0,
            maximum=MAX_INFRA_RETRIES,
            int_format="int32",
            doc=(
                "Re-runs of a group whose Job ended on a Node, Platform or ControlPlane "
                "failure; they do not spend retryFailedGroups."),
        ),
    )
    infra_scoped_fail_fast: bool | None = attrs.field(
        default=None, metadata=c(json_name="infraScopedFailFast", doc=(
            "Overrides the manager's --infra-scoped-failfast for this Workflow: false counts "
            "every failure the same. Unset: the manager's setting.")))
    node_not_ready_grace_seconds: int = attrs.field(
        default=DEFAULT_NODE_NOT_READY_GRACE_SECONDS,
        metadata=c(minimum=0, maximum=MAX_NODE_NOT_READY_GRACE_SECONDS, int_format="int32",
                   doc=("Seconds. A node a failed Job names NotReady is blamed (Failed, scope "
                        "Node) only when it is still not Ready this long after the failure; "
                        "one that comes back in time is not blamed.")),
    )
    outage_threshold_percent: int = attrs.field(
        default=DEFAULT_OUTAGE_THRESHOLD_PERCENT,
        metadata=c(minimum=1, maximum=100, int_format="int32",
                   doc=("Percent. SuspectedClusterOutage is raised when at least 2 groups and "
                        "at least this share of an iteration's groups ended on an "
                        "infrastructure abort.")),
    )
