#!/usr/bin/env python3
"""What a call costs around the encoder: encode()'s Python list, and a small text's call.

Not a test. Two parts, every output checked equal to tiktoken's ids (and non-empty) first:

1. **list**: ``encode()``'s list builder alone (``_core.ids_to_list``: ids already in an int32
   buffer -> a list), at 1K-10M ids, in ns per id: the build alone (the list kept), its
   ``del`` alone (what the caller pays later), and ``ndarray.tolist()`` (a new int per id) for
   scale. Ids of real text (the bench corpus, tokens repeated to the size) and uniform random
   ids over the vocabulary (worst locality). Also ``encode()`` minus ``encode_to_numpy()`` on
   one text of 131K and 1M tokens (how earlier notes measured it: build and free together),
   on the CPU path and, with ``--gpu``, on a GPU tokenizer.
2. **call**: one 64-token text (cut from the bench corpus at token boundaries, as in
   ``bench_cpu_path.py``) through each layer, warm: the facade (``encode_ordinary``,
   ``encode``), the core's method directly (list and numpy results, and an empty text: the
   binding and facade cost without text), ``encode_batch_flat([t])``, a pybind11 call that
   does nothing (``routes_to_gpu``), and the peers (gigatoken where installed, tiktoken).
   Median of 7 loops of at least ``--least`` seconds each.

    .venv/bin/python bench/bench_call_overhead.py                  # both parts
    .venv/bin/python bench/bench_call_overhead.py --part call --json out.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "bench", REPO / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

LIST_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
JSONL = [
    REPO / ".cache" / "corpus" / "corpus-bench.jsonl",
    *([Path(os.environ["GPUTOK_BENCH_JSONL"])] if os.environ.get("GPUTOK_BENCH_JSONL") else []),
]


def log(msg: str) -> None:
    print(f"[bench_call_overhead {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def bench_text(max_bytes: int = 8_000_000) -> str:
    """The first max_bytes of the bench corpus (or of the ci corpus the tests build)."""
    path = next((p for p in JSONL if p.exists()), None)
    if path is None:
        import corpus

        docs = corpus.load_corpus("bench")
    else:
        docs = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                docs.append(json.loads(line)["text"])
                if sum(map(len, docs)) > max_bytes:
                    break
    return "".join(docs)[:max_bytes]


def median_loop(fn, least: float) -> float:
    """Median seconds per fn() over 7 loops of at least `least` seconds, after a warm-up."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= least:
            break
        n *= 2
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def build_and_free(make, n_ids: int, reps: int) -> tuple[float, float]:
    """(build, free) median ns per id: make() timed with its result kept, then its del."""
    build, free = [], []
    gc.disable()
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            out = make()
            t1 = time.perf_counter()
            del out
            t2 = time.perf_counter()
            build.append(t1 - t0)
            free.append(t2 - t1)
    finally:
        gc.enable()
    return statistics.median(build) * 1e9 / n_ids, statistics.median(free) * 1e9 / n_ids


def list_builder(tok):
    """ids -> list through encode()'s builder: this tree's ``_core.ids_to_list(ids, threads)``,
    or None where the build has no such hook (an older tree: only ``tolist`` and the
    encode()-minus-encode_to_numpy rows are measured)."""
    from gputok import _core

    fn = getattr(_core, "ids_to_list", None)
    if fn is None:
        return None
    try:
        fn(__import__("numpy").zeros(1, dtype="int32"), 0)
        return fn
    except TypeError:  # the first hook took the Core: (core, ids)
        return lambda ids, threads=0: fn(tok._core, ids)


