"""Third-party data CRE ships unmodified (internal): the upstream CRDs in :mod:`cre._vendor.crds`.

Data only, importing nothing of CRE, so every layer may read it: ``cre validate`` checks
manifests against these schemas, and the test kit's emulator installs them.
"""
