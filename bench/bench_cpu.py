#!/usr/bin/env python3
"""CPU benchmark: gputok (CPU) vs tiktoken vs HF tokenizers vs gigatoken, same run.

Not a test. For each thread configuration (1 and all cores by default) a fresh worker
process is started with ``RAYON_NUM_THREADS=N`` (HF tokenizers and gigatoken size their
global rayon pools from it at first use; tiktoken and gputok take ``num_threads=N``).
Each worker:

1. loads the pinned corpus (``bench/corpus.py``; ``bench`` profile ~85 MB, ``ci`` with
   ``--quick``) and builds every tokenizer offline (``tests/references.py``);
2. **corpus batch**: one cold pass per tokenizer whose output is checked equal to
   tiktoken's (and non-empty for non-empty docs) *before* any timing, then ``--repeat``
   timed passes; the median is reported (the cold pass is kept in the JSON);
3. **single sequences** of ~256, 1K, 4K, 16K and 131K tokens cut from the concatenated
   corpus text at token boundaries; output checked, then warm repeats, median.

APIs timed (each tokenizer's fastest documented API returning ids in host memory):
  tiktoken   ``encode_ordinary_batch(texts, num_threads=N)`` / ``encode_ordinary(t)``
  HF         ``Tokenizer.encode_batch(texts)`` (Encoding objects) / ``encode(t)``
  gigatoken  ``encode_batch(texts, parallel=N>1)`` (awkward flat) / ``encode(t)`` on 1
             thread, ``encode_batch([t])`` on N>1 (it splits one document across cores)
  gputok     ``encode_batch_flat(texts, num_threads=N)`` (flat np.int32) and
             ``encode_ordinary_batch`` (lists) / ``encode_ordinary(t)`` on 1 thread,
             ``encode_batch_flat([t], num_threads=N)`` on N>1

Results: a markdown table replaced/added in the day's ``bench/results/<date>-bench-runs.md`` under a dated heading
with the machine and the exact command, and JSON in ``bench/results/``. Progress goes to
stderr.

    .venv/bin/python bench/bench_cpu.py                  # full run (~30 min on 2 cores)
    .venv/bin/python bench/bench_cpu.py --hf-max-mb 8    # HF (~0.5-2 MB/s/core) on 8 MB only
    .venv/bin/python bench/bench_cpu.py --quick          # ci corpus, fewer repeats (~1 min)
    .venv/bin/python bench/bench_cpu.py --threads 1,4,16 --tokenizers gputok,gigatoken
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import itertools
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "bench", REPO / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402
from _common import cpu_model, ncores, replace_section  # noqa: E402

LENGTHS = (256, 1024, 4096, 16384, 131072)
TOKENIZERS = ("tiktoken", "hf", "gigatoken", "gigatoken-tt", "gputok", "gputok-lists")
# gigatoken in both exact configurations: Tokenizer(hf) and Tokenizer.from_tiktoken(ranks,
# pretokenizer="gpt2"); the "vs gigatoken" column compares with the faster of the two.
RESULTS = REPO / "bench" / "results"
DOCS = _common.DOCS  # a dated note in bench/results/, not docs/benchmarks.md


def log(msg: str) -> None:
    print(f"[bench_cpu {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine_info() -> dict:
    cpu = cpu_model()
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    vers = {}
    for mod in ("tiktoken", "tokenizers", "gigatoken", "gputok", "numpy"):
        try:
            from importlib.metadata import version

            vers[mod] = version(mod)
        except Exception:
            vers[mod] = None
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": ncores(),
        "mem_gib": mem,
        "python": platform.python_version(),
        "versions": vers,
    }


# ------------------------------------------------------------------ worker side


def flat_from_lists(lists) -> tuple:
    import numpy as np

    lens = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(offsets[-1]))
    return ids, offsets


def to_flat(name: str, out) -> tuple:
    """Normalize each API's batch output to (ids int64, offsets int64)."""
    import numpy as np

    if name == "hf":
        return flat_from_lists([e.ids for e in out])
    if name.startswith("gigatoken"):
        import awkward as ak

        lay = ak.to_layout(out)
        offs = np.asarray(lay.offsets, dtype=np.int64)
        ids = np.asarray(lay.content.data, dtype=np.int64)[offs[0] : offs[-1]]
        return ids, offs - offs[0]
    if name == "gputok":
        ids, offs = out
        return np.asarray(ids, dtype=np.int64), np.asarray(offs, dtype=np.int64)
    return flat_from_lists(out)  # tiktoken, gputok-lists


