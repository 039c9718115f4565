"""python -m scalestudy.ui: see scalestudy.ui.server."""

import sys

from .server import main

sys.exit(main())
