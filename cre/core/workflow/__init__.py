"""The Workflow kind's pure core: :func:`cre.core.reconcile_workflow`, its running phase,
discovery, partitioning, dependencies, overrides, deferral and node results.

Internal: import the public names from :mod:`cre.core`.
"""
