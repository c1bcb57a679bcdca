"""Dask cluster set-up: local GPUs and cores, workers and threads per GPU, worker processes'
malloc tuning, and starting or joining a scheduler."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Callable

from ._common import (
    MAX_GPU_THREADS_PER_WORKER,
    MAX_GPU_WORKERS_PER_GPU,
    MAX_IN_PROCESS_CPU_THREADS,
    MAX_IN_PROCESS_GPU_THREADS,
    _cpu_count,
)


def _gpu_count() -> int:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([v for v in vis.split(",") if v.strip() and v.strip() != "-1"])
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
    except (OSError, subprocess.SubprocessError):
        return 0


def _dashboard_kwargs(dashboard: bool) -> dict:
    """LocalCluster options: the dashboard on a free port, or none. The scheduler's HTTP
    server starts even without the dashboard and would take port 8787 (or warn), so it gets
    a free port too."""
    if dashboard:
        return {"dashboard_address": ":0"}
    return {"dashboard_address": ":0", "scheduler_kwargs": {"dashboard": False}}


def local_gpus(device: str = "auto") -> int:
    """GPUs a local cluster would use for ``device``: 0 for "cpu" or where CUDA is not
    usable ("auto"); raises CudaUnavailableError for "cuda" without a usable GPU."""
    if device == "cpu":
        return 0
    import gputok

    if gputok.cuda_available()[0]:
        return max(1, _gpu_count())
    if device == "cuda":
        raise gputok.CudaUnavailableError(f"device='cuda': {gputok.cuda_available()[1]}")
    return 0


def default_workers_per_gpu(gpus: int, cores: int | None = None) -> int:
    """Worker processes per GPU of a local cluster by default: min(MAX_GPU_WORKERS_PER_GPU,
    cores / (4 x GPUs)), at least 1 (4 on a 16-core host with one GPU, or 32 cores with two).

    Why several: a GPU worker's host work per GB of text (Parquet decoding ~2.2 core-s,
    gputok's staging, UTF-8 check and copies ~1.2, packing, sha256 and writing ~1.3;
    bench/corpus_stages.py on the H200 host) runs on many threads of one interpreter, which
    take turns on the GIL between their native calls; separate processes on the same GPU do
    not, and their calls interleave on the device. One GPU on the 16-core H200 host
    (2026-11-23, tmpfs, 1.36 GB in 64 Parquet shards): 1 worker 0.86-0.89 GB/s, 2 workers
    1.36-1.47, 3 (2 shards each) 1.20, 4 1.53-1.75."""
    if gpus <= 0:
        return 1
    cores = cores or _cpu_count()
    return max(1, min(MAX_GPU_WORKERS_PER_GPU, cores // (4 * gpus)))


def default_threads_per_worker(
    gpus: int, cores: int | None = None, workers_per_gpu: int = 1
) -> int:
    """Shards a local worker tokenizes at once (Dask threads per worker) by default.

    GPU workers: min(MAX_GPU_THREADS_PER_WORKER, cores / (GPUs x workers per GPU)), at least
    1: about one shard in flight per core. One shard's pipeline is a chain of one-core stages
    (its reader decodes Parquet, ~0.45 GB/s; its writer hashes and writes, ~0.8 GB/s or more),
    far below the GPU (~3 GB/s end to end), and each stage also waits on the others, so a GPU
    needs many shards in flight; on the 16-core H200 host 4 workers x 4 shards beat 4 x 2 and
    3 x 2 (2026-11-23). All threads of a worker share its one tokenizer. CPU workers: 1. The
    CPU tokenizer is the bound there (~10x slower than the pipeline), and a local CPU cluster
    already has min(cores, 8) workers, so as many shards in flight, each call on cores /
    workers threads; more per worker mostly costs memory (see the notes at the top of this
    module)."""
    if gpus <= 0:
        return 1
    cores = cores or _cpu_count()
    return max(1, min(MAX_GPU_THREADS_PER_WORKER, cores // (gpus * max(1, workers_per_gpu))))


def default_in_process_threads(gpus: int, cores: int | None = None) -> int:
    """Shards a run in this process (no cluster) tokenizes at once by default: on a GPU,
    min(MAX_IN_PROCESS_GPU_THREADS, 3/4 of the cores), at least 1; on the CPU,
    min(MAX_IN_PROCESS_CPU_THREADS, half the cores), at least 1, each call on cores / shards
    at once (in_process_threads: no more than the tasks). One process has one GPU tokenizer and one interpreter for every shard's
    reading, packing and hashing, so it needs more shards in flight than one of a cluster's
    workers to keep the GPU busy. H100, 16-core host, 2026-11-27 (bench_corpus_e2e.py, every
    output exact): 4 / 8 / 16 shards at once took 5.88 / 4.98 / 5.19 s for 10 GB of Parquet
    in 100 MB shards and 2.05 / 1.68 / 1.77 s for 1 GB of JSONL in 20 MB shards. Since the
    joined call's writer gives the GIL up once (write_files.h), more pay: H200 hosts, 16
    cores, 2026-11-29 (bench_corpus_ab.py, medians of 4-5 alternated rounds, three machines),
    8 / 12 at once: JSONL in 1 MB shards 0.96 / 0.88 s and 1.22 / 1.12, in 4 MB 0.82 / 0.79,
    in 20 MB 0.96 / 0.92; text 1 MB 0.81 / 0.79 and 0.87 / 0.86, 100 MB 0.89 / 0.86; Parquet
    1 MB 0.99 / 1.01, 4 MB 0.94 / 0.89, 100 MB 0.91 / 0.91, 10 GB in 100 MB 4.16 / 4.22 (the
    same within its rounds' spread); 4 and 6 were slower than 8 everywhere, 16 was like 12
    (bench/results/2026-11-29-corpus-writer-h200.md). Other core counts: unmeasured."""
    cores = cores or _cpu_count()
    if gpus <= 0:
        return max(1, min(MAX_IN_PROCESS_CPU_THREADS, cores // 2))
    return max(1, min(MAX_IN_PROCESS_GPU_THREADS, 3 * cores // 4))


# H100, 16-core host, 2026-11-28, 1 GB in 10 shards of 100 MB, 8 / 10 / 16 at once (medians
# of 3): Parquet 1.91 / 1.65 / 1.73 s, text 1.74 / 1.58 / 1.58, JSONL 1.96 / 1.77 / 1.80; in
# 48 shards of 20 MB 1.46 / 1.48 / 1.43. Grouped small shards gained nothing from one round:
# 1 GB in 1 MB shards, 16 tasks, 16 / 8 at once: text 1.70 / 1.66 s, JSONL 2.60 / 2.42,
# Parquet 2.36 / 2.26 (bench/results/2026-11-28-corpus-startup-h100.md).
def in_process_threads(base: int, gpus: int, groups: list, cores: int | None = None) -> int:
    """Shards at once for a run in this process of the tasks ``groups`` (lists of shards),
    ``base`` by default (default_in_process_threads). On a GPU, where every task is one
    shard and they are more than ``base`` but no more than the cores: all of them (one
    round, no tail of a few large shards running alone). Grouped shards need no such rule:
    group_specs makes two tasks or more a thread. On the CPU no more than the tasks, so that
    the cores are shared among those that run (3 shards of 100 MB: 3 at once on 5 cores each)."""
    cores = cores or _cpu_count()
    if gpus <= 0:
        return max(1, min(base, len(groups)))
    one_each = all(len(g) == 1 for g in groups)
    return len(groups) if one_each and base < len(groups) <= cores else base


@dataclasses.dataclass(frozen=True)
class _ClusterOptions:
    """How to reach or start the cluster (tokenize_corpus's and local_cluster's arguments)."""

    scheduler: str | None = None
    n_workers: int | None = None
    processes: bool = True
    device: str = "auto"
    dashboard: bool = True
    log: Callable[[str], None] = print
    threads_per_worker: int | None = None
    workers_per_gpu: int | None = None
    gpus: int | None = None  # use the first this many GPUs (None: all visible)


def local_cluster(
    n_workers: int | None = None,
    *,
    device: str = "auto",
    processes: bool = True,
    dashboard: bool = True,
    threads_per_worker: int | None = None,
    log: Callable[[str], None] = print,
    workers_per_gpu: int | None = None,
    gpus: int | None = None,
):
    """(client, cluster): the local cluster ``tokenize_corpus`` starts when given no client.
    With a usable GPU: ``workers_per_gpu`` worker processes per GPU (None:
    default_workers_per_gpu; one: dask-cuda's LocalCUDACluster where installed; else plain
    workers that pick their GPU by worker name), on the first ``gpus`` GPUs (None: all
    visible); else min(cores, 8) CPU workers.
    Each worker runs ``threads_per_worker`` shards at once (None:
    default_threads_per_worker). Pass the client to ``tokenize_corpus(client=...)``; close
    both when done."""
    opts = _ClusterOptions(
        n_workers=n_workers,
        processes=processes,
        device=device,
        dashboard=dashboard,
        log=log,
        threads_per_worker=threads_per_worker,
        workers_per_gpu=workers_per_gpu,
        gpus=gpus,
    )
    client, cluster, _, _ = _make_client(opts)
    return client, cluster


# glibc malloc settings for the worker processes of local clusters. Dask's nanny starts them
# with MALLOC_TRIM_THRESHOLD_=65536 (hand freed memory back to the kernel at once, against
# fragmentation), and glibc serves big blocks with mmap anyway: so every batch's token arrays
# (int32 ids, uint16 shard data, ~2.7 bytes per byte of text) came as fresh pages, faulted in
# one by one as they were written (240 minor faults per MB of text in the tokenize stage,
# bench/corpus_stages.py). Keeping freed memory (up to the workers' peak, a few batches)
# and serving blocks up to 32 MiB from the heap (the largest mmap threshold 64-bit glibc
# accepts: a 4-8 MB batch's arrays are below it) reuses the pages. GPUTOK_CORPUS_KEEP_MEMORY=0
# keeps Dask's settings (ablation).
WORKER_MALLOC_ENV = {
    "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TOP_PAD_": str(64 << 20),
}


def _worker_spawn_env() -> dict:
    """The malloc settings above, or none with GPUTOK_CORPUS_KEEP_MEMORY=0."""
    if os.environ.get("GPUTOK_CORPUS_KEEP_MEMORY", "1") == "0":
        return {}
    return dict(WORKER_MALLOC_ENV)


def _worker_spawn_config() -> dict:
    """dask.config for starting local workers: the malloc settings (applied by the nanny
    before it spawns a worker, which is when glibc reads them)."""
    return {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in _worker_spawn_env().items()}


@contextlib.contextmanager
def _worker_spawn_settings():
    """The settings above while local workers start. The nanny lets this process's own
    environment override its pre-spawn config, and it writes that config into this
    environment when it spawns (so after any Dask cluster, MALLOC_TRIM_THRESHOLD_=65536 is
    here): both are set for the start, and the environment is put back afterwards.
    SIGINT is ignored while they start, so the worker processes inherit that: a Ctrl-C
    reaches the whole process group, and each worker printed its own traceback of the
    interrupt (97 lines for one run) while this process was already closing them."""
    import dask

    env = _worker_spawn_env()
    old = {k: os.environ.get(k) for k in env}
    old_int = None
    with contextlib.suppress(ValueError):  # only the main thread may set it
        old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.environ.update(env)
        with dask.config.set(_worker_spawn_config()):
            yield
    finally:
        if old_int is not None:
            signal.signal(signal.SIGINT, old_int)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _make_client(opts: _ClusterOptions):
    """(client, cluster or None, GPUs per host, choose the GPU by worker name). The GPU facts
    also ride on the client (``_gputok_gpu_info``) for runs that are handed the client."""
    from distributed import Client

    if opts.threads_per_worker is not None and opts.threads_per_worker < 1:
        raise ValueError(f"threads_per_worker must be >= 1, got {opts.threads_per_worker}")
    if opts.workers_per_gpu is not None and opts.workers_per_gpu < 1:
        raise ValueError(f"workers_per_gpu must be >= 1, got {opts.workers_per_gpu}")
    if opts.gpus is not None and opts.gpus < 1:
        raise ValueError(f"gpus must be >= 1, got {opts.gpus}")
    if opts.scheduler:
        if opts.threads_per_worker is not None:
            opts.log("threads per worker: set by the workers of a running cluster (--nthreads)")
        client, cluster, gpus, by_name = Client(opts.scheduler), None, 0, False
    else:
        with _worker_spawn_settings():
            client, cluster, gpus, by_name = _start_local(opts)
    client._gputok_gpu_info = (gpus, by_name)
    return client, cluster, gpus, by_name


# The local cluster's workers and scheduler log at CRITICAL only. The tool reports every
# shard's failure itself (its line, the manifest, the exit code); what Dask logs besides is its
# own shutdown: on Ctrl-C a worker whose scheduler went first logged its heartbeat's failure
# as an ERROR with a traceback, after the one line that says how to resume (seen under load,
# tests/corpus/test_corpus_ux.py).
_LOCAL_LOGS = {"silence_logs": logging.CRITICAL}


def _start_local(opts: _ClusterOptions):
    from distributed import Client, LocalCluster

    gpus = local_gpus(opts.device)
    if gpus and opts.gpus is not None:
        gpus = min(gpus, opts.gpus)
    per_gpu = opts.workers_per_gpu or default_workers_per_gpu(gpus)
    tpw = opts.threads_per_worker or default_threads_per_worker(gpus, workers_per_gpu=per_gpu)
    dash = _dashboard_kwargs(opts.dashboard)
    if gpus:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            LocalCUDACluster = None
        n = opts.n_workers or gpus * per_gpu
        # dask-cuda places one worker per GPU; more per GPU, or fewer GPUs than visible, need
        # the plain workers that choose their GPU by name (worker i: GPU i mod gpus).
        if LocalCUDACluster is not None and per_gpu == 1 and opts.gpus is None:
            cluster = LocalCUDACluster(n_workers=n, threads_per_worker=tpw, **dash, **_LOCAL_LOGS)
            return Client(cluster), cluster, gpus, False
        opts.log(f"{n} plain workers on {gpus} GPU(s), each GPU chosen by worker name")
        cluster = LocalCluster(
            n_workers=n, threads_per_worker=tpw, processes=opts.processes, **dash, **_LOCAL_LOGS
        )
        return Client(cluster), cluster, gpus, True
    n = opts.n_workers or max(1, min(_cpu_count(), 8))
    cluster = LocalCluster(
        n_workers=n, threads_per_worker=tpw, processes=opts.processes, **dash, **_LOCAL_LOGS
    )
    return Client(cluster), cluster, 0, False


def _close_quietly(client, cluster) -> None:
    """Close our client and local cluster. The scheduler logs the progress bar's feed being
    cancelled at shutdown as an ERROR with a traceback; that is noise, so it is muted here."""
    import logging

    logger = logging.getLogger("distributed.scheduler")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        client.close()
        if cluster is not None:
            cluster.close()
    finally:
        logger.setLevel(level)
