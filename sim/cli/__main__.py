"""``python -m vtasim.sim.cli``: the ``vtasim`` command without the console script."""

import sys

from vtasim.sim.cli import main

sys.exit(main())
