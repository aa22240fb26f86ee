"""``python -m strom`` is the ``strom`` command."""

import sys

from strom.cli import main

sys.exit(main())
