"""What a caller may change about a rendering, as one frozen value.

Kept apart from the renderer so callers (the Job tier, the CLI, tests) build options without
importing the rendering code, and so every bound (worker backoffLimit below Kubernetes' 6) is
checked in one place.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from cre.api.common import GangSchedulerSpec
from cre.catalog.template import Scalar

KAI_SCHEDULER = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
# The leaf queue a fresh KAI install creates, and GangSchedulerSpec.queue's API default.
DEFAULT_QUEUE = "default-queue"
# Kubernetes' own default is 6; a crash-looping sshd must not hold GPUs that long.
MAX_WORKER_BACKOFF_LIMIT = 5
DEFAULT_WORKER_BACKOFF_LIMIT = 3


class RenderError(ValueError):
    """The request cannot be rendered (bad option, unsupported combination)."""


@attrs.frozen
class GangScheduler:
    """A gang scheduler: its scheduler name, queue and the queue label key."""

    scheduler_name: str = KAI_SCHEDULER
    queue: str = DEFAULT_QUEUE
    queue_label_key: str = KAI_QUEUE_LABEL

    @classmethod
    def from_spec(cls, spec: GangSchedulerSpec) -> GangScheduler:
        """The render option for an API ``gangScheduler`` (Workflow, Certification, WorkloadRun)."""
        return cls(
            scheduler_name=spec.scheduler_name,
            queue=spec.queue,
            queue_label_key=spec.queue_label_key,
        )

    @property
    def is_kai(self) -> bool:
        """KAI needs the launcher gate moved into the launcher pod."""
        return self.scheduler_name == KAI_SCHEDULER


def _check_worker_backoff(_: object, __: attrs.Attribute[int], value: int) -> None:
    if not 0 <= value <= MAX_WORKER_BACKOFF_LIMIT:
        raise RenderError(
            f"worker_backoff_limit: must be 0..{MAX_WORKER_BACKOFF_LIMIT}, got {value}"
        )


def _check_launcher_backoff(_: object, __: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and not 0 <= value <= MAX_WORKER_BACKOFF_LIMIT:
        raise RenderError(
            f"launcher_backoff_limit: must be 0..{MAX_WORKER_BACKOFF_LIMIT}, got {value}"
        )


@attrs.frozen(kw_only=True)
class RenderOptions:
    """Caller choices: image override, gang scheduler, retry bounds, entry parameters."""

    image: str | None = None
    gang_scheduler: GangScheduler | None = None
    worker_backoff_limit: int = attrs.field(
        default=DEFAULT_WORKER_BACKOFF_LIMIT, validator=_check_worker_backoff
    )
    launcher_backoff_limit: int | None = attrs.field(
        default=None, validator=_check_launcher_backoff
    )
    nic_resource_name: str | None = None
    parameters: Mapping[str, Scalar] = attrs.field(factory=dict)
    # Secret names every pod of the workload pulls its images with (``imagePullSecrets``).
    image_pull_secrets: tuple[str, ...] = ()
    # PriorityClass of every pod of the workload (``priorityClassName``); ``None``: the default.
    priority_class_name: str | None = None
    # ``{"limits": {...}, "requests": {...}}`` quantities (cpu, memory) laid over the main
    # worker container's resources (the GPU and NIC counts stay the catalog's).
    resources: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)
    # A training entry's checkpoint PVC: mounted at the entry's checkpoint path, and the
    # entry's checkpoint arguments appended to the command. ``None``: no checkpointing.
    checkpoint_claim: str | None = None
