"""The ReportExportPolicy and ReportExport kinds' pure core:
:func:`cre.core.reconcile_reportexportpolicy` (which exports exist) and
:func:`cre.core.reconcile_reportexport` (one delivery's next step).

Internal: import the public names from :mod:`cre.core`.
"""
