#!/usr/bin/env python3
"""One GPU tokenizer shared by several threads (a corpus worker's shards, a server's
requests): GB/s of text with 1..T threads calling ``encode_buffer_uint16`` on batches of
--batch-mb, for each count of encode slots (``GPUTOK_GPU_ENCODE_SLOTS``: how many calls run
at once; 1 is one call at a time). In the same run: gigatoken's ``encode_batch`` and
tiktoken's ``encode_ordinary_batch`` on all host cores over the same batches, and every
output is checked against tiktoken's ids before any timing.

    python bench/bench_gpu_threads.py [--threads 1,2,4,8] [--slots 1,4] [--batch-mb 4]

Results: bench/results/gpu-threads-<UTC stamp>.json and a table on stdout
(docs/benchmarks.md records them with date, device and command).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
NCPU = os.cpu_count() or 1
os.environ.setdefault("RAYON_NUM_THREADS", str(NCPU))

import numpy as np  # noqa: E402

EOT = 50256


def make_batches(docs: list[str], batch_mb: float, total_mb: float) -> list[tuple]:
    """(data, int64 offsets, documents) batches of about batch_mb MB each, total_mb in all
    (the corpus repeated as needed)."""
    target, batches, k = int(batch_mb * 1e6), [], 0
    while sum(len(b[0]) for b in batches) < total_mb * 1e6:
        raw, size = [], 0
        while size < target:
            d = docs[k % len(docs)].encode()
            raw.append(d)
            size += len(d)
            k += 1
        offs = np.zeros(len(raw) + 1, np.int64)
        np.cumsum([len(d) for d in raw], out=offs[1:])
        batches.append((b"".join(raw), offs, raw))
    return batches


def expected(batches, tt) -> list[np.ndarray]:
    """tiktoken's ids of each batch as the corpus writes them: uint16, EOT after each doc."""
    out = []
    for _, _, raw in batches:
        rows = tt.encode_ordinary_batch([d.decode() for d in raw], num_threads=NCPU)
        assert all(rows), "tiktoken returned an empty document"
        out.append(np.fromiter((t for r in rows for t in (*r, EOT)), dtype=np.uint16))
    return out


def run_threads(tok, batches, want, threads: int, rounds: int) -> float:
    """Seconds for `threads` threads to encode every batch `rounds` times (each thread takes
    the next batch from a shared counter); checks each batch's ids against `want`."""
    nxt, lock, bad = [0], threading.Lock(), []
    work = [b for _ in range(rounds) for b in range(len(batches))]

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(work):
                return
            data, offs, _ = batches[work[i]]
            ids, _ = tok.encode_buffer_uint16(
                data, offs, separator=EOT, num_threads=1, disallowed_special=()
            )
            if not np.array_equal(ids, want[work[i]]):
                bad.append(work[i])

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if bad:
        raise SystemExit(f"ids differ from tiktoken's in batch(es) {sorted(set(bad))[:5]}")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2,4,8", help="caller thread counts (comma list)")
    ap.add_argument("--slots", default="1,4", help="GPUTOK_GPU_ENCODE_SLOTS values (1-4)")
    ap.add_argument("--batch-mb", type=float, default=4.0, help="MB of text per call")
    ap.add_argument("--total-mb", type=float, default=256.0, help="MB of distinct batches")
    ap.add_argument("--rounds", type=int, default=2, help="passes over the batches per timing")
    ap.add_argument("--repeat", type=int, default=3, help="timings per setting (best kept)")
    args = ap.parse_args()

    import gputok
    from corpus import load_corpus
    from references import gigatoken_gpt2, tiktoken_gpt2

    ok, why = gputok.cuda_available()
    if not ok:
        raise SystemExit(f"needs a GPU: {why}")
    docs = load_corpus("bench")
    batches = make_batches(docs, args.batch_mb, args.total_mb)
    size = sum(len(b[0]) for b in batches)
    tt = tiktoken_gpt2()
    want = expected(batches, tt)
    print(f"{len(batches)} batches, {size / 1e6:.0f} MB, host cores {NCPU}", flush=True)

    def best(fn) -> float:
        return min(fn() for _ in range(args.repeat))

    rows = []
    t_tt = best(
        lambda: _timed(
            lambda: [
                tt.encode_ordinary_batch([d.decode() for d in raw], num_threads=NCPU)
                for _, _, raw in batches
            ]
        )
    )
    rows.append({"contender": "tiktoken encode_ordinary_batch", "GBps": size / t_tt / 1e9})
    try:
        gt = gigatoken_gpt2()
        lists = [[d.decode() for d in raw] for _, _, raw in batches]
        gt.encode_batch(lists[0], parallel=True)
        t_gt = best(lambda: _timed(lambda: [gt.encode_batch(x, parallel=True) for x in lists]))
        rows.append({"contender": "gigatoken encode_batch", "GBps": size / t_gt / 1e9})
    except Exception as e:  # noqa: BLE001 - a missing reference is reported, not fatal
        print(f"gigatoken unavailable: {e}", flush=True)
    for slots in [int(s) for s in args.slots.split(",")]:
        os.environ["GPUTOK_GPU_ENCODE_SLOTS"] = str(slots)  # read when a tokenizer is made
        tok = gputok.gpt2(device="cuda", blocking_sync=True)  # as corpus workers make it
        run_threads(tok, batches, want, 4, 1)  # warm: every slot's buffers at full size
        for threads in [int(t) for t in args.threads.split(",")]:
            secs = best(lambda t=threads, g=tok: run_threads(g, batches, want, t, args.rounds))
            rows.append(
                {
                    "contender": "gputok encode_buffer_uint16",
                    "slots": slots,
                    "threads": threads,
                    "GBps": size * args.rounds / secs / 1e9,
                }
            )
            print(f"slots {slots} threads {threads}: {rows[-1]['GBps']:.2f} GB/s", flush=True)
        del tok
    base = next((r["GBps"] for r in rows if r["contender"].startswith("gigatoken")), None)
    print("\n| contender | encode slots | caller threads | GB/s | vs gigatoken |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        vs = f"{r['GBps'] / base:.2f}×" if base else "–"
        print(
            f"| {r['contender']} | {r.get('slots', '–')} | {r.get('threads', NCPU)} | "
            f"{r['GBps']:.2f} | {vs} |"
        )
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "bench" / "results" / f"gpu-threads-{stamp}.json"
    import subprocess

    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    out.write_text(
        json.dumps(
            {
                "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "command": shlex.join(["python", "bench/bench_gpu_threads.py", *sys.argv[1:]]),
                "gpu": gpu,
                "host_cores": NCPU,
                "batch_mb": args.batch_mb,
                "batches": len(batches),
                "text_bytes": size,
                "rows": rows,
            },
            indent=1,
        )
    )
    print(f"results: {out}")
    return 0


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
