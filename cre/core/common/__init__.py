"""What every kind's pure core shares: the slim views and their projections, the Observation and
Plan types, the lifecycle conditions, timeouts and wording.

Internal: import the public names from :mod:`cre.core`.
"""
