"""CRE's API: attrs models of the ``cre.dev/v1alpha1`` kinds, their JSON converter,
validation with field paths and CRD generation (``python -m cre.api.crdgen``).

Import models and the converter from here; submodules hold one kind or concern each.
"""

from cre.api.certification import (
    CategoryOptions,
    Certification,
    CertificationCategory,
    CertificationSpec,
    CertificationStatus,
)
from cre.api.conditions import (
    CommonReason,
    ConditionType,
    FailedNodeReason,
    FailureScope,
    JobReason,
    MeasurementPhase,
    Phase,
)
from cre.api.converter import from_dict, structure, to_dict, unstructure
from cre.api.crdgen import build_crd
from cre.api.errors import FieldError, ValidationError
from cre.api.goodput import GoodputMeasurement
from cre.api.job import FailedNode, FailureClass, FailureLog, Job, JobSpec, JobStatus, WorkloadSpec
from cre.api.kinds import KINDS
from cre.api.measurement import BandwidthMeasurement, LogProfile
from cre.api.meta import Condition, ConditionStatus, ObjectMeta, ObjectReference
from cre.api.validate import validate, validated
from cre.api.workflow import Workflow, WorkflowSpec, WorkflowStatus
from cre.api.workloadrun import WorkloadRun, WorkloadRunSpec, WorkloadRunStatus

__all__ = [
    "KINDS",
    "BandwidthMeasurement",
    "CategoryOptions",
    "Certification",
    "CertificationCategory",
    "CertificationSpec",
    "CertificationStatus",
    "CommonReason",
    "Condition",
    "ConditionStatus",
    "ConditionType",
    "FailedNode",
    "FailedNodeReason",
    "FailureClass",
    "FailureLog",
    "FailureScope",
    "FieldError",
    "GoodputMeasurement",
    "Job",
    "JobReason",
    "JobSpec",
    "JobStatus",
    "LogProfile",
    "MeasurementPhase",
    "ObjectMeta",
    "ObjectReference",
    "Phase",
    "ValidationError",
    "Workflow",
    "WorkflowSpec",
    "WorkflowStatus",
    "WorkloadRun",
    "WorkloadRunSpec",
    "WorkloadRunStatus",
    "WorkloadSpec",
    "build_crd",
    "from_dict",
    "structure",
    "to_dict",
    "unstructure",
    "validate",
    "validated",
]
