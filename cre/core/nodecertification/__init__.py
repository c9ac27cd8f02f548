"""The NodeCertification kind's pure core: :func:`cre.core.reconcile_nodecertification`.

Internal: import the public names from :mod:`cre.core`.
"""
