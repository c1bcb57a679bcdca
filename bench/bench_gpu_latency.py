#!/usr/bin/env python3
"""Where the time of one short text on the GPU path goes, against gigatoken, in one run.

Texts of exactly N tokens (prefixes of the bench corpus cut at a token boundary, as
bench/bench_gpu.py cuts them), each through ``gpt2(device="cuda").encode_batch_flat([text])``:

- end to end, the median of many warm calls (and the 10th percentile), beside gigatoken's
  ``encode(text)`` in its faster exact configuration (both constructors tried) on all cores;
  the default variant also through ``encode_to_numpy(text)``, one text's own call (an array,
  as gigatoken's ``encode`` returns);
- the same calls with ``GpuTuning.profile`` on: the encoder's own per-call split (plan,
  staging, submit, wait for the device, copy-out) and per-kernel split (the fused kernel's
  stage stamps), medians over the calls; what the encoder does not see is the binding and
  Python (special tokens, UTF-8, the numpy result);
- ``--variants``: GpuTuning variants (NAME=FIELD:VALUE[+FIELD:VALUE...], comma-separated;
  a field may also be the gpt2() option gpu_cache_bytes) timed the same way, every output
  checked;
- ``--unseen K``: K further texts of each size, each called once per variant (text the
  variant has not seen, as a server meets it), beside the repeated text's warm figure.

Every output is checked against tiktoken's ids (non-empty, equal) before any timing.

    python bench/bench_gpu_latency.py [--tokens 1024,4096,16384] [--reps 300]
        [--variants "blocks66=coop_blocks:66,multi=fused_max_bytes:0"] [--out DIR]

Writes DIR/latency.json; prints a markdown table last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
NCPU = os.cpu_count() or 1
os.environ.setdefault("RAYON_NUM_THREADS", str(NCPU))

import numpy as np  # noqa: E402


def log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def texts_of(tokens: list[int], tt) -> list[tuple[int, str, list[int]]]:
    from corpus_fixture import load_corpus

    unit = " " + "".join(load_corpus("bench")).strip()
    ids = tt.encode_ordinary(unit[: max(tokens) * 8])
    out = []
    for n in tokens:
        text = tt.decode_bytes(ids[:n]).decode("utf-8", "ignore")
        out.append((n, text, tt.encode_ordinary(text)))
    return out


def times_of(fn, reps: int) -> tuple[float, float]:
    """(median, 10th percentile) of `reps` warm calls, microseconds."""
    for _ in range(5):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        ts.append((time.perf_counter_ns() - t0) / 1e3)
    ts.sort()
    return statistics.median(ts), ts[len(ts) // 10]


# Variant fields that are gpt2() options rather than GpuTuning fields.
OPTION_FIELDS = ("gpu_cache_bytes",)


def tokenizer_of(gputok, spec: str):
    """gpt2(device="cuda") with a variant's fields: GpuTuning's, or the gpt2() options in
    OPTION_FIELDS."""
    t, opts = gputok.GpuTuning(), {}
    for part in filter(None, spec.split("+")):
        field, value = part.split(":")
        if field in OPTION_FIELDS:
            opts[field] = int(value)
            continue
        cur = getattr(t, field)
        setattr(t, field, type(cur)(int(value)) if not isinstance(cur, bool) else value == "1")
    return gputok.gpt2(device="cuda", gpu_tuning=t, **opts)


def unseen_texts(tokens: list[int], k: int, tt) -> dict[int, list[tuple[str, list[int]]]]:
    """k texts of each size from further into the corpus than texts_of's prefixes, so that
    each call meets text it has not seen (words it has: the corpus's common ones)."""
    from corpus_fixture import load_corpus

    docs = load_corpus("bench")
    unit = " " + "".join(docs[len(docs) // 2 :]).strip()
    out = {}
    for n in tokens:
        ids = tt.encode_ordinary(unit[: (k + 1) * n * 6])
        texts = []
        for i in range(k):
            text = tt.decode_bytes(ids[i * n : (i + 1) * n]).decode("utf-8", "ignore")
            texts.append((text, tt.encode_ordinary(text)))
        out[n] = texts
    return out


def measure_unseen(toks: dict, texts: list[tuple[str, list[int]]]) -> dict:
    """Median us of one call per text per variant, the variants in turn on each text; every
    output checked."""
    calls = {
        name: (lambda t, tok=tok: tok.encode_batch_flat([t], disallowed_special=())[0])
        for name, tok in toks.items()
    }
    calls["encode_to_numpy"] = toks["default"].encode_to_numpy
    ts: dict[str, list[float]] = {name: [] for name in calls}
    for text, want in texts:
        for name, call in calls.items():
            t0 = time.perf_counter_ns()
            ids = call(text)
            ts[name].append((time.perf_counter_ns() - t0) / 1e3)
            assert len(ids) and ids.tolist() == want, f"{name}: unseen text differs"
    return {name: round(statistics.median(v), 2) for name, v in ts.items()}


_CALL = re.compile(
    r"plan (\S+) us, submit (\S+) \(staging copy (\S+)\), wait (\S+), stitch (\S+); run (\S+) us"
)
_CHUNK = re.compile(
    r"submit (\S+) us \(staging (\S+), launch (\S+)\), wait (\S+) us \(kernels (\S+) us"
)
_FUSED = re.compile(r"\[(?:fused|lean):([^\]]*) us\]")


def profiled(gputok, spec: str, text: str, want: list[int], calls: int) -> dict:
    """Medians of the encoder's own per-call and per-kernel split (GpuTuning.profile)."""
    tok = tokenizer_of(gputok, spec + "+profile:1")
    for _ in range(3):
        tok.encode_batch_flat([text], disallowed_special=())
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            for _ in range(calls):
                ids, _ = tok.encode_batch_flat([text], disallowed_special=())
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        lines = f.read().decode(errors="replace").splitlines()
    assert len(ids) and ids.tolist() == want, "profiled call differs from tiktoken"
    keys = ("plan", "submit", "staging", "wait", "stitch", "run")
    acc: dict[str, list[float]] = {}
    for ln in lines:
        if m := _CALL.search(ln):
            for k, v in zip(keys, m.groups(), strict=True):
                acc.setdefault(k, []).append(float(v))
        elif m := _CHUNK.search(ln):
            for k, g in (("chunk_submit", 1), ("chunk_stage", 2), ("launch", 3), ("kernels", 5)):
                acc.setdefault(k, []).append(float(m.group(g)))
            if f := _FUSED.search(ln):
                parts = f.group(1).split()
                for name, v in zip(parts[::2], parts[1::2], strict=True):
                    acc.setdefault("k_" + name, []).append(float(v))
    return {k: round(statistics.median(v), 2) for k, v in acc.items()}


def exact_gigatokens(texts) -> dict:
    """name -> gigatoken in each exact configuration (bench_envelope.gigatoken_makers)
    whose ids equal tiktoken's on every text."""
    from bench_envelope import gigatoken_makers

    out = {}
    for name, make in gigatoken_makers():
        g = make()
        if all(list(np.asarray(g.encode(t))) == w for _, t, w in texts):
            out[name] = g
        else:
            log(f"gigatoken {name}: ids differ; not used")
    return out


def measure_row(args, gputok, toks, variants, cpu, gts, n, text, want) -> dict:
    """One text: every variant (checked first), the CPU path, gigatoken, the profiles."""
    row = {"tokens": n, "bytes": len(text.encode()), "us": {}, "p10_us": {}}

    def call(t):
        return lambda: t.encode_batch_flat([text], disallowed_special=())

    for name, tok in toks.items():
        ids, _ = tok.encode_batch_flat([text], disallowed_special=())
        if not (len(ids) and ids.tolist() == want):
            log(f"MISMATCH: {name} {n} tokens differs from tiktoken; not timed")
            row.setdefault("mismatch", []).append(name)
            continue
        med, p10 = times_of(call(tok), args.reps)
        row["us"][name], row["p10_us"][name] = round(med, 2), round(p10, 2)
    # One text's own call (an array, as gigatoken's encode returns): no list of texts to
    # convert and no offsets array.
    tok = toks["default"]
    assert tok.encode_to_numpy(text).tolist() == want
    row["numpy_us"] = round(times_of(lambda: tok.encode_to_numpy(text), args.reps)[0], 2)
    assert cpu.encode_batch_flat([text], disallowed_special=())[0].tolist() == want
    row["cpu_us"] = round(times_of(call(cpu), args.reps)[0], 2)
    for name, g in gts.items():
        row[f"gigatoken {name}_us"] = round(times_of(lambda g=g: g.encode(text), args.reps)[0], 2)
    gk = [v for k, v in row.items() if k.startswith("gigatoken ")]
    row["gigatoken_us"] = min(gk) if gk else None
    row["profile"] = {
        name: profiled(gputok, variants[name], text, want, args.profile_calls)
        for name in args.profile_variants.split(",")
        if name in variants and name not in row.get("mismatch", [])
    }
    log(json.dumps(row))
    return row


def print_tables(res: dict) -> None:
    names, rows = list(res["variants"]), res["rows"]
    print(f"empty call (binding + plan, no launch): {res['empty_call_us']:.1f} us")
    print(
        "| tokens | bytes | "
        + " | ".join(f"GPU {k} us" for k in names)
        + " | GPU encode_to_numpy us | CPU path us | gigatoken us | default / gigatoken"
        + " | encode_to_numpy / gigatoken |"
    )
    print("|" + "---|" * (len(names) + 7))
    for r in rows:
        g = r["gigatoken_us"]
        cells = [f"{r['us'][k]:.1f}" if k in r["us"] else "MISMATCH" for k in names]
        x = f"{g / r['us']['default']:.2f}x" if g and "default" in r["us"] else "–"
        xn = f"{g / r['numpy_us']:.2f}x" if g else "–"
        print(
            f"| {r['tokens']:,} | {r['bytes']:,} | "
            + " | ".join(cells)
            + f" | {r['numpy_us']:.1f} | {r['cpu_us']:.1f} | {g if g else '–'} | {x} | {xn} |"
        )
    if any("unseen_us" in r for r in rows):
        cols = [*names, "encode_to_numpy"]
        print("\n| tokens | " + " | ".join(f"unseen {k} us" for k in cols) + " |")
        print("|" + "---|" * (len(cols) + 1))
        for r in rows:
            u = r.get("unseen_us", {})
            print(f"| {r['tokens']:,} | " + " | ".join(f"{u.get(k, 0):.1f}" for k in cols) + " |")
    print("\n| tokens, variant | profile (us, medians) |\n|---|---|")
    for r in rows:
        for name, prof in r["profile"].items():
            cells = ", ".join(f"{k} {v}" for k, v in prof.items())
            print(f"| {r['tokens']:,} {name} | {cells} |")


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="1024,2048,4096,8192,16384,32768,65536")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--profile-calls", type=int, default=40)
    ap.add_argument("--variants", default="", help="NAME=FIELD:VALUE[+FIELD:VALUE],...")
    ap.add_argument("--profile-variants", default="default", help="variants profiled")
    ap.add_argument(
        "--unseen", type=int, default=0, help="also time K texts a size, each called once"
    )
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/latency"))
    ap.add_argument(
        "--repeat-only",
        type=int,
        default=0,
        help="only encode the first --tokens text this many times (a target for ncu)",
    )
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import gputok
    from references import tiktoken_gpt2

    tt = tiktoken_gpt2()
    texts = texts_of([int(x) for x in args.tokens.split(",")], tt)
    if args.repeat_only:
        tok = gputok.gpt2(device="cuda")
        for _ in range(args.repeat_only):
            tok.encode_batch_flat([texts[0][1]], disallowed_special=())
        return
    gts = exact_gigatokens(texts)
    variants = {"default": ""}
    variants.update(v.split("=", 1) for v in filter(None, args.variants.split(",")))
    toks = {name: tokenizer_of(gputok, spec) for name, spec in variants.items()}
    cpu = gputok.gpt2(device="cpu")
    rows = [measure_row(args, gputok, toks, variants, cpu, gts, *t) for t in texts]
    if args.unseen:
        unseen = unseen_texts([r["tokens"] for r in rows], args.unseen, tt)
        for r in rows:
            r["unseen_us"] = measure_unseen(toks, unseen[r["tokens"]])
            log(f"{r['tokens']} tokens, unseen texts: {r['unseen_us']}")
    # The fixed host cost: an empty text goes through the binding and the encoder's plan
    # but launches nothing.
    empty = times_of(lambda: toks["default"].encode_batch_flat([""], disallowed_special=()), 300)
    res = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": sys.argv,
        "cores": NCPU,
        "variants": variants,
        "empty_call_us": round(empty[0], 2),
        "rows": rows,
    }
    (out / "latency.json").write_text(json.dumps(res, indent=1))
    print_tables(res)


if __name__ == "__main__":
    main()
