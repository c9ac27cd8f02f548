"""Whether a finished run left anything behind: the ``CleanedUp`` condition of a Workflow and of a
Certification.

Each CRE Job releases its own workload once nothing needs the pods (:mod:`cre.core.job.release`,
the Job's ``WorkloadReleased`` condition). A run's verdict comes first; the cleanup follows it,
so a terminal Workflow keeps reading its Jobs and says, in one additive condition:

* ``CleanedUp=True`` (``WorkloadsReleased``): every Job of the run says its TrainJob and pods
  are gone (a Job being deleted counts once it is gone: its finalizer waits for its pods);
* ``CleanedUp=False`` (``WorkloadsRemaining``): which Jobs still hold a workload and why, in
  their own words (a measurement still reading the logs, a deletion in flight, a finalizer
  holding the TrainJob, a Job told to retain it), the first :data:`LISTED` of them by name.

A Certification says the same over its categories' Workflows, quoting each Workflow's message.
The condition is written with the terminal verdict and kept up to date after it; it flips to
True once, with one Normal event. Pure: the Jobs and Workflows are the observation's.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final, TypeVar

import attrs

from cre.api.certification import CertificationStatus
from cre.api.conditions import CleanupReason, ConditionType
from cre.api.job import Job, WorkloadRetention
from cre.api.meta import Condition, ConditionStatus
from cre.api.workflow import Workflow, WorkflowStatus
from cre.core.common.conditions import condition, set_additive
from cre.core.common.lifecycle import true_member
from cre.core.common.plan import EventSpec, Plan
from cre.core.common.wording import count
from cre.core.job.release import released_condition

#: How many remaining workloads a message names (the rest are counted).
LISTED: Final = 10


def job_remains(job: Job) -> str | None:
    """Why ``job`` still holds a workload, or ``None`` when it released it."""
    name = job.metadata.name or ""
    if job.metadata.deletion_timestamp is not None:
        return f"Job {name} is being deleted (its finalizer waits for its pods)"
    if job.spec.workload_retention != WorkloadRetention.RELEASE:
        return f"Job {name} keeps its workload (workloadRetention Retain)"
    cond = released_condition(job.status)
    if cond is None:
        return f"Job {name} has not released its workload yet"
    if cond.status != ConditionStatus.TRUE:
        return f"Job {name}: {cond.message}"
    return None


def workflow_remains(wf: Workflow) -> str | None:
    """Why the Workflow ``wf`` still holds workloads, or ``None`` when it is cleaned up."""
    name = wf.metadata.name or ""
    cond = condition(wf.status.conditions, ConditionType.CLEANED_UP)
    if cond is None:
        return f"Workflow {name} has not reported its cleanup yet"
    if cond.status != ConditionStatus.TRUE:
        return f"Workflow {name}: {cond.message}"
    return None


def cleaned_up(conditions: tuple[Condition, ...], remaining: Iterable[str | None], *,
               noun: str, now: datetime, generation: int | None
               ) -> tuple[tuple[Condition, ...], EventSpec | None]:
    """``conditions`` with ``CleanedUp`` set from what each of the run's ``noun``s (Job or
    Workflow) still holds (``None``: nothing), and the event of its flip to True."""
    found = list(remaining)
    left = [r for r in found if r is not None]
    if not left:
        message = (f"Every workload of the run is gone ({count(len(found), noun)}: TrainJobs "
                   "and their pods deleted)") if found else "The run created no workload"
        return set_additive(conditions, type_=ConditionType.CLEANED_UP, status=True,
                            reason=CleanupReason.WORKLOADS_RELEASED, message=message, now=now,
                            generation=generation)
    shown = "; ".join(left[:LISTED])
    more = f"; and {len(left) - LISTED} more" if len(left) > LISTED else ""
    holds = "holds a workload" if len(left) == 1 else "hold workloads"
    message = f"{len(left)} of {count(len(found), noun)} still {holds}: {shown}{more}"
    return set_additive(conditions, type_=ConditionType.CLEANED_UP, status=False,
                        reason=CleanupReason.WORKLOADS_REMAINING, message=message, now=now,
                        generation=generation)

S = TypeVar("S", WorkflowStatus, CertificationStatus)


def with_cleanup(plan: Plan[S], current: S, remaining: Iterable[str | None], *, noun: str,
                 now: datetime, generation: int | None) -> Plan[S]:
    """``plan`` with the ``CleanedUp`` condition of a terminal run (a Workflow's Jobs, a
    Certification's Workflows: ``noun``) brought up to date from what each still holds;
    ``current``: the status the plan starts from. A plan that asks, or a run still in progress,
    is left as it is."""
    status = plan.status if plan.status is not None else current
    member = true_member(status.conditions)
    if plan.asks or member is None or member.type == ConditionType.IN_PROGRESS:
        return plan
    conditions, flipped = cleaned_up(status.conditions, remaining, noun=noun, now=now,
                                     generation=generation)
    if conditions == status.conditions:
        return plan
    events = plan.events if flipped is None else (*plan.events, flipped)
    return attrs.evolve(plan, status=attrs.evolve(status, conditions=conditions), events=events)
