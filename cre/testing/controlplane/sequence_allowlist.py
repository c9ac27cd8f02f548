"""The understood differences between the simulated and the real Job controller and scheduler.

Each entry of :data:`ALLOWED` names the scenarios and objects it covers (fnmatch patterns),
which comparison (``sequence``: an object's distinct states; ``collected``: the scenario's
golden output) and the reason, so the report of :mod:`.sequences` never hides a difference
without saying why.
"""

from __future__ import annotations

from typing import Final

from .sequences import Allowed

ALLOWED: Final[tuple[Allowed, ...]] = ()
