"""``python -m bookindex``: the ``bookindex`` command (``bookindex.cli``)."""

import sys

from bookindex.cli import main

sys.exit(main())
