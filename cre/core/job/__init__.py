"""The Job kind's pure core: :func:`cre.core.reconcile_job` and what it decides with (failure
class, failure log, health, image pulls, stalls, the workload, thresholds, the Job's side of its
measurements).

Internal: import the public names from :mod:`cre.core`.
"""
