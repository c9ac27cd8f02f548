"""cre.controller: the glue per kind — caches -> Observation -> pure core -> Plan -> executor.

:class:`cre.controller.job.JobController` runs the Job tier: a Reconciler on
:mod:`cre.kube.runtime` plus its early capture (:mod:`~cre.controller.prefetch`,
:mod:`~cre.controller.tombstones`); its I/O is in :mod:`cre.controller.jobshell`.
:mod:`cre.controller.scenario` scripts the cluster side of a run (pods, TrainJob conditions) for
tests, goldens and benchmarks; :mod:`cre.controller.golden` is the ``type: job`` golden-case
runner.
"""
