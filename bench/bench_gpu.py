#!/usr/bin/env python3
"""GPU benchmark: gputok (GPU and CPU paths) against the strongest CPU peers, in one run.

Run on the GPU machine (scripts/gpu_check.sh does): ``python bench/bench_gpu.py --out DIR``.

Peers, each through its fastest call that returns ids in host memory:
  gputok GPU / CPU  ``gpt2(device=...).encode_batch_flat(texts)`` (flat np.int32)
  gigatoken         both exact configurations, ``Tokenizer.from_tiktoken(ranks,
                    pretokenizer="gpt2")`` and ``Tokenizer(hf_tokenizer)``: ``encode(text)`` and
                    ``encode_batch(docs, parallel=True)``; the tables mark the faster one
  tiktoken          ``encode_ordinary`` (1 thread) / ``encode_ordinary_batch`` (all cores)
  HF tokenizers     ``encode`` / ``encode_batch``

1. Single texts of 64 tokens to 1M tokens, then 16 MB and 100 MB (prefixes of the bench
   corpus, repeated past its 85 MB).
2. Batches of 1 MB to 1 GB, as documents (the corpus's documents, cycled) and as one str.

Cold is the first call on a freshly built tokenizer (pretoken caches empty, GPU pools
unallocated; build time excluded); warm is the median of repeated calls after it. Every
cold output is checked against tiktoken's ids before any warm timing; a mismatch is counted
and reported. References past tiktoken's reach are stitched from pieces cut where the ids
provably do not change (gputok_client.chunking, checked against tiktoken in the tests).
tiktoken and HF are measured up to the sizes in TT_MAX / HF_MAX (minutes per pass above).
Writes results.json and results.md into --out.
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
sys.path.insert(0, str(REPO / "client"))

NCPU = os.cpu_count() or 1
os.environ.setdefault("RAYON_NUM_THREADS", str(NCPU))

import numpy as np  # noqa: E402

import gputok  # noqa: E402
import references as refs  # noqa: E402
from gputok_client.chunking import split_text  # noqa: E402

SINGLE_TOKENS = [64, 256, 1024, 4096, 16384, 65536, 131072, 1 << 20]
SINGLE_MB = [16, 100]
BATCH_MB = [1, 16, 64, 256, 1024]
TT_MAX = {"single": 16e6, "batch": 64e6}  # bytes; tiktoken above: tens of seconds per pass
HF_MAX = {"single": 1.1e6, "batch": 64e6}
PIECE = 1 << 20  # reference pieces


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


# ------------------------------------------------------------------ peers
def _gt_batch(gt, docs):
    import awkward as ak

    return np.asarray(ak.flatten(gt.encode_batch(docs, parallel=True))).astype(np.int32)


def _gt_one(gt, text):
    return np.asarray(gt.encode(text)).astype(np.int32)


def _gputok(device):
    def build():
        if device == "cuda" and PROFILE[0]:
            tuning = gputok.GpuTuning()
            tuning.profile = True
            return gputok.gpt2(device=device, gpu_tuning=tuning)
        return gputok.gpt2(device=device)

    def one(t, text):
        return t.encode_batch_flat([text], disallowed_special=())[0]

    def batch(t, docs):
        return t.encode_batch_flat(docs, disallowed_special=())[0]

    return build, one, batch


def peers(gpu: bool) -> dict:
    """name -> (build(), one(tok, text) -> ids, batch(tok, docs) -> flat ids, caches)."""
    import gigatoken as gt

    ranks = str(refs.RANKS)
    hf_files = refs.gpt2_files()
    out = {}
    if gpu:
        out["gputok GPU"] = (*_gputok("cuda"), True)
    out["gputok CPU"] = (*_gputok("cpu"), True)
    out["gigatoken tiktoken"] = (
        lambda: gt.Tokenizer.from_tiktoken(ranks, pretokenizer="gpt2"),
        _gt_one,
        _gt_batch,
        True,
    )
    out["gigatoken hf"] = (lambda: gt.Tokenizer(_fresh_hf(hf_files)), _gt_one, _gt_batch, True)
    tt = refs.tiktoken_gpt2()
    out["tiktoken"] = (
        lambda: tt,
        lambda t, text: np.asarray(t.encode_ordinary(text), np.int32),
        lambda t, docs: _flat(t.encode_ordinary_batch(docs, num_threads=NCPU)),
        False,
    )
    out["HF"] = (
        lambda: _fresh_hf(hf_files),
        lambda t, text: np.asarray(t.encode(text).ids, np.int32),
        lambda t, docs: _flat([e.ids for e in t.encode_batch(docs)]),
        True,
    )
    return out


def _fresh_hf(files):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE.from_file(str(files["vocab.json"]), str(files["merges.txt"])))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def _flat(lists) -> np.ndarray:
    return np.fromiter((t for row in lists for t in row), dtype=np.int32)


def _capped(name: str, kind: str, nbytes: float) -> bool:
    cap = TT_MAX if name == "tiktoken" else HF_MAX if name == "HF" else None
    return cap is not None and nbytes > cap[kind]


# ------------------------------------------------------------------ inputs and references
class Corpus:
    """The bench corpus as one unit text (repeatable with exact references) and as docs."""

    def __init__(self, docs: list[str], tt):
        # " " + text: the junction of two copies is a cut before whitespace (exact), so the
        # ids of unit*k are the ids of unit, k times.
        self.unit = " " + "".join(docs).strip()
        data = self.unit.encode()
        cuts = split_text(data, PIECE)
        pieces = [data[a:b].decode() for a, b in cuts]
        t0 = time.perf_counter()
        ids = tt.encode_ordinary_batch(pieces, num_threads=NCPU)
        self.piece_bytes = np.array([b - a for a, b in cuts], np.int64)
        self.piece_chars = np.array([len(p) for p in pieces], np.int64)
        self.piece_ids = [np.asarray(x, np.int32) for x in ids]
        self.docs = docs
        self.doc_bytes = np.array([len(d.encode()) for d in docs], np.int64)
        self.doc_ids = [
            np.asarray(x, np.int32) for x in tt.encode_ordinary_batch(docs, num_threads=NCPU)
        ]
        log(f"references: {len(data) / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s")

    def text(self, nbytes: float) -> tuple[str, np.ndarray]:
        """A prefix of unit*k of about nbytes, ending at a piece boundary, and its ids."""
        chars, ids, size, i = 0, [], 0, 0
        n = len(self.piece_bytes)
        while size < nbytes:
            chars += int(self.piece_chars[i % n])
            size += int(self.piece_bytes[i % n])
            ids.append(self.piece_ids[i % n])
            i += 1
        k, rest = divmod(chars, len(self.unit))
        return self.unit * k + self.unit[:rest], np.concatenate(ids)

    def batch(self, nbytes: float) -> tuple[list[str], np.ndarray]:
        """The docs, cycled, until nbytes, and their ids flat."""
        out, ids, size, i = [], [], 0, 0
        while size < nbytes:
            j = i % len(self.docs)
            out.append(self.docs[j])
            ids.append(self.doc_ids[j])
            size += int(self.doc_bytes[j])
            i += 1
        return out, np.concatenate(ids)


def token_prefixes(corpus: Corpus, tt) -> list[tuple[str, str, np.ndarray]]:
    """(label, text, ids) of about N tokens each, cut at a token boundary."""
    ids = tt.encode_ordinary(corpus.unit[:8_000_000])
    out = []
    for n in SINGLE_TOKENS:
        text = tt.decode_bytes(ids[:n]).decode("utf-8", "ignore")
        label = (
            f"{n >> 20}M tok" if n >= 1 << 20 else f"{n >> 10}K tok" if n >= 1024 else f"{n} tok"
        )
        out.append((label, text, np.asarray(tt.encode_ordinary(text), np.int32)))
    return out


# ------------------------------------------------------------------ timing
def timeit(fn, budget_s: float, min_runs: int = 3, max_runs: int = 50) -> float:
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < min_runs or (len(times) < max_runs and time.perf_counter() < t_end):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def measure(peer, arg, want: np.ndarray, cold: bool, budget: float, tok_cache: dict, name: str):
    """{cold_ms, warm_ms, exact} for one peer on one input; the cold output is checked first."""
    build, _one, _batch, caches = peer
    call = _one if isinstance(arg, str) else _batch
    if cold or name not in tok_cache:
        tok_cache[name] = build()
    tok = tok_cache[name]
    t0 = time.perf_counter()
    got = call(tok, arg)
    cold_ms = (time.perf_counter() - t0) * 1e3
    exact = got.shape == want.shape and bool(np.array_equal(got, want))
    del got
    big = (len(arg) if isinstance(arg, str) else sum(map(len, arg))) > 50e6
    warm = timeit(lambda: call(tok, arg), budget, min_runs=2 if big else 3)
    return {
        "cold_ms": round(cold_ms, 4),
        "caches": caches,
        "warm_ms": round(warm, 4),
        "exact": exact,
    }


DEADLINE = [float("inf")]  # time.monotonic() after which no new row starts (--deadline-s)
PROFILE = [False]  # --profile: GPU tokenizers are built with GpuTuning.profile on


def run_rows(kind: str, cases, ps: dict, quick: bool) -> list[dict]:
    rows = []
    tok_cache: dict = {}
    for label, arg, want in cases:
        if time.monotonic() > DEADLINE[0]:
            log(f"deadline: {kind} {label} not run")
            continue
        nbytes = len(arg.encode()) if isinstance(arg, str) else sum(len(d.encode()) for d in arg)
        row = {"kind": kind, "size": label, "bytes": nbytes, "tokens": int(want.size), "peers": {}}
        fresh = True  # cold = the first call on a fresh tokenizer, in every row
        for name, peer in ps.items():
            if _capped(name, "single" if kind == "single" else "batch", nbytes):
                continue
            budget = 0.2 if quick else (0.5 if nbytes < 16e6 else 0.1)
            row["peers"][name] = measure(peer, arg, want, fresh, budget, tok_cache, name)
        gts = [g for g in ("gigatoken tiktoken", "gigatoken hf") if g in row["peers"]]
        if gts:
            row["gigatoken_best"] = min(gts, key=lambda g: row["peers"][g]["warm_ms"])
        row["mismatches"] = sum(not p["exact"] for p in row["peers"].values())
        log(json.dumps(row))
        rows.append(row)
    return rows


# ------------------------------------------------------------------ report
def _cell(p: dict | None, nbytes: int, mbps: bool) -> str:
    if p is None:
        return "–"
    bad = "" if p["exact"] else " ✗"

    def f(ms):
        if ms is None:
            return "–"
        return f"{nbytes / ms / 1e3:,.0f}" if mbps else f"{ms:.3f}"

    return f"{f(p['warm_ms'])} / {f(p['cold_ms'])}{bad}"


def to_markdown(meta: dict, rows: list[dict]) -> str:
    names = list(dict.fromkeys(n for r in rows for n in r["peers"]))
    lines = [
        f"### {meta['date']}, {meta['device'].split(',')[0]}",
        "",
        f"Device: {meta['device']}; host: {meta['cpus']} cores; command: `{meta['command']}`; "
        f"corpus: {meta['corpus_mb']:.1f} MB; versions: {meta['versions']}.",
        "Warm / cold (first call on a fresh tokenizer) for each cell; ✗ = ids differ from "
        "tiktoken's; * = the faster gigatoken configuration.",
    ]
    for kind, unit in (("single", "ms"), ("docs", "MB/s"), ("str", "MB/s")):
        sel = [r for r in rows if r["kind"] == kind]
        if not sel:
            continue
        title = {"single": "One text", "docs": "Batch of documents", "str": "Batch as one str"}
        lines += ["", f"{title[kind]}, {unit} (warm / cold):", ""]
        lines.append("| size | tokens | " + " | ".join(names) + " | mismatches |")
        lines.append("|---|---:|" + "---:|" * (len(names) + 1))
        for r in sel:
            cells = []
            for n in names:
                c = _cell(r["peers"].get(n), r["bytes"], unit == "MB/s")
                cells.append(c + ("*" if r.get("gigatoken_best") == n else ""))
            lines.append(
                f"| {r['size']} | {r['tokens']:,} | "
                + " | ".join(cells)
                + f" | {r['mismatches']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "bench" / "out"), help="results folder")
    ap.add_argument("--quick", action="store_true", help="batches to 64 MB, texts to 16 MB")
    ap.add_argument("--no-gpu", action="store_true", help="CPU peers only (a GPU-less machine)")
    ap.add_argument("--max-mb", type=float, default=None, help="largest batch / text, MB")
    ap.add_argument("--corpus", choices=("bench", "ci"), default="bench", help="corpus profile")
    ap.add_argument(
        "--deadline-s", type=float, default=None, help="start no new row after this many seconds"
    )
    ap.add_argument(
        "--profile", action="store_true", help="GpuTuning.profile: per-stage times on stderr"
    )
    args = ap.parse_args(argv)
    PROFILE[0] = args.profile
    if args.deadline_s:
        DEADLINE[0] = time.monotonic() + args.deadline_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from corpus_fixture import load_corpus

    docs = load_corpus(args.corpus)
    tt = refs.tiktoken_gpt2()
    gpu = not args.no_gpu and gputok.cuda_available()[0]
    meta = _meta(docs, gpu)
    log(json.dumps(meta))
    corpus = Corpus(docs, tt)
    max_mb = args.max_mb or (64 if args.quick else 1024)
    ps = peers(gpu)
    singles = [(lbl, t, ids) for lbl, t, ids in token_prefixes(corpus, tt)]
    singles += [(f"{mb} MB", *corpus.text(mb * 1e6)) for mb in SINGLE_MB if mb <= max_mb]
    rows = run_rows("single", singles, ps, args.quick)
    for mb in (m for m in BATCH_MB if m <= max_mb):
        rows += run_rows("docs", [(f"{mb} MB", *corpus.batch(mb * 1e6))], ps, args.quick)
        rows += run_rows("str", [(f"{mb} MB", *corpus.text(mb * 1e6))], ps, args.quick)
    (out / "results.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    md = to_markdown(meta, rows)
    (out / "results.md").write_text(md)
    print(md)
    return 1 if any(r["mismatches"] for r in rows) else 0


def _meta(docs: list[str], gpu: bool) -> dict:
    import importlib.metadata as md

    versions = {}
    for mod in ("gputok", "gigatoken", "tiktoken", "tokenizers"):
        try:
            versions[mod] = md.version(mod)
        except md.PackageNotFoundError:
            # gputok run from a source tree (the GPU machine's PYTHONPATH) has no metadata
            versions[mod] = getattr(sys.modules.get(mod), "__version__", "?")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": device_name() if gpu else f"no GPU ({platform.processor() or 'CPU'})",
        "cpus": NCPU,
        "host": platform.node(),
        "command": "python bench/bench_gpu.py " + " ".join(sys.argv[1:]),
        "corpus_mb": sum(len(d.encode()) for d in docs) / 1e6,
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
    }


if __name__ == "__main__":
    sys.exit(main())
