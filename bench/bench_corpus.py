#!/usr/bin/env python3
"""Corpus tokenization throughput: `gputok corpus` on N Dask workers vs gigatoken, same run.

Not a test. End to end, in GB/s of UTF-8 text: read the input shards, tokenize, build uint16
ids with <|endoftext|> after every document, write .bin/.idx and hash them (--hash), fsync,
rename, write the manifest. Both contenders run exactly that pipeline (gputok.corpus.tokenize_shard):

* **gputok**: ``tokenize_corpus`` on a local Dask cluster of W workers for each W in
  ``--workers`` (one per GPU via dask-cuda's LocalCUDACluster where installed and a GPU is
  usable, else CPU worker processes with cores / (W x T) gputok threads each), each worker
  running T = ``--threads-per-worker`` shards at once (default: the library's, up to 4 on a
  GPU worker, 1 on a CPU worker). Cluster start-up and each worker's tokenizer load are
  excluded (a warm-up builds the tokenizers first, and one untimed run precedes the timed
  ones, for every contender).
* **gigatoken** on all cores: the same shards in this process, K = ``--gigatoken-shards`` at
  once (a thread pool; default K = gputok's T, so both overlap the same number of shards'
  reading and writing), with gigatoken ``encode_batch`` (its rayon pool spans every core, GIL
  released) in place of gputok.

Exactness: every gputok run's shard hashes must equal gigatoken's (the bytes are identical),
else the run is reported as a mismatch. Inputs are written once and read from the page cache.

Input: the pinned diverse corpus (bench/corpus.py; ``bench`` ~85 MB, ``ci`` ~4 MB with
``--quick``), repeated ``--scale`` times to reach a size where per-task overhead is small
(repeats flatter pretoken caches, gigatoken's above all; the table says so), cut into
``--shards`` files of ``--format`` (Parquet by default; JSONL is parsed in Python).

Results: JSON in ``bench/results/`` and, unless ``--quick`` (or with ``--docs``), a dated
subsection under "## Corpus tokenization" in the day's note ``bench/results/<date>-bench-runs.md``.

    .venv/bin/python bench/bench_corpus.py --quick              # CPU smoke run, ~1 min
    .venv/bin/python bench/bench_corpus.py --workers 1,2        # 2-GPU machine: 1 and 2 GPUs
    .venv/bin/python bench/bench_corpus.py --workers 1,2 --threads-per-worker 4 --null
    .venv/bin/python bench/bench_corpus.py --workers 1,2 --scale 16 --format jsonl
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "bench", REPO / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402
from _common import ncores  # noqa: E402
from corpus_bench_args import parse_args  # noqa: E402
from corpus_bench_common import TEXT_SEP, log, log_stages, machine, write_inputs  # noqa: E402
from corpus_bench_report import markdown, write_docs  # noqa: E402
from corpus_bench_runs import Bench, run_dask, run_in_process  # noqa: E402

# write_inputs, run_dask and run_in_process: also imported from here (bench/corpus_stages.py).
__all__ = ["GigatokenAdapter", "NullAdapter", "main", "run_dask", "run_in_process", "write_inputs"]

RESULTS = REPO / "bench" / "results"
DOCS = _common.DOCS  # a dated note in bench/results/, not docs/benchmarks.md


# ------------------------------------------------------------------ contenders
# The adapters and the worker functions stay in this script: Dask pickles them by value with
# it (``_install_contender`` runs on workers before this folder is on their sys.path).


class GigatokenAdapter:
    """gigatoken behind the one method tokenize_shard uses, returning gputok's flat layout."""

    device = "gigatoken"
    name = "gigatoken"
    n_vocab = 50257

    def __init__(self):
        from references import gigatoken_gpt2

        self.tok = gigatoken_gpt2()

    def encode_batch_flat(self, docs, num_threads=0, disallowed_special=(), errors="strict"):
        import awkward as ak
        import numpy as np

        out = self.tok.encode_batch(docs, parallel=True)
        lay = ak.to_layout(out)
        offs = np.asarray(lay.offsets, dtype=np.int64)
        ids = np.asarray(lay.content.data)[offs[0] : offs[-1]]
        return ids.astype(np.int32, copy=False), offs - offs[0]


