"""The ``cre`` command (also ``kubectl cre``): render, validate, catalog, status, report.

A person's entry point to CRE, next to the ``cre-manager`` process. Offline commands read the
shipped catalog and files; ``status`` and ``report`` read a cluster through
:class:`cre.kube.client.KubeClient`. Needs the ``cli`` extra (``pip install 'cre[cli]'``):
click for the command line, rich for the terminal, jsonschema and kubernetes-validate for the
offline schema checks. Importing this package loads none of them; ``cre.cli.app`` loads
click only, and each command what it needs (``cre --help`` answers at once).

For programs (the demo ends with the HTML report): :func:`cre.cli.session.write_html_report`.
"""
