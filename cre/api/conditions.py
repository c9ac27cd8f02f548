"""Condition types, reasons and phases of the CRE kinds, as enums.

Every lifecycle tier (Certification, Workflow, Job, WorkloadRun) carries the exclusive trio
InProgress / Succeeded / Failed: exactly one is True, the other two are False with reason
``NotApplicable`` (``Superseded`` on WorkloadRun). ``ValidationFailed``, ``HardwareFailed``,
``WorkloadReleased`` (Job) and ``CleanedUp`` (Workflow, Certification) are additive and
independent of the trio. ``status.phase`` mirrors the True trio member as a
single word for ``kubectl get``. Reasons are ``StrEnum`` members so they compare equal to the
plain strings read back from the server.
"""

from __future__ import annotations

import enum
from typing import Final


class ConditionType(enum.StrEnum):
    """Condition types used by the CRE kinds."""

    IN_PROGRESS = "InProgress"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    VALIDATION_FAILED = "ValidationFailed"
    HARDWARE_FAILED = "HardwareFailed"
    MEASURING = "Measuring"
    COMPLETE = "Complete"
    # Workflow / Certification: the run ended Succeeded but did not cover every node.
    INCOMPLETE = "Incomplete"
    # Workflow (copied to Certification and WorkloadRun): at least 2 groups and at least
    # failurePolicy.outageThresholdPercent of one iteration's groups ended infra-aborted.
    SUSPECTED_CLUSTER_OUTAGE = "SuspectedClusterOutage"
    # Job: its finished workload (TrainJob, and with it JobSet, batch Jobs, pods) was deleted
    # and confirmed gone (True), or why it is still there (False).
    WORKLOAD_RELEASED = "WorkloadReleased"
    # Workflow / Certification, once terminal: every workload of the run is gone (True), or
    # which remain and why (False).
    CLEANED_UP = "CleanedUp"
    # Certification (written by the NodeCertification controller): the blast-radius breaker
    # keeps failed nodes from being tainted (True, with the count and the cap).
    NODE_TAINTS_HELD_BACK = "NodeTaintsHeldBack"


# Exactly one of these is True at any time on a lifecycle tier.
LIFECYCLE_CONDITIONS: Final = (ConditionType.IN_PROGRESS, ConditionType.SUCCEEDED,
                               ConditionType.FAILED)
# Independent of the trio.
ADDITIVE: Final = (
    ConditionType.VALIDATION_FAILED,
    ConditionType.HARDWARE_FAILED,
    ConditionType.INCOMPLETE,
    ConditionType.SUSPECTED_CLUSTER_OUTAGE,
    ConditionType.WORKLOAD_RELEASED,
    ConditionType.CLEANED_UP,
    ConditionType.NODE_TAINTS_HELD_BACK,
)


