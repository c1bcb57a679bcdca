"""How a run's shards become tasks, and where the tasks run.

* Grouping (group_specs): consecutive small shards go into one task of about ``task_bytes``
  of input; tokenize_group sends the task's small shards through the tokenizer together
  (group.py) and runs the others one after another; each shard still gets its own output
  files and manifest entry, so a resume still keeps or redoes shard by shard.
* Start-up (warm_all): every worker builds its tokenizer at once (``client.run``), timed
  apart from the shards.
* In-process (run_in_process): a small corpus runs on a thread pool of this process, with no
  Dask cluster: the same tasks, the same files and manifest.

Where a run's time goes before and around its shards (2-core dev VM shared by 8 jobs, load
~18, CPU tokenizer, 2026-11-25 13:25 UTC; orders of magnitude, not figures):

* before the first shard, on a cluster: ``import distributed`` 2.1 s in the driver; a
  LocalCluster of 1 worker process 3.2 s, of 2 workers 4.4 s (Dask starts them at once,
  asyncio.gather; two cores make them queue); each worker's tokenizer 0.66-0.81 s (in
  process 0.45 s); closing the cluster 1.4-1.8 s at the end. ``gputok corpus`` on one 100 KB
  shard: 18 s wall on a cluster, 4.2 s in process, gigatoken's script 1.9 s.
* per task on Dask: ~15 ms for one round trip, 200 no-op tasks 0.8-1.2 s (4-6 ms each).
* per shard in a task: opening the file 0.01 ms; the entry's write 0.13-0.17 ms, 0.7-13 ms
  with its fsync; the shard's reader and writer threads and readers' set-up ~10 ms (3.4 MB in
  64 shards took 1.26 s, in 8 shards 0.59 s).
* 6.7 MB in 200 JSONL shards: 0.9-1.4 s in process; on 2 workers 9.9 s as 200 tasks and
  9.7 s as 5 grouped tasks (start-up 5-6 s of it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

from ._common import _cpu_count
from .discovery import _split_ext
from .group import SMALL_SHARD_BYTES, tokenize_joined
from .manifest import _settings, settings_digest
from .shard import (
    _tokenizer,
    _worker_device_id,
    resume_or_clear,
    tokenize_shard,
)
from .spec import ShardSpec

# Input bytes per task that grouping aims at (tokenize_corpus's task_bytes): a task of 64 MB
# runs ~20-60 ms on a GPU worker (1-3 GB/s), so Dask's ~5 ms per task stays below a tenth
# of it, while 1 GB still makes 16 tasks for the 16 threads of a 16-core host's default
# cluster (the target also shrinks to total / (2 x threads)).
DEFAULT_TASK_BYTES = 64 << 20

# Below this many bytes of input files, a run with no client, scheduler or cluster shape given
# runs in this process (tokenize_corpus's in_process_below). In process saves the cluster's
# start-up and close and was faster at every size measured on one GPU (H100, 16-core host,
# 2026-11-25, bench/bench_corpus_e2e.py, bench/results/2026-11-25-corpus-e2e.md): 1 GB in
# 1.97-2.82 s against 6.50-6.98 s on the default cluster (whose start-up is 4.7-5.7 s: cluster
# 3.9, tokenizers 0.8), 10 GB of Parquet in 5.6 s against 9.7 s. From those rates the two meet
# somewhere past 30 GB, which was not measured; above 16 GiB the cluster takes over, as it also
# spreads over more GPUs and hosts.
IN_PROCESS_BELOW_BYTES = 16 << 30

# device="auto" in process runs on the CPU path below this much text per core (at most
# CPU_BELOW_MAX_BYTES in all), where the GPU's start-up (the driver and context, ~0.25 s of a
# run) costs more than the GPU saves. H200, 16-core host, 2026-11-29 (`bench_corpus_ab.py
# --variant auto=backend_src --variant cpu=backend_src:--device cpu`, medians of 3 whole
# commands, bench/results/2026-11-29-corpus-small-runs-h200.md), auto / cpu, s: 100 KB 0.51 /
# 0.33, 10 MB 0.51 / 0.39, 50 MB 0.57 / 0.46 (code 0.60 / 0.44), 100 MB 0.55 / 0.66 (code 0.60
# / 0.50, Parquet 0.66 / 0.77, text 0.58 / 0.68), 200 MB 0.61 / 0.91 and up: the GPU. Fewer
# cores make the CPU path slower, so the bound shrinks with them (unmeasured below 16).
CPU_BELOW_BYTES_PER_CORE = 4 << 20
CPU_BELOW_MAX_BYTES = 64 << 20
# Input files whose text is larger than their bytes count this many times their size:
# Parquet files 2 (snappy: the bench corpus's text is 2.0x its files, the code corpus's
# 2.7-4.2x; at 2, 100 MB of the bench corpus's text, where the GPU was faster, stays there),
# .gz/.bz2/.xz files 4 (unmeasured: JSON text often compresses 3-5x).
PARQUET_TEXT_RATIO = 2
COMPRESSED_TEXT_RATIO = 4


def default_cpu_below(cores: int | None = None) -> int:
    """device="auto"'s bound for a run in process: text below it goes to the CPU path."""
    return min(CPU_BELOW_MAX_BYTES, CPU_BELOW_BYTES_PER_CORE * (cores or _cpu_count()))


