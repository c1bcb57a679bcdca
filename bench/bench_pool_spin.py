#!/usr/bin/env python3
"""The CPU pool's spin window (Tokenizer cpu_spin_us, thread_pool.h), A/B in one process: one
text of each size cut across the cores, and batches, called back to back on tokenizers that
differ only in the window, alternated for several rounds. gigatoken's one-text time (the
faster of its two exact constructors, `encode`) is taken in the same rounds for reference.
Every output is checked against tiktoken's before anything is timed. Not a test.

    python bench/bench_pool_spin.py [--sizes-kb 32,64,128,256,1024] [--spins 0,50,200]
        [--rounds 4] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests"))
from bench_cpu_path import gigatoken_configs, load_bench  # noqa: E402


def median_us(fn, least: float) -> float:
    """Median of 5 loops of back-to-back calls, each at least `least` seconds, per call.
    It starts after a 20 ms pause, so that threads still spinning after the previous
    measurement (ours, or rayon's after gigatoken) have gone to sleep."""
    time.sleep(0.02)
    fn()
    runs = []
    for _ in range(5):
        t0, k = time.perf_counter(), 0
        while time.perf_counter() - t0 < least:
            fn()
            k += 1
        runs.append((time.perf_counter() - t0) / k)
    return statistics.median(runs) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes-kb", default="32,64,128,256,1024")
    ap.add_argument("--spins", default="0,50,200")
    ap.add_argument("--batches", default="64,1000", help="documents per batch call")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--least", type=float, default=0.1, help="seconds per timed loop")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    import gputok
    from references import tiktoken_gpt2

    docs = load_bench(12)
    big = "".join(docs)
    tt = tiktoken_gpt2()
    toks = {int(s): gputok.gpt2(device="cpu", cpu_spin_us=int(s)) for s in a.spins.split(",")}
    giga = {name: make() for name, make in gigatoken_configs().items()}
    cases = [("text", int(kb), big[: int(kb) * 1024]) for kb in a.sizes_kb.split(",")]
    cases += [("batch", int(n), docs[: int(n)]) for n in a.batches.split(",")]
    for kind, size, arg in cases:  # exactness first
        want = tt.encode_ordinary(arg) if kind == "text" else None
        for tok in toks.values():
            if kind == "text":
                got = tok.encode_ordinary(arg)
                if not want or got != want:
                    raise SystemExit(f"one text of {size} KB differs from tiktoken")
            else:
                ids, offs = tok.encode_batch_flat(arg)
                ref = tt.encode_ordinary_batch(arg)
                if not len(ids) or ids.tolist() != [i for r in ref for i in r]:
                    raise SystemExit(f"a batch of {size} docs differs from tiktoken")
        if kind == "text":
            for g in giga.values():
                if not np.array_equal(np.asarray(g.encode(arg), dtype=np.int64), want):
                    raise SystemExit(f"gigatoken differs on one text of {size} KB")
    rows = []
    for rnd in range(a.rounds):
        for kind, size, arg in cases:
            row = {"round": rnd, "kind": kind, "size": size}
            order = list(toks.items())
            k = rnd % len(order)  # a different tokenizer goes first each round
            for spin, tok in order[k:] + order[:k]:
                call = tok.encode_ordinary if kind == "text" else tok.encode_batch_flat
                row[f"spin{spin}_us"] = median_us(lambda c=call, x=arg: c(x), a.least)
            if kind == "text":
                row["gigatoken_us"] = min(
                    median_us(lambda g=g, x=arg: g.encode(x), a.least) for g in giga.values()
                )
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    spins = list(toks)
    print(
        f"| case | {' | '.join(f'spin {s} us' for s in spins)} | gigatoken us | "
        f"spin {spins[-1]} / spin {spins[0]} |  (median of {a.rounds} rounds; {os.cpu_count()} CPUs)"
    )
    print("|---|" + "---:|" * (len(spins) + 2))
    for kind, size, _ in cases:
        rs = [r for r in rows if r["kind"] == kind and r["size"] == size]
        med = {s: statistics.median(r[f"spin{s}_us"] for r in rs) for s in spins}
        ratios = [r[f"spin{spins[-1]}_us"] / r[f"spin{spins[0]}_us"] for r in rs]
        gt = statistics.median(r["gigatoken_us"] for r in rs) if kind == "text" else None
        label = f"one text {size} KB" if kind == "text" else f"batch of {size} docs"
        print(
            f"| {label} | "
            + " | ".join(f"{med[s]:.1f}" for s in spins)
            + f" | {'' if gt is None else f'{gt:.1f}'} | {min(ratios):.2f}-{max(ratios):.2f}x |"
        )
    if a.json:
        a.json.write_text(json.dumps({"spins": spins, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
