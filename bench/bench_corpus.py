#!/usr/bin/env python3
"""Corpus tokenization throughput: `gputok corpus` on N Dask workers vs gigatoken, same run.

Not a test. End to end, in GB/s of UTF-8 text: read the input shards, tokenize, build uint16
ids with <|endoftext|> after every document, write .bin/.idx and hash them (--hash), fsync,
rename, write the manifest. Both contenders run exactly that pipeline (gputok.corpus.tokenize_shard):

* **gputok**: ``tokenize_corpus`` on a local Dask cluster of W workers for each W in
  ``--workers`` (one per GPU via dask-cuda's LocalCUDACluster where installed and a GPU is
  usable, else CPU worker processes with cores / (W x T) gputok threads each), each worker
  running T = ``--threads-per-worker`` shards at once (default: the library's, up to 4 on a
  GPU worker, 1 on a CPU worker). Cluster start-up and each worker's tokenizer load are
  excluded (a warm-up builds the tokenizers first, and one untimed run precedes the timed
  ones, for every contender).
* **gigatoken** on all cores: the same shards in this process, K = ``--gigatoken-shards`` at
  once (a thread pool; default K = gputok's T, so both overlap the same number of shards'
  reading and writing), with gigatoken ``encode_batch`` (its rayon pool spans every core, GIL
  released) in place of gputok.

Exactness: every gputok run's shard hashes must equal gigatoken's (the bytes are identical),
else the run is reported as a mismatch. Inputs are written once and read from the page cache.

Input: the pinned diverse corpus (bench/corpus.py; ``bench`` ~85 MB, ``ci`` ~4 MB with
``--quick``), repeated ``--scale`` times to reach a size where per-task overhead is small
(repeats flatter pretoken caches, gigatoken's above all; the table says so), cut into
``--shards`` files of ``--format`` (Parquet by default; JSONL is parsed in Python).

Results: JSON in ``bench/results/`` and, unless ``--quick`` (or with ``--docs``), a dated
subsection under "## Corpus tokenization" in the day's note ``bench/results/<date>-bench-runs.md``.

    .venv/bin/python bench/bench_corpus.py --quick              # CPU smoke run, ~1 min
    .venv/bin/python bench/bench_corpus.py --workers 1,2        # 2-GPU machine: 1 and 2 GPUs
    .venv/bin/python bench/bench_corpus.py --workers 1,2 --threads-per-worker 4 --null
    .venv/bin/python bench/bench_corpus.py --workers 1,2 --scale 16 --format jsonl
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO / "bench", REPO / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import _common  # noqa: E402
from _common import cpu_model, ncores  # noqa: E402

RESULTS = REPO / "bench" / "results"
DOCS = _common.DOCS  # a dated note in bench/results/, not docs/benchmarks.md
SECTION = "## Corpus tokenization"
TEXT_SEP = "\x1e\n"  # text-format document separator (record separator + newline)


def log(msg: str) -> None:
    print(f"[bench_corpus {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine() -> dict:
    cpu = cpu_model("?")
    gpus = []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        gpus = [g.strip() for g in out.stdout.splitlines() if g.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    vers = {}
    from importlib.metadata import PackageNotFoundError, version

    for mod in ("gputok", "gigatoken", "dask", "distributed", "dask-cuda", "pyarrow", "numpy"):
        try:
            vers[mod] = version(mod)
        except PackageNotFoundError:
            vers[mod] = None
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": ncores(),
        "gpus": gpus,
        "python": platform.python_version(),
        "versions": vers,
    }


# ------------------------------------------------------------------ inputs


def write_inputs(work: Path, fmt: str, docs: list[str], shards: int) -> tuple[Path, int, int]:
    """Input shards (contiguous runs of documents) -> (dir, text bytes, documents)."""
    d = work / f"in-{fmt}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    if fmt == "text":
        docs = [x for x in docs if TEXT_SEP not in x]
    n = len(docs)
    bounds = [round(k * n / shards) for k in range(shards + 1)]
    for k in range(shards):
        part = docs[bounds[k] : bounds[k + 1]]
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(
                pa.table({"text": part}), d / f"part{k:04d}.parquet", row_group_size=2048
            )
        elif fmt == "jsonl":
            with open(d / f"part{k:04d}.jsonl", "w", encoding="utf-8") as f:
                for x in part:
                    f.write(json.dumps({"text": x}, ensure_ascii=False) + "\n")
        else:
            (d / f"part{k:04d}.txt").write_bytes("".join(x + TEXT_SEP for x in part).encode())
    return d, sum(len(x.encode("utf-8")) for x in docs), n


# ------------------------------------------------------------------ contenders


class GigatokenAdapter:
    """gigatoken behind the one method tokenize_shard uses, returning gputok's flat layout."""

    device = "gigatoken"
    name = "gigatoken"
    n_vocab = 50257

    def __init__(self):
        from references import gigatoken_gpt2

        self.tok = gigatoken_gpt2()

    def encode_batch_flat(self, docs, num_threads=0, disallowed_special=(), errors="strict"):
        import awkward as ak
        import numpy as np

        out = self.tok.encode_batch(docs, parallel=True)
        lay = ak.to_layout(out)
        offs = np.asarray(lay.offsets, dtype=np.int64)
        ids = np.asarray(lay.content.data)[offs[0] : offs[-1]]
        return ids.astype(np.int32, copy=False), offs - offs[0]


