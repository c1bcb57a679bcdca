#!/usr/bin/env python3
"""gputok's CPU path against gigatoken, same run, every output checked exact.

Not a test. For each thread count a fresh worker process starts with
``RAYON_NUM_THREADS=N`` (gigatoken sizes its global pool from it at first use; gputok takes
``num_threads=N``). Each worker:

1. loads the bench corpus (``bench/corpus.py``'s jsonl; ``--bench-mb`` caps it) and a code
   corpus (the ``.py`` files of this Python's stdlib and site-packages, sorted, up to
   ``--code-mb``), and tiktoken's ids for both (the reference);
2. **batch**: per tokenizer, a fresh object's first pass (cold: its pretoken cache empty, or
   holding only the vocabulary's tokens, as gputok's and gigatoken's new caches do)
   and ``--repeat`` more (warm; median); gputok ``encode_batch_flat(docs, num_threads=N)``,
   gigatoken ``encode_batch(docs, parallel=N > 1)`` in both its exact configurations
   (``from_tiktoken(..., pretokenizer="gpt2")`` and ``Tokenizer(hf)``), the faster kept;
3. **one text** of about 64 to 1M tokens cut from the bench corpus: gputok
   ``encode_ordinary(t)`` (a list) and ``encode_to_numpy(t)`` (a uint32 array, as gigatoken
   returns), gigatoken ``encode(t)`` (and ``encode_batch([t])`` on N > 1, the
   faster kept); the median of 5 timed loops of at least ``--least`` seconds each (0.1 by
   default), after a warm-up.

Every output is compared with tiktoken's ids before it is timed; a mismatch aborts.

    .venv/bin/python bench/bench_cpu_path.py                       # 1 thread and all cores
    .venv/bin/python bench/bench_cpu_path.py --bench-mb 20 --code-mb 20 --threads 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "bench", REPO / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

SIZES = (64, 256, 1024, 4096, 16384, 65536, 1 << 20)
BENCH_JSONL = [
    REPO / ".cache" / "corpus" / "corpus-bench.jsonl",
    # another checkout's copy, e.g. the main worktree's, to skip a rebuild of the corpus
    *([Path(os.environ["GPUTOK_BENCH_JSONL"])] if os.environ.get("GPUTOK_BENCH_JSONL") else []),
]


def log(msg: str) -> None:
    print(f"[bench_cpu_path {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_bench(max_mb: float) -> list[str]:
    path = next((p for p in BENCH_JSONL if p.exists()), None)
    if path is None:
        import corpus

        return _cap(corpus.load_corpus("bench"), max_mb)
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"])
    return _cap(docs, max_mb)


def load_code(max_mb: float) -> list[str]:
    roots = sorted({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]})
    docs: list[str] = []
    total = 0
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "<|endoftext|>" in text or not text:
                continue
            docs.append(text)
            total += len(text.encode())
            if total >= max_mb * 1e6:
                return docs
    return docs


def _cap(docs: list[str], max_mb: float) -> list[str]:
    out, total = [], 0
    for d in docs:
        out.append(d)
        total += len(d.encode())
        if total >= max_mb * 1e6:
            break
    return out


def flat(rows) -> tuple:
    import numpy as np

    lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    ids = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]) if rows else lens
    return ids, offsets


def giga_flat(out) -> tuple:
    import awkward as ak
    import numpy as np

    lay = ak.to_layout(out)
    offs = np.asarray(lay.offsets, dtype=np.int64)
    ids = np.asarray(lay.content.data, dtype=np.int64)[offs[0] : offs[-1]]
    return ids, offs - offs[0]


def same(a, b) -> bool:
    import numpy as np

    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def gigatoken_configs():
    import gigatoken as gt

    from references import RANKS, hf_gpt2

    ranks = Path(RANKS)
    return {
        "gigatoken from_tiktoken": lambda: gt.Tokenizer.from_tiktoken(
            str(ranks), pretokenizer="gpt2"
        ),
        "gigatoken Tokenizer(hf)": lambda: gt.Tokenizer(hf_gpt2()),
    }


# Wall time by default; --clock cpu takes this process's CPU time instead, which a machine
# shared with other jobs disturbs far less (one thread only: CPU time sums the threads).
CLOCK = [time.perf_counter]


def time_batch(make, call, docs, want, mb, repeat) -> dict:
    tok = make()
    t0 = CLOCK[0]()
    out = call(tok, docs)
    cold = CLOCK[0]() - t0
    if not same(out, want):
        raise SystemExit("batch output differs from tiktoken's")
    warm = []
    for _ in range(repeat):
        t0 = CLOCK[0]()
        call(tok, docs)
        warm.append(CLOCK[0]() - t0)
    return {"cold_MBps": mb / cold, "warm_MBps": mb / statistics.median(warm)}


def time_call(fn, least: float = 0.1) -> float:
    fn()
    n, spent = 1, 0.0
    while spent < least:
        t0 = CLOCK[0]()
        for _ in range(n):
            fn()
        spent = CLOCK[0]() - t0
        if spent < least:
            n *= 2
    runs = []
    for _ in range(5):
        t0 = CLOCK[0]()
        for _ in range(n):
            fn()
        runs.append((CLOCK[0]() - t0) / n)
    return statistics.median(runs)


def worker(args) -> dict:
    import numpy as np
    import tiktoken  # noqa: F401  (references builds it offline)

    import gputok
    from references import tiktoken_gpt2

    threads = args.threads_one
    if args.clock == "cpu":
        CLOCK[0] = time.process_time
    ref = tiktoken_gpt2()
    res = {"threads": threads, "batch": {}, "one_text": {}}
    corpora = {"bench": load_bench(args.bench_mb), "code": load_code(args.code_mb)}
    giga = gigatoken_configs()
    for name, docs in corpora.items():
        mb = sum(len(d.encode()) for d in docs) / 1e6
        log(f"{name}: {len(docs)} docs, {mb:.1f} MB; tiktoken reference")
        want = flat(ref.encode_ordinary_batch(docs, num_threads=max(threads, 2)))
        rows = {"MB": mb, "docs": len(docs)}
        rows["gputok"] = time_batch(
            lambda: gputok.gpt2(device="cpu"),
            lambda t, d: t.encode_batch_flat(d, num_threads=threads, disallowed_special=()),
            docs,
            want,
            mb,
            args.repeat,
        )
        for gname, make in giga.items():
            rows[gname] = time_batch(
                make,
                lambda t, d: giga_flat(t.encode_batch(d, parallel=threads > 1)),
                docs,
                want,
                mb,
                args.repeat,
            )
        log(f"{name}: {json.dumps(rows)}")
        res["batch"][name] = rows
    text = "".join(corpora["bench"])
    ids = ref.encode_ordinary(text[:6_000_000])
    tok = gputok.gpt2(device="cpu")
    gts = {g: make() for g, make in giga.items()}
    for size in args.sizes:
        start = 1000
        t = ref.decode(ids[start : start + size]) if size < len(ids) - start else text
        want_ids = ref.encode_ordinary(t)
        if tok.encode_ordinary(t) != want_ids or tok.encode_to_numpy(t).tolist() != want_ids:
            raise SystemExit(f"one text of {size} tokens: gputok differs from tiktoken")
        # Both of gputok's outputs: a list (encode_ordinary) and, like gigatoken's encode, a
        # uint32 array (encode_to_numpy).
        row = {
            "tokens": len(want_ids),
            "gputok_us": time_call(lambda t=t: tok.encode_ordinary(t), args.least) * 1e6,
            "gputok_numpy_us": time_call(lambda t=t: tok.encode_to_numpy(t), args.least) * 1e6,
        }
        best = None
        for g, gt in gts.items():
            calls = {"encode": lambda gt=gt, t=t: gt.encode(t)}
            if threads > 1:
                calls["encode_batch"] = lambda gt=gt, t=t: gt.encode_batch([t], parallel=True)
            if not np.array_equal(np.asarray(gt.encode(t), dtype=np.int64), want_ids):
                raise SystemExit(f"one text of {size} tokens: {g} differs from tiktoken")
            for c, fn in calls.items():
                us = time_call(fn, args.least) * 1e6
                if best is None or us < best[0]:
                    best = (us, f"{g} {c}")
        row["gigatoken_us"], row["gigatoken_api"] = best
        log(f"one text {size}: {row}")
        res["one_text"][str(size)] = row
    return res


def table(results: list[dict]) -> str:
    lines = []
    for r in results:
        n = r["threads"]
        lines.append(f"\n**{n} thread(s)** (RAYON_NUM_THREADS={n})\n")
        lines.append(
            "| corpus | MB | gputok cold | gputok warm | gigatoken cold | gigatoken warm | warm ratio | cold ratio |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, rows in r["batch"].items():
            g = rows["gputok"]
            giga = [v for k, v in rows.items() if k.startswith("gigatoken")]
            gw = max(v["warm_MBps"] for v in giga)  # the faster configuration, warm
            gc = max(v["cold_MBps"] for v in giga)  # and cold (it may be the other one)
            lines.append(
                f"| {name} | {rows['MB']:.1f} | {g['cold_MBps']:.0f} | {g['warm_MBps']:.0f} | "
                f"{gc:.0f} | {gw:.0f} | {g['warm_MBps'] / gw:.2f} | {g['cold_MBps'] / gc:.2f} |"
            )
        lines.append(
            "\n| one text, tokens | gputok us, list | gputok us, numpy | gigatoken us (API) "
            "| ratio, list | ratio, numpy |"
        )
        lines.append("|---:|---:|---:|---:|---:|---:|")
        for row in r["one_text"].values():
            g, npy = row["gigatoken_us"], row.get("gputok_numpy_us", float("nan"))
            lines.append(
                f"| {row['tokens']:,} | {row['gputok_us']:.2f} | {npy:.2f} | {g:.2f} "
                f"({row['gigatoken_api']}) | {g / row['gputok_us']:.2f} | {g / npy:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--threads", default=f"1,{os.cpu_count() or 1}")
    ap.add_argument("--bench-mb", type=float, default=1000.0)
    ap.add_argument("--code-mb", type=float, default=96.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--least", type=float, default=0.1, help="seconds per one-text timed loop")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: process CPU time (--threads 1)",
    )
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads-one", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.sizes = [int(s) for s in str(args.sizes).split(",") if s]
    if args.clock == "cpu" and args.threads != "1" and not args.worker:
        ap.error("--clock cpu measures one thread only: pass --threads 1")
    if args.worker:
        print(json.dumps(worker(args)))
        return
    results = []
    for n in [int(x) for x in args.threads.split(",")]:
        cmd = [sys.executable, __file__, "--worker", "--threads-one", str(n)]
        cmd += ["--bench-mb", str(args.bench_mb), "--code-mb", str(args.code_mb)]
        cmd += ["--repeat", str(args.repeat), "--sizes", ",".join(map(str, args.sizes))]
        cmd += ["--least", str(args.least), "--clock", args.clock]
        env = dict(os.environ, RAYON_NUM_THREADS=str(n))
        out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
    meta = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "clock": args.clock,
    }
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(f"{meta['date_utc']} UTC, {meta['machine']}: `{meta['command']}`")
    print(table(results))


if __name__ == "__main__":
    main()
