"""``python -m cre.cli``: the ``cre`` command."""

import sys

from cre.cli.entry import main

sys.exit(main())
