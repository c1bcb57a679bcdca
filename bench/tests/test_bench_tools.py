"""Tools of bench/: thread_sampler.py (bench_corpus.py --sample-threads: CPU seconds per thread
kind, threads that ended before stop() included, and on-CPU frames of busy threads), and
bench_corpus_e2e.py's rounds."""

from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

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


def test_profile_summary_classes():
    """bench/profile_summary.py: each py-spy raw stack in one class, the first rule that fits;
    GIL waits inside the writer are not counted as its work."""
    import profile_summary as ps

    py = "thread (1): gputok-corpus-writer_0;Thread.run (threading.py:1010)"
    lines = [
        f"{py};Tokenizer._packed (gputok/_tokenizer.py:231);Core::encode_packed_buffer (x.so);"
        "gputok::utf8_first_invalid (x.so);gputok::simd::all_valid (x.so) 7\n",
        f"{py};Core::encode_packed_buffer (x.so);gputok::wait_for (x.so);"
        "cudaEventSynchronize (x.so) 5\n",
        f"{py};_HashedFile.write (gputok/corpus.py:885);write (libc.so.6) 3\n",
        f"{py};_HashedFile.write (gputok/corpus.py:885);pthread_cond_timedwait (libc.so.6) 2\n",
        f"{py};_HashedFile.write (gputok/corpus.py:884);PYXXH3_128_update (_xxhash.c:1934) 1\n",
        f"{py};Condition.wait (threading.py:355);pthread_cond_timedwait (libc.so.6) 4\n",
        "not a profile line\n",
        "\n",
    ]
    got = ps.summarize(lines)
    assert got == {
        "tokenizer call: UTF-8 check": 7,
        "tokenizer call: waiting for the GPU": 5,
        "writer: write": 3,
        "writer: retaking the GIL": 2,
        "writer: hash": 1,
        "idle: thread pools and queues": 4,
    }
    assert ps.classify("main;something_else 1") == "other"


def test_e2e_rounds_alternate_and_report_each_contenders_median(monkeypatch, tmp_path):
    """bench_corpus_e2e --rounds: gigatoken then gputok each round, every round's time kept,
    the median round reported and the ratio taken from the two medians."""
    import argparse

    import bench_corpus_e2e as e2e

    order: list[str] = []
    ours, theirs = iter([3.0, 2.0, 1.0]), iter([9.0, 6.0, 3.0])
    (tmp_path / "a").write_bytes(b"x")
    monkeypatch.setattr(e2e, "write_inputs", lambda *a: ([tmp_path / "a"], [1], 10))
    monkeypatch.setattr(e2e, "same_output", lambda *a: (True, 5))

    def gigatoken(job):
        order.append("gigatoken")
        return {"wall_s": next(theirs), "encode_s": 0.1}

    def gputok(*a):
        order.append("gputok")
        return {"wall_s": next(ours), "startup_s": 0.1, "tasks": 1, "in_process": True}

    monkeypatch.setattr(e2e, "run_gigatoken", gigatoken)
    monkeypatch.setattr(e2e, "run_gputok", gputok)
    args = argparse.Namespace(
        rounds=3,
        both_modes=set(),
        gputok_args="",
        gigatoken_call_gb=2.0,
        gigatoken_config="tiktoken",
        other_gigatoken=False,
    )
    row = e2e.one_config(args, tmp_path, "diverse", ["d"], "jsonl", 0.001, 1.0)
    assert order == ["gigatoken", "gputok"] * 3
    assert row["gputok"]["rounds_s"] == [3.0, 2.0, 1.0]
    assert row["gputok"]["wall_s"] == 2.0 and row["gigatoken"]["wall_s"] == 6.0
    assert row["speedup"] == 3.0 and row["exact"]
