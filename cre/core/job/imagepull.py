"""Image pulls that fail: a cause of their own, decided within a bounded grace.

A container whose image cannot be pulled waits (``ErrImagePull``, then ``ImagePullBackOff``
while the kubelet backs off; ``InvalidImageName`` and ``ErrImageNeverPull`` for an image that
can never be pulled) and the kubelet keeps retrying for as long as the pod lives. Without this
rule such a workload reads as running until ``timeoutPerJob``, a timeout is a genuine failure,
and every node of the group is blamed for a registry that is down (issue 23, item 2).

Rule: while any container or init container of a live pod of the *current* workload waits for
one of those reasons, the Job records ``status.imagePullFailingSince`` (the first pass that saw
it). Once ``spec.imagePullGraceSeconds`` (default 120, at most an hour) have passed since then
with a pull still failing, the Job fails ``ImagePullFailed``: class Platform / ImagePullFailed,
the image and the kubelet's message in the condition, the failure class and the failure record,
the workload deleted (its pods hold GPUs), no node blamed. A pull that recovers within the
grace clears the mark and the run goes on; a later failure starts a new grace. A
``timeoutPerJob`` shorter than the grace that runs out while a pull is failing ends the same
way (the message names the timeout): the image, not the test, used up the time.

Pure: ``now`` is a parameter, the requeue is the time left in the grace.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

import attrs

from cre.api.conditions import JobReason
from cre.api.job import FailureLog, Job
from cre.core.common.observed import ContainerStatusView, PodView
from cre.core.job.classify import IMAGE_PULL_REASONS

_TERMINAL: Final = ("Succeeded", "Failed")
# Failing pulls named in one message (a 64-node group repeats the same failure 64 times).
MAX_SHOWN: Final = 3


@attrs.frozen(kw_only=True)
class PullFailure:
    """One container waiting on a failing image pull."""

    pod: str
    node: str | None
    container: str
    image: str | None
    reason: str
    message: str

    @property
    def cause(self) -> str:
        """What the runtime said, the same whichever half of the kubelet's cycle the container
        is in: ``ErrImagePull`` says ``Failed to pull image "X": <why>`` and
        ``ImagePullBackOff`` says ``Back-off pulling image "X"`` (since Kubernetes 1.31
        followed by ``: ErrImagePull: <why>``); both give ``<why>``. A message of another
        shape is kept whole."""
        text = self.message.strip()
        for prefix in ("Failed to pull image ", "Back-off pulling image "):
            if text.startswith(prefix):
                _, sep, rest = text[len(prefix):].partition(": ")
                if not sep:
                    return text
                for reason in sorted(IMAGE_PULL_REASONS):
                    if rest.startswith(f"{reason}: "):
                        rest = rest[len(reason) + 2:]
                        break
                return cause_of(rest)
        return text or self.reason

    def where(self) -> str:
        """``pod P (container C on node N)``."""
        node = f" on node {self.node}" if self.node else ""
        return f"pod {self.pod} (container {self.container}{node})"


def cause_of(text: str) -> str:
    """``text`` less a leading ``Failed to pull image "X": `` (a back-off message wrapping
    the pull error)."""
    prefix = "Failed to pull image "
    if text.startswith(prefix):
        _, sep, rest = text[len(prefix):].partition(": ")
        return rest if sep else text
    return text


def _failing(status: ContainerStatusView) -> bool:
    state = status.state
    return state is not None and state.kind == "waiting" and state.reason in IMAGE_PULL_REASONS


def failures(pods: Sequence[PodView]) -> tuple[PullFailure, ...]:
    """Every container (init containers first) of a live pod in ``pods`` waiting on a failing
    image pull, in pod-name order."""
    out: list[PullFailure] = []
    for pod in sorted(pods, key=lambda p: p.name):
        if pod.deletion_timestamp is not None or pod.phase in _TERMINAL:
            continue
        for status in pod.init_container_statuses + pod.container_statuses:
            if not _failing(status):
                continue
            assert status.state is not None
            out.append(PullFailure(pod=pod.name, node=pod.node_name, container=status.name,
                                   image=status.image, reason=status.state.reason or "",
                                   message=status.state.message or ""))
    return tuple(out)


def grace(job: Job) -> timedelta:
    """``spec.imagePullGraceSeconds`` as a timedelta."""
    return timedelta(seconds=job.spec.image_pull_grace_seconds)


def seconds_left(job: Job, *, since: datetime, now: datetime) -> float:
    """Seconds left in the grace that started at ``since`` (zero or less: it is over)."""
    return (since + grace(job) - now).total_seconds()


def images(found: Sequence[PullFailure]) -> tuple[str, ...]:
    """The distinct images that fail, in order of appearance."""
    out: list[str] = []
    for f in found:
        if f.image and f.image not in out:
            out.append(f.image)
    return tuple(out)


def _by_cause(found: Sequence[PullFailure]) -> list[tuple[str, str, list[PullFailure]]]:
    """The failures grouped by (image, cause), in order of appearance."""
    groups: dict[tuple[str, str], list[PullFailure]] = {}
    for f in found:
        groups.setdefault((f.image or "", f.cause), []).append(f)
    return [(image, cause, fs) for (image, cause), fs in groups.items()]


def _where(failures: Sequence[PullFailure]) -> str:
    shown = ", ".join(f.where() for f in failures[:MAX_SHOWN])
    more = f" and {len(failures) - MAX_SHOWN} more" if len(failures) > MAX_SHOWN else ""
    return shown + more


def failed_message(*, workload: str, job: Job, found: Sequence[PullFailure],
                   bound: str | None = None) -> str:
    """The Failed message: which image(s), where, and what the runtime said (the kubelet's
    message less its back-off wrapping); ``bound`` names the limit that ran out (default
    the grace; ``timeoutPerJob 10m`` when the Job's timeout came first)."""
    parts = []
    for image, cause, failures in _by_cause(found):
        what = f'image "{image}"' if image else "an image"
        parts.append(f"{what} on {_where(failures)}: {cause}")
    bound = bound or f"imagePullGraceSeconds {job.spec.image_pull_grace_seconds}s"
    return f"Workload {workload} could not pull its image within {bound}: {'; '.join(parts)}"


def failure_log(found: Sequence[PullFailure]) -> FailureLog:
    """The failure record: no container ran, so the kubelet's words are the log."""
    first = found[0] if found else None
    lines = [f'{f.where()}: image "{f.image or "?"}": {f.cause}' for f in found[:MAX_SHOWN]]
    if len(found) > MAX_SHOWN:
        lines.append(f"... and {len(found) - MAX_SHOWN} more container(s)")
    return FailureLog(
        pod_name=first.pod if first else None,
        container_name=first.container if first else None,
        node_name=first.node if first else None,
        reason=JobReason.IMAGE_PULL_FAILED,
        tail="the workload never ran: its image could not be pulled\n" + "\n".join(lines),
    )