class Phase(enum.StrEnum):
    """``status.phase`` of the lifecycle tiers: the True member of the trio in one word."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        """Whether no further transition is expected."""
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class Verdict(enum.StrEnum):
    """``status.verdict`` of a Workflow or Certification once it is terminal.

    ``Incomplete``: nothing genuinely failed, but some nodes were not certified (an
    infrastructure abort, or nodes discovery excluded). The trio says Succeeded then.
    """

    PASSED = "Passed"
    FAILED = "Failed"
    INCOMPLETE = "Incomplete"


class IncompleteReason(enum.StrEnum):
    """Reasons of the additive ``Incomplete`` condition."""

    INFRA_ABORTED = "InfraAborted"
    NODES_EXCLUDED = "NodesExcluded"
    DEADLINE_EXCEEDED = "DeadlineExceeded"  # the run's deadline cancelled its running groups
    COMPLETE = "Complete"  # the False form: every target node was certified


class MeasurementPhase(enum.StrEnum):
    """``status.phase`` of a measurement: waiting, sampling, or frozen final result."""

    PENDING = "Pending"
    MEASURING = "Measuring"
    COMPLETE = "Complete"


class CommonReason(enum.StrEnum):
    """Reasons any tier writes on the non-True members of the trio."""

    NOT_APPLICABLE = "NotApplicable"
    SUPERSEDED = "Superseded"


class JobReason(enum.StrEnum):
    """Reasons of the Job tier (conditions, failed nodes and events)."""

    WORKLOAD_CREATED = "WorkloadCreated"
    WORKLOAD_ADOPTED = "WorkloadAdopted"
    WORKLOAD_PENDING = "WorkloadPending"
    WORKLOAD_RUNNING = "WorkloadRunning"
    WORKLOAD_COMPLETED = "WorkloadCompleted"
    WORKLOAD_FAILED = "WorkloadFailed"
    WORKLOAD_CREATION_ERROR = "WorkloadCreationError"
    WORKLOAD_STALLED = "WorkloadStalled"
    WORKLOAD_SCHEDULING_BLOCKED = "WorkloadSchedulingBlocked"
    WORKLOAD_RESTARTING = "WorkloadRestarting"
    WORKLOAD_NAME_COLLISION = "WorkloadNameCollision"
    HARDWARE_FAILURE_DETECTED = "HardwareFailureDetected"
    MEASUREMENT_CREATION_ERROR = "MeasurementCreationError"
    # Written by earlier versions in place of ThresholdNoData; still read (Jobs outlive upgrades).
    MEASUREMENT_TIMEOUT = "MeasurementTimeout"
    # ValidationFailed=True: a threshold could not be evaluated on measured data (no final
    # value by the Job tier's deadline, or the measurement cannot run: see failureClass).
    THRESHOLD_NO_DATA = "ThresholdNoData"
    THRESHOLDS_MET = "ThresholdsMet"
    # The reference's reason on the Job's ValidationFailed condition; the nodes it blames carry
    # FailedNodeReason.THRESHOLD_VIOLATION ("ThresholdViolation").
    THRESHOLD_VIOLATED = "ThresholdViolated"
    UNKNOWN_THRESHOLD_KEY = "UnknownThresholdKey"
    INVALID_THRESHOLD_EXPRESSION = "InvalidThresholdExpression"
    JOB_TIMED_OUT = "JobTimedOut"
    INVALID_SPEC = "InvalidSpec"
    # A container of the workload could not pull its image within imagePullGraceSeconds.
    IMAGE_PULL_FAILED = "ImagePullFailed"
    # Pods of the workload stayed unschedulable past schedulingStallTimeout.
    WORKLOAD_UNSCHEDULABLE = "WorkloadUnschedulable"
    # Higher-priority work preempted a pod of the workload: the run ended, no node is judged.
    WORKLOAD_PREEMPTED = "WorkloadPreempted"


class ReleaseReason(enum.StrEnum):
    """Reasons of a finished Job's ``WorkloadReleased`` condition (cre.core.job.release)."""

    RELEASED = "Released"  # True: the TrainJob and the Job's pods are gone (or never existed)
    MEASUREMENT_PENDING = "MeasurementPending"  # a measurement still needs the pods' logs
    RELEASING = "Releasing"  # the TrainJob was deleted; it or the Job's pods are still there
    HELD_BY_FINALIZER = "HeldByFinalizer"  # the TrainJob's deletion waits on a finalizer


class CleanupReason(enum.StrEnum):
    """Reasons of the ``CleanedUp`` condition of a finished Workflow or Certification."""

    WORKLOADS_RELEASED = "WorkloadsReleased"
    WORKLOADS_REMAINING = "WorkloadsRemaining"


class FailedNodeReason(enum.StrEnum):
    """Why a node is listed in ``status.failedNodes``."""

    HARDWARE_FAILURE_DETECTED = "HardwareFailureDetected"
    THRESHOLD_VIOLATION = "ThresholdViolation"
    WORKLOAD_FAILED = "WorkloadFailed"


class OutlierBasis(enum.StrEnum):
    """What a fleet-relative outlier was compared with (``status.outliers[].basis``)."""

    PEER_MEDIAN = "PeerMedian"
    FLEET_P10 = "FleetP10"
    GROUP_MEDIAN = "GroupMedian"


class FailureScope(enum.StrEnum):
    """Whom a Job failure is attributed to (``status.failureClass.scope``)."""

    WORKLOAD = "Workload"
    NODE = "Node"
    PLATFORM = "Platform"
    CONTROL_PLANE = "ControlPlane"
    CONFIGURATION = "Configuration"


