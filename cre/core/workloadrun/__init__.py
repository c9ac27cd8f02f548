"""The WorkloadRun kind's pure core: :func:`cre.core.reconcile_workloadrun`.

Internal: import the public names from :mod:`cre.core`.
"""
