"""Where a run's tasks run: on a Dask cluster (its own or a given client's), or on threads
of this process with the tokenizer building while the first shards are read."""

from __future__ import annotations

import contextlib
import dataclasses
import time

from .cluster import (
    _close_quietly,
    _ClusterOptions,
    _cpu_count,
    _make_client,
    default_in_process_threads,
    in_process_threads,
)
from .shard import start_tokenizer
from .spec import ShardSpec
from .tasks import group_specs, run_in_process, run_on_client, warm_all


@dataclasses.dataclass(frozen=True)
class _TaskPlan:
    """What running the specs needs besides them: each input's size, the target task size,
    the run's description for the log, and whether to show progress."""

    sizes: list[int]
    task_bytes: int
    what: str
    progress: bool


@contextlib.contextmanager
def _building(start: bool, device: str):
    """start_tokenizer's thread (None unless ``start``), joined on the way out, failures
    included: a build must not be left running into the interpreter's exit."""
    build = start_tokenizer(ShardSpec(device=device)) if start else None
    try:
        yield build
    finally:
        if build is not None:
            build.join()


def _run_on_cluster(
    client, opts: _ClusterOptions, specs: list[ShardSpec], plan: _TaskPlan
) -> tuple[dict, list[str], dict]:
    """Runs the specs on the given client, or on a cluster of our own (closed after); fills
    in what the cluster decides: GPUs, GPU by worker name, and num_threads where None.
    Returns (results, failures, start-up seconds: "cluster" to start or join it, "tokenizers"
    for every worker to build its tokenizer, all at once; the number of tasks)."""
    own = client is None
    t0 = time.perf_counter()
    client, cluster, gpus, by_name = _open_client(client, opts)
    startup = {"cluster": time.perf_counter() - t0}
    try:
        workers, slots = _slots(client)
        num_threads = specs[0].num_threads if specs else 0
        if num_threads is None:
            # Each Dask thread makes one tokenizer call at a time: split the cores among all
            # of them (no oversubscription). On a remote cluster 0 = all cores; there calls
            # of more than 1 thread take turns on the tokenizer's pool.
            num_threads = max(1, _cpu_count() // slots) if cluster is not None else 0
        if opts.dashboard and client.dashboard_link:
            opts.log(f"dask dashboard: {client.dashboard_link}")
        specs = [
            dataclasses.replace(
                s, num_threads=int(num_threads), gpus=gpus, gpu_by_worker_name=by_name
            )
            for s in specs
        ]
        t1 = time.perf_counter()
        if specs:
            warm_all(client, specs[0])
        startup["tokenizers"] = time.perf_counter() - t1
        groups = group_specs(specs, plan.sizes, plan.task_bytes, slots)
        opts.log(
            f"tokenizing {len(specs)} {plan.what} on {workers} worker(s), {slots} shard(s) at a "
            f"time, in {len(groups)} task(s); start-up {sum(startup.values()):.1f} s"
        )
        return (*run_on_client(client, groups, plan.progress), startup, len(groups))
    finally:
        if own:
            _close_quietly(client, cluster)


def _run_here(build, opts: _ClusterOptions, specs: list[ShardSpec], plan: _TaskPlan):
    """Runs the specs in this process, with no cluster: ``threads`` shards at once sharing
    this process's tokenizer (GPU 0 where the device is a GPU; ``build``: start_tokenizer's
    thread building it, or None), each call on cores / threads CPU threads unless num_threads
    says. Same results as _run_on_cluster; the start-up is the build's time, spent while the
    tasks read their first shards."""
    import gputok

    ok, why = gputok.cuda_available() if opts.device != "cpu" else (False, "")
    if opts.device == "cuda" and not ok:  # the error gputok.gpt2 gives, before any task
        raise gputok.CudaUnavailableError(f"device='cuda' is not available: {why}")
    threads = opts.threads_per_worker or default_in_process_threads(int(ok))
    groups = group_specs(specs, plan.sizes, plan.task_bytes, threads)
    if not opts.threads_per_worker:
        threads = in_process_threads(threads, int(ok), groups)
    num_threads = specs[0].num_threads if specs else 0
    if num_threads is None:
        num_threads = max(1, _cpu_count() // threads)
    groups = [[dataclasses.replace(s, num_threads=int(num_threads)) for s in g] for g in groups]
    opts.log(
        f"tokenizing {len(specs)} {plan.what} in this process (no cluster), {threads} shard(s) "
        f"at a time, in {len(groups)} task(s), the tokenizer building meanwhile"
    )
    results = run_in_process(groups, threads, plan.progress)
    if build is not None:
        build.join()
    startup = {"tokenizers": build.seconds if build is not None else 0.0}
    return (*results, startup, len(groups))


def _open_client(client, opts: _ClusterOptions):
    """(client, our local cluster or None, GPUs, GPU by worker name): the given client, or one
    of our own (opts)."""
    if client is None:
        return _make_client(opts)
    if opts.threads_per_worker is not None or opts.workers_per_gpu is not None:
        opts.log(
            "threads_per_worker / workers_per_gpu: ignored, the given client keeps its workers"
        )
    return (client, None, *getattr(client, "_gputok_gpu_info", (0, False)))


def _slots(client) -> tuple[int, int]:
    """(workers, Dask threads in all) of the client's cluster."""
    info = client.scheduler_info(n_workers=-1).get("workers", {})
    workers = max(1, len(info))
    return workers, max(workers, sum(int(w.get("nthreads") or 1) for w in info.values()))
