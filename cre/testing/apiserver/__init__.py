"""Kubernetes API server emulator: a real protocol peer for controllers, kubectl and clients.

Start it with :func:`serve` (an async context manager yielding an :class:`Emulator`), from pytest
with the ``kube_emulator`` fixture, or as a process with ``python -m cre.testing.apiserver``.
See ``docs/design/003-api-emulator.md`` for its scope.
"""

from ._cel import Program as CelProgram
from ._cel import compile_expression as compile_cel
from .emulator import Clock, Emulator, Objects, serve
from .faults import Faults

# The CEL compiler of CRD rules is exported for the offline schema checks (cre.testing.schemas).
__all__ = ["CelProgram", "Clock", "Emulator", "Faults", "Objects", "compile_cel", "serve"]