def text_estimate(paths: Sequence[str], sizes: Sequence[int], fmt: str) -> int:
    """About how much text input files of ``sizes`` bytes hold, from their sizes alone:
    Parquet files count PARQUET_TEXT_RATIO times theirs, compressed ones COMPRESSED_TEXT_RATIO."""

    def ratio(path: str) -> int:
        if fmt == "parquet":
            return PARQUET_TEXT_RATIO
        return COMPRESSED_TEXT_RATIO if _split_ext(path)[1] else 1

    return sum(size * ratio(path) for path, size in zip(paths, sizes, strict=True))


def group_specs(
    specs: Sequence[ShardSpec], sizes: Sequence[int], task_bytes: int, slots: int
) -> list[list[ShardSpec]]:
    """Consecutive shards in groups of about ``task_bytes`` of input (a shard larger than that
    is a group alone). The target shrinks to total / (2 x slots) so that every one of the
    ``slots`` Dask threads gets two tasks or more; where every shard is within the target, the
    groups then even out to a multiple of ``slots`` (_even_out); ``task_bytes`` <= 0 makes one
    task per shard."""
    if task_bytes <= 0:
        return [[s] for s in specs]
    target = max(1, min(int(task_bytes), sum(sizes) // max(1, 2 * slots)))
    groups: list[list[ShardSpec]] = []
    cur: list[ShardSpec] = []
    cur_bytes = 0
    for spec, size in zip(specs, sizes, strict=True):
        if cur and cur_bytes + size > target:
            groups.append(cur)
            cur, cur_bytes = [], 0
        cur.append(spec)
        cur_bytes += size
    if cur:
        groups.append(cur)
    if slots > 1 and len(groups) > slots and max(sizes, default=0) <= target:
        return _even_out(specs, sizes, (len(groups) // slots) * slots)
    return groups


# Greedy groups of at most the target came out one or two over a multiple of the threads:
# 1 GB in 949 shards of 1 MB made 17 tasks for 8 threads, the 17th running alone at the end.
# Evened out to 16 (H100 host, 2026-11-28, whole commands, medians of 3, before / after): JSONL
# in 4 MB shards 1.37 / 1.20 s; text 1 MB 1.43 / 1.43, JSONL 1 MB 1.61 / 1.61, Parquet 1 MB
# 2.08 / 2.06, text 4 MB 1.24 / 1.25: the tail shows in one of five (10 shards of 100 MB on 8
# threads lost 13% to theirs: cluster.in_process_threads).
def _even_out(specs: Sequence[ShardSpec], sizes: Sequence[int], n: int) -> list[list[ShardSpec]]:
    """``specs`` in at most ``n`` consecutive groups of about equal bytes: a shard goes to the
    group its middle byte falls in."""
    total = max(1, sum(sizes))
    groups: list[list[ShardSpec]] = []
    at, last = 0, -1
    for spec, size in zip(specs, sizes, strict=True):
        k = min(n - 1, (2 * at + size) * n // (2 * total))
        if k != last:
            groups.append([])
            last = k
        groups[-1].append(spec)
        at += size
    return groups


def tokenize_group(specs: Sequence[ShardSpec]) -> list[dict]:
    """One task (the Dask task, or a thread's in process): its shards' results, in order. A
    shard that fails is recorded with its error and the others go on, as they do when each
    shard is its own task. Small shards that need redoing go through the tokenizer together
    (group.tokenize_joined: joined calls, one reader and one writer for the task); the others,
    and any that the joined path hands back, run alone (tokenize_shard). Leftover temporary
    files are the run's to remove, once at its start and once at its end (run.py): a scan per
    task, of a directory that fills with three files per shard, took 0.25 s of a second round
    of tasks in 1 GB of 1 MB shards (H200 host, py-spy, 2026-11-28)."""
    if not specs:
        return []
    done: dict[str, dict] = {}
    small, small_sizes = [], []
    sha = None  # a task's shards share the run's settings (tokenize_joined writes one sha)
    for spec in specs:
        size = _joinable_size(spec)
        if size is None:
            continue
        try:
            sha = sha or settings_digest(_settings(spec))
            kept = resume_or_clear(spec, sha)
        except Exception:  # noqa: BLE001 - tokenize_shard meets it again and names it
            continue
        if kept is not None:
            done[spec.name] = {"entry": kept, "status": "verified", "seconds": 0.0}
        else:
            small.append(spec)
            small_sizes.append(size)
    if len(small) > 1:
        with contextlib.suppress(Exception):  # anything unforeseen: every shard alone
            results, _alone = tokenize_joined(small, small_sizes)
            done.update((r["entry"]["name"], r) for r in results)
    out = []
    for spec in specs:
        res = done.get(spec.name)
        if res is None:
            try:
                res = tokenize_shard(spec, scan_stale=False)
            except Exception as e:  # noqa: BLE001 - reported per shard, like a failed task
                res = {"error": f"{type(e).__name__}: {e}"}
        out.append({**res, "name": spec.name})
    return out


def _joinable_size(spec: ShardSpec) -> int | None:
    """The input file's size when ``spec`` may join others in one tokenizer call (small,
    readable, no test fault hook), else None."""
    if spec.fault:
        return None
    size = spec.size
    if size is None:
        try:
            size = os.stat(spec.path).st_size
        except OSError:
            return None
    return size if size <= SMALL_SHARD_BYTES else None


def warm(spec: ShardSpec) -> dict:
    """Build this process's tokenizer for ``spec`` (device, GPU): its device and when the
    build started and ended (wall clock), so a test can see the workers' builds overlap."""
    t0 = time.time()
    fault = spec.fault or {}
    if fault.get("mode") == "slow_start":  # test hook: a tokenizer that takes this long
        time.sleep(float(fault["seconds"]))
    dev = _tokenizer(spec.device, _worker_device_id(spec)).device
    return {"device": dev, "start": t0, "end": time.time()}


def warm_all(client, spec: ShardSpec) -> dict:
    """Every worker of ``client`` builds its tokenizer, all at once: one task pinned to each
    worker, submitted together and run on the workers' task threads ({worker address:
    warm()'s dict}). Not ``client.run``: that calls the function on each worker's event loop,
    which in-process (thread) workers share, so their builds ran one after another."""
    workers = list(client.scheduler_info(n_workers=-1).get("workers", {}))
    token = secrets.token_hex(4)
    futures = [
        client.submit(
            warm,
            spec,
            workers=[w],
            allow_other_workers=False,
            pure=False,
            key=f"gputok-warm-{k}-{token}",
        )
        for k, w in enumerate(workers)
    ]
    return dict(zip(workers, client.gather(futures), strict=True))


def _failure(spec: ShardSpec, err: str) -> str:
    return f"{spec.name} ({spec.source}): {err}"


def _collect(groups, group_results) -> tuple[dict, list[str]]:
    """(results by shard name, the failures' lines) from the groups' results (a list per
    group, or an exception for a group whose task itself failed)."""
    results, failures = {}, []
    for group, res in zip(groups, group_results, strict=True):
        if isinstance(res, BaseException):
            failures += [_failure(s, f"{type(res).__name__}: {res}") for s in group]
            continue
        by_name = {s.name: s for s in group}
        for r in res:
            if "error" in r:
                failures.append(_failure(by_name[r["name"]], r["error"]))
            else:
                results[r["name"]] = r
    return results, failures


def _sizes(group) -> int:
    return sum(os.stat(s.path).st_size if os.path.exists(s.path) else 0 for s in group)


def run_on_client(client, groups, progress: bool) -> tuple[dict, list[str]]:
    """The groups as Dask tasks: (results by shard name, the failures' lines)."""
    import distributed

    token = secrets.token_hex(4)
    keys = [f"tokenize_group-{g[0].name}-{len(g)}-{token}" for g in groups]
    futures = client.map(tokenize_group, groups, key=keys, pure=False)
    if progress:
        _progress(
            futures, groups, lambda f: f.status != "pending", lambda t: _dask_wait(futures, t)
        )
    distributed.wait(futures)
    # The finished tasks' results in one gather: one round trip, where a result() per
    # future took ~2.7 ms each (0.17 s of a 0.9 s run of 64 shards, 2-core dev VM,
    # 2026-11-23). Failed tasks (a worker lost too often) are fetched one by one.
    done = [k for k, f in enumerate(futures) if f.status == "finished"]
    got = dict(zip(done, client.gather([futures[k] for k in done]), strict=True))
    return _collect(
        groups, [got[k] if k in got else futures[k].exception() for k in range(len(groups))]
    )


def run_in_process(groups, threads: int, progress: bool) -> tuple[dict, list[str]]:
    """The groups on ``threads`` threads of this process, sharing its tokenizer (built before,
    by the caller). On an interrupt, groups not started are dropped; the shards running end."""
    pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="gputok-corpus-task")
    try:
        futures = [pool.submit(tokenize_group, g) for g in groups]
        if progress:
            _progress(futures, groups, lambda f: f.done(), lambda t: wait(futures, t))
        group_results = [f.exception() or f.result() for f in futures]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return _collect(groups, group_results)


def _dask_wait(futures, timeout: float) -> None:
    import distributed

    with contextlib.suppress(TimeoutError):
        distributed.wait(futures, timeout=timeout)


def _progress(futures, groups, ended: Callable, wait_for: Callable[[float], None]) -> None:
    """Until every task has ended: shards done, input MB done, MB/s and the ETA, redrawn on
    a terminal every 0.5 s, a line every 10 s into a log. MB are of the input files (Parquet
    and .gz as they lie on disk), which is what a run reads. It waits on the tasks, not a
    timer, so the run goes on the moment the last one ends (a plain 10 s sleep held a short
    run that long when the output was not a terminal)."""
    tty = sys.stdout.isatty()
    sizes = [_sizes(g) for g in groups]
    counts = [len(g) for g in groups]
    total, shards, t0 = sum(sizes), sum(counts), time.perf_counter()
    while True:
        done = [ended(f) for f in futures]
        n = sum(c for c, e in zip(counts, done, strict=True) if e)
        got = sum(s for s, e in zip(sizes, done, strict=True) if e)
        took = time.perf_counter() - t0
        rate = got / took if took > 0 else 0.0
        eta = f"{(total - got) / rate:.0f} s" if rate > 0 and n < shards else "-"
        line = (
            f"{n}/{shards} shards, {got / 1e6:.1f}/{total / 1e6:.1f} MB of input, "
            f"{rate / 1e6:.1f} MB/s, ETA {eta}"
        )
        print("\r" + line if tty else line, end="" if tty else "\n", flush=True)
        if all(done):
            if tty:
                print(flush=True)
            return
        wait_for(0.5 if tty else 10.0)
