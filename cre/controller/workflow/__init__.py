"""The Workflow controller and its shell.

Internal: import the controllers from :mod:`cre.controller`.
"""
