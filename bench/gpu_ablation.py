#!/usr/bin/env python3
"""Ablations of the GPU path on the bench corpus (one process per setting, since the
settings are read from the environment when an encoder is built):

    python bench/gpu_ablation.py [--mb 64]   -> one line per setting: e2e and kernel MB/s

Settings: default; GPUTOK_GPU_NO_CACHE=1 (no whole-piece cache); gpu_pretokenize=False
(pieces found on the CPU). Each prints the median of 5 timed calls after 2 warm-ups, and
the per-stage profile (GPUTOK_GPU_PROFILE=1) of the last call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child(mb: float, gpu_pretok: bool, seq: bool) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    import gputok
    from corpus_fixture import load_corpus

    docs = load_corpus("bench")
    sel, size = [], 0
    for d in docs:
        sel.append(d)
        size += len(d.encode())
        if size >= mb * 1e6:
            break
    if seq:
        sel = ["".join(sel)]
    tok = gputok.gpt2(device="cuda", gpu_pretokenize=gpu_pretok)
    e2e, ker = [], []
    for i in range(7):
        t0 = time.perf_counter()
        _, _, k = tok._encode_flat(sel, 0, frozenset(), (), "strict")
        if i >= 2:
            e2e.append(time.perf_counter() - t0)
            ker.append(k / 1e3)
    print(
        json.dumps(
            {
                "MB": round(size / 1e6, 1),
                "docs": len(sel),
                "e2e_MBps": round(size / statistics.median(e2e) / 1e6),
                "kernel_MBps": round(size / statistics.median(ker) / 1e6),
                "e2e_ms": round(statistics.median(e2e) * 1e3, 2),
                "kernel_ms": round(statistics.median(ker) * 1e3, 2),
            }
        ),
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=64.0)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--cpu-pretok", action="store_true")
    ap.add_argument("--seq", action="store_true")
    a = ap.parse_args()
    if a.child:
        child(a.mb, not a.cpu_pretok, a.seq)
        return
    settings = [
        ("default", {}, []),
        ("no whole-piece cache", {"GPUTOK_GPU_NO_CACHE": "1"}, []),
        ("CPU pretokenization", {}, ["--cpu-pretok"]),
        ("one sequence of 2 MB", {}, ["--seq", "--mb", "2"]),
        ("one sequence of 2 MB, CPU pretok", {}, ["--seq", "--mb", "2", "--cpu-pretok"]),
    ]
    for name, env, extra in settings:
        e = dict(os.environ, GPUTOK_GPU_PROFILE="1", **env)
        r = subprocess.run(
            [sys.executable, __file__, "--child", "--mb", str(a.mb), *extra],
            env=e,
            capture_output=True,
            text=True,
        )
        prof = [ln for ln in r.stderr.splitlines() if ln.startswith("[gputok gpu]")]
        print(f"{name}: {r.stdout.strip() or r.stderr[-2000:]}")
        if prof:
            print("   ", prof[-1])


if __name__ == "__main__":
    main()
