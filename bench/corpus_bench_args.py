"""bench/bench_corpus.py's command line."""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import add_docs_options

REPO = Path(__file__).resolve().parents[1]


def parse_args(description: str, C, docs_path: Path, argv: list[str] | None = None):
    """The options; ``C``: gputok.corpus (its hashes), ``docs_path``: the day's note."""
    ap = argparse.ArgumentParser(description=description)
    _input_and_workers(ap)
    _pipeline(ap, C)
    ap.add_argument("--work-dir", default=str(REPO / ".cache" / "bench-corpus"))
    add_docs_options(ap)
    ap.add_argument("--docs-path", default=str(docs_path))
    return ap.parse_args(argv)


def _input_and_workers(ap: argparse.ArgumentParser) -> None:
    """The input corpus and the runs: workers, GPUs, decoders, contenders on Dask."""
    ap.add_argument(
        "--quick",
        action="store_true",
        help="ci corpus, 4 shards, 1 and 2 workers, no docs (a smoke run)",
    )
    ap.add_argument("--profile", choices=("ci", "bench"), default=None)
    ap.add_argument("--scale", type=int, default=None, help="repeat the corpus (default 8; 1)")
    ap.add_argument("--shards", type=int, default=None, help="input shards (default 32; 4)")
    ap.add_argument(
        "--format",
        choices=("parquet", "jsonl", "text"),
        default=None,
        help="input format (default: parquet, or text where pyarrow is not installed)",
    )
    ap.add_argument(
        "--workers",
        default="1,2",
        help="GPU counts (on a GPU machine) or CPU worker counts to run, e.g. 1,2",
    )
    ap.add_argument(
        "--workers-per-gpu",
        default="",
        metavar="P[,P...]",
        help="gputok worker processes per GPU to run, e.g. 1,2,4 (default: the library's, "
        "min(4, cores / (4 x GPUs)))",
    )
    ap.add_argument(
        "--parquet-decoders",
        default="auto",
        metavar="D[,D...]",
        help="gputok runs with each Parquet decoder: auto (the default: gputok-gpu for GPU "
        "workers), gputok (its page reader on the CPU), gputok-gpu (snappy on the GPU), arrow "
        "(the contenders always read through Arrow)",
    )
    ap.add_argument(
        "--contender-workers",
        type=int,
        default=0,
        metavar="W",
        help="also run gigatoken (and --null) on a local Dask cluster of W worker processes "
        "through the same tasks, each with cores / W rayon threads (default: in-process only)",
    )
    ap.add_argument(
        "--switch-interval-ms",
        type=float,
        default=None,
        help="sys.setswitchinterval on every Dask worker (default: Python's 5 ms)",
    )
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs each (default 3; 1)")


def _pipeline(ap: argparse.ArgumentParser, C) -> None:
    """How every contender's pipeline runs: fsync, batches, hashes, threads."""
    ap.add_argument(
        "--no-fsync",
        action="store_true",
        help="every contender skips fsync (measures without the disk's flush)",
    )
    ap.add_argument(
        "--no-writeback",
        action="store_true",
        help="no early writeback of shard files (GPUTOK_CORPUS_WRITEBACK=0): the whole shard "
        "goes to disk at its fsync",
    )
    ap.add_argument(
        "--null",
        action="store_true",
        help="also time the pipeline with no tokenizer (its ceiling), in-process",
    )
    ap.add_argument(
        "--threads-per-worker",
        type=int,
        default=None,
        metavar="T",
        help="shards each gputok worker runs at once (default: the library's, "
        "min(4, cores / (GPUs x workers per GPU)) on GPU workers, 1 on CPU workers)",
    )
    ap.add_argument(
        "--gigatoken-shards",
        type=int,
        default=None,
        metavar="K",
        help="shards gigatoken (and --null) runs at once in its process (default: T, "
        "gputok's threads per worker)",
    )
    ap.add_argument(
        "--min-batch-mb",
        type=float,
        default=None,
        help="fewest MB of text per tokenizer call, every contender (default: the "
        "library's, 4 on the GPU, 1 on the CPU and for gigatoken)",
    )
    ap.add_argument(
        "--hash",
        choices=C.HASHES,
        default=C.DEFAULT_HASH,
        help="how every contender's pipeline hashes the shard files (gputok corpus --hash)",
    )
    ap.add_argument(
        "--sample-threads",
        action="store_true",
        help="gputok rows: CPU seconds per thread kind and on-CPU Python frames in every "
        "worker during the timed runs (bench/thread_sampler.py), in the log and the JSON",
    )
    ap.add_argument(
        "--threads-in-process",
        action="store_true",
        help="workers as threads of this process (default: processes)",
    )
