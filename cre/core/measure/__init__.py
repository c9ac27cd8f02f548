"""The log-reading measurements' pure cores: the shared log reading, bandwidth
(BandwidthMeasurement) with its nccl-tests parser, goodput (GoodputMeasurement) with its log
parser and profiles.

Internal: import the public names from :mod:`cre.core`.
"""
