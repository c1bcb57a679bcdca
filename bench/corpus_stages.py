#!/usr/bin/env python3
"""Where one corpus worker's host time goes, per stage, on one thread.

Reads Parquet shards of the bench corpus the way ``gputok corpus`` does, then runs each
batch through the stages of ``tokenize_shard`` one after another (no overlap), timing wall
and process CPU time (all threads: the tokenizer's copy pool counts) of each: Parquet
decoding, tokenizing (gputok on the GPU or CPU, or gigatoken), uint16 + <|endoftext|> packing,
hashing (--hash, as gputok corpus), writing. The CPU seconds per GB of text are what several
shards in flight compete for on a host; the GPU's own time is beside them.

    python bench/corpus_stages.py [--device cuda] [--scale 2] [--shards 8] [--gigatoken]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "bench", REPO / "tests", REPO / "backend_src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


class Clock:
    """Wall and process-CPU seconds and minor page faults (fresh memory touched) summed per
    stage."""

    def __init__(self):
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.faults: dict[str, int] = {}

    def time(self, stage: str, fn, *args, **kw):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn(*args, **kw)
        self.wall[stage] = self.wall.get(stage, 0.0) + time.perf_counter() - w0
        self.cpu[stage] = self.cpu.get(stage, 0.0) + time.process_time() - c0
        df = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        self.faults[stage] = self.faults.get(stage, 0) + df
        return out


def _parse_args(C):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--gigatoken", action="store_true", help="gigatoken as the tokenizer")
    ap.add_argument("--min-batch-mb", type=float, default=None)
    ap.add_argument(
        "--parquet-decoder",
        default="auto",
        choices=C.PARQUET_DECODERS,
        help="as gputok corpus --parquet-decoder (auto: snappy on the GPU for a GPU tokenizer)",
    )
    ap.add_argument("--hash", default=C.DEFAULT_HASH, choices=C.HASHES, help="as gputok corpus")
    return ap.parse_args()


def _tokenizer(args, C):
    """(tokenizer, its device, the fewest bytes per call) as gputok corpus would use them."""
    from bench_corpus import GigatokenAdapter

    import gputok

    if args.gigatoken:
        tok = GigatokenAdapter()
    else:
        opts = {"blocking_sync": True} if args.device != "cpu" else {}
        tok = gputok.gpt2(device=args.device, **opts)
    dev = getattr(tok, "device", "?")
    min_batch = (
        int(args.min_batch_mb * 2**20)
        if args.min_batch_mb
        else (C.GPU_MIN_BATCH_BYTES if dev == "cuda" else C.MIN_BATCH_BYTES)
    )
    return tok, dev, min_batch


def _one_pass(C, args, tok, paths, decoder, min_batch, work) -> tuple[Clock, int]:
    """Every shard through decode, tokenize, pack, hash and write, each stage timed."""
    spec = C.ShardSpec(errors="strict", skip_empty=False, num_threads=0)
    clock, calls = Clock(), 0
    for path in paths:
        reader = C.read_parquet(
            path, "text", C.DEFAULT_BATCH_BYTES, min_batch_bytes=min_batch, decoder=decoder
        )
        h = C.new_hasher(args.hash)
        with open(os.path.join(work, "out.bin"), "wb") as out:
            while True:
                batch = clock.time("parquet decode", next, reader, None)
                if batch is None:
                    break
                calls += 1
                # gputok packs uint16 + EOT itself (in its copy-out, counted under tokenize);
                # other tokenizers' ids are packed here, as the corpus writer thread does.
                enc = clock.time("tokenize", C._encode_batch, tok, batch, spec, 50256)
                packed = enc.ids
                if not enc.packed:
                    packed, _ends, _bad = clock.time(
                        "pack uint16+eot", C._pack, enc.ids, enc.offsets, 50256
                    )
                clock.time(args.hash, h.update, memoryview(packed).cast("B"))
                clock.time("write", out.write, memoryview(packed).cast("B"))
    return clock, calls


def _report(clock: Clock, nbytes: int) -> None:
    total_w, total_c = sum(clock.wall.values()), sum(clock.cpu.values())
    print(
        f"{'stage':<18}{'wall s':>8}{'CPU s':>8}{'CPU s/GB':>10}{'GB/s (wall)':>13}"
        f"{'page faults/MB':>16}"
    )
    for st in clock.wall:
        w, c, f = clock.wall[st], clock.cpu[st], clock.faults[st]
        print(
            f"{st:<18}{w:8.3f}{c:8.3f}{c / (nbytes / 1e9):10.2f}{nbytes / 1e9 / w:13.2f}"
            f"{f / (nbytes / 1e6):16.1f}"
        )
    print(
        f"{'all':<18}{total_w:8.3f}{total_c:8.3f}{total_c / (nbytes / 1e9):10.2f}"
        f"{nbytes / 1e9 / total_w:13.2f}"
    )


def main() -> int:
    import shutil

    from gputok import corpus as C  # no Dask: that is imported lazily

    args = _parse_args(C)
    from bench_corpus import write_inputs

    from corpus_fixture import load_corpus

    work = Path(
        tempfile.mkdtemp(
            prefix="gputok-stages-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
    )
    inputs, nbytes, ndocs = write_inputs(
        work, "parquet", load_corpus("bench") * args.scale, args.shards
    )
    tok, dev, min_batch = _tokenizer(args, C)
    paths = sorted(str(p) for p in Path(inputs).glob("*.parquet"))
    decoder = C._parquet_decoder(args.parquet_decoder, tok)
    for _rep in range(2):  # the first pass warms up (pools, caches); the second is reported
        clock, calls = _one_pass(C, args, tok, paths, decoder, min_batch, work)
    print(
        f"{nbytes / 1e6:.1f} MB of text, {ndocs} documents, {len(paths)} shards, {calls} tokenizer "
        f"calls, tokenizer {type(tok).__name__} on {dev}, min batch {min_batch / 2**20:g} MB, "
        f"Parquet decoder {args.parquet_decoder}"
    )
    _report(clock, nbytes)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
