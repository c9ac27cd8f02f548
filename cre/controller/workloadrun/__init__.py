"""The WorkloadRun controller.

Internal: import the controllers from :mod:`cre.controller`.
"""
