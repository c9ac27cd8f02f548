"""The ReportExportPolicy and ReportExport controllers (docs/design/023-report-export.md).

Internal: import the controllers from :mod:`cre.controller`.
"""