class WorkflowReason(enum.StrEnum):
    """Reasons of the Workflow tier."""

    JOB_CREATED = "JobCreated"
    JOB_RUNNING = "JobRunning"
    JOB_COMPLETED = "JobCompleted"
    JOB_FAILED = "JobFailed"
    JOB_HARDWARE_FAILED = "JobHardwareFailed"
    JOB_CREATION_ERROR = "JobCreationError"
    JOB_VALIDATION_FAILED = "JobValidationFailed"
    JOB_TIMED_OUT = "JobTimedOut"
    GROUPS_PARTITIONED = "GroupsPartitioned"
    ITERATION_COMPLETED = "IterationCompleted"
    ITERATIONS_FAILED = "IterationsFailed"
    DEPENDENCY_CREATION_ERROR = "DependencyCreationError"
    NODE_DISCOVERY_ERROR = "NodeDiscoveryError"
    PARTITION_ERROR = "PartitionError"
    JOB_NAME_COLLISION = "JobNameCollision"
    DEPENDENCY_NAME_COLLISION = "DependencyNameCollision"
    GANG_SCHEDULING_CONFLICT = "GangSchedulingConflict"
    HETEROGENEOUS_PLATFORM = "HeterogeneousPlatform"
    OVERRIDE_ERROR = "OverrideError"
    INVALID_SPEC = "InvalidSpec"
    # Events of discovery and of the infra-scoped fail-fast rules.
    CORDONED_NODES_EXCLUDED = "CordonedNodesExcluded"
    NOT_READY_NODES_EXCLUDED = "NotReadyNodesExcluded"
    HETEROGENEOUS_GPU = "HeterogeneousGPU"
    INSUFFICIENT_GPU_CAPACITY = "InsufficientGPUCapacity"
    INFRA_ABORT_DEFERRED = "InfraAbortDeferred"
    GROUPS_CANCELLED = "GroupsCancelled"
    SUSPECTED_CLUSTER_OUTAGE = "SuspectedClusterOutage"
    NO_OUTAGE = "NoOutage"
    OVERRIDE_APPLIED = "OverrideApplied"
    OVERRIDE_NO_OP = "OverrideNoOp"
    # Thresholds are set but the Job tier does not judge them yet (design record 013).
    THRESHOLDS_NOT_JUDGED = "ThresholdsNotJudged"
    # The blame rows of docs/design/013: a deterministic error of the user's configuration
    # (admission rejection, InvalidSpec, a name collision), and a person deleting a workload.
    CONFIGURATION_ERROR = "ConfigurationError"
    USER_INTERRUPTED = "UserInterrupted"
    # A NotReady node named by a Job's failure: the Workflow waits for it to come back.
    NODE_NOT_READY_GRACE = "NodeNotReadyGrace"
    # A group's launch left out nodes that are Failed, NotReady, cordoned or tainted (an
    # event); too few were left to run it (the group's failure class reason).
    NODES_EXCLUDED_FROM_GROUP = "NodesExcludedFromGroup"
    TOO_FEW_USABLE_NODES = "TooFewUsableNodes"
    # Nodes beyond the run's maxNodes were not taken (an event); the run's deadline passed.
    MAX_NODES_EXCLUDED = "MaxNodesExcluded"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    # A diagnose round was planned (orchestration.diagnose; docs/design/024).
    DIAGNOSE_ROUND = "DiagnoseRound"
    # A group below its peer groups' median (relativeThreshold scope Group; an event).
    GROUP_OUTLIER = "GroupOutlier"


class CertificationReason(enum.StrEnum):
    """Reasons of the Certification tier."""

    WAITING_FOR_NODES = "WaitingForNodes"
    WORKFLOW_CREATED = "WorkflowCreated"
    WORKFLOW_RUNNING = "WorkflowRunning"
    ALL_WORKFLOWS_SUCCEEDED = "AllWorkflowsSucceeded"
    WORKFLOW_SUCCEEDED = "WorkflowSucceeded"
    WORKFLOW_FAILED = "WorkflowFailed"
    WORKFLOW_VALIDATION_FAILED = "WorkflowValidationFailed"
    CATEGORY_NOT_FOUND = "CategoryNotFound"
    BUILD_FAILED = "BuildFailed"
    WORKFLOW_DELETED = "WorkflowDeleted"
    THRESHOLD_VIOLATION = "ThresholdViolation"
    WORKFLOW_NAME_COLLISION = "WorkflowNameCollision"
    INVALID_SPEC = "InvalidSpec"
    NODE_DISCOVERY_ERROR = "NodeDiscoveryError"
    # Headline reasons: the most severe genuine failure across categories (docs/design/013).
    JOB_HARDWARE_FAILED = "JobHardwareFailed"
    CONFIGURATION_ERROR = "ConfigurationError"
    USER_INTERRUPTED = "UserInterrupted"
    SUSPECTED_CLUSTER_OUTAGE = "SuspectedClusterOutage"
    # A category's nodesPerJob was above its eligible nodes and was clamped (an event).
    NODES_PER_JOB_CLAMPED = "NodesPerJobClamped"
    # NodeTaintsHeldBack: the breaker's cap is reached (True) / nothing is held back (False).
    TAINT_CAP_REACHED = "TaintCapReached"
    NO_TAINTS_HELD_BACK = "NoTaintsHeldBack"


