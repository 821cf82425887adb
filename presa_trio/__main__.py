"""``python -m presa_trio``: the same as the ``presa-trio`` command."""

import sys

from ._cli import main

sys.exit(main())
