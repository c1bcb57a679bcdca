#!/usr/bin/env python3
"""One GPU tokenizer shared by several threads (a corpus worker's shards, a server's
requests): GB/s of text with 1..T threads calling ``encode_buffer_uint16`` on batches of
--batch-mb, for each count of encode slots (``GpuTuning.encode_slots``: how many calls run
at once; 1 is one call at a time). In the same run: gigatoken's ``encode_batch`` and
tiktoken's ``encode_ordinary_batch`` on all host cores over the same batches, and every
output is checked against tiktoken's ids before any timing.

``--procs P[,P...]`` also runs P processes at once on the one GPU, each with its own
tokenizer (its own CUDA context) and --threads callers, as a GPU's corpus workers do: every
process checks every batch against tiktoken's ids in an untimed pass, then all start the timed
passes together (a barrier); GB/s is all processes' text over the span from the first start to
the last end. ``--host-copy`` measures the host's memory copy rate (numpy, 1..cores threads),
the roof of the pipeline's host copies (staging, copy-out).

    python bench/bench_gpu_threads.py [--threads 1,2,4,8] [--slots 1,4] [--batch-mb 4]
    python bench/bench_gpu_threads.py --threads 4 --slots 4 --procs 1,2,4 --host-copy

Results: bench/results/gpu-threads-<UTC stamp>.json and a table on stdout
(a dated note in bench/results/ records them with date, device and command).
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


def run_threads(tok, batches, want, threads: int, rounds: int, check: bool = True) -> float:
    """Seconds for `threads` threads to encode every batch `rounds` times (each thread takes
    the next batch from a shared counter); checks each batch's ids against `want` (``check``;
    --procs checks them in an untimed pass instead)."""
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
            if check and not np.array_equal(ids, want[work[i]]):
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


def _proc(rank, args, want_digests, barrier, results) -> None:
    """One of --procs processes: its own tokenizer, every batch checked (untimed), then the
    timed passes, started together at a barrier. Puts (rank, start, end, error) on ``results``."""
    import hashlib

    import gputok
    from corpus import load_corpus

    try:
        batches = make_batches(load_corpus("bench"), args.batch_mb, args.total_mb)
        tok = gputok.gpt2(device="cuda", blocking_sync=True)  # as corpus workers make it
        for k, (data, offs, _) in enumerate(batches):
            ids, _ = tok.encode_buffer_uint16(
                data, offs, separator=EOT, num_threads=1, disallowed_special=()
            )
            if hashlib.sha256(ids.tobytes()).hexdigest() != want_digests[k]:
                raise SystemExit(f"process {rank}: batch {k} differs from tiktoken's ids")
        # warm, as the one-process rows are: every slot's buffers at full size before timing
        run_threads(tok, batches, None, args.threads_list[0], 1, check=False)
        barrier.wait()  # a broken barrier (another process failed) raises here
        t0 = time.monotonic()  # system-wide clock: comparable across the processes
        run_threads(tok, batches, None, args.threads_list[0], args.rounds, check=False)
        results.put((rank, t0, time.monotonic(), None))
    except BaseException as e:  # noqa: BLE001 - reported by the parent
        barrier.abort()
        results.put((rank, 0.0, 0.0, f"{type(e).__name__}: {e}"))


def run_procs(procs: int, args, digests: list[str], size: int) -> float:
    """GB/s of ``procs`` processes tokenizing at once (see the module docstring); ``digests``:
    sha256 of tiktoken's ids for each batch, which every process checks its own against."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # CUDA does not survive fork
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    ps = [
        ctx.Process(target=_proc, args=(r, args, digests, barrier, results)) for r in range(procs)
    ]
    for p in ps:
        p.start()
    got = [results.get(timeout=600) for _ in ps]
    for p in ps:
        p.join()
    errors = [e for *_, e in got if e]
    if errors:
        raise SystemExit(f"--procs {procs}: {errors[0]}")
    span = max(t1 for _, _, t1, _ in got) - min(t0 for _, t0, _, _ in got)
    return procs * size * args.rounds / span / 1e9


def host_copy_rates() -> list[dict]:
    """The host's memory copy rate: 1..NCPU threads each copying its own 256 MB numpy array
    (numpy releases the GIL), GB/s copied (read once, written once), best of 3."""
    n = 256 << 20
    rows = []
    for threads in sorted({1, 2, 4, 8, NCPU}):
        if threads > NCPU:
            continue
        src = [np.ones(n, np.uint8) for _ in range(threads)]
        dst = [np.zeros(n, np.uint8) for _ in range(threads)]  # touched: no page faults timed

        def one(i, src=src, dst=dst):
            np.copyto(dst[i], src[i])

        def timed(threads=threads, one=one):
            ts = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return time.perf_counter() - t0

        secs = min(timed() for _ in range(3))
        rows.append({"threads": threads, "GBps": threads * n / secs / 1e9})
        print(f"host copy, {threads} thread(s): {rows[-1]['GBps']:.1f} GB/s", flush=True)
    return rows


