#!/usr/bin/env python3
"""The GPU path's envelope, one run: single texts from 64 tokens to 100 MB, and calls from
1 MB to 1 GB as a list of documents and as one str, gputok's GPU path against gigatoken in
its best exact configuration (both constructors tried, the faster kept) on all host cores.

Inputs are built from the bench corpus (tests/corpus_fixture.py, profile "bench"): calls
over the corpus's size repeat its documents in shuffled copies; one str is those documents
joined. Every output is checked: the GPU's ids and offsets equal gputok's CPU path at every
size (which tests check against tiktoken), and tiktoken's ids on a sample (1,000 documents
of each call, every single text up to 1M tokens, the whole 1 MB str).

    python bench/bench_envelope.py [--sizes-mb 1,4,16,64,256,1024] [--single]
        [--configs "16M:2,64M:1"] [--profile] [--out DIR]

--configs: GPU tunings to compare, CHUNK:LANES[:COPY_THREADS[:HUGE_PAGES]] each (the first
is the one reported against gigatoken; COPY_THREADS 0: the default). --profile: one extra call per size with GpuTuning.profile on;
its per-call stage lines (stderr) go to DIR/profile.log. Writes DIR/envelope.json and prints
markdown tables last. ``--old`` runs the calls only (no peers, no tuning) for an older
gputok on PYTHONPATH, for before/after in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
NCPU = os.cpu_count() or 1
os.environ.setdefault("RAYON_NUM_THREADS", str(NCPU))


def log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def docs_of(corpus: list[str], mb: float, seed: int = 0) -> list[str]:
    """Documents totalling about mb MB (UTF-8): the corpus, then shuffled copies of it."""
    out, size, rng, rnd = [], 0, random.Random(seed), 0
    while size < mb * 1e6:
        order = list(range(len(corpus)))
        if rnd:
            rng.shuffle(order)
        for i in order:
            d = corpus[i]
            out.append(d)
            size += len(d.encode())
            if size >= mb * 1e6:
                break
        rnd += 1
    return out


def timed(fn, reps: int):
    """(first call's seconds, median of `reps` more, last result). The previous result is
    freed before each timed call: freeing 1.8 GB of ids (munmap) is no part of a call."""
    t0 = time.perf_counter()
    r = fn()
    first = time.perf_counter() - t0
    ts = []
    for _ in range(reps):
        r = None
        t0 = time.perf_counter()
        r = fn()
        ts.append(time.perf_counter() - t0)
    return first, statistics.median(ts) if ts else first, r


def reps_for(mb: float) -> int:
    return 20 if mb <= 1 else 7 if mb <= 16 else 5 if mb <= 64 else 3 if mb <= 256 else 2


def gpu_tokenizers(gputok, configs: list[str], old: bool):
    out = {}
    for spec in configs:
        if old:
            out["old"] = gputok.gpt2(device="cuda")
            break
        t, kw = tuning_of(gputok, spec)
        out[spec] = gputok.gpt2(device="cuda", gpu_tuning=t, **kw)
    return out


def tuning_of(gputok, spec: str):
    """GpuTuning and Tokenizer options of CHUNK:LANES[:COPY_THREADS[:HUGE]] ("16M:2:16:0")."""
    parts = spec.split(":")
    t = gputok.GpuTuning()
    t.chunk_bytes = int(float(parts[0].rstrip("M")) * (1 << 20))
    t.lanes = int(parts[1])
    if len(parts) > 3:
        t.huge_pages = parts[3] == "1"
    kw = {"copy_threads": int(parts[2])} if len(parts) > 2 and int(parts[2]) else {}
    return t, kw


def gigatoken_makers() -> list:
    """(name, constructor) of gigatoken's two exact GPT-2 configurations; [] when missing."""
    try:
        import gigatoken as gtk

        from references import hf_gpt2
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        log(f"gigatoken unavailable: {e}")
        return []
    path = REPO / "backend_src" / "gputok" / "data" / "gpt2.tiktoken"
    return [
        (
            "from_tiktoken(gpt2)",
            lambda: gtk.Tokenizer.from_tiktoken(str(path), pretokenizer="gpt2"),
        ),
        ("Tokenizer(hf)", lambda: gtk.Tokenizer(hf_gpt2())),
    ]


def best_gigatoken(sample: list[str], want):
    """gigatoken's faster exact constructor on `sample` (None when it is missing)."""
    makers = gigatoken_makers()
    if not makers:
        return None, None
    cands = {}
    for name, make in makers:
        try:
            g = make()
            got = g.encode_batch_list(sample, parallel=True)
            if [list(x) for x in got] != want:
                log(f"gigatoken {name}: ids differ from tiktoken's; not used")
                continue
            _, t, _ = timed(lambda g=g: g.encode_batch(sample, parallel=True), 3)
            cands[name] = (t, g)
        except Exception as e:  # noqa: BLE001
            log(f"gigatoken {name}: {e}")
    if not cands:
        return None, None
    name = min(cands, key=lambda k: cands[k][0])
    log(f"gigatoken: {', '.join(f'{k} {v[0] * 1e3:.1f} ms' for k, v in cands.items())}; {name}")
    return name, cands[name][1]


def check_sample(tt, docs, ids, offs, label: str) -> None:
    rng = random.Random(1)
    idx = rng.sample(range(len(docs)), min(1000, len(docs)))
    want = tt.encode_ordinary_batch([docs[i] for i in idx], num_threads=NCPU)
    for i, w in zip(idx, want, strict=True):
        got = ids[offs[i] : offs[i + 1]].tolist()
        assert w and got == w, f"{label}: doc {i} differs from tiktoken"


def run_calls(args, gputok, corpus, toks, cpu, gt, tt) -> list[dict]:
    rows = []
    for mb in [float(x) for x in args.sizes_mb.split(",")]:
        docs = docs_of(corpus, mb)
        size = sum(len(d.encode()) for d in docs)
        joined = "".join(docs)
        for shape, inp in (("docs", docs), ("str", [joined])):
            row = {"MB": round(size / 1e6, 1), "shape": shape, "docs": len(inp)}
            reps = args.reps or reps_for(mb)
            ref_ids = ref_offs = None
            if cpu is not None:
                cf, cm, (ref_ids, ref_offs) = timed(
                    lambda inp=inp: cpu.encode_batch_flat(inp, disallowed_special=()),
                    1 if mb > 64 else 3,
                )
                row["cpu_GBps"] = size / cm / 1e9
            for name, tok in toks.items():
                first, med, (ids, offs) = timed(
                    lambda tok=tok, inp=inp: tok.encode_batch_flat(inp, disallowed_special=()), reps
                )
                row[f"gpu[{name}]_GBps"] = size / med / 1e9
                row[f"gpu[{name}]_first_GBps"] = size / first / 1e9
                if ref_ids is not None:
                    ok = np.array_equal(ids, ref_ids) and np.array_equal(offs, ref_offs)
                    row[f"gpu[{name}]_exact"] = bool(ok and len(ids))
                    assert ok, f"{name} {mb} MB {shape}: GPU ids differ from the CPU path"
                if tt is not None and shape == "docs" and name == next(iter(toks)):
                    check_sample(tt, inp, ids, offs, f"{name} {mb} MB")
                if tt is not None and shape == "str" and size <= 1.1e6:
                    assert ids.tolist() == tt.encode_ordinary(joined), "1 MB str vs tiktoken"
                del ids, offs
            if gt is not None:
                call = (
                    (lambda inp=inp: gt.encode_batch(inp, parallel=True))
                    if shape == "docs"
                    else (lambda inp=inp: gt.encode(inp[0]))
                )
                gf, gm, _ = timed(call, max(1, reps // 2))
                row["gigatoken_GBps"] = size / gm / 1e9
                row["gigatoken_first_GBps"] = size / gf / 1e9
            log(json.dumps(row))
            rows.append(row)
            del ref_ids, ref_offs
        del docs, joined
    return rows


def run_single(args, corpus, toks, gt, tt) -> list[dict]:
    big = "".join(corpus[:4000])
    while len(big) < 110_000_000:
        big += big
    rows = []
    tok = next(iter(toks.values()))
    for _tokens, chars in (
        (64, 300),
        (256, 1100),
        (1024, 4500),
        (4096, 18_000),
        (16_384, 72_000),
        (65_536, 290_000),
        (262_144, 1_150_000),
        (1 << 20, 4_600_000),
        (4 << 20, 18_400_000),
        (0, 100_000_000),
    ):
        text = big[:chars]
        mb = len(text.encode()) / 1e6
        reps = 50 if mb < 1 else 9 if mb < 20 else 3
        _, med, (ids, _) = timed(
            lambda text=text: tok.encode_batch_flat([text], disallowed_special=()), reps
        )
        row = {"chars": chars, "MB": round(mb, 3), "tokens": len(ids), "gpu_ms": med * 1e3}
        if tt is not None and mb < 5:
            assert ids.tolist() == tt.encode_ordinary(text), f"single {chars} vs tiktoken"
        if gt is not None:
            _, gm, gids = timed(lambda text=text: gt.encode(text), reps)
            row["gigatoken_ms"] = gm * 1e3
            assert np.array_equal(np.asarray(gids, dtype=np.int64), ids.astype(np.int64))
            row["x_gigatoken"] = gm / med
        log(json.dumps(row))
        rows.append(row)
    return rows


def table(calls: list[dict], single: list[dict], first: str) -> str:
    out = []
    if calls:
        keys = [k for k in calls[0] if k.startswith("gpu[") and k.endswith("]_GBps")]
        out.append(
            "| MB | shape | "
            + " | ".join(k[:-5] for k in keys)
            + " | gigatoken | CPU path | GPU / gigatoken |"
        )
        out.append("|" + "---|" * (len(keys) + 5))
        for r in calls:
            g = r.get("gigatoken_GBps")
            best = r.get(f"gpu[{first}]_GBps", 0)
            cells = [f"{r[k]:.2f}" for k in keys]
            cells += [f"{g:.2f}" if g else "–", f"{r['cpu_GBps']:.2f}" if "cpu_GBps" in r else "–"]
            cells.append(f"{best / g:.2f}x" if g else "–")
            out.append(f"| {r['MB']} | {r['shape']} | " + " | ".join(cells) + " |")
    if single:
        out.append("\n| tokens | MB | gputok GPU ms | gigatoken ms | GPU / gigatoken |")
        out.append("|---|---|---|---|---|")
        for r in single:
            g = r.get("gigatoken_ms")
            out.append(
                f"| {r['tokens']:,} | {r['MB']} | {r['gpu_ms']:.3f} | "
                + (f"{g:.3f} | {r['x_gigatoken']:.2f}x |" if g else "– | – |")
            )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes-mb", default="1,4,16,64,256,1024")
    ap.add_argument("--configs", default="16M:2")
    ap.add_argument("--single", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--old", action="store_true")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--reps", type=int, default=0, help="timed calls per size (0: by size)")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/envelope"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import gputok
    from corpus_fixture import load_corpus

    corpus = list(load_corpus("bench"))
    configs = args.configs.split(",")
    toks = gpu_tokenizers(gputok, configs, args.old)
    cpu = None if args.old else gputok.gpt2(device="cpu")
    tt = gt = gt_name = None
    if not args.old and not args.no_peers:
        from references import tiktoken_gpt2

        tt = tiktoken_gpt2()
        sample = corpus[:2000]
        gt_name, gt = best_gigatoken(sample, tt.encode_ordinary_batch(sample, num_threads=NCPU))
    calls = run_calls(args, gputok, corpus, toks, cpu, gt, tt)
    single = run_single(args, corpus, toks, gt, tt) if args.single else []
    if args.profile and not args.old:
        t, kw = tuning_of(gputok, configs[0])
        t.profile = True
        ptok = gputok.gpt2(device="cuda", gpu_tuning=t, **kw)
        fd = os.open(out / "profile.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        saved = os.dup(2)
        for mb in [float(x) for x in args.sizes_mb.split(",")]:
            docs = docs_of(corpus, mb)
            for inp in (docs, ["".join(docs)]):
                ptok.encode_batch_flat(inp, disallowed_special=())
                os.dup2(fd, 2)
                ptok.encode_batch_flat(inp, disallowed_special=())
                os.dup2(saved, 2)
    res = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
        "cores": NCPU,
        "gigatoken": gt_name,
        "calls": calls,
        "single": single,
    }
    (out / ("envelope-old.json" if args.old else "envelope.json")).write_text(
        json.dumps(res, indent=1)
    )
    print(table(calls, single, configs[0] if not args.old else "old"))


if __name__ == "__main__":
    main()
