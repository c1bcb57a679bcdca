#!/usr/bin/env python3
"""GPU benchmark: the GPUTOK paper's latency table, and batch throughput, on one machine.

Run on the GPU machine (scripts/gpu_check.sh does): ``python bench/bench_gpu.py --out DIR``.

1. Latency, one sequence of ~256, 1K, 4K, 16K, 131K and 1M tokens (prefixes of the diverse
   bench corpus joined into one string): HF tokenizers, tiktoken (1 thread), gigatoken,
   gputok-CPU, and gputok on the GPU with blockbpe, blockbpe_optimized and per_word, end to
   end from a Python str to ids in host memory (np.int32), with the kernel-only time (CUDA
   events) beside. Median of repeated runs after a warm-up.
2. Batch throughput on >= 64 MB of the bench corpus (documents of <= 16 KiB): gputok
   per_word end to end (flat ids in host memory) and kernel-only, gputok-CPU, tiktoken,
   HF and gigatoken each with all host cores.
Every output is checked against tiktoken (HF where noted); mismatches are counted and
reported. Writes results.json, results.md and latency.png into --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

NCPU = os.cpu_count() or 1
os.environ.setdefault("RAYON_NUM_THREADS", str(NCPU))

import numpy as np  # noqa: E402
from _common import replace_section  # noqa: E402

import gputok  # noqa: E402
from references import gigatoken_gpt2, hf_gpt2, tiktoken_gpt2  # noqa: E402

TARGETS = [256, 1024, 4096, 16384, 131072, 1048576]
LABELS = ["256", "1K", "4K", "16K", "131K", "1M"]


def log(*a):
    print(*a, flush=True)


def device_name() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
        return out or "unknown GPU"
    except Exception:
        return "unknown GPU"


def timeit(fn, budget_s=1.5, min_runs=3, max_runs=50):
    fn()  # warm-up
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < min_runs or (len(times) < max_runs and time.perf_counter() < t_end):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, len(times)


def make_sequences(docs, tt):
    """Prefixes of the joined corpus with about N tokens each."""
    big = "".join(docs[:4000])
    ids = tt.encode_ordinary(big[:8_000_000])
    out = {}
    for n in TARGETS:
        # bytes of the first n tokens, decoded back at a character boundary
        b = tt.decode_bytes(ids[:n])
        s = b.decode("utf-8", "ignore")
        out[n] = s
    return out


def bench_latency(seqs, tt, hf, gt, cpu, gpus, quick):
    rows = []
    for n, label in zip(TARGETS, LABELS, strict=True):
        text = seqs[n]
        want = tt.encode_ordinary(text)
        ntok = len(want)
        row = {"target": label, "tokens": ntok, "bytes": len(text.encode())}
        budget = 0.5 if quick else 1.5
        slow_budget = 0.2 if n >= 131072 else budget
        row["tiktoken_ms"], _ = timeit(lambda text=text: tt.encode_ordinary(text), slow_budget)
        row["hf_ms"], _ = timeit(
            lambda text=text: hf.encode(text).ids, slow_budget, min_runs=1 if n >= 131072 else 3
        )
        ok_hf = hf.encode(text).ids == want
        if gt is not None:
            row["gigatoken_ms"], _ = timeit(lambda text=text: gt.encode(text), budget)
            ok_gt = list(gt.encode(text)) == want
        else:
            ok_gt = True
        row["gputok_cpu_ms"], _ = timeit(
            lambda text=text: cpu.encode_batch_flat([text], disallowed_special=()), budget
        )
        ok_cpu = cpu.encode_ordinary(text) == want
        mism = int(not ok_hf) + int(not ok_gt) + int(not ok_cpu)
        for alg, g in gpus.items():
            if alg != "per_word" and n >= 1048576 and quick:
                continue
            kms = []

            def run(g=g, text=text, kms=kms):
                ids, offs, k = g._encode_flat([text], 0, frozenset(), (), "strict")
                kms.append(k)
                return ids

            e2e, runs = timeit(
                run, 0.3 if alg != "per_word" else budget, min_runs=2 if alg != "per_word" else 5
            )
            row[f"{alg}_ms"] = e2e
            row[f"{alg}_kernel_ms"] = statistics.median(kms[1:]) if len(kms) > 1 else kms[0]
            got = run().tolist()
            mism += int(got != want)
        row["mismatches"] = mism
        rows.append(row)
        log(json.dumps(row))
    return rows


def bench_batch(docs, tt, hf, gt, cpu, gpu, mb):
    sel, size = [], 0
    for d in docs:
        sel.append(d)
        size += len(d.encode())
        if size >= mb * 1e6:
            break
    log(f"batch: {len(sel)} docs, {size / 1e6:.1f} MB")
    res = {"docs": len(sel), "bytes": size}
    # gputok GPU (warm-up on a slice, then the whole)
    gpu._encode_flat(sel[:2000], 0, frozenset(), (), "strict")
    gpu._encode_flat(sel, 0, frozenset(), (), "strict")
    t0 = time.perf_counter()
    ids_g, offs_g, kms = gpu._encode_flat(sel, 0, frozenset(), (), "strict")
    t_g = time.perf_counter() - t0
    res["gputok_gpu_MBps"] = size / t_g / 1e6
    res["gputok_gpu_kernel_MBps"] = size / (kms / 1e3) / 1e6
    res["gputok_gpu_kernel_ms"] = kms
    res["gputok_gpu_s"] = t_g
    log(f"gputok per_word: {t_g:.3f} s e2e, kernel {kms:.1f} ms")
    # references
    t0 = time.perf_counter()
    want = tt.encode_ordinary_batch(sel, num_threads=NCPU)
    res["tiktoken_MBps"] = size / (time.perf_counter() - t0) / 1e6
    log(f"tiktoken {res['tiktoken_MBps']:.1f} MB/s")
    flat_want = np.fromiter((t for row in want for t in row), dtype=np.int32)
    mism = int(not np.array_equal(ids_g, flat_want))
    cpu.encode_batch_flat(sel[:2000], disallowed_special=())
    t0 = time.perf_counter()
    ids_c, _ = cpu.encode_batch_flat(sel, disallowed_special=())
    res["gputok_cpu_MBps"] = size / (time.perf_counter() - t0) / 1e6
    mism += int(not np.array_equal(ids_c, flat_want))
    if gt is not None:
        # encode_batch (awkward array, parallel on all cores) is gigatoken's fast call; its
        # encode_batch_list builds Python lists and is ~30x slower. Check outside the timing.
        import awkward as ak

        gt.encode_batch(sel[:2000], parallel=True)
        t0 = time.perf_counter()
        arr = gt.encode_batch(sel, parallel=True)
        res["gigatoken_MBps"] = size / (time.perf_counter() - t0) / 1e6
        mism += int(not np.array_equal(np.asarray(ak.flatten(arr)).astype(np.int32), flat_want))
        log(f"gigatoken {res['gigatoken_MBps']:.1f} MB/s")
    hf_sel = sel if len(sel) < 100000 else sel
    t0 = time.perf_counter()
    enc = hf.encode_batch(hf_sel)
    res["hf_MBps"] = size / (time.perf_counter() - t0) / 1e6
    mism += int([e.ids for e in enc] != want)
    res["mismatches"] = mism
    log(json.dumps(res))
    return res


def plot(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # pragma: no cover
        log(f"no plot: {e}")
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    x = [r["tokens"] for r in rows]
    for key, name in [
        ("hf_ms", "HF tokenizers"),
        ("tiktoken_ms", "tiktoken (1 thread)"),
        ("gigatoken_ms", "gigatoken"),
        ("gputok_cpu_ms", "gputok CPU"),
        ("blockbpe_ms", "gputok blockbpe"),
        ("blockbpe_optimized_ms", "gputok blockbpe_optimized"),
        ("per_word_ms", "gputok per_word (end to end)"),
        ("per_word_kernel_ms", "per_word kernels only"),
    ]:
        pts = [(xx, r[key]) for xx, r in zip(x, rows, strict=True) if key in r]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens in the sequence")
    ax.set_ylabel("latency, ms (median)")
    ax.set_title("One sequence, str -> ids in host memory")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def to_markdown(meta, rows, batch):
    lines = [
        f"### {meta['date']}, {meta['device'].split(',')[0]}",
        "",
        f"Device: {meta['device']}; host: {meta['cpus']} cores; command: `{meta['command']}`.",
        f"Corpus: bench profile (bench/corpus.py, diverse multilingual docs), {meta['corpus_mb']:.1f} MB.",
        "",
        "One sequence, end to end (Python str -> np.int32 ids in host memory), median ms; "
        "kernel-only (CUDA events) in brackets. tiktoken `encode_ordinary` and HF `encode` on one "
        "thread, gigatoken `encode`, gputok CPU `encode_batch_flat([text])` on all host cores.",
        "",
        "| tokens | HF | tiktoken | gigatoken | gputok CPU | blockbpe | blockbpe_optimized | per_word | mismatches |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def f(r, k):
        return f"{r[k]:.3f}" if k in r else "—"

    def g(r, a):
        if f"{a}_ms" not in r:
            return "—"
        return f"{r[a + '_ms']:.3f} [{r[a + '_kernel_ms']:.3f}]"

    for r in rows:
        lines.append(
            f"| {r['tokens']:,} | {f(r, 'hf_ms')} | {f(r, 'tiktoken_ms')} | {f(r, 'gigatoken_ms')} | "
            f"{f(r, 'gputok_cpu_ms')} | {g(r, 'blockbpe')} | {g(r, 'blockbpe_optimized')} | "
            f"{g(r, 'per_word')} | {r['mismatches']} |"
        )
    if batch:
        lines += [
            "",
            f"Batch: {batch['docs']:,} documents, {batch['bytes'] / 1e6:.1f} MB, all {meta['cpus']} host cores "
            "for the CPU tokenizers.",
            "",
            "| tokenizer | MB/s |",
            "|---|---:|",
            f"| gputok per_word, end to end | {batch['gputok_gpu_MBps']:.0f} |",
            f"| gputok per_word, kernels only | {batch['gputok_gpu_kernel_MBps']:.0f} |",
            f"| gputok CPU | {batch['gputok_cpu_MBps']:.0f} |",
            f"| gigatoken | {batch.get('gigatoken_MBps', float('nan')):.0f} |",
            f"| tiktoken | {batch['tiktoken_MBps']:.0f} |",
            f"| HF tokenizers | {batch['hf_MBps']:.0f} |",
            "",
            f"Batch mismatches: {batch['mismatches']}.",
        ]
    return "\n".join(lines) + "\n"


DOCS = REPO / "docs" / "benchmarks.md"
DOCS_HEADING = "## GPU path: latency and batch throughput (bench/bench_gpu.py)"


def write_docs(from_dir: Path, notes: str = "") -> None:
    """Puts the GPU results of ``from_dir`` (results.json, latency.png from a run on the GPU
    machine) under DOCS_HEADING in docs/benchmarks.md, replacing an older GPU section."""
    import shutil

    data = json.loads((from_dir / "results.json").read_text())
    md = DOCS_HEADING + "\n\n" + to_markdown(data["meta"], data["latency"], data["batch"])
    if (from_dir / "latency.png").is_file():
        shutil.copy(from_dir / "latency.png", REPO / "docs" / "gpu_latency.png")
        md += "\n![GPU latency](gpu_latency.png)\n"
    if notes:
        md += "\n" + notes.rstrip("\n") + "\n"
    replace_section(md, DOCS_HEADING, DOCS)
    log(f"updated {DOCS.relative_to(REPO)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "bench" / "out"))
    ap.add_argument("--batch-mb", type=float, default=64.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-batch", action="store_true")
    ap.add_argument("--docs-from", help="write docs/benchmarks.md from DIR/results.json and exit")
    ap.add_argument("--notes", help="markdown file appended to the docs section")
    ap.add_argument(
        "--profile", action="store_true", help="GPUTOK_GPU_PROFILE=1: per-stage times on stderr"
    )
    args = ap.parse_args()
    if args.docs_from:
        write_docs(Path(args.docs_from), Path(args.notes).read_text() if args.notes else "")
        return
    if args.profile:
        os.environ["GPUTOK_GPU_PROFILE"] = "1"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from corpus_fixture import load_corpus

    docs = load_corpus("bench")
    corpus_mb = sum(len(d.encode()) for d in docs) / 1e6
    tt, hf = tiktoken_gpt2(), hf_gpt2()
    try:
        gt = gigatoken_gpt2()
    except Exception as e:
        log(f"gigatoken unavailable: {e}")
        gt = None
    cpu = gputok.gpt2(device="cpu")
    gpus = {
        a: gputok.gpt2(device="cuda", algorithm=a)
        for a in ("blockbpe", "blockbpe_optimized", "per_word")
    }
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": device_name(),
        "cpus": NCPU,
        "host": platform.node(),
        "command": "python bench/bench_gpu.py " + " ".join(sys.argv[1:]),
        "corpus_mb": corpus_mb,
    }
    log(json.dumps(meta))
    seqs = make_sequences(docs, tt)
    rows = bench_latency(seqs, tt, hf, gt, cpu, gpus, args.quick)
    batch = (
        None
        if args.no_batch
        else bench_batch(docs, tt, hf, gt, cpu, gpus["per_word"], args.batch_mb)
    )
    (out / "results.json").write_text(
        json.dumps({"meta": meta, "latency": rows, "batch": batch}, indent=1)
    )
    md = to_markdown(meta, rows, batch)
    (out / "results.md").write_text(md)
    plot(rows, out / "latency.png")
    print(md)


if __name__ == "__main__":
    main()
