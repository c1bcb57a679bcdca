#!/usr/bin/env python3
"""Where a corpus worker's threads are, from py-spy's raw profiles (scripts/gpu_profile_workers.sh).

py-spy's raw format is one stack a line, ``frame;frame;...;leaf COUNT``, outermost first. Each
sample is put in one class, by the first rule whose words all appear in its stack (RULES: the
tokenizer and decode calls split into the UTF-8 check, waiting for the GPU, the copies and
retaking the GIL; the writer; the reader; idle threads; Dask's own threads), and the classes
are printed as shares of all samples. Waiting threads are counted too: py-spy samples a
native wait as it samples work, so a share is where threads are, not CPU time.

    python bench/profile_summary.py prof-1.txt [prof-2.txt ...]   (.gz read as is)
"""

from __future__ import annotations

import argparse
import collections
import gzip
from pathlib import Path

# A CPython thread waiting for the GIL sits in these (3.12: take_gil's timed condition wait).
GIL = ("pthread_cond_timedwait", "pthread_mutex_lock")

# (class, words that must all be in the stack, words none of which may be); the first match wins.
RULES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("tokenizer call: UTF-8 check", ("encode_packed", "all_valid"), ()),
    ("tokenizer call: waiting for the GPU", ("encode_packed", "cudaEventSynchronize"), ()),
    ("tokenizer call: waiting for the GPU", ("encode_packed", "cudaStreamSynchronize"), ()),
    ("tokenizer call: staging copy (and its pool)", ("encode_packed", "parallel_copy"), ()),
    ("tokenizer call: copy-out (and its pool)", ("encode_packed", "copy_out"), ()),
    ("decode call: waiting for the GPU", ("parquet_decode", "cudaEventSynchronize"), ()),
    ("decode call: copies (and their pool)", ("parquet_decode", "parallel_for"), ()),
    ("decode call: spans", ("parquet_decode", "ParquetSpanCursor"), ()),
    ("reader: finding text separators", ("_find_all", "find_separators"), GIL),
    # a native call's return: pybind11 takes the GIL back
    ("native call: retaking the GIL", ("pybind11", GIL[0]), ()),
    ("native call: retaking the GIL", ("pybind11", GIL[1]), ()),
    ("tokenizer call: other", ("encode_packed",), ()),
    ("decode call: other", ("parquet_decode",), ()),
    ("writer: hash", ("_HashedFile.write", "_xxhash"), GIL),
    ("writer: hash", ("_HashedFile.write", "sha256"), GIL),
    ("writer: write", ("_HashedFile.write", "write (libc"), GIL),
    ("writer: retaking the GIL", ("_HashedFile.write",), ()),
    ("reader: file read", ("_decode_row_groups", "read (libc"), GIL),
    ("reader: file read", ("_read_all", "read (libc"), GIL),
    ("idle: thread pools and queues", ("Condition.wait",), ()),
    ("idle: thread pools and queues", ("concurrent/futures/thread.py",), ()),
    ("Dask: event loop, profiler, pipes", ("selectors.py",), ()),
    ("Dask: event loop, profiler, pipes", ("distributed/profile.py",), ()),
    ("Dask: event loop, profiler, pipes", ("multiprocessing/connection.py",), ()),
    ("Dask: event loop, profiler, pipes", ("tornado",), ()),
    ("Python: retaking the GIL", GIL[:1], ()),
    ("Python: retaking the GIL", GIL[1:], ()),
]


def classify(stack: str) -> str:
    for name, need, forbid in RULES:
        if all(w in stack for w in need) and not any(w in stack for w in forbid):
            return name
    return "other"


def summarize(lines) -> collections.Counter:
    """Samples per class over py-spy raw lines (blank or malformed lines are skipped)."""
    out: collections.Counter = collections.Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if stack and count.isdigit():
            out[classify(stack)] += int(count)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+", type=Path)
    args = ap.parse_args()
    total: collections.Counter = collections.Counter()
    for p in args.profiles:
        with gzip.open(p, "rt") if p.suffix == ".gz" else open(p) as f:
            total += summarize(f)
    n = sum(total.values())
    print(f"{n} samples in {len(args.profiles)} profile(s)")
    print("| where | samples | share |")
    print("|---|---:|---:|")
    for name, k in total.most_common():
        print(f"| {name} | {k} | {100 * k / max(n, 1):.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
