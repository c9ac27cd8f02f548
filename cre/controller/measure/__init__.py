"""The BandwidthMeasurement and GoodputMeasurement controllers, the log-reading shell they share,
and their metrics.

Internal: import the controllers from :mod:`cre.controller`.
"""
