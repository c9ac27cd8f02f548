"""A group Job's name fits Kubernetes' limit and still says which test it runs: a shortened
name keeps the variant (the end of the Workflow name), the group, iteration and retry."""

from __future__ import annotations

from cre.core.workflow.groupjob import job_name, shorten_words
from cre.render.workload import MAX_JOB_NAME

WORKFLOW = "gpu-cert-communication-nccl-all-reduce"


def test_a_retry_keeps_the_variant() -> None:
    """The retry's name (too long in full) drops middle words, not the variant."""
    name = job_name(WORKFLOW, group="group-1", iteration=1, single=False, attempt=1)
    assert len(name) <= MAX_JOB_NAME
    assert name.startswith("gpu-nccl-all-reduce-")
    assert name.endswith("-group-1-iter-1-retry-1")
    first = job_name(WORKFLOW, group="group-1", iteration=1, single=False)
    assert first == f"{WORKFLOW}-group-1-iter-1"  # short enough: unchanged


def test_shortened_names_stay_distinct() -> None:
    """Two Workflows that shorten to the same words still get different Job names (the digest
    of the full name)."""
    a = job_name("cert-a-communication-nccl-all-reduce", group="group-10", iteration=2,
                 single=False, attempt=3)
    b = job_name("cert-b-communication-nccl-all-reduce", group="group-10", iteration=2,
                 single=False, attempt=3)
    assert a != b and len(a) <= MAX_JOB_NAME and len(b) <= MAX_JOB_NAME


def test_shorten_words_prefers_the_end_then_the_start() -> None:
    """Whole words from the end first, then from the start; one long word is cut."""
    assert shorten_words("gpu-cert-communication-nccl-all-reduce", 22) == "gpu-nccl-all-reduce"
    assert shorten_words("gpu-cert-communication-nccl-all-reduce", 24) == \
        "gpu-cert-nccl-all-reduce"
    assert shorten_words("x" * 30, 10) == "x" * 10
