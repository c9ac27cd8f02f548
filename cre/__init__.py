"""CRE, the Cluster Readiness Engine: certify GPU clusters on Kubernetes before they take real work.

Layers (imports point downwards only): ``cre.api`` (models) <- ``cre.catalog`` <- ``cre.render``
<- ``cre.core`` (pure reconciliation) <- ``cre.kube`` (I/O edge) <- ``cre.controller`` (glue).
``cre.testing`` ships the API emulator, the cluster simulator and the golden harness.
"""

__version__ = "0.1.0"
