"""Thread counts: a bound with a clear error, no more threads than the hardware has, and a
system that refuses a thread (address-space limit) gives a smaller pool, never a hang."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gputok

DOCS = ["The quick brown fox jumps over the lazy dog. " * 50 + str(i) for i in range(400)]


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.parametrize("call", ["encode_batch_flat", "encode_batch_uint16"])
def test_num_threads_above_the_bound_is_a_clear_error(call):
    tok = gputok.gpt2(device="cpu")
    with pytest.raises(ValueError, match=r"num_threads must be <= 1024"):
        getattr(tok, call)(DOCS[:2], num_threads=10_000)
    with pytest.raises(ValueError, match=r"num_threads must be <= 1024"):
        tok.encode_buffer_flat(b"abc", np.array([0, 3]), num_threads=1025)


def test_many_threads_start_no_more_than_the_hardware_has():
    tok = gputok.gpt2(device="cpu")
    want = tok.encode_batch_flat(DOCS, num_threads=1)
    before = _threads()
    got = tok.encode_batch_flat(DOCS, num_threads=1000)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert len(want[0]) > 0
    assert _threads() - before <= (os.cpu_count() or 1) - 1


def test_refused_thread_creation_runs_on_fewer_threads_without_hanging():
    # Under an address-space limit just above what the process maps, the pool's first
    # worker (an 8 MiB stack) cannot start. The call must still finish, with the same ids.
    code = textwrap.dedent(
        """
        import resource, sys
        import numpy as np
        import gputok
        docs = ["The quick brown fox jumps over the lazy dog. " * 50 + str(i) for i in range(400)]
        tok = gputok.gpt2(device="cpu")
        want = tok.encode_batch_flat(docs, num_threads=1)
        size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (size + (4 << 20), resource.RLIM_INFINITY))
        got = tok.encode_batch_flat(docs, num_threads=64)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        assert len(want[0]) > 0
        print("ok")
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
