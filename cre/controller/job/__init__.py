"""The Job controller, its shell, event mapping, early log capture, tombstones and metrics.

Internal: import the controllers from :mod:`cre.controller`.
"""
