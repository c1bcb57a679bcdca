"""bench/bench_corpus.py's runs: the contenders in this process, gputok (or a contender) on a
local Dask cluster, and one invocation's settings that they share."""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _common import ncores
from corpus_bench_common import HostCpu, log, log_stages, median_or_none

REPO = Path(__file__).resolve().parents[1]


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
        "cpu_busy": median_or_none(busy[1:]),
    }


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


def _setup_workers(
    client, contender: str | None, switch_interval_ms: float | None, install_contender
) -> None:
    """The switch interval on every worker and, with ``contender``, that CPU contender in
    place of gputok's tokenizer (cores / workers rayon threads each)."""
    if switch_interval_ms:
        client.run(sys.setswitchinterval, switch_interval_ms / 1000)
    if contender:
        n = len(client.scheduler_info(n_workers=-1)["workers"])
        rayon = max(1, ncores() // n)
        client.run(install_contender, contender, rayon, [str(REPO / "bench"), str(REPO / "tests")])


def _timed_runs(client, inputs: Path, out: Path, repeat: int, sampler, kw: dict):
    """``repeat`` + 1 runs of tokenize_corpus (the first warms up: imports, caches) ->
    (seconds of each, the last run, host cores busy in each, the thread sample or None)."""
    from gputok import corpus as C

    times, run, busy, cpu, sampled = [], None, [], HostCpu(), None
    for k in range(repeat + 1):
        if sampler and k == 1:  # the timed runs only
            client.run(sampler, "start", str(REPO / "bench"))
        # The last run's shards go before the clock starts, as for the in-process
        # contenders (overwrite=True would delete them inside the timed run).
        shutil.rmtree(out, ignore_errors=True)
        cpu.start()
        run = C.tokenize_corpus(inputs, out, **kw)
        times.append(run.seconds)
        busy.append(cpu.stop())
    if sampler:
        sampled = merge_samples(client.run(sampler, "stop", str(REPO / "bench")))
    return times, run, busy, sampled


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
    install_contender=None,
    sampler=None,
) -> dict:
    """Time ``tokenize_corpus`` on a local cluster: gputok on ``gpus`` GPUs with
    ``workers_per_gpu`` processes each (or ``workers`` CPU workers), or, with ``contender``,
    that CPU contender in ``workers`` worker processes through the same tasks.
    ``install_contender`` and ``sampler`` run on the workers (bench_corpus.py's, which Dask
    pickles by value with that script)."""
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
        _setup_workers(client, contender, switch_interval_ms, install_contender)
        gpus, by_name = client._gputok_gpu_info
        devs = client.run(C.warm_worker, device, gpus, by_name)
        nthreads = client.nthreads()
        # gputok CPU threads per call: the cores shared by every shard in flight.
        threads = max(1, ncores() // max(1, sum(nthreads.values())))
        kw = dict(
            format=fmt, text_separator=sep, client=client, device=device, num_threads=threads,
            progress=False, dashboard=False, overwrite=True, fsync=fsync,
            min_batch_bytes=min_batch_bytes, parquet_decoder=parquet_decoder, hash=hash_name,
            log=lambda m: None,
        )  # fmt: skip
        times, run, busy, sampled = _timed_runs(
            client, inputs, out, repeat, sampler if sample_threads else None, kw
        )
        return {
            "thread_sample": sampled,
            "seconds": times[1:],
            "warmup_s": times[0],
            "entries": run.manifest["shards"],
            "devices": sorted(set(devs.values())),
            "threads": threads,
            "threads_per_worker": max(nthreads.values()),
            "workers": len(devs),
            "gpus": gpus,
            "workers_per_gpu": len(devs) // gpus if gpus else None,
            "stage_seconds": run.stage_seconds,
            "cpu_busy": median_or_none(busy[1:]),
        }
    finally:
        C._close_quietly(client, cluster)


@dataclass
class Bench:
    """One invocation: its options, the settings derived from them, and the input shards."""

    args: argparse.Namespace
    C: object  # gputok.corpus
    work: Path
    inputs: Path
    sep: str | None
    nbytes: int
    repeat: int
    gpus: int  # GPUs gputok may use (0: CPU workers)
    k_shards: int  # shards gigatoken and the null pipeline run at once
    min_batch: int | None
    cpu_min_mb: float  # gigatoken, null: CPU batches
    input_info: dict  # the report's "input", less the tokens
    install_contender: object  # worker functions, passed to run_dask
    sampler: object

    def in_process(self, adapter, out: Path) -> dict:
        a = self.args
        return run_in_process(
            adapter,
            self.inputs,
            out,
            a.format,
            self.sep,
            self.repeat,
            not a.no_fsync,
            self.k_shards,
            self.min_batch,
            hash_name=a.hash,
        )

    def in_process_summary(self, label: str, stage_name: str, res: dict, tokens=None) -> dict:
        """The report entry of an in-process contender (null pipeline, gigatoken), logged."""
        nbytes = self.nbytes
        med = statistics.median(res["seconds"])
        entry = {"seconds": res["seconds"], "median_s": med, "GBps": nbytes / med / 1e9}
        if tokens is not None:
            entry["Mtokps"] = tokens / med / 1e6
        entry.update(
            shards_at_once=self.k_shards,
            min_batch_mb=self.cpu_min_mb,
            cpu_busy=res["cpu_busy"],
            stage_seconds=res["stage_seconds"],
        )
        log(
            f"{label}: {med:.3f} s, {nbytes / med / 1e9:.3f} GB/s, "
            f"host cores busy {res['cpu_busy']}"
        )
        log_stages(stage_name, res["stage_seconds"])
        return entry

    def dask_run(self, out: Path, workers, **kw) -> dict:
        a = self.args
        return run_dask(
            self.inputs,
            out,
            a.format,
            self.sep,
            workers,
            a.device,
            self.repeat,
            not a.threads_in_process,
            not a.no_fsync,
            kw.pop("tpw", a.threads_per_worker),
            self.min_batch,
            switch_interval_ms=a.switch_interval_ms,
            sample_threads=kw.pop("sample", False),
            hash_name=a.hash,
            install_contender=self.install_contender,
            sampler=self.sampler,
            **kw,
        )

    def hashes(self, entries: list[dict]) -> list:
        return [self.C._digest_of(e["bin"]) for e in entries]
