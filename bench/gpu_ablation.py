#!/usr/bin/env python3
"""Ablations of the GPU path on the bench corpus (one process per setting; each sets
gputok.GpuTuning fields, which an encoder reads when it is built):

    python bench/gpu_ablation.py [--mb 64]   -> one line per setting: e2e and kernel MB/s

Settings: default; piece_cache False (no whole-piece cache); split_misses False (cache hits
and the merge loop in one kernel); warp_min (misses longer than this go to a warp);
direct_output False (ids copied back after a sync instead of written to mapped pinned memory
by the kernel); multi_rank False (long pieces without the multi-rank pass); fused_max_bytes
(chunks up to this many bytes run as one cooperative launch; 0: never); memo_slots (slots of
the per-call miss memo; 0: none); gpu_pretokenize=False (pieces found on the CPU); one
sequence. Each prints the median of 5 timed calls after 2 warm-ups (58 for calls under 1 MB),
and the per-stage profile (GpuTuning.profile) of the last call. --only REGEX runs a subset.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def child(mb: float, gpu_pretok: bool, seq: bool, tuning_json: str) -> None:
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
    tuning = gputok.GpuTuning()
    for name, value in {"profile": True, **json.loads(tuning_json)}.items():
        setattr(tuning, name, value)
    tok = gputok.gpt2(device="cuda", gpu_pretokenize=gpu_pretok, gpu_tuning=tuning)
    e2e, ker = [], []
    runs = 7 if mb >= 1 else 60  # sub-millisecond calls: more samples for a stable median
    for i in range(runs):
        t0 = time.perf_counter()
        ids, offs, k = tok._encode_flat(sel, 0, frozenset(), (), "strict")
        if i >= 2:
            e2e.append(time.perf_counter() - t0)
            ker.append(k / 1e3)
    # Every setting must stay exact: the CPU path is the reference.
    want_ids, want_offs = gputok.gpt2(device="cpu").encode_batch_flat(sel, disallowed_special=())
    exact = bool(np.array_equal(ids, want_ids) and np.array_equal(offs, want_offs)) and len(
        want_ids
    )
    print(
        json.dumps(
            {
                "exact": exact,
                "MB": round(size / 1e6, 1),
                "docs": len(sel),
                "e2e_MBps": round(size / statistics.median(e2e) / 1e6),
                "kernel_MBps": round(size / statistics.median(ker) / 1e6),
                "e2e_ms": round(statistics.median(e2e) * 1e3, 3),
                "kernel_ms": round(statistics.median(ker) * 1e3, 3),
            }
        ),
        flush=True,
    )


def ablation_settings() -> list[tuple[str, dict, list[str]]]:
    """(name, GpuTuning fields, extra child arguments) of every setting the ablation runs."""
    seq16k, seq300k = ["--seq", "--mb", "0.07"], ["--seq", "--mb", "0.3"]
    NOFUSE = {"fused_max_bytes": 0}  # mid-size chunks on the multi-kernel pipeline
    return [
        ("default", {}, []),
        ("no whole-piece cache", {"piece_cache": False}, []),
        ("one short-piece kernel (no miss list)", {"split_misses": False}, []),
        ("no miss memo", {"memo_slots": 0}, []),
        ("miss memo of 64K slots", {"memo_slots": 65536}, []),
        ("miss memo of 4M slots", {"memo_slots": 4194304}, []),
        ("single-rank passes only", {"multi_rank": False}, []),
        ("warp_min 32 (only pieces over 32 bytes to a warp)", {"warp_min": 32}, []),
        ("warp_min 12", {"warp_min": 12}, []),
        ("warp_min 8", {"warp_min": 8}, []),
        ("CUDA graph", {"graph": True}, []),
        ("one sequence of ~16K tokens", {}, seq16k),
        (
            "one sequence of ~16K tokens, ids copied back after a sync",
            {"direct_output": False},
            seq16k,
        ),
        ("one sequence of ~16K tokens, CUDA graph", {"graph": True}, seq16k),
        ("one sequence of ~16K tokens, warp_min 32", {"warp_min_small": 32}, seq16k),
        ("one sequence of ~16K tokens, warp_min 16", {"warp_min_small": 16}, seq16k),
        ("one sequence of ~16K tokens, warp_min 12", {"warp_min_small": 12}, seq16k),
        ("one sequence of ~16K tokens, warp_min 6", {"warp_min_small": 6}, seq16k),
        ("one sequence of ~16K tokens, single-rank", {"multi_rank": False}, seq16k),
        ("one sequence of ~300 KB", {}, seq300k),
        (
            "one sequence of ~300 KB, ids copied back after a sync",
            {"direct_output": False},
            seq300k,
        ),
        ("one sequence of ~300 KB, CUDA graph", {"graph": True}, seq300k),
        ("one sequence of ~300 KB, warp_min 16", {"warp_min_small": 16}, seq300k),
        ("one sequence of ~4K tokens", {}, ["--seq", "--mb", "0.009"]),
        ("one sequence of ~4K tokens, fused off", NOFUSE, ["--seq", "--mb", "0.009"]),
        ("one sequence of ~16K tokens, fused off", NOFUSE, seq16k),
        (
            "one sequence of ~16K tokens, pair table as on the CPU",
            {"pair_sparser": 0},
            seq16k,
        ),
        (
            "one sequence of ~16K tokens, pair table 8x slots",
            {"pair_sparser": 3},
            seq16k,
        ),
        ("pair table as on the CPU (4 MiB, 41% load)", {"pair_sparser": 0}, []),
        ("pair table 2x slots", {"pair_sparser": 1}, []),
        ("pair table 8x slots", {"pair_sparser": 3}, []),
        (
            "one sequence of ~16K tokens, 132 fused blocks",
            {"coop_blocks": 132},
            seq16k,
        ),
        ("one sequence of ~16K tokens, 66 fused blocks", {"coop_blocks": 66}, seq16k),
        ("one sequence of ~300 KB, fused off", NOFUSE, seq300k),
        ("one sequence of ~300 KB, fused", {"fused_max_bytes": 1048576}, seq300k),
        ("one sequence of ~150 KB", {}, ["--seq", "--mb", "0.15"]),
        ("one sequence of ~150 KB, fused off", NOFUSE, ["--seq", "--mb", "0.15"]),
        ("one sequence of 1 MB", {}, ["--seq", "--mb", "1.0"]),
        ("one sequence of 1 MB, fused off", NOFUSE, ["--seq", "--mb", "1.0"]),
        ("batch of 1 MB", {}, ["--mb", "1.0"]),
        ("batch of 1 MB, fused off", NOFUSE, ["--mb", "1.0"]),
        (
            "one sequence of 2 MB, fused up to 4 MB",
            {"fused_max_bytes": 4194304},
            ["--seq", "--mb", "2"],
        ),
        ("batch of 4 MB", {}, ["--mb", "4.0"]),
        ("batch of 4 MB, fused up to 4 MB", {"fused_max_bytes": 4194304}, ["--mb", "4.0"]),
        ("CPU pretokenization", {}, ["--cpu-pretok"]),
        ("one sequence of 2 MB", {}, ["--seq", "--mb", "2"]),
        ("one sequence of 2 MB, CPU pretok", {}, ["--seq", "--mb", "2", "--cpu-pretok"]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=64.0)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--cpu-pretok", action="store_true")
    ap.add_argument("--seq", action="store_true")
    ap.add_argument("--tuning", default="{}", help="GpuTuning fields as JSON (children)")
    ap.add_argument("--only", default=None, help="run the settings whose name matches this regex")
    a = ap.parse_args()
    if a.child:
        child(a.mb, not a.cpu_pretok, a.seq, a.tuning)
        return
    settings = ablation_settings()
    for name, fields, extra in settings:
        if a.only and not re.search(a.only, name):
            continue
        r = subprocess.run(
            [sys.executable, __file__, "--child", "--mb", str(a.mb), "--tuning", json.dumps(fields)]
            + extra,
            capture_output=True,
            text=True,
        )
        prof = [ln for ln in r.stderr.splitlines() if ln.startswith("[gputok gpu]")]
        print(f"{name}: {r.stdout.strip() or r.stderr[-2000:]}")
        if prof:
            print("   ", prof[-1])


if __name__ == "__main__":
    main()
