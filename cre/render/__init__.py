"""Pure rendering: a resolved catalog entry + platform + arch + nodes -> manifests.

``render_workload`` gives the TrainingRuntime, the TrainJob spec and DRA objects;
``render_job_manifest`` wraps them in the CRE Job the demo and the Job tier apply.
"""

from cre.render.job import job_object, render_job_manifest
from cre.render.options import (
    DEFAULT_WORKER_BACKOFF_LIMIT,
    KAI_QUEUE_LABEL,
    KAI_SCHEDULER,
    GangScheduler,
    RenderError,
    RenderOptions,
)
from cre.render.workload import FAIL_FAST_RULE, RenderedWorkload, render_workload

__all__ = [
    "DEFAULT_WORKER_BACKOFF_LIMIT",
    "FAIL_FAST_RULE",
    "KAI_QUEUE_LABEL",
    "KAI_SCHEDULER",
    "GangScheduler",
    "RenderError",
    "RenderOptions",
    "RenderedWorkload",
    "job_object",
    "render_job_manifest",
    "render_workload",
]
