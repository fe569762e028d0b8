"""``python -m warpsim``: the warpsim command line (see :mod:`warpsim.cli`)."""

import sys

from .cli import main

sys.exit(main())
