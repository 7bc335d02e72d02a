"""``python -m parvox``: the ``parvox`` command."""

import sys

from parvox.cli import main

sys.exit(main())
