"""``python -m governor.cli``: the `governor` command."""

import sys

from governor.cli import main

sys.exit(main())