def part_list(tok, ref, text: str, sizes, sweep, gpu: bool, least_big: float) -> dict:
    import numpy as np

    build = list_builder(tok)
    real = tok.encode_to_numpy(text).astype(np.int32)
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        reps = max(3, min(100, int(1e7 // n)))
        for kind in ("text", "random"):
            if kind == "text":
                ids = np.resize(real, n).astype(np.int32)
            else:
                ids = rng.integers(0, tok.n_vocab, n, dtype=np.int32)
            nb, nf = build_and_free(ids.tolist, n, reps)
            row = {"ids": n, "kind": kind, "tolist_build_ns": nb, "tolist_free_ns": nf}
            for threads in [0, *(sweep if n >= 1_000_000 else [])] if build else []:
                got = build(ids, threads)
                if not got or got != ids.tolist():
                    raise SystemExit(f"ids_to_list of {n} {kind} ids differs from tolist()")
                del got
                b, f = build_and_free(lambda i=ids, t=threads: build(i, t), n, reps)
                key = "" if threads == 0 else f"_t{threads}"
                row.update({f"build_ns{key}": b, f"free_ns{key}": f})
            rows.append(row)
            log(f"list {n} {kind}: {json.dumps(row)}")
    one = []
    toks = {"cpu": tok}
    if gpu:
        import gputok

        ok, why = gputok.cuda_available()
        if ok:
            toks["cuda"] = gputok.gpt2(device="cuda")
        else:
            log(f"--gpu: no usable GPU ({why})")
    for tokens in (131072, 1048576):
        t = ref.decode(real[:tokens].tolist())
        want = ref.encode_ordinary(t)
        for device, dtok in toks.items():
            if not want or dtok.encode_ordinary(t) != want:
                raise SystemExit(f"{device}: encode of {tokens} tokens differs from tiktoken")
            t_np = median_loop(lambda t=t, d=dtok: d.encode_to_numpy(t), least_big)
            t_list = median_loop(lambda t=t, d=dtok: d.encode(t), least_big)
            row = {"device": device, "tokens": len(want)}
            row.update({"encode_to_numpy_ms": t_np * 1e3, "encode_ms": t_list * 1e3})
            row["list_ns_per_token"] = (t_list - t_np) * 1e9 / len(want)
            one.append(row)
            log(f"encode - encode_to_numpy: {json.dumps(row)}")
    return {"ids_to_list": rows, "encode_minus_numpy": one}


def part_call(tok, ref, text: str, least: float) -> dict:
    import numpy as np

    ids = ref.encode_ordinary(text[:20000])
    t = ref.decode(ids[1000:1064])
    want = ref.encode_ordinary(t)
    core = tok._core
    fns = {
        "encode_ordinary(t)": lambda: tok.encode_ordinary(t),
        "encode(t)": lambda: tok.encode(t),
        "encode_to_numpy(t)": lambda: tok.encode_to_numpy(t),
        "core.encode_list(t)": lambda: core.encode_list(t, [], [], "strict"),
        "core.encode_numpy(t)": lambda: core.encode_numpy(t, [], [], "strict"),
        'core.encode_list("")': lambda: core.encode_list("", [], [], "strict"),
        'encode_ordinary("")': lambda: tok.encode_ordinary(""),
        "encode_batch_flat([t])": lambda: tok.encode_batch_flat([t], disallowed_special=()),
        "core.routes_to_gpu (no-op call)": lambda: core.routes_to_gpu(0, 1),
        "tiktoken encode_ordinary(t)": lambda: ref.encode_ordinary(t),
    }
    checks = {
        "encode_ordinary(t)": fns["encode_ordinary(t)"](),
        "encode(t)": fns["encode(t)"](),
        "encode_to_numpy(t)": fns["encode_to_numpy(t)"]().tolist(),
        "encode_batch_flat([t])": fns["encode_batch_flat([t])"]()[0].tolist(),
    }
    try:
        import gigatoken as gt

        from references import RANKS

        giga = gt.Tokenizer.from_tiktoken(str(RANKS), pretokenizer="gpt2")
        fns["gigatoken encode(t)"] = lambda: giga.encode(t)
        checks["gigatoken encode(t)"] = np.asarray(giga.encode(t)).tolist()
    except ImportError:
        log("gigatoken not installed: no peer row")
    for name, got in checks.items():
        if not got or list(got) != want:
            raise SystemExit(f"{name} differs from tiktoken's ids")
    rows = {"tokens": len(want), "bytes": len(t.encode())}
    for name, fn in fns.items():
        rows[name] = median_loop(fn, least) * 1e6
        log(f"{name}: {rows[name]:.3f} us")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--part", choices=("all", "list", "call"), default="all")
    ap.add_argument("--sizes", default=",".join(map(str, LIST_SIZES)))
    ap.add_argument("--least", type=float, default=0.05, help="seconds per timed loop")
    ap.add_argument("--least-big", type=float, default=0.3, help="the same for 131K/1M texts")
    ap.add_argument("--gpu", action="store_true", help="encode - encode_to_numpy on the GPU too")
    ap.add_argument(
        "--sweep", default="1,2,4,8,16", help="fill threads to try on lists of >= 1M ids"
    )
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()

    import gputok
    from references import tiktoken_gpt2

    ref = tiktoken_gpt2()
    tok = gputok.gpt2(device="cpu")
    text = bench_text()
    meta = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    res: dict = {"meta": meta}
    if args.part in ("all", "call"):
        res["call"] = part_call(tok, ref, text, args.least)
    if args.part in ("all", "list"):
        sizes = [int(s) for s in args.sizes.split(",") if s]
        sweep = [int(t) for t in args.sweep.split(",") if t]
        res["list"] = part_list(tok, ref, text, sizes, sweep, args.gpu, args.least_big)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    print(
        f"{meta['date_utc']} UTC, {meta['machine']}, Python {meta['python']}: `{meta['command']}`"
    )
    if "call" in res:
        print("\n| 64-token call | µs |\n|---|---:|")
        for k, v in res["call"].items():
            if k not in ("tokens", "bytes"):
                print(f"| {k} | {v:.3f} |")
    if "list" in res:
        print("\n| ids | kind | build ns/id | del ns/id | tolist build | tolist del | sweep |")
        print("|---:|---|---:|---:|---:|---:|---|")
        for r in res["list"]["ids_to_list"]:
            sweep = " ".join(f"{k[9:]}={v:.2f}" for k, v in r.items() if k.startswith("build_ns_t"))
            print(
                f"| {r['ids']:,} | {r['kind']} | {r.get('build_ns', float('nan')):.2f} | "
                f"{r.get('free_ns', float('nan')):.2f} | {r['tolist_build_ns']:.2f} | "
                f"{r['tolist_free_ns']:.2f} | {sweep} |"
            )
        for r in res["list"]["encode_minus_numpy"]:
            print(
                f"\n{r['device']}: encode() - encode_to_numpy(), {r['tokens']:,} tokens: "
                f"{r['list_ns_per_token']:.2f} ns/token ({r['encode_ms']:.3f} - "
                f"{r['encode_to_numpy_ms']:.3f} ms)"
            )


if __name__ == "__main__":
    main()
