"""Entry point of ``cre-manager`` and ``python -m cre_manager``."""

from __future__ import annotations

import sys

from cre_manager.app import main

if __name__ == "__main__":
    sys.exit(main())
