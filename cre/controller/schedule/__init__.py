"""The CertificationSchedule controller (:class:`cre.controller.ScheduleController`).

Internal: import the public names from :mod:`cre.controller`.
"""
