"""Kubernetes API server emulator: a real protocol peer for controllers, kubectl and clients.

Start it with :func:`serve` (an async context manager yielding an :class:`Emulator`), from pytest
with the ``kube_emulator`` fixture, or as a process with ``python -m cre.testing.apiserver``.
See ``docs/design/003-api-emulator.md`` for its scope.
"""

from .emulator import Clock, Emulator, Objects, serve
from .faults import Faults

__all__ = ["Clock", "Emulator", "Faults", "Objects", "serve"]
