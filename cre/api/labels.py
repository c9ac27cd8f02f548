"""Label, annotation and finalizer keys CRE puts on objects or reads from them.

One place for every key so the renderer, the pure core, the caches and the simulator agree.
"""

from typing import Final

GROUP: Final = "cre.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "cre"

# Worker pods (the MPI `node` replicated job, or the single pod of loopback/DCGM) carry JOB.
JOB: Final = "cre.dev/job"
# MPI launcher pods carry LAUNCHER and never JOB; workers never carry LAUNCHER.
LAUNCHER: Final = "cre.dev/launcher"
WORKFLOW: Final = "cre.dev/workflow"
CERTIFICATION: Final = "cre.dev/certification"
GROUP_LABEL: Final = "cre.dev/group"
# Annotation on a Job: comma-separated nodes the group is pinned to (failed-node attribution).
GROUP_NODES: Final = "cre.dev/group-nodes"
# On a Workflow whose thresholds are the catalog entry's defaults: where the figures come from.
THRESHOLDS_SOURCE: Final = "cre.dev/thresholds-source"
# On a Certification a CertificationSchedule made: the schedule's name, and (annotation) the
# due time the run was made for (RFC 3339).
SCHEDULE: Final = "cre.dev/schedule"
SCHEDULED_TIME: Final = "cre.dev/scheduled-time"

JOB_FINALIZER: Final = "cre.dev/finalizer"
WORKFLOW_FINALIZER: Final = "cre.dev/workflow-finalizer"
CERTIFICATION_FINALIZER: Final = "cre.dev/certification-finalizer"

# Read from Nodes.
GPU_PRESENT: Final = "nvidia.com/gpu.present"
GPU_PRODUCT: Final = "nvidia.com/gpu.product"

# Read from Pods (set by JobSet / the Job controller / Trainer).
JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT: Final = "jobset.sigs.k8s.io/restart-attempt"
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
TRAINJOB_ANCESTOR_STEP: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
