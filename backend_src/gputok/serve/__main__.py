import sys

from gputok.serve.cli import main

sys.exit(main())
