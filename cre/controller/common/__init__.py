"""What the tier controllers share (Workflow, Certification, WorkloadRun): applying a tier plan.

Internal: import the controllers from :mod:`cre.controller`.
"""
