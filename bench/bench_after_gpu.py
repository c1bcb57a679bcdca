#!/usr/bin/env python3
"""How long the CPU path's calls take right after a GPU call of the same tokenizer.

Run on the GPU machine: ``python bench/bench_after_gpu.py [--kb 12,24,48]``.

device="auto" learns which path is faster near its crossover from its own calls' times
(backend_src/csrc/route_learner.h), but not for calls in a stream that the CPU path cuts across
its pool: timed right after a GPU call, those ran 2-4x the CPU path's steady time (H200,
2026-11-29). This measures that directly, on a tokenizer with a fixed rule (so nothing is
learned): a large text (the GPU by the rule), then six calls of a text of K KB back to back
(the CPU by the stream rule), each timed; against the same calls in a steady stream, on the
CPU path alone (1 ms apart, the pool asleep) and on the GPU. Prints medians, microseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import corpus  # noqa: E402
import gputok  # noqa: E402


def cut(text: str, nbytes: int) -> str:
    return text.encode()[:nbytes].decode(errors="ignore")


def timed_us(fn) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kb", default="12,24,48")
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    lines = corpus.ensure("bench").read_text(encoding="utf-8").splitlines()[:4000]
    text = "".join(json.loads(line)["text"] for line in lines)
    big = cut(text, 262144)
    below, per_row, stream = gputok.default_crossover()
    tok = gputok.gpt2(cpu_below_bytes=below, bytes_per_row=per_row, stream_below_bytes=stream)
    assert tok.path_for(len(big.encode())) == "cuda"
    for kb in (int(k) for k in args.kb.split(",")):
        small = cut(text, kb * 1024)
        for _ in range(30):
            tok.encode_to_numpy(big)
            tok.encode_to_numpy(small)
        after = [[] for _ in range(6)]
        for _ in range(args.reps):
            tok.encode_to_numpy(big)
            for k in range(6):
                after[k].append(timed_us(lambda s=small: tok.encode_to_numpy(s)))
        steady = [timed_us(lambda s=small: tok.encode_to_numpy(s)) for _ in range(6 * args.reps)]
        alone = []
        tok.set_cpu_below_bytes(1 << 40)  # every call on the CPU
        for _ in range(args.reps):
            time.sleep(0.001)
            alone.append(timed_us(lambda s=small: tok.encode_to_numpy(s)))
        gpu = []
        tok.set_cpu_below_bytes(0)  # every call on the GPU
        for _ in range(args.reps):
            gpu.append(timed_us(lambda s=small: tok.encode_to_numpy(s)))
        tok.set_cpu_below_bytes(below, per_row, stream)
        firsts = " ".join(f"{statistics.median(a):.1f}" for a in after)
        print(
            f"{kb} KB: after a GPU call, calls 1-6: {firsts} | steady {statistics.median(steady):.1f}"
            f" | alone {statistics.median(alone):.1f} | GPU {statistics.median(gpu):.1f} us",
            flush=True,
        )


if __name__ == "__main__":
    main()
