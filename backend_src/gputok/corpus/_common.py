"""Constants and errors shared by the corpus tool's modules."""

from __future__ import annotations

import os

FORMAT_NAME = "gputok-corpus"


FORMAT_VERSION = 1


FORMATS = ("text", "jsonl", "parquet")


ERROR_POLICIES = ("strict", "replace", "skip")


MANIFEST = "manifest.json"


STAGES = ("read_wait", "encode", "write_wait", "finish")  # CorpusRun.stage_seconds


MAX_ID = 65535  # uint16


DEFAULT_BATCH_BYTES = 32 << 20  # text per tokenizer call at most: bounds memory, amortizes it
# The same for text files, whose batches cost little to read: 8 MB calls start the GPU sooner
# and overlap more. H200, 2026-12-02 (bench/bench_corpus_ab.py, 3 rounds, whole commands, s;
# bench/results/2026-12-02-corpus-cpu-start-h200.md §3): 1 GB of code in 100 MB text shards
# 0.82-1.06 at 32 MB, 0.72-0.76 at 8, 0.71-0.73 at 4; Parquet and JSONL were no faster
# (Parquet in 100 MB shards 0.90-1.00 at 32, 0.95-1.00 at 8), so they keep 32.
TEXT_BATCH_BYTES = 8 << 20


# A shard is cut into at least this many batches (of at least the minimum batch), so that its
# reading, tokenizing and writing overlap even when it is smaller than batch_bytes.
PIPELINE_BATCHES = 4


MIN_BATCH_BYTES = 1 << 20  # the minimum batch on the CPU


# ... and on the GPU, where a call has a fixed cost (launches, copies: a 1 MB batch took 30 ms
# per 16.7 MB on an H200, i.e. ~1.8 ms per call) that bigger batches amortize.
GPU_MIN_BATCH_BYTES = 4 << 20


# Shards a GPU worker tokenizes at once (Dask threads per worker) at most; see
# default_threads_per_worker.
MAX_GPU_THREADS_PER_WORKER = 4


# Shards a run in this process (no cluster) tokenizes at once on one GPU at most; see
# default_in_process_threads.
MAX_IN_PROCESS_GPU_THREADS = 12
# ... and on the CPU path. H200 host, 16 cores, 2026-11-29 (bench_corpus_ab.py --device cpu
# with 1 / 2 / 4 / 8 shards at once, medians of 3; bench/results/2026-11-29-corpus-cpu-threads-
# h200.md): 200 MB in 1 MB shards, JSONL 0.80 / 0.92 / 0.80 / 0.66 s, Parquet 0.82 / 0.85 /
# 0.79 / 0.73; code Parquet in 10 shards of 20 MB 0.58 / 0.61 / 0.62 / 0.50; 3 shards of 100
# MB (where 8 at once leaves cores idle) Parquet 1.29 / 1.06 / 1.19 / 1.48.
MAX_IN_PROCESS_CPU_THREADS = 8


# Worker processes per GPU of a local cluster at most; see default_workers_per_gpu.
MAX_GPU_WORKERS_PER_GPU = 4


class CorpusError(RuntimeError):
    """A corpus run could not finish (bad output directory, or some shards failed)."""


class CorpusInputError(ValueError):
    """An input shard is unreadable or malformed; the message names the file and place."""


_ARROW_POOL_SET = False


def import_arrow():
    """pyarrow, imported where a reader first needs it, with Arrow's CPU pool given this
    process's cores the first time. Dask's nanny starts workers with OMP_NUM_THREADS=1 (for
    BLAS), and Arrow sizes its pool from that variable too, so Parquet shards were decoded on
    one thread per worker: on the H200 host (2026-11-22) a GPU worker spent 5.4 s of its
    shards' time waiting for the reader against 0.9 s encoding, and ran at 0.30 GB/s where the
    same pipeline in one process reached 0.76. Imported only when needed: a text run never
    reads through Arrow, nor a JSONL run whose files the native reader decides (importing
    pyarrow took 140 ms of a run's start on the dev VM, 2026-11-28). ImportError where
    pyarrow is not installed."""
    global _ARROW_POOL_SET
    import pyarrow as pa

    if not _ARROW_POOL_SET:
        _ARROW_POOL_SET = True
        cores = _cpu_count()
        if pa.cpu_count() < cores:
            pa.set_cpu_count(cores)
    return pa


def _cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