def first_mismatch(ref, got, srcs) -> str | None:
    import numpy as np

    rid, roff = ref
    gid, goff = got
    if len(roff) != len(goff):
        return f"{len(goff) - 1} rows, expected {len(roff) - 1}"
    if np.array_equal(roff, goff) and np.array_equal(rid, gid):
        return None
    for i in range(len(roff) - 1):
        a = rid[roff[i] : roff[i + 1]]
        b = gid[goff[i] : goff[i + 1]]
        if not np.array_equal(a, b):
            j = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
            return (
                f"doc {i} ({srcs[i] if srcs else '?'}): first difference at token {j}: "
                f"got {b[j : j + 5].tolist()} expected {a[j : j + 5].tolist()} "
                f"(lengths {len(b)} vs {len(a)})"
            )
    return "offsets differ"


def build_tokenizers(wanted: list[str], threads: int) -> tuple[dict, dict]:
    """name -> (batch_fn(texts), single_fn(text) -> ids)."""
    import numpy as np

    import references as refs

    fns: dict = {}
    skipped: dict = {}
    par = threads > 1
    if "tiktoken" in wanted:
        tt = refs.tiktoken_gpt2()
        fns["tiktoken"] = (
            lambda texts: tt.encode_ordinary_batch(texts, num_threads=threads),
            tt.encode_ordinary,
        )
    if "hf" in wanted:
        hf = refs.hf_gpt2()
        fns["hf"] = (
            lambda texts: hf.encode_batch(texts, add_special_tokens=False),
            lambda t: hf.encode(t, add_special_tokens=False).ids,
        )
    for name, build in (
        ("gigatoken", refs.gigatoken_gpt2),
        ("gigatoken-tt", refs.gigatoken_tiktoken_gpt2),
    ):
        if name in wanted:
            import awkward  # noqa: F401  (import before any timing; to_flat reads its layouts)

            fns[name] = _gigatoken_fns(build(), par)
    if "gputok" in wanted or "gputok-lists" in wanted:
        try:
            import gputok

            tok = gputok.gpt2(device="cpu")
            probe = tok.encode_ordinary("hello world")
            assert list(probe) == [31373, 995], probe
        except Exception as e:  # not built yet, or broken: report, don't fail the others
            skipped["gputok"] = f"{type(e).__name__}: {e}"
            log(f"gputok unavailable: {skipped['gputok']}")
        else:

            def g_single(t):
                # encode_ordinary splits a long text across all cores, so the thread count
                # is pinned through encode_batch_flat in every configuration.
                ids, _ = tok.encode_batch_flat([t], num_threads=threads, disallowed_special=())
                return np.asarray(ids)

            if "gputok" in wanted:
                fns["gputok"] = (
                    lambda texts: tok.encode_batch_flat(
                        texts, num_threads=threads, disallowed_special=()
                    ),
                    g_single,
                )
            if "gputok-lists" in wanted:
                fns["gputok-lists"] = (
                    lambda texts: tok.encode_ordinary_batch(texts, num_threads=threads),
                    None,
                )
    return fns, skipped


def _gigatoken_fns(gt, par: bool) -> tuple:
    """gigatoken's batch call, and its single-text call: `encode` on 1 thread, `encode_batch([t])`
    on more (it splits one document across cores)."""
    single = (
        gt.encode
        if not par
        else (lambda t: to_flat("gigatoken", gt.encode_batch([t], parallel=True))[0])
    )
    return (lambda texts: gt.encode_batch(texts, parallel=par), single)


