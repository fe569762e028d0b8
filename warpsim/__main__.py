"""``python -m warpsim``: the warpsim command line (see :mod:`warpsim.tools.cli`)."""

import sys

from warpsim.tools.cli import main

sys.exit(main())
