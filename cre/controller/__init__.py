"""cre.controller: the glue per kind — caches -> Observation -> pure core -> Plan -> executor.

:class:`cre.controller.job.JobController` runs the Job tier: a Reconciler on
:mod:`cre.kube.runtime` plus its early capture (:mod:`~cre.controller.prefetch`,
:mod:`~cre.controller.tombstones`); its I/O is in :mod:`cre.controller.jobshell`. The test kit
drives it through :mod:`cre.testing.jobharness` (a scripted cluster side for tests, goldens and
benchmarks).
"""

from cre.controller.job import JobController

__all__ = ["JobController"]