def timed(fn, arg) -> tuple[float, object]:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn(arg)
        t = time.perf_counter() - t0
    finally:
        gc.enable()
    return t, out


def cut_sequences(docs: list[str], tt, lengths) -> dict[int, tuple[str, int]]:
    """Texts of ~N tokens: a prefix of the concatenated corpus, cut at the byte end of
    token N and backed off to a UTF-8 character boundary. Returns N -> (text, real count)."""
    need = max(lengths)
    parts, n = [], 0
    for d in docs:
        parts.append(d)
        n += len(tt.encode_ordinary(d))
        if n > need * 1.02 + 64:
            break
    big = "".join(parts)
    toks = tt.encode_ordinary(big)
    tb = [len(tt.decode_single_token_bytes(t)) for t in toks[: need + 1]]
    raw = big.encode("utf-8")
    out = {}
    for L in lengths:
        end = sum(tb[:L])
        while end > 0 and (raw[end] & 0xC0) == 0x80:  # not inside a UTF-8 sequence
            end -= 1
        text = raw[:end].decode("utf-8")
        out[L] = (text, len(tt.encode_ordinary(text)))
    return out


def worker(args) -> dict:
    import numpy as np

    import corpus as corpus_mod

    threads = args.threads
    res: dict = {
        "threads": threads,
        "batch": {},
        "single": {},
        "errors": {},
        "loadavg_start": list(os.getloadavg()),
    }
    log(f"[{threads}t] loading corpus {args.profile}")
    docs_src = corpus_mod.load_corpus_with_sources(args.profile)
    if args.max_mb:
        cap, tot, cut = args.max_mb * 1e6, 0, []
        for s, t in docs_src:
            if tot >= cap:
                break
            cut.append((s, t))
            tot += len(t.encode("utf-8"))
        docs_src = cut
    srcs = [s for s, _ in docs_src]
    docs = [t for _, t in docs_src]
    nbytes = sum(len(t.encode("utf-8")) for t in docs)
    res["corpus"] = {"profile": args.profile, "docs": len(docs), "bytes": nbytes}
    fns, skipped = build_tokenizers(args.tokenizers, threads)
    res["errors"].update(skipped)

    # ---- corpus batch: cold checked pass, then timed passes
    ref = None
    ntok = None
    for name in [n for n in TOKENIZERS if n in fns]:
        batch_fn = fns[name][0]
        # HF runs ~1-2 MB/s per core: --hf-max-mb lets it time a prefix of the corpus.
        k = len(docs)
        if name == "hf" and args.hf_max_mb and ref is not None:
            cap, tot, k = args.hf_max_mb * 1e6, 0, 0
            while k < len(docs) and tot < cap:
                tot += len(docs[k].encode("utf-8"))
                k += 1
        texts = docs if k == len(docs) else docs[:k]
        sub_bytes = nbytes if k == len(docs) else sum(len(t.encode("utf-8")) for t in texts)
        log(f"[{threads}t] batch {name}: cold pass + check ({sub_bytes / 1e6:.1f} MB)")
        t_cold, out = timed(batch_fn, texts)
        flat = to_flat(name, out)
        del out
        if name == "tiktoken":
            ref = flat
            ntok = int(ref[1][-1])
            lens = np.diff(ref[1])
            empty = [i for i, t in enumerate(docs) if t and lens[i] == 0]
            if empty:
                raise SystemExit(f"tiktoken returned empty ids for non-empty doc {srcs[empty[0]]}")
            mism = None
        else:
            sub_ref = ref if k == len(docs) else (ref[0][: ref[1][k]], ref[1][: k + 1])
            mism = first_mismatch(sub_ref, flat, srcs)
        del flat
        if mism:
            log(f"[{threads}t] MISMATCH {name}: {mism}")
            res["errors"][name] = f"mismatch vs tiktoken: {mism}"
            continue
        sub_tok = ntok if k == len(docs) else int(ref[1][k])
        times = []
        reps = args.hf_repeat if name == "hf" else args.repeat
        for _ in range(reps):
            t, out = timed(batch_fn, texts)
            del out
            times.append(t)
        med = statistics.median(times)
        res["batch"][name] = {
            "seconds": med,
            "times": times,
            "cold_seconds": t_cold,
            "MBps": sub_bytes / med / 1e6,
            "Mtokps": sub_tok / med / 1e6,
            "cold_MBps": sub_bytes / t_cold / 1e6,
            "tokens": sub_tok,
            "bytes": sub_bytes,
            "docs": k,
        }
        log(
            f"[{threads}t] batch {name}: {sub_bytes / med / 1e6:.1f} MB/s "
            f"(cold {sub_bytes / t_cold / 1e6:.1f})"
        )
    gc.collect()

    # ---- single sequences
    import references as refs

    tt = refs.tiktoken_gpt2()
    seqs = cut_sequences(docs, tt, args.lengths)
    for L, (text, n) in seqs.items():
        want = tt.encode_ordinary(text)
        for name in [n_ for n_ in TOKENIZERS if n_ in fns and fns[n_][1] is not None]:
            if name in res["errors"]:
                continue
            single = fns[name][1]
            got = [int(x) for x in single(text)]
            if got != want:
                j = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), None)
                res["errors"][f"{name}@{L}"] = f"single-sequence mismatch at token {j}"
                log(f"[{threads}t] MISMATCH {name} single {L}: at token {j}")
                continue
            times = []
            budget = args.single_budget
            t_all = time.perf_counter()
            while len(times) < args.single_min or (
                time.perf_counter() - t_all < budget and len(times) < args.single_max
            ):
                t, _ = timed(single, text)
                times.append(t)
            res["single"].setdefault(name, {})[str(L)] = {
                "tokens": n,
                "bytes": len(text.encode("utf-8")),
                "ms": statistics.median(times) * 1e3,
                "reps": len(times),
            }
        log(
            f"[{threads}t] single {L} ({n} tokens): "
            + ", ".join(
                f"{k} {v[str(L)]['ms']:.3f} ms" for k, v in res["single"].items() if str(L) in v
            )
        )
    res["loadavg_end"] = list(os.getloadavg())
    return res


