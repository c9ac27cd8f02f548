"""TrainJob names: short enough for the pods JobSet derives from them, and distinct per Job."""

from __future__ import annotations

from cre.core.job.workload import WORKLOAD_NAME_MAX, workload_name
from cre.core.workflow.groupjob import job_name


def test_a_short_job_name_keeps_its_workload_name_readable() -> None:
    """A Job whose name fits gets ``<job>-workload`` unchanged."""
    assert workload_name("j1") == "j1-workload"


def test_the_groups_of_a_large_certification_get_distinct_trainjobs() -> None:
    """10,000 groups of one long-named Workflow (the names share every character the cut
    keeps) get 10,000 distinct TrainJob names, each within the limit: a 5,000-node run must
    never fail a group on a collision with its own sibling."""
    workflow = "cert-communication-nccl-all-reduce"
    names = {workload_name(job_name(workflow, group=f"group-{g}", iteration=1, single=False))
             for g in range(10_000)}
    assert len(names) == 10_000
    assert max(len(n) for n in names) <= WORKLOAD_NAME_MAX


def test_a_cut_name_is_stable_and_ends_in_its_digest() -> None:
    """The same Job always gets the same TrainJob name (re-adoption after a restart)."""
    long = "c-communication-nccl-all-reduce-group-451-iter-1"
    first = workload_name(long)
    assert first == workload_name(long)
    head, _, digest = first.rpartition("-")
    assert len(digest) == 10 and long.startswith(head)