def _parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default="1,2,4,8", help="caller thread counts (comma list)")
    ap.add_argument("--slots", default="1,4", help="GpuTuning.encode_slots values (1-4)")
    ap.add_argument("--batch-mb", type=float, default=4.0, help="MB of text per call")
    ap.add_argument("--total-mb", type=float, default=256.0, help="MB of distinct batches")
    ap.add_argument("--rounds", type=int, default=2, help="passes over the batches per timing")
    ap.add_argument("--repeat", type=int, default=3, help="timings per setting (best kept)")
    ap.add_argument(
        "--procs",
        default="",
        metavar="P[,P...]",
        help="also P processes at once on the GPU, each with its own tokenizer and the first "
        "--threads count of callers (4 slots)",
    )
    ap.add_argument("--host-copy", action="store_true", help="also the host's memory copy rate")
    args = ap.parse_args()
    args.threads_list = [int(t) for t in args.threads.split(",")]
    return args


def _peer_rows(args, batches, tt, size) -> list[dict]:
    """tiktoken and gigatoken (all host cores) on the same batches, as str lists."""
    from references import gigatoken_gpt2

    def best(fn) -> float:
        return min(fn() for _ in range(args.repeat))

    lists = [[d.decode() for d in raw] for _, _, raw in batches]
    t_tt = best(
        lambda: _timed(lambda: [tt.encode_ordinary_batch(x, num_threads=NCPU) for x in lists])
    )
    rows = [{"contender": "tiktoken encode_ordinary_batch", "GBps": size / t_tt / 1e9}]
    try:
        gt = gigatoken_gpt2()
        gt.encode_batch(lists[0], parallel=True)
        t_gt = best(lambda: _timed(lambda: [gt.encode_batch(x, parallel=True) for x in lists]))
        rows.append({"contender": "gigatoken encode_batch", "GBps": size / t_gt / 1e9})
    except Exception as e:  # noqa: BLE001 - a missing reference is reported, not fatal
        print(f"gigatoken unavailable: {e}", flush=True)
    return rows


def _gputok_rows(args, batches, want, size) -> list[dict]:
    """gputok's encode_buffer_uint16 per encode-slot count and caller thread count."""
    import gputok

    rows = []
    for slots in [int(s) for s in args.slots.split(",")]:
        tuning = gputok.GpuTuning()
        tuning.encode_slots = slots
        # blocking_sync: as corpus workers make it
        tok = gputok.gpt2(device="cuda", blocking_sync=True, gpu_tuning=tuning)
        run_threads(tok, batches, want, 4, 1)  # warm: every slot's buffers at full size
        for threads in args.threads_list:
            secs = min(
                run_threads(tok, batches, want, threads, args.rounds) for _ in range(args.repeat)
            )
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
    return rows


def _proc_rows(args, want, size) -> list[dict]:
    """P processes at once, each with its own tokenizer (the default 4 encode slots)."""
    import hashlib

    procs_list = [int(p) for p in args.procs.split(",") if p.strip()]
    digests = [hashlib.sha256(w.tobytes()).hexdigest() for w in want] if procs_list else []
    rows = []
    for procs in procs_list:
        rows.append(
            {
                "contender": "gputok encode_buffer_uint16",
                "procs": procs,
                "slots": 4,
                "threads": args.threads_list[0],
                "GBps": run_procs(procs, args, digests, size),
            }
        )
        print(f"{procs} process(es) x {args.threads_list[0]} threads: {rows[-1]['GBps']:.2f} GB/s")
    return rows


def _print_table(rows: list[dict]) -> None:
    base = next((r["GBps"] for r in rows if r["contender"].startswith("gigatoken")), None)
    print("\n| contender | processes | encode slots | caller threads | GB/s | vs gigatoken |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        vs = f"{r['GBps'] / base:.2f}×" if base else "–"
        print(
            f"| {r['contender']} | {r.get('procs', 1)} | {r.get('slots', '–')} | "
            f"{r.get('threads', NCPU)} | {r['GBps']:.2f} | {vs} |"
        )


def _write_json(args, batches, size, rows, copies) -> Path:
    import subprocess

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "bench" / "results" / f"gpu-threads-{stamp}.json"
    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    report = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join(["python", "bench/bench_gpu_threads.py", *sys.argv[1:]]),
        "gpu": gpu,
        "host_cores": NCPU,
        "batch_mb": args.batch_mb,
        "batches": len(batches),
        "text_bytes": size,
        "rows": rows,
        "host_copy": copies,
    }
    out.write_text(json.dumps(report, indent=1))
    return out


def main() -> int:
    args = _parse_args()
    import gputok
    from corpus import load_corpus
    from references import tiktoken_gpt2

    ok, why = gputok.cuda_available()
    if not ok:
        raise SystemExit(f"needs a GPU: {why}")
    batches = make_batches(load_corpus("bench"), args.batch_mb, args.total_mb)
    size = sum(len(b[0]) for b in batches)
    tt = tiktoken_gpt2()
    want = expected(batches, tt)
    print(f"{len(batches)} batches, {size / 1e6:.0f} MB, host cores {NCPU}", flush=True)
    rows = _peer_rows(args, batches, tt, size)
    rows += _gputok_rows(args, batches, want, size)
    rows += _proc_rows(args, want, size)
    copies = host_copy_rates() if args.host_copy else []
    _print_table(rows)
    print(f"results: {_write_json(args, batches, size, rows, copies)}")
    return 0


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
