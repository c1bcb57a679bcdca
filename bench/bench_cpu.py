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
from _common import add_docs_options, cpu_model, ncores, replace_section  # noqa: E402
from cpu_report import markdown  # noqa: E402
from cpu_tokenizers import TOKENIZERS, build_tokenizers, first_mismatch, log, to_flat  # noqa: E402

LENGTHS = (256, 1024, 4096, 16384, 131072)
RESULTS = REPO / "bench" / "results"
DOCS = _common.DOCS  # a dated note in bench/results/, not docs/benchmarks.md


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


def _load_docs(args) -> tuple[list[str], list[str], int]:
    """The corpus (sources, texts, bytes), cut to --max-mb when set."""
    import corpus as corpus_mod

    docs_src = corpus_mod.load_corpus_with_sources(args.profile)
    if args.max_mb:
        cap, tot, cut = args.max_mb * 1e6, 0, []
        for s, t in docs_src:
            if tot >= cap:
                break
            cut.append((s, t))
            tot += len(t.encode("utf-8"))
        docs_src = cut
    docs = [t for _, t in docs_src]
    return [s for s, _ in docs_src], docs, sum(len(t.encode("utf-8")) for t in docs)


def _prefix_count(docs: list[str], max_mb: float) -> int:
    """How many leading docs fit in max_mb (HF runs ~1-2 MB/s per core: it times a prefix)."""
    cap, tot, k = max_mb * 1e6, 0, 0
    while k < len(docs) and tot < cap:
        tot += len(docs[k].encode("utf-8"))
        k += 1
    return k


def _check_batch(name, flat, ref, docs, srcs, k) -> str | None:
    """tiktoken is the reference (its ids must be non-empty); others are compared to it."""
    import numpy as np

    if name == "tiktoken":
        lens = np.diff(flat[1])
        empty = [i for i, t in enumerate(docs) if t and lens[i] == 0]
        if empty:
            raise SystemExit(f"tiktoken returned empty ids for non-empty doc {srcs[empty[0]]}")
        return None
    sub_ref = ref if k == len(docs) else (ref[0][: ref[1][k]], ref[1][: k + 1])
    return first_mismatch(sub_ref, flat, srcs)


def _bench_batches(args, fns, docs, srcs, nbytes, res) -> None:
    """Corpus batch: a cold checked pass, then timed passes, per tokenizer."""
    threads, ref = args.threads, None
    for name in [n for n in TOKENIZERS if n in fns]:
        batch_fn = fns[name][0]
        k = len(docs)
        if name == "hf" and args.hf_max_mb and ref is not None:
            k = _prefix_count(docs, args.hf_max_mb)
        texts = docs if k == len(docs) else docs[:k]
        sub_bytes = nbytes if k == len(docs) else sum(len(t.encode("utf-8")) for t in texts)
        log(f"[{threads}t] batch {name}: cold pass + check ({sub_bytes / 1e6:.1f} MB)")
        t_cold, out = timed(batch_fn, texts)
        flat = to_flat(name, out)
        del out
        mism = _check_batch(name, flat, ref, docs, srcs, k)
        if name == "tiktoken":
            ref = flat
        del flat
        if mism:
            log(f"[{threads}t] MISMATCH {name}: {mism}")
            res["errors"][name] = f"mismatch vs tiktoken: {mism}"
            continue
        sub_tok = int(ref[1][k])
        times = []
        for _ in range(args.hf_repeat if name == "hf" else args.repeat):
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


def _time_single(args, single, text) -> tuple[float, int]:
    """Median seconds of single(text): at least --single-min runs, more within the budget."""
    times = []
    t_all = time.perf_counter()
    while len(times) < args.single_min or (
        time.perf_counter() - t_all < args.single_budget and len(times) < args.single_max
    ):
        t, _ = timed(single, text)
        times.append(t)
    return statistics.median(times), len(times)


def _bench_singles(args, fns, docs, res) -> None:
    """Single sequences cut from the corpus, each checked against tiktoken before it is timed."""
    import references as refs

    threads = args.threads
    tt = refs.tiktoken_gpt2()
    for L, (text, n) in cut_sequences(docs, tt, args.lengths).items():
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
            med, reps = _time_single(args, single, text)
            res["single"].setdefault(name, {})[str(L)] = {
                "tokens": n,
                "bytes": len(text.encode("utf-8")),
                "ms": med * 1e3,
                "reps": reps,
            }
        log(
            f"[{threads}t] single {L} ({n} tokens): "
            + ", ".join(
                f"{k} {v[str(L)]['ms']:.3f} ms" for k, v in res["single"].items() if str(L) in v
            )
        )


def worker(args) -> dict:
    threads = args.threads
    res: dict = {
        "threads": threads,
        "batch": {},
        "single": {},
        "errors": {},
        "loadavg_start": list(os.getloadavg()),
    }
    log(f"[{threads}t] loading corpus {args.profile}")
    srcs, docs, nbytes = _load_docs(args)
    res["corpus"] = {"profile": args.profile, "docs": len(docs), "bytes": nbytes}
    fns, skipped = build_tokenizers(args.tokenizers, threads)
    res["errors"].update(skipped)
    _bench_batches(args, fns, docs, srcs, nbytes, res)
    gc.collect()
    _bench_singles(args, fns, docs, res)
    res["loadavg_end"] = list(os.getloadavg())
    return res


# ------------------------------------------------------------------ driver side


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
    add_docs_options(ap)
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
