"""``python -m gputok ...``: the gputok command line (gputok/cli.py)."""

import sys

from gputok.cli import main

sys.exit(main())
