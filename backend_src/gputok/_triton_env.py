"""The old name of `gputok.serve.triton`, kept for the scripts and tests that import it: the
same module object, private names and state included."""

import sys

from gputok.serve import triton as _triton

sys.modules[__name__] = _triton
