"""The CertificationSchedule kind's pure core: :func:`cre.core.reconcile_schedule`.

Internal: import the public names from :mod:`cre.core`.
"""
