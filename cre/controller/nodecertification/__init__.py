"""The NodeCertification controller (:class:`cre.controller.NodeCertificationController`).

Internal: import the public names from :mod:`cre.controller`.
"""
