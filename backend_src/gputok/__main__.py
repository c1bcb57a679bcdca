"""``python -m gputok ...``: the gputok command line (gputok/cli.py)."""

from gputok.cli import entry

entry()
