"""``python -m sim.cli``: the ``vtasim`` command without the console script."""

import sys

from sim.cli import main

sys.exit(main())
