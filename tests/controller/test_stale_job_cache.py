"""A Job cache that missed the Job's deletion never makes the controller create its workload.

The chaos soak found it: a Job deleted while the manager's watches were refused with 410 stayed
in the cache (its DELETED event never seen); each reconcile of that cached copy created its
TrainJob (admitted), the status write answered 404, the garbage collector removed the TrainJob
(its owner's uid is gone), and the TrainJob's own events brought the Job back to create it
again: hundreds of creates for one deleted Job. Here the stale cache is made by hand (the Job
put in the controller's store, never on the server), the collector is the test deleting what
was created, and the reconciles are called directly: no watch, no worker, no clock.
"""

from __future__ import annotations

import attrs
import pytest

from cre.controller.job.controller import JobController
from cre.core.job.workload import workload_name
from cre.kube.client import TRAINJOBS, ApiError
from cre.testing.apiserver import Emulator
from cre.testing.jobharness import JobHarness
from cre.testing.strategies.job import make_job

pytestmark = pytest.mark.anyio


def _trainjob_creates(emu: Emulator, ns: str) -> int:
    """TrainJob creates the emulator admitted in ``ns`` (its audit)."""
    return sum(1 for r in emu.audit.since() if r.verb == "create" and r.resource == "trainjobs"
               and r.namespace == ns and r.code == 201)


async def _collect(c: JobController, ns: str, name: str) -> None:
    """The garbage collector: the TrainJob of a Job that does not exist is deleted."""
    try:
        await c.client.delete(TRAINJOBS, workload_name(name), namespace=ns)
    except ApiError as exc:
        if not exc.not_found:
            raise


async def test_deleted_job_left_in_the_cache_creates_nothing(
        job_harness: JobHarness, shared_emulator: Emulator) -> None:
    """Five reconciles of a cached Job the server no longer has (as a TrainJob's events would
    bring it back) admit no TrainJob create."""
    name, ns = "stale-gone", job_harness.namespace
    c = JobController(job_harness.client, namespaces=[ns])  # idle: no watch, no worker
    job = make_job(name=name, uid="uid-of-a-deleted-job")
    job = attrs.evolve(job, metadata=attrs.evolve(job.metadata, namespace=ns))
    c.jobs.store._put(f"{ns}/{name}", job, job.metadata.resource_version or "")
    before = _trainjob_creates(shared_emulator, ns)
    for _ in range(5):
        await c.reconcile(f"{ns}/{name}")
        await _collect(c, ns, name)
    assert _trainjob_creates(shared_emulator, ns) - before == 0