class NullAdapter:
    """No tokenizer: one id per 4 bytes, all zero. Times the pipeline alone (read, pack,
    hash, write), the ceiling any tokenizer can reach through it. Like gputok it takes
    buffer batches as they are (``encode_buffer_flat``: no Python object per document)."""

    device = "null"
    name = "null"
    n_vocab = 50257

    def encode_batch_flat(self, docs, num_threads=0, disallowed_special=(), errors="strict"):
        import numpy as np

        lens = np.fromiter((len(d) // 4 for d in docs), dtype=np.int64, count=len(docs))
        return self._ids(lens)

    def encode_buffer_flat(
        self, data, offsets, num_threads=0, disallowed_special=(), errors="strict"
    ):
        import numpy as np

        b = np.asarray(offsets, dtype=np.int64)
        lens = np.diff(b) if b.ndim == 1 else b[:, 1] - b[:, 0]
        return self._ids(lens // 4)

    @staticmethod
    def _ids(lens):
        import numpy as np

        offs = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        return np.zeros(int(offs[-1]), dtype=np.int32), offs


def _install_contender(kind: str, rayon_threads: int, paths: list[str]) -> str:
    """On a Dask worker: put a CPU contender (``null`` or ``gigatoken``) where gputok's CPU
    tokenizer would be, so the same tokenize_shard tasks run it. (Pickled by value with
    this script's classes; ``paths``: where the adapters' imports are.)"""
    os.environ["RAYON_NUM_THREADS"] = str(rayon_threads)  # before gigatoken's pool starts
    for p in paths:
        if p not in sys.path:
            sys.path.insert(0, p)
    from gputok import corpus as C

    C._TOKENIZERS[("cpu", 0)] = GigatokenAdapter() if kind == "gigatoken" else NullAdapter()
    return kind


def _sampler(action: str, path: str):
    """On a Dask worker: thread_sampler.start() or .stop() (--sample-threads)."""
    if path not in sys.path:
        sys.path.insert(0, path)
    import thread_sampler

    return thread_sampler.start() if action == "start" else thread_sampler.stop()


# ------------------------------------------------------------------ main


def prepare(args: argparse.Namespace, C) -> tuple[Bench, dict]:
    """The settings, the report's first fields and the input shards, written once."""
    quick = args.quick
    profile = args.profile or ("ci" if quick else "bench")
    scale = args.scale or (1 if quick else 8)
    shards = args.shards or (4 if quick else 32)
    repeat = args.repeat or (1 if quick else 3)
    os.environ.setdefault("RAYON_NUM_THREADS", str(ncores()))  # gigatoken: all cores
    if args.no_writeback:  # before any worker starts: they inherit it
        os.environ["GPUTOK_CORPUS_WRITEBACK"] = "0"

    gpus = C.local_gpus(args.device)
    pw1 = C.default_workers_per_gpu(gpus)
    # gigatoken and the null pipeline: as many shards at once as one GPU's workers run.
    k_shards = args.gigatoken_shards or pw1 * (
        args.threads_per_worker or C.default_threads_per_worker(gpus, workers_per_gpu=pw1)
    )
    min_batch = None if args.min_batch_mb is None else int(args.min_batch_mb * 2**20)

    from corpus_fixture import load_corpus

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    rep = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join([".venv/bin/python", "bench/bench_corpus.py", *sys.argv[1:]]),
        "machine": machine(),
        "loadavg_start": list(os.getloadavg()),
        "repeat": repeat,
        "no_fsync": args.no_fsync,
        "hash": args.hash,
        "early_writeback": not args.no_writeback and not args.no_fsync,
        "threads_per_worker": args.threads_per_worker,
        "gigatoken_shards": k_shards,
        "min_batch_mb": args.min_batch_mb,
    }
    docs = load_corpus(profile) * scale
    if args.format is None:
        try:
            import pyarrow.parquet  # noqa: F401

            args.format = "parquet"
        except ImportError:
            args.format = "text"
            log("pyarrow is not installed: text input shards (documents split on \\x1e\\n)")
    sep = TEXT_SEP if args.format == "text" else None
    inputs, nbytes, ndocs = write_inputs(work, args.format, docs, shards)
    del docs
    log(f"input: {ndocs} documents, {nbytes / 1e6:.1f} MB in {shards} {args.format} shards")
    info = {
        "profile": profile,
        "scale": scale,
        "shards": shards,
        "format": args.format,
        "bytes": nbytes,
        "documents": ndocs,
    }
    cpu_min_mb = (min_batch or C.MIN_BATCH_BYTES) / 2**20
    bench = Bench(
        args, C, work, inputs, sep, nbytes, repeat, gpus, k_shards, min_batch, cpu_min_mb,
        info, _install_contender, _sampler,
    )  # fmt: skip
    return bench, rep


def run_in_process_contenders(b: Bench, rep: dict) -> tuple[list, int]:
    """The null pipeline (--null) and gigatoken in this process -> (gigatoken's shard
    hashes, the reference for every other run; its tokens)."""
    if b.args.null:
        nul = b.in_process(NullAdapter(), b.work / "out-null")
        rep["null"] = b.in_process_summary("pipeline alone (null tokenizer)", "null", nul)
    g = b.in_process(GigatokenAdapter(), b.work / "out-gigatoken")
    tokens = sum(e["tokens"] for e in g["entries"])
    rep["input"] = {**b.input_info, "tokens": tokens}
    rep["gigatoken"] = b.in_process_summary(
        f"gigatoken ({b.k_shards} shard(s) at once)", "gigatoken", g, tokens
    )
    return b.hashes(g["entries"]), tokens


def run_dask_contenders(b: Bench, rep: dict, ref_hashes: list) -> None:
    """gigatoken (and the null pipeline) on --contender-workers Dask workers."""
    rep["dask_contenders"] = []
    cw = b.args.contender_workers
    if not cw:
        return
    ctpw = max(1, b.k_shards // cw)
    for kind in ("null", "gigatoken") if b.args.null else ("gigatoken",):
        r = b.dask_run(b.work / f"out-dask-{kind}", cw, contender=kind, tpw=ctpw)
        med = statistics.median(r["seconds"])
        exact = b.hashes(r["entries"]) == ref_hashes
        rep["dask_contenders"].append(
            {
                "name": kind,
                "workers": r["workers"],
                "threads_per_worker": r["threads_per_worker"],
                "seconds": r["seconds"],
                "median_s": med,
                "GBps": b.nbytes / med / 1e9,
                "exact": exact or kind == "null",
                "cpu_busy": r["cpu_busy"],
                "stage_seconds": {k: round(v, 3) for k, v in r["stage_seconds"].items()},
            }
        )
        log(
            f"{kind} on {r['workers']} Dask workers x {r['threads_per_worker']} shards: "
            f"{med:.3f} s, {b.nbytes / med / 1e9:.3f} GB/s, host cores busy {r['cpu_busy']}"
        )
        log_stages(f"{kind} (dask)", r["stage_seconds"])
        shutil.rmtree(b.work / f"out-dask-{kind}", ignore_errors=True)


def _gputok_entry(b: Bench, r: dict, dec: str, tokens: int, exact: bool) -> dict:
    """The report entry of one gputok run."""
    s = statistics.median(r["seconds"])
    on_gpu = "cuda" in r["devices"]
    C = b.C
    return {
        "gpus": r["gpus"],
        "workers_per_gpu": r["workers_per_gpu"],
        "workers": r["workers"],
        "devices": r["devices"],
        "threads": r["threads"],
        "threads_per_worker": r["threads_per_worker"],
        "min_batch_mb": (b.min_batch or (C.GPU_MIN_BATCH_BYTES if on_gpu else C.MIN_BATCH_BYTES))
        / 2**20,
        "seconds": r["seconds"],
        "median_s": s,
        "GBps": b.nbytes / s / 1e9,
        "Mtokps": tokens / s / 1e6,
        "exact": exact,
        "stage_seconds": {k: round(v, 3) for k, v in r["stage_seconds"].items()},
        "cpu_busy": r["cpu_busy"],
        "parquet_decoder": dec,
        **({"thread_sample": r["thread_sample"]} if r["thread_sample"] else {}),
    }


def run_gputok(b: Bench, rep: dict, ref_hashes: list, tokens: int) -> None:
    """gputok corpus for every (Parquet decoder, workers per GPU, worker count) asked for."""
    args = b.args
    rep["gputok"] = []
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    per_gpu = [int(x) for x in args.workers_per_gpu.split(",") if x.strip()] or [None]
    decoders = [x.strip() for x in args.parquet_decoders.split(",") if x.strip()] or ["auto"]
    for w, pw, dec in [(w, pw, d) for d in decoders for pw in per_gpu for w in counts]:
        on_gpu_machine = b.gpus > 0 and args.device != "cpu"
        r = b.dask_run(
            b.work / f"out-gputok-{w}",
            None if on_gpu_machine else w,
            gpus=w if on_gpu_machine else None,
            workers_per_gpu=pw,
            tpw=args.threads_per_worker,
            parquet_decoder=dec,
            sample=args.sample_threads,
        )
        s = statistics.median(r["seconds"])
        exact = b.hashes(r["entries"]) == ref_hashes
        rep["gputok"].append(_gputok_entry(b, r, dec, tokens, exact))
        read_by = f"Parquet by {dec}" if args.format == "parquet" else f"{args.format} shards"
        if r["thread_sample"]:
            ts = r["thread_sample"]
            log(f"CPU s per thread kind, summed over workers and timed runs: {ts['threads_cpu_s']}")
            for where, n in list(ts["samples"].items())[:25]:
                log(f"  {n:6d}  {where}")
        log(
            f"gputok x{w}, {pw} per GPU, {read_by} ({'/'.join(r['devices'])}, {r['threads_per_worker']} shard(s) per "
            f"worker at once): {s:.3f} s, {b.nbytes / s / 1e9:.3f} GB/s, "
            f"{'exact' if exact else 'MISMATCH vs gigatoken'}, host cores busy {r['cpu_busy']}"
        )
        log_stages(f"gputok x{w}", r["stage_seconds"])
        shutil.rmtree(b.work / f"out-gputok-{w}", ignore_errors=True)


def finish(args: argparse.Namespace, rep: dict) -> int:
    """The JSON in bench/results/, the table on stdout and (unless --quick or --no-docs) in
    the day's note; exit code 1 on any gputok run that is not byte-identical to gigatoken's."""
    quick = args.quick
    docs_on = (not quick) if args.docs is None else args.docs
    rep["loadavg_end"] = list(os.getloadavg())
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    res_path = RESULTS / f"corpus-{stamp}{'-quick' if quick else ''}.json"
    res_path.write_text(json.dumps(rep, indent=1) + "\n")
    heading, body = markdown(rep)
    print(body)
    if docs_on:
        write_docs(Path(args.docs_path), heading, body)
        log(f"wrote {args.docs_path}")
    log(f"results: {res_path}")
    return 0 if all(r["exact"] for r in rep["gputok"]) else 1


def main() -> int:
    from gputok import corpus as C  # no Dask: that is imported lazily

    args = parse_args(__doc__.split("\n\n")[0], C, DOCS)
    b, rep = prepare(args, C)
    ref_hashes, tokens = run_in_process_contenders(b, rep)
    run_dask_contenders(b, rep, ref_hashes)
    run_gputok(b, rep, ref_hashes, tokens)
    return finish(args, rep)


if __name__ == "__main__":
    sys.exit(main())
