"""The Certification kind's pure core: :func:`cre.core.reconcile_certification` and the per-
category Workflow build.

Internal: import the public names from :mod:`cre.core`.
"""