class NullAdapter:
    """No tokenizer: one id per 4 bytes, all zero. Times the pipeline alone (read, pack,
    hash, write), the ceiling any tokenizer can reach through it. Like gputok it takes
    buffer batches as they are (``encode_buffer_flat``: no Python object per document)."""

    device = "null"
    name = "null"
    n_vocab = 50257

    def encode_batch_flat(self, docs, num_threads=0, disallowed_special=(), errors="strict"):
        import numpy as np

        lens = np.fromiter((len(d) // 4 for d in docs), dtype=np.int64, count=len(docs))
        return self._ids(lens)

    def encode_buffer_flat(
        self, data, offsets, num_threads=0, disallowed_special=(), errors="strict"
    ):
        import numpy as np

        b = np.asarray(offsets, dtype=np.int64)
        lens = np.diff(b) if b.ndim == 1 else b[:, 1] - b[:, 0]
        return self._ids(lens // 4)

    @staticmethod
    def _ids(lens):
        import numpy as np

        offs = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        return np.zeros(int(offs[-1]), dtype=np.int32), offs


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores from /proc/stat, or None off Linux."""
    try:
        with open("/proc/stat") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    return sum(vals) - idle, sum(vals)


class HostCpu:
    """Share of all the host's cores busy between start() and stop() (None off Linux): tells
    a run bound by the host's cores from one that waits on something else."""

    def start(self) -> None:
        self.a = _cpu_jiffies()

    def stop(self) -> float | None:
        b = _cpu_jiffies()
        if self.a is None or b is None or b[1] == self.a[1]:
            return None
        return (b[0] - self.a[0]) / (b[1] - self.a[1])


def _decoder(r: dict) -> str:
    """A gputok result's Parquet decoder (results from before the setting: the page reader)."""
    return r.get("parquet_decoder", "gputok")


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def log_stages(who: str, stage_seconds: dict) -> None:
    """Where the shard tasks' threads spent the last run (seconds summed over shards)."""
    log(
        f"{who} stages (s, summed over shards): "
        + ", ".join(f"{k} {v:.2f}" for k, v in stage_seconds.items())
    )


def run_in_process(
    adapter,
    inputs: Path,
    out: Path,
    fmt: str,
    sep,
    repeat: int,
    fsync: bool = True,
    shards_at_once: int = 1,
    min_batch_bytes: int | None = None,
    *,
    hash_name: str,
) -> dict:
    """The shards in this process through tokenize_shard, ``shards_at_once`` at a time (a
    thread pool, as a Dask worker's threads run them), with ``adapter`` in place of gputok;
    one untimed warm-up pass, then ``repeat`` timed ones."""
    from concurrent.futures import ThreadPoolExecutor

    from gputok import corpus as C

    C._TOKENIZERS[(adapter.device, 0)] = adapter
    base, paths, fmt, names = C.plan_shards(inputs, fmt)
    common = {
        "format": fmt,
        "field": "text",
        "text_separator": sep,
        "eot": True,
        "errors": "strict",
        "skip_empty": False,
    }
    times, entries, busy, cpu = [], [], [], HostCpu()
    for _ in range(repeat + 1):
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        specs = [
            C.shard_spec(
                common,
                p,
                base,
                n,
                str(out),
                device=adapter.device,
                fsync=fsync,
                min_batch_bytes=min_batch_bytes,
                parquet_decoder="arrow",  # contenders read through Arrow (see run_dask)
                hash=hash_name,
            )
            for p, n in zip(paths, names, strict=True)
        ]
        cpu.start()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max(1, shards_at_once)) as pool:
            results = list(pool.map(C.tokenize_shard, specs))
        entries = [r["entry"] for r in results]
        stage_seconds = C.sum_stages(results)
        man = C.build_manifest(C._settings(specs[0]), base, fmt, entries, complete=True)
        C.atomic_write_bytes(str(out / C.MANIFEST), C._json_bytes(man))
        times.append(time.perf_counter() - t0)
        busy.append(cpu.stop())
    shutil.rmtree(out, ignore_errors=True)
    return {
        "seconds": times[1:],
        "warmup_s": times[0],
        "entries": entries,
        "stage_seconds": stage_seconds,
        "cpu_busy": _median_or_none(busy[1:]),
    }


def _install_contender(kind: str, rayon_threads: int, paths: list[str]) -> str:
    """On a Dask worker: put a CPU contender (``null`` or ``gigatoken``) where gputok's CPU
    tokenizer would be, so the same tokenize_shard tasks run it. (Pickled by value with
    this script's classes; ``paths``: where the adapters' imports are.)"""
    os.environ["RAYON_NUM_THREADS"] = str(rayon_threads)  # before gigatoken's pool starts
    for p in paths:
        if p not in sys.path:
            sys.path.insert(0, p)
    from gputok import corpus as C

    C._TOKENIZERS[("cpu", 0)] = GigatokenAdapter() if kind == "gigatoken" else NullAdapter()
    return kind


def _sampler(action: str, path: str):
    """On a Dask worker: thread_sampler.start() or .stop() (--sample-threads)."""
    if path not in sys.path:
        sys.path.insert(0, path)
    import thread_sampler

    return thread_sampler.start() if action == "start" else thread_sampler.stop()


def merge_samples(per_worker: dict) -> dict:
    """The workers' thread_sampler results summed: CPU s per thread kind, on-CPU samples."""
    threads: collections.Counter = collections.Counter()
    samples: collections.Counter = collections.Counter()
    for r in per_worker.values():
        if r:
            threads.update(r["threads"])
            samples.update(r["samples"])
    return {
        "workers": len(per_worker),
        "threads_cpu_s": {k: round(v, 2) for k, v in threads.most_common()},
        "samples": dict(samples.most_common(40)),
    }


def run_dask(
    inputs: Path,
    out: Path,
    fmt: str,
    sep,
    workers: int | None,
    device: str,
    repeat: int,
    processes: bool,
    fsync: bool = True,
    threads_per_worker: int | None = None,
    min_batch_bytes: int | None = None,
    *,
    gpus: int | None = None,
    workers_per_gpu: int | None = None,
    contender: str | None = None,
    switch_interval_ms: float | None = None,
    parquet_decoder: str = "auto",
    sample_threads: bool = False,
    hash_name: str,
) -> dict:
    """Time ``tokenize_corpus`` on a local cluster: gputok on ``gpus`` GPUs with
    ``workers_per_gpu`` processes each (or ``workers`` CPU workers), or, with ``contender``,
    that CPU contender in ``workers`` worker processes through the same tasks."""
    from gputok import corpus as C

    if contender:
        # Contenders read Parquet through Arrow, as their users would; gputok's page reader
        # is part of gputok's pipeline (the 2026-11-23 "Parquet pages" runs in bench/results/2026-11-25-benchmarks-history.md).
        device, parquet_decoder = "cpu", "arrow"
    client, cluster = C.local_cluster(
        workers,
        device=device,
        processes=processes,
        dashboard=False,
        threads_per_worker=threads_per_worker,
        log=log,
        workers_per_gpu=workers_per_gpu,
        gpus=gpus,
    )
    try:
        if switch_interval_ms:
            client.run(sys.setswitchinterval, switch_interval_ms / 1000)
        if contender:
            n = len(client.scheduler_info(n_workers=-1)["workers"])
            rayon = max(1, ncores() // n)
            client.run(
                _install_contender, contender, rayon, [str(REPO / "bench"), str(REPO / "tests")]
            )
        gpus, by_name = client._gputok_gpu_info
        devs = client.run(C.warm_worker, device, gpus, by_name)
        devices = sorted(set(devs.values()))
        nthreads = client.nthreads()
        tpw = max(nthreads.values())
        # gputok CPU threads per call: the cores shared by every shard in flight.
        threads = max(1, ncores() // max(1, sum(nthreads.values())))
        times, run, busy, cpu, sampled = [], None, [], HostCpu(), None
        for k in range(repeat + 1):  # the first run warms up (imports, caches) untimed
            if sample_threads and k == 1:  # the timed runs only
                client.run(_sampler, "start", str(REPO / "bench"))
            # The last run's shards go before the clock starts, as for the in-process
            # contenders (overwrite=True would delete them inside the timed run).
            shutil.rmtree(out, ignore_errors=True)
            cpu.start()
            run = C.tokenize_corpus(
                inputs,
                out,
                format=fmt,
                text_separator=sep,
                client=client,
                device=device,
                num_threads=threads,
                progress=False,
                dashboard=False,
                overwrite=True,
                fsync=fsync,
                min_batch_bytes=min_batch_bytes,
                parquet_decoder=parquet_decoder,
                hash=hash_name,
                log=lambda m: None,
            )
            times.append(run.seconds)
            busy.append(cpu.stop())
        if sample_threads:
            sampled = merge_samples(client.run(_sampler, "stop", str(REPO / "bench")))
        return {
            "thread_sample": sampled,
            "seconds": times[1:],
            "warmup_s": times[0],
            "entries": run.manifest["shards"],
            "devices": devices,
            "threads": threads,
            "threads_per_worker": tpw,
            "workers": len(devs),
            "gpus": gpus,
            "workers_per_gpu": len(devs) // gpus if gpus else None,
            "stage_seconds": run.stage_seconds,
            "cpu_busy": _median_or_none(busy[1:]),
        }
    finally:
        C._close_quietly(client, cluster)


# ------------------------------------------------------------------ report


def markdown(rep: dict) -> tuple[str, str]:
    m, inp = rep["machine"], rep["input"]
    gpu = f", GPUs: {', '.join(m['gpus'])}" if m["gpus"] else ", no GPU"
    heading = f"### {rep['date']}, {m['host']} ({m['cores']} cores{gpu})"
    vers = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    lines = [
        heading,
        "",
        f"- Machine: `{m['host']}`, {m['cores']} cores, {m['cpu']}{gpu}; Python "
        f"{m['python']}; {vers}",
        f"- Command: `{rep['command']}`",
        f"- Input: corpus profile `{inp['profile']}` × {inp['scale']} ({inp['documents']} "
        f"documents, {inp['bytes'] / 1e6:.1f} MB of UTF-8 text, {inp['tokens'] / 1e6:.2f} M "
        f"tokens with <|endoftext|>) in {inp['shards']} {inp['format']} shards, read from the "
        "page cache"
        + (
            "; repeated text flatters pretoken caches (gigatoken's most)"
            if inp["scale"] > 1
            else ""
        ),
        f"- Timed: read, tokenize, uint16 + <|endoftext|>, write .bin/.idx with their hashes ({rep.get('hash', 'sha256')}), "
        + ("no fsync (--no-fsync), " if rep["no_fsync"] else "fsync, ")
        + ("" if rep.get("early_writeback", True) or rep["no_fsync"] else "no early writeback, ")
        + "rename, manifest; cluster start-up, tokenizer loading and a warm-up run excluded. "
        "Median of "
        f"{rep['repeat']} run(s). gigatoken: the same pipeline in one process, "
        f"{rep['gigatoken']['shards_at_once']} shard(s) at once, its rayon pool on all cores "
        "(and, in the Dask rows, on W worker processes with cores / W rayon threads each). "
        "gputok: `G GPU × P` is P worker processes on each of G GPUs; each worker runs "
        "`threads/worker` shards at once (Dask threads sharing its one tokenizer); `tok. "
        "threads`: gputok CPU threads per call; `vs 1 GPU`: against one GPU with as many "
        "workers per GPU. Every gputok run's shards are byte-identical to gigatoken's (same hash).",
        f"- 1-min load average at the start: {rep['loadavg_start'][0]:.1f} (other work on the "
        "machine skews figures)",
        "",
        "| contender | workers | device | threads/worker (shards at once) | tok. threads | "
        "min batch MB | seconds | GB/s of text | M tokens/s | vs gigatoken | vs 1 GPU | "
        "host cores busy |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    g = rep["gigatoken"]
    lines.append(
        f"| gigatoken `encode_batch` | 1 process | cpu | {g['shards_at_once']} | {m['cores']} | "
        f"{g['min_batch_mb']:g} | {g['median_s']:.3f} | {g['GBps']:.3f} | {g['Mtokps']:.1f} | "
        f"1.00× | – | {_pct(g.get('cpu_busy'))} |"
    )
    if "null" in rep:
        nl = rep["null"]
        lines.append(
            f"| pipeline alone (no tokenizer) | 1 process | – | {nl['shards_at_once']} | – | "
            f"{nl['min_batch_mb']:g} | {nl['median_s']:.3f} | {nl['GBps']:.3f} | – | "
            f"{nl['GBps'] / g['GBps']:.2f}× | – | {_pct(nl.get('cpu_busy'))} |"
        )
    best_g = g["GBps"]
    for c in rep.get("dask_contenders", []):
        ok = "" if c["exact"] else " **MISMATCH**"
        label = "gigatoken `encode_batch`" if c["name"] == "gigatoken" else "pipeline alone"
        if c["name"] == "gigatoken":
            best_g = max(best_g, c["GBps"])
        lines.append(
            f"| {label}{ok}, Dask | {c['workers']} processes | cpu | {c['threads_per_worker']} | "
            f"{m['cores'] // max(1, c['workers'])} | – | {c['median_s']:.3f} | {c['GBps']:.3f} | "
            f"– | {c['GBps'] / g['GBps']:.2f}× | – | {_pct(c.get('cpu_busy'))} |"
        )
    for r in rep["gputok"]:
        ok = "" if r["exact"] else " **MISMATCH**"
        # "vs 1": against one GPU with as many workers per GPU (one CPU worker off GPUs).
        base = [
            x["GBps"]
            for x in rep["gputok"]
            if (
                (x.get("gpus"), x.get("workers_per_gpu")) == (1, r.get("workers_per_gpu"))
                or (not r.get("gpus") and x["workers"] == 1)
            )
            and _decoder(x) == _decoder(r)
        ]
        one = base[0] if base else None
        vs1 = f"{r['GBps'] / one:.2f}×" if one else "–"
        who = f"{r['gpus']} GPU × {r['workers_per_gpu']}" if r.get("gpus") else str(r["workers"])
        if _decoder(r) != "auto":
            who += f", Parquet by {_decoder(r)}"
        lines.append(
            f"| **gputok corpus**{ok} | {who} | {'/'.join(r['devices'])} | "
            f"{r['threads_per_worker']} | {r['threads']} | {r['min_batch_mb']:g} | "
            f"{r['median_s']:.3f} | {r['GBps']:.3f} | {r['Mtokps']:.1f} | "
            f"{r['GBps'] / g['GBps']:.2f}× | {vs1} | {_pct(r.get('cpu_busy'))} |"
        )
    if best_g != g["GBps"]:
        lines += [
            "",
            f"gigatoken's best here is {best_g:.3f} GB/s (Dask); per GPU against it: "
            + ", ".join(
                f"{r['gpus']} GPU × {r['workers_per_gpu']}"
                + (f" ({_decoder(r)})" if _decoder(r) != "auto" else "")
                + f": {r['GBps'] / max(1, r['gpus']) / best_g:.2f}×"
                for r in rep["gputok"]
                if r.get("gpus")
            ),
        ]
    return heading, "\n".join(lines) + "\n"


def write_docs(path: Path, heading: str, body: str) -> None:
    """Put ``body`` under SECTION, replacing a subsection with the same heading; the rest of
    the file (other engineers' sections) is kept as it is."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    lines = text.rstrip("\n").split("\n")
    try:
        start = lines.index(SECTION)
    except ValueError:
        lines += [
            "",
            SECTION,
            "",
            "`bench/bench_corpus.py`: end-to-end `gputok corpus` "
            "throughput vs gigatoken on all cores (docs/corpus.md).",
            "",
        ]
        start = lines.index(SECTION)
    end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
    section = lines[start:end]
    new = body.rstrip("\n").split("\n")
    if heading in section:
        i = section.index(heading)
        j = next(
            (k for k in range(i + 1, len(section)) if section[k].startswith("### ")), len(section)
        )
        section[i:j] = [*new, ""]
    else:
        while section and section[-1] == "":
            section.pop()
        section += ["", *new, ""]
    lines[start:end] = section
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines).rstrip("\n") + "\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------ main


def main() -> int:
    from gputok import corpus as C  # no Dask: that is imported lazily

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--quick",
        action="store_true",
        help="ci corpus, 4 shards, 1 and 2 workers, no docs (a smoke run)",
    )
    ap.add_argument("--profile", choices=("ci", "bench"), default=None)
    ap.add_argument("--scale", type=int, default=None, help="repeat the corpus (default 8; 1)")
    ap.add_argument("--shards", type=int, default=None, help="input shards (default 32; 4)")
    ap.add_argument(
        "--format",
        choices=("parquet", "jsonl", "text"),
        default=None,
        help="input format (default: parquet, or text where pyarrow is not installed)",
    )
    ap.add_argument(
        "--workers",
        default="1,2",
        help="GPU counts (on a GPU machine) or CPU worker counts to run, e.g. 1,2",
    )
    ap.add_argument(
        "--workers-per-gpu",
        default="",
        metavar="P[,P...]",
        help="gputok worker processes per GPU to run, e.g. 1,2,4 (default: the library's, "
        "min(4, cores / (4 x GPUs)))",
    )
    ap.add_argument(
        "--parquet-decoders",
        default="auto",
        metavar="D[,D...]",
        help="gputok runs with each Parquet decoder: auto (the default: gputok-gpu for GPU "
        "workers), gputok (its page reader on the CPU), gputok-gpu (snappy on the GPU), arrow "
        "(the contenders always read through Arrow)",
    )
    ap.add_argument(
        "--contender-workers",
        type=int,
        default=0,
        metavar="W",
        help="also run gigatoken (and --null) on a local Dask cluster of W worker processes "
        "through the same tasks, each with cores / W rayon threads (default: in-process only)",
    )
    ap.add_argument(
        "--switch-interval-ms",
        type=float,
        default=None,
        help="sys.setswitchinterval on every Dask worker (default: Python's 5 ms)",
    )
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs each (default 3; 1)")
    ap.add_argument(
        "--no-fsync",
        action="store_true",
        help="every contender skips fsync (measures without the disk's flush)",
    )
    ap.add_argument(
        "--no-writeback",
        action="store_true",
        help="no early writeback of shard files (GPUTOK_CORPUS_WRITEBACK=0): the whole shard "
        "goes to disk at its fsync",
    )
    ap.add_argument(
        "--null",
        action="store_true",
        help="also time the pipeline with no tokenizer (its ceiling), in-process",
    )
    ap.add_argument(
        "--threads-per-worker",
        type=int,
        default=None,
        metavar="T",
        help="shards each gputok worker runs at once (default: the library's, "
        "min(4, cores / (GPUs x workers per GPU)) on GPU workers, 1 on CPU workers)",
    )
    ap.add_argument(
        "--gigatoken-shards",
        type=int,
        default=None,
        metavar="K",
        help="shards gigatoken (and --null) runs at once in its process (default: T, "
        "gputok's threads per worker)",
    )
    ap.add_argument(
        "--min-batch-mb",
        type=float,
        default=None,
        help="fewest MB of text per tokenizer call, every contender (default: the "
        "library's, 4 on the GPU, 1 on the CPU and for gigatoken)",
    )
    ap.add_argument(
        "--hash",
        choices=C.HASHES,
        default=C.DEFAULT_HASH,
        help="how every contender's pipeline hashes the shard files (gputok corpus --hash)",
    )
    ap.add_argument(
        "--sample-threads",
        action="store_true",
        help="gputok rows: CPU seconds per thread kind and on-CPU Python frames in every "
        "worker during the timed runs (bench/thread_sampler.py), in the log and the JSON",
    )
    ap.add_argument(
        "--threads-in-process",
        action="store_true",
        help="workers as threads of this process (default: processes)",
    )
    ap.add_argument("--work-dir", default=str(REPO / ".cache" / "bench-corpus"))
    ap.add_argument(
        "--docs",
        dest="docs",
        action="store_true",
        default=None,
        help="write the day's bench/results note (default unless --quick)",
    )
    ap.add_argument("--no-docs", dest="docs", action="store_false")
    ap.add_argument("--docs-path", default=str(DOCS))
    args = ap.parse_args()
    quick = args.quick
    profile = args.profile or ("ci" if quick else "bench")
    scale = args.scale or (1 if quick else 8)
    shards = args.shards or (4 if quick else 32)
    repeat = args.repeat or (1 if quick else 3)
    docs_on = (not quick) if args.docs is None else args.docs
    counts = [int(x) for x in args.workers.split(",") if x.strip()]
    os.environ.setdefault("RAYON_NUM_THREADS", str(ncores()))  # gigatoken: all cores
    if args.no_writeback:  # before any worker starts: they inherit it
        os.environ["GPUTOK_CORPUS_WRITEBACK"] = "0"

    gpus = C.local_gpus(args.device)
    pw1 = C.default_workers_per_gpu(gpus)
    # gigatoken and the null pipeline: as many shards at once as one GPU's workers run.
    k_shards = args.gigatoken_shards or pw1 * (
        args.threads_per_worker or C.default_threads_per_worker(gpus, workers_per_gpu=pw1)
    )
    tpw = args.threads_per_worker
    min_batch = None if args.min_batch_mb is None else int(args.min_batch_mb * 2**20)
    cpu_min_mb = (min_batch or C.MIN_BATCH_BYTES) / 2**20  # gigatoken, null: CPU batches

    from corpus_fixture import load_corpus

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    rep = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join([".venv/bin/python", "bench/bench_corpus.py", *sys.argv[1:]]),
        "machine": machine(),
        "loadavg_start": list(os.getloadavg()),
        "repeat": repeat,
        "no_fsync": args.no_fsync,
        "hash": args.hash,
        "early_writeback": not args.no_writeback and not args.no_fsync,
        "threads_per_worker": tpw,
        "gigatoken_shards": k_shards,
        "min_batch_mb": args.min_batch_mb,
    }
    docs = load_corpus(profile) * scale
    if args.format is None:
        try:
            import pyarrow.parquet  # noqa: F401

            args.format = "parquet"
        except ImportError:
            args.format = "text"
            log("pyarrow is not installed: text input shards (documents split on \\x1e\\n)")
    sep = TEXT_SEP if args.format == "text" else None
    inputs, nbytes, ndocs = write_inputs(work, args.format, docs, shards)
    del docs
    log(f"input: {ndocs} documents, {nbytes / 1e6:.1f} MB in {shards} {args.format} shards")

    def in_process(adapter, out: Path) -> dict:
        return run_in_process(
            adapter,
            inputs,
            out,
            args.format,
            sep,
            repeat,
            not args.no_fsync,
            k_shards,
            min_batch,
            hash_name=args.hash,
        )

    def in_process_summary(label: str, stage_name: str, res: dict, tokens=None) -> dict:
        """The report entry of an in-process contender (null pipeline, gigatoken), logged."""
        med = statistics.median(res["seconds"])
        entry = {"seconds": res["seconds"], "median_s": med, "GBps": nbytes / med / 1e9}
        if tokens is not None:
            entry["Mtokps"] = tokens / med / 1e6
        entry.update(
            shards_at_once=k_shards,
            min_batch_mb=cpu_min_mb,
            cpu_busy=res["cpu_busy"],
            stage_seconds=res["stage_seconds"],
        )
        log(
            f"{label}: {med:.3f} s, {nbytes / med / 1e9:.3f} GB/s, "
            f"host cores busy {res['cpu_busy']}"
        )
        log_stages(stage_name, res["stage_seconds"])
        return entry

    if args.null:
        nul = in_process(NullAdapter(), work / "out-null")
        rep["null"] = in_process_summary("pipeline alone (null tokenizer)", "null", nul)
    g = in_process(GigatokenAdapter(), work / "out-gigatoken")
    tokens = sum(e["tokens"] for e in g["entries"])
    ref_hashes = [C._digest_of(e["bin"]) for e in g["entries"]]
    rep["input"] = {
        "profile": profile,
        "scale": scale,
        "shards": shards,
        "format": args.format,
        "bytes": nbytes,
        "documents": ndocs,
        "tokens": tokens,
    }
    rep["gigatoken"] = in_process_summary(
        f"gigatoken ({k_shards} shard(s) at once)", "gigatoken", g, tokens
    )

    def dask_run(out: Path, workers, **kw) -> dict:
        return run_dask(
            inputs,
            out,
            args.format,
            sep,
            workers,
            args.device,
            repeat,
            not args.threads_in_process,
            not args.no_fsync,
            kw.pop("tpw", tpw),
            min_batch,
            switch_interval_ms=args.switch_interval_ms,
            sample_threads=kw.pop("sample", False),
            hash_name=args.hash,
            **kw,
        )

    rep["dask_contenders"] = []
    if args.contender_workers:
        cw = args.contender_workers
        ctpw = max(1, k_shards // cw)
        for kind in ("null", "gigatoken") if args.null else ("gigatoken",):
            r = dask_run(work / f"out-dask-{kind}", cw, contender=kind, tpw=ctpw)
            med = statistics.median(r["seconds"])
            exact = [C._digest_of(e["bin"]) for e in r["entries"]] == ref_hashes
            rep["dask_contenders"].append(
                {
                    "name": kind,
                    "workers": r["workers"],
                    "threads_per_worker": r["threads_per_worker"],
                    "seconds": r["seconds"],
                    "median_s": med,
                    "GBps": nbytes / med / 1e9,
                    "exact": exact or kind == "null",
                    "cpu_busy": r["cpu_busy"],
                    "stage_seconds": {k: round(v, 3) for k, v in r["stage_seconds"].items()},
                }
            )
            log(
                f"{kind} on {r['workers']} Dask workers x {r['threads_per_worker']} shards: "
                f"{med:.3f} s, {nbytes / med / 1e9:.3f} GB/s, host cores busy {r['cpu_busy']}"
            )
            log_stages(f"{kind} (dask)", r["stage_seconds"])
            shutil.rmtree(work / f"out-dask-{kind}", ignore_errors=True)

    rep["gputok"] = []
    per_gpu = [int(x) for x in args.workers_per_gpu.split(",") if x.strip()] or [None]
    decoders = [x.strip() for x in args.parquet_decoders.split(",") if x.strip()] or ["auto"]
    for w, pw, dec in [(w, pw, d) for d in decoders for pw in per_gpu for w in counts]:
        on_gpu_machine = gpus > 0 and args.device != "cpu"
        r = dask_run(
            work / f"out-gputok-{w}",
            None if on_gpu_machine else w,
            gpus=w if on_gpu_machine else None,
            workers_per_gpu=pw,
            tpw=args.threads_per_worker,
            parquet_decoder=dec,
            sample=args.sample_threads,
        )
        s = statistics.median(r["seconds"])
        on_gpu = "cuda" in r["devices"]
        exact = [C._digest_of(e["bin"]) for e in r["entries"]] == ref_hashes
        rep["gputok"].append(
            {
                "gpus": r["gpus"],
                "workers_per_gpu": r["workers_per_gpu"],
                "workers": r["workers"],
                "devices": r["devices"],
                "threads": r["threads"],
                "threads_per_worker": r["threads_per_worker"],
                "min_batch_mb": (
                    min_batch or (C.GPU_MIN_BATCH_BYTES if on_gpu else C.MIN_BATCH_BYTES)
                )
                / 2**20,
                "seconds": r["seconds"],
                "median_s": s,
                "GBps": nbytes / s / 1e9,
                "Mtokps": tokens / s / 1e6,
                "exact": exact,
                "stage_seconds": {k: round(v, 3) for k, v in r["stage_seconds"].items()},
                "cpu_busy": r["cpu_busy"],
                "parquet_decoder": dec,
                **({"thread_sample": r["thread_sample"]} if r["thread_sample"] else {}),
            }
        )
        read_by = f"Parquet by {dec}" if args.format == "parquet" else f"{args.format} shards"
        if r["thread_sample"]:
            ts = r["thread_sample"]
            log(f"CPU s per thread kind, summed over workers and timed runs: {ts['threads_cpu_s']}")
            for where, n in list(ts["samples"].items())[:25]:
                log(f"  {n:6d}  {where}")
        log(
            f"gputok x{w}, {pw} per GPU, {read_by} ({'/'.join(r['devices'])}, {r['threads_per_worker']} shard(s) per "
            f"worker at once): {s:.3f} s, {nbytes / s / 1e9:.3f} GB/s, "
            f"{'exact' if exact else 'MISMATCH vs gigatoken'}, host cores busy {r['cpu_busy']}"
        )
        log_stages(f"gputok x{w}", r["stage_seconds"])
        shutil.rmtree(work / f"out-gputok-{w}", ignore_errors=True)
    rep["loadavg_end"] = list(os.getloadavg())

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    res_path = RESULTS / f"corpus-{stamp}{'-quick' if quick else ''}.json"
    res_path.write_text(json.dumps(rep, indent=1) + "\n")
    heading, body = markdown(rep)
    print(body)
    if docs_on:
        write_docs(Path(args.docs_path), heading, body)
        log(f"wrote {args.docs_path}")
    log(f"results: {res_path}")
    return 0 if all(r["exact"] for r in rep["gputok"]) else 1


if __name__ == "__main__":
    sys.exit(main())
