"""cre-manager: the thin process that wires CRE's informers and controllers together."""

from cre import __version__

__all__ = ["__version__"]
