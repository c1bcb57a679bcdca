"""bench/thread_sampler.py (bench_corpus.py --sample-threads): CPU seconds per thread kind,
threads that ended before stop() included, and on-CPU frames of busy threads."""

from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import thread_sampler  # noqa: E402


def _hash_for_a_while():
    data = b"x" * (8 << 20)
    for _ in range(40):
        hashlib.sha256(data).digest()  # releases the GIL: the sampler sees it running


def test_sampler_counts_ended_threads_and_their_frames():
    assert thread_sampler.stop() is None  # nothing started
    thread_sampler.start(interval=0.002)
    workers = [threading.Thread(target=_hash_for_a_while, name=f"hasher-{k}") for k in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    out = thread_sampler.stop()
    assert out is not None and out["seconds"] > 0
    assert out["threads"].get("hasher", 0) > 0.1, out["threads"]  # ended, still counted
    assert out["samples"]["(samples)"] > 0
    assert any("_hash_for_a_while" in where for where in out["samples"]), out["samples"]
    assert thread_sampler.stop() is None  # stopped once


def test_thread_kinds_group_numbered_pools():
    assert thread_sampler._group("gputok-corpus-writer_3") == "gputok-corpus-writer"
    assert thread_sampler._group("hasher-12") == "hasher"
    assert thread_sampler._group(None) == "native"