class WorkloadRunReason(enum.StrEnum):
    """Reasons of the WorkloadRun tier (mostly mirrored from its Workflow)."""

    WORKFLOW_CREATED = "WorkflowCreated"
    WORKFLOW_RUNNING = "WorkflowRunning"
    WORKFLOW_SUCCEEDED = "WorkflowSucceeded"
    WORKFLOW_FAILED = "WorkflowFailed"
    WORKFLOW_VALIDATION_FAILED = "WorkflowValidationFailed"
    THRESHOLD_VIOLATION = "ThresholdViolation"
    BUILD_FAILED = "BuildFailed"
    WORKFLOW_DELETED = "WorkflowDeleted"
    WORKFLOW_NAME_COLLISION = "WorkflowNameCollision"
    WAITING_FOR_NODES = "WaitingForNodes"
    SUSPECTED_CLUSTER_OUTAGE = "SuspectedClusterOutage"


class MeasurementReason(enum.StrEnum):
    """Reasons of the measurement kinds."""

    JOB_RUNNING = "JobRunning"
    JOB_SUCCEEDED = "JobSucceeded"
    JOB_FAILED = "JobFailed"
    LOG_PROFILE_NOT_FOUND = "LogProfileNotFound"
    NO_DATA_COLLECTED = "NoDataCollected"
    # The final read could not be done (pod gone, unreadable log): results are provisional.
    LOGS_UNAVAILABLE = "LogsUnavailable"
    # The Job ended; the final read failed and is retried (not terminal).
    FINAL_READ_PENDING = "FinalReadPending"
    # Goodput: the Job restarted its workload (an interruption was recorded); an event.
    WORKLOAD_RESTARTED = "WorkloadRestarted"
    # Goodput: the LogProfile cannot parse training logs (no trainingStep pattern, bad regex).
    LOG_PROFILE_INVALID = "LogProfileInvalid"
    # BandwidthMeasurement: spec.jobRef names a kind other than cre.dev Job (terminal).
    INVALID_JOB_REF = "InvalidJobRef"
    # BandwidthMeasurement: the Job it names does not exist (waits, then terminal).
    JOB_NOT_FOUND = "JobNotFound"


class CategoryState(enum.StrEnum):
    """``status.categoryStatuses[].status`` of a Certification."""

    PENDING = "Pending"
    IN_PROGRESS = "InProgress"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        """Whether the category's Workflow has finished (or never could start)."""
        return self in (CategoryState.SUCCEEDED, CategoryState.FAILED)


class GroupPhase(enum.StrEnum):
    """``status.groups[].phase`` of a Workflow.

    ``Cancelled``: stopped by FailFast because a sibling failed genuinely (not this group's
    fault). ``InfraAborted``: ended on a Node/Platform/ControlPlane class failure after its
    infra retries; its nodes are Uncertified, not Failed (unless a Node class named them).
    """

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    INFRA_ABORTED = "InfraAborted"

    @property
    def terminal(self) -> bool:
        """Whether the group is done for this iteration."""
        return self not in (GroupPhase.PENDING, GroupPhase.RUNNING)


TRIO_PHASE: Final = {
    ConditionType.SUCCEEDED: Phase.SUCCEEDED,
    ConditionType.FAILED: Phase.FAILED,
}


def phase_of(true_member: ConditionType, *, running: bool) -> Phase:
    """The phase mirroring the True trio member (InProgress is Running or Pending)."""
    if true_member in TRIO_PHASE:
        return TRIO_PHASE[true_member]
    if true_member is not ConditionType.IN_PROGRESS:
        raise ValueError(f"{true_member} is not a member of the exclusive trio")
    return Phase.RUNNING if running else Phase.PENDING
