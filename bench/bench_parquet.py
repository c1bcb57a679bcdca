#!/usr/bin/env python3
"""Parquet decoding alone, in one process: gputok's page reader on the GPU (snappy decompressed
there) and on the CPU, against Arrow, through ``gputok.corpus.read_parquet`` (what a corpus
worker's reader thread runs). Wall time (best of --repeat) and CPU time per GB of text.

    python bench/bench_parquet.py [--dir DIR]   # DIR: *.parquet with a "text" column; made
                                               # from the bench corpus (4 files) when absent

``GpuPageDecoder(profile=True)`` prints the GPU kernels' times per call. Results: bench/results/2026-11-25-benchmarks-history.md,
"Parquet pages on the GPU" (run there as .carry/devbench.py, the same code).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_inputs(d: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(REPO / "bench"))
    from corpus import load_corpus

    docs = load_corpus("bench")
    os.makedirs(d)
    n = len(docs)
    for k in range(4):
        part = docs[k * n // 4 : (k + 1) * n // 4]
        pq.write_table(pa.table({"text": part}), f"{d}/p{k}.parquet", row_group_size=2048)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/gputok-bench-parquet")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--decoders",
        default="gpu,cpu,arrow",
        help="comma list of gpu (the page reader on the GPU, gputok's snappy kernels), nvcomp "
        "(the same with NVIDIA nvCOMP's batched snappy), cpu (on the CPU), arrow",
    )
    args = ap.parse_args()
    import pyarrow.parquet as pq

    import gputok
    from gputok import _corpus_native
    from gputok import corpus as C

    if not os.path.isdir(args.dir):
        make_inputs(args.dir)
    paths = sorted(glob.glob(os.path.join(args.dir, "*.parquet")))
    text = 0
    for p in paths:
        md = pq.ParquetFile(p).metadata
        text += sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
    wanted = args.decoders.split(",")
    unknown = set(wanted) - {"gpu", "nvcomp", "cpu", "arrow"}
    if unknown:
        ap.error(f"unknown decoders: {sorted(unknown)}")
    decoders = [("cpu pages", _corpus_native.parquet_decode)] * ("cpu" in wanted)
    decoders += [("arrow", None)] * ("arrow" in wanted)
    ok, why = gputok.cuda_available()
    for name, engine in (("nvcomp", "nvcomp"), ("gpu", "kernels")):
        if name not in wanted:
            continue
        if ok:
            gpu = C.decoders.gpu_page_decoder(0, engine)
            decoders.insert(0, (f"gpu pages ({engine})", gpu.parquet_decode))
        else:
            print(f"{name} pages: skipped ({why})", flush=True)
    for name, dec in decoders:
        best, cpu = float("inf"), float("inf")
        for _ in range(args.repeat):
            t, c = time.perf_counter(), time.process_time()
            for p in paths:
                for _batch in C.read_parquet(p, "text", 32 << 20, decoder=dec):
                    pass
            best = min(best, time.perf_counter() - t)
            cpu = min(cpu, time.process_time() - c)
        print(
            f"{name}: {text / 1e6:.0f} MB of text in {len(paths)} files: {best * 1e3:.1f} ms, "
            f"{text / best / 1e9:.2f} GB/s, CPU {cpu / text * 1e9:.2f} s per GB",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
