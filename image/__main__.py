"""``python -m image {tools,bases,build,version}``."""

import sys

from image.build import main

sys.exit(main())