# ------------------------------------------------------------------ driver side


def fmt_ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "–"
    return f"{a / b:.2f}×"


LABEL = {
    "tiktoken": "tiktoken `encode_ordinary_batch`",
    "hf": "HF tokenizers `encode_batch`",
    "gigatoken": "gigatoken(hf) `encode_batch`",
    "gigatoken-tt": "gigatoken.from_tiktoken `encode_batch`",
    "gputok": "**gputok-CPU `encode_batch_flat`**",
    "gputok-lists": "gputok-CPU `encode_ordinary_batch`",
}
SLABEL = {
    "tiktoken": "tiktoken `encode_ordinary`",
    "hf": "HF tokenizers `encode`",
    "gigatoken": "gigatoken(hf) `encode` (1t) / `encode_batch([t])`",
    "gigatoken-tt": "gigatoken.from_tiktoken `encode` (1t) / `encode_batch([t])`",
    "gputok": "**gputok-CPU** `encode_ordinary` (1t) / `encode_batch_flat([t])`",
}


def markdown(report: dict) -> str:
    m = report["machine"]
    c = report["corpus"]
    lines = [
        f"## CPU, {report['date']}, {m['cores']} cores ({m['cpu']})",
        "",
        f"- Machine: `{m['host']}`, {m['cores']} cores, {m['cpu']}, {m['mem_gib']} GiB, "
        f"Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v),
        f"- Command: `{report['command']}`",
        f"- Corpus: profile `{c['profile']}` (bench/corpus_manifest.json), {c['docs']} documents, "
        f"{c['bytes'] / 1e6:.1f} MB UTF-8, {report.get('tokens', 0) / 1e6:.2f} M tokens; "
        f"mixed English reST docs, Python source, kernel YAML, man pages in ja/zh/ru/de/fr/pl.",
        "- Every output was checked equal to tiktoken's before timing. Median of "
        f"{report['repeat']} warm passes ({report.get('hf_repeat', 1)} for HF) after one cold "
        "pass (pretoken caches are warm in the timed passes; cold MB/s shown beside).",
    ]
    loads = [
        f"{r['loadavg_start'][0]:.1f}" for r in report["runs"].values() if "loadavg_start" in r
    ]
    if loads:
        lines.append(
            f"- 1-min load average when each worker started (other work on the machine "
            f"skews figures): {', '.join(loads)}"
        )
    errs = {f"{t}t {k}": v for t, r in report["runs"].items() for k, v in r["errors"].items()}
    if errs:
        lines.append("- Not measured / failed: " + "; ".join(f"{k}: {v}" for k, v in errs.items()))
    lines += [
        "",
        "| tokenizer | threads | MB/s | M tokens/s | cold MB/s | vs tiktoken | vs gigatoken |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for t, r in report["runs"].items():
        b = r["batch"]
        tt = b.get("tiktoken", {}).get("MBps")
        gg = max((b.get(g, {}).get("MBps") or 0 for g in ("gigatoken", "gigatoken-tt")), default=0)
        for name in TOKENIZERS:
            if name not in b:
                continue
            x = b[name]
            part = ""
            if x.get("bytes") and x["bytes"] < c["bytes"]:
                part = f" (first {x['bytes'] / 1e6:.3g} MB)"
            lines.append(
                f"| {LABEL[name]}{part} | {t} | {x['MBps']:.1f} | {x['Mtokps']:.2f} | {x['cold_MBps']:.1f} | "
                f"{fmt_ratio(x['MBps'], tt)} | {fmt_ratio(x['MBps'], gg)} |"
            )
    for t, r in report["runs"].items():
        s = r["single"]
        if not s:
            continue
        Ls = sorted({int(L) for v in s.values() for L in v})
        any_name = next(iter(s.values()))
        hdr = " | ".join(f"{round(L / 1000)}K" if L >= 1024 else str(L) for L in Ls)
        lines += [
            "",
            f"Single sequence, {t} thread{'s' if int(t) > 1 else ''}: median ms end to end "
            "(str in, ids out); ratio = tiktoken's time / this time. Exact token counts: "
            + ", ".join(f"{any_name[str(L)]['tokens']}" for L in Ls if str(L) in any_name)
            + ".",
            "",
            f"| tokenizer | {hdr} |",
            "|---|" + "---:|" * len(Ls),
        ]
        tts = s.get("tiktoken", {})
        for name in TOKENIZERS:
            if name not in s:
                continue
            cells = []
            for L in Ls:
                v = s[name].get(str(L))
                if not v:
                    cells.append("–")
                    continue
                ref = tts.get(str(L), {}).get("ms")
                ratio = f" ({ref / v['ms']:.1f}×)" if ref and name != "tiktoken" else ""
                cells.append(f"{v['ms']:.3f}{ratio}")
            lines.append(f"| {SLABEL[name]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_docs(md: str, heading: str) -> None:
    replace_section(md, heading, DOCS)
    log(f"updated {DOCS.relative_to(REPO)} ({heading})")


def driver(args, argv: list[str]) -> int:
    import corpus as corpus_mod

    corpus_mod.ensure(args.profile)  # build once here, not racing in workers
    thread_list = args.thread_list or sorted({1, ncores()})
    report = {
        "date": dt.date.today().isoformat(),
        "command": "python bench/bench_cpu.py " + " ".join(shlex.quote(a) for a in argv),
        "machine": machine_info(),
        "repeat": args.repeat,
        "hf_repeat": args.hf_repeat,
        "runs": {},
    }
    for n in thread_list:
        env = dict(os.environ, RAYON_NUM_THREADS=str(n))
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            out = f.name
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            "--worker-threads",
            str(n),
            "--out",
            out,
        ] + argv
        log(f"worker threads={n}: RAYON_NUM_THREADS={n}")
        r = subprocess.run(cmd, env=env)
        crash = None
        if r.returncode < 0 and any(t.startswith("gputok") for t in args.tokenizers):
            # gputok is under construction: a native crash must not cost the other figures.
            crash = f"worker crashed with signal {-r.returncode}; rerun without gputok"
            log(f"worker threads={n}: {crash}")
            others = [t for t in args.tokenizers if not t.startswith("gputok")]
            r = subprocess.run(cmd + ["--tokenizers", ",".join(others)], env=env)
        if r.returncode != 0:
            log(f"worker threads={n} failed (rc {r.returncode})")
            return r.returncode or 1
        res = json.loads(Path(out).read_text())
        if crash:
            res["errors"]["gputok"] = crash
        os.unlink(out)
        report["runs"][str(n)] = res
        report["corpus"] = res["corpus"]
        report["tokens"] = res["batch"].get("tiktoken", {}).get("tokens", 0)
    md = markdown(report)
    print(md)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    jpath = (
        RESULTS / f"cpu-{stamp}-{report['machine']['cores']}c{'-quick' if args.quick else ''}.json"
    )
    jpath.write_text(json.dumps(report, indent=1) + "\n")
    log(f"wrote {jpath.relative_to(REPO)}")
    if args.docs or (not args.quick and args.docs is None):
        write_docs(md, md.splitlines()[0])
    bad = [k for r in report["runs"].values() for k, v in r["errors"].items() if "mismatch" in v]
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description="CPU tokenizer benchmark (see module docstring)")
    ap.add_argument(
        "--quick", action="store_true", help="ci corpus, 1 timed pass, short single-seq budget"
    )
    ap.add_argument(
        "--profile",
        choices=("ci", "bench"),
        default=None,
        help="corpus profile (default bench; ci with --quick)",
    )
    ap.add_argument(
        "--max-mb", type=float, default=None, help="use only the first N MB of the corpus"
    )
    ap.add_argument(
        "--threads",
        dest="thread_list",
        type=lambda s: [int(x) for x in s.split(",")],
        default=None,
        help="comma list of thread counts (default: 1,all cores)",
    )
    ap.add_argument(
        "--tokenizers",
        type=lambda s: s.split(","),
        default=list(TOKENIZERS),
        help=f"comma list from {','.join(TOKENIZERS)}",
    )
    ap.add_argument(
        "--lengths", type=lambda s: [int(x) for x in s.split(",")], default=list(LENGTHS)
    )
    ap.add_argument(
        "--repeat", type=int, default=None, help="timed corpus passes (default 3; 1 with --quick)"
    )
    ap.add_argument(
        "--hf-repeat",
        type=int,
        default=1,
        help="timed corpus passes for HF tokenizers (slow: ~1-3 MB/s per core; default 1)",
    )
    ap.add_argument(
        "--hf-max-mb",
        type=float,
        default=None,
        help="time HF on only the first N MB of the corpus (its MB/s is per byte it encoded)",
    )
    ap.add_argument(
        "--docs",
        dest="docs",
        action="store_true",
        default=None,
        help="write the day's bench/results note (default unless --quick)",
    )
    ap.add_argument("--no-docs", dest="docs", action="store_false")
    # worker-only
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--worker-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.profile is None:
        args.profile = "ci" if args.quick else "bench"
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    args.single_min = 3 if args.quick else 5
    args.single_max = 200
    args.single_budget = 0.3 if args.quick else 1.0
    if "tiktoken" not in args.tokenizers:
        args.tokenizers = ["tiktoken"] + args.tokenizers  # the reference is always run
    if args.worker:
        args.threads = args.worker_threads
        res = worker(args)
        Path(args.out).write_text(json.dumps(res))
        return 0
    return driver(args, argv)


if __name__ == "__main__":
    sys.exit(main())
