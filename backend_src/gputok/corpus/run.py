"""The driver: plan the shards, check the output directory, run the tasks on Dask, write the
manifest and report what failed.

tokenize_corpus's parameters. inputs: file(s), directories and/or glob patterns. format: "auto" (by extension), "text",
"jsonl" or "parquet". field: the JSONL field / Parquet column. text_separator: split text
files into documents on it (None: a file is one document). eot: append <|endoftext|>
after every document. errors: invalid UTF-8 policy, "strict" (fail naming the place),
"replace" (U+FFFD) or "skip" (drop the document). device: "auto" | "cpu" | "cuda".
num_threads: gputok CPU threads per tokenizer call (None: cores / (workers x threads per
worker) on a local cluster, else 0 = all cores, calls taking turns on the pool).
threads_per_worker: shards each local worker tokenizes at once, sharing its tokenizer
(None: default_threads_per_worker: up to 4 on GPU workers, 1 on CPU workers; in process,
default_in_process_threads: up to 12 on a GPU; a given client or scheduler keeps its
workers' threads). workers_per_gpu: local worker processes
per GPU, each with its own tokenizer on that GPU (None: default_workers_per_gpu, up to 4:
a GPU's host-side work, Parquet decoding, packing, hashing, then runs in several
interpreters). batch_bytes / min_batch_bytes: the most
/ the fewest bytes of text per tokenizer call (a shard is cut into at least 4 calls; None:
32 MB, 8 MB for text files / 4 MB on the GPU, 1 MB on the CPU). client / scheduler: an existing distributed.Client, or a scheduler address; neither
runs in process (see in_process below) or starts a LocalCluster (LocalCUDACluster, one worker per GPU, where dask-cuda is installed
and a GPU is usable). Raises CorpusError when a shard fails (after the others finished;
a rerun resumes), CorpusInputError for inputs that cannot be found. fsync=False skips the
fsyncs (files are still renamed into place only when complete, and a resume re-hashes
everything, so a crash costs rework, not wrong data). parquet_decoder: who decodes
Parquet pages (PARQUET_DECODERS): "auto" (default), gputok's page reader with snappy
decompressed on the GPU of GPU workers and on the CPU of CPU workers, and on the CPU in a run
of under 4 GiB of input files (decoders.PARQUET_GPU_MIN_RUN_BYTES); "gputok-gpu", the
same; "gputok", the page reader on the CPU everywhere; "arrow", Arrow. Row groups the page
reader cannot read (other codecs or encodings) go to Arrow; the output is the same either
way (docs/corpus.md, "Parquet decoding"). hash: how the shard files are hashed for the
manifest (HASHES): "xxh3_128" (default; the xxhash package) or "sha256". Shards written
earlier keep the digest they were written with, and a resume checks that one.
in_process: True runs the tasks on threads of this process with no Dask cluster, False on a
cluster; None (default) in process when no client, scheduler, n_workers, workers_per_gpu or
processes=False is given and the input files hold fewer than in_process_below bytes
(tasks.IN_PROCESS_BELOW_BYTES). cpu_below: a run in process with device "auto" whose inputs
hold about fewer bytes of text than this goes to the CPU path and starts no GPU (None:
tasks.default_cpu_below, 4 MB a core up to 64 MB; 0: never; Parquet files count 2x their
size, compressed ones 4x). task_bytes: consecutive shards smaller than this are grouped
into one task (tasks.group_specs; 0: one task per shard); each keeps its own output and entry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import time
from collections.abc import Callable

from ._common import (
    DEFAULT_BATCH_BYTES,
    ERROR_POLICIES,
    MANIFEST,
    TEXT_BATCH_BYTES,
    CorpusError,
)
from .cluster import _ClusterOptions
from .decoders import parquet_decoder_for_run
from .discovery import _SHARD_RE, plan_shards
from .files import DEFAULT_HASH, _load_json, atomic_write_bytes, manifest_bytes, new_hasher
from .manifest import _settings, build_manifest
from .parquet import MAX_EXPANSION, PARQUET_DECODERS
from .readers import check_field_sample
from .runners import _building, _run_here, _run_on_cluster, _TaskPlan
from .shard import _remove_stale_all, sum_stages
from .spec import ShardSpec
from .tasks import DEFAULT_TASK_BYTES, IN_PROCESS_BELOW_BYTES, default_cpu_below, text_estimate


@dataclasses.dataclass
class CorpusRun:
    """What ``tokenize_corpus`` did. ``manifest`` is what manifest.json holds."""

    out_dir: str
    manifest: dict
    written: list[str]
    verified: list[str]
    seconds: float
    devices: list[str]
    # Per stage (STAGES), the seconds the written shards' tasks spent in it, summed.
    stage_seconds: dict = dataclasses.field(default_factory=dict)
    # Seconds before the first shard, by step: "cluster" (start or join it; absent in
    # process) and "tokenizers" (every worker builds its own, all at once). In ``seconds``.
    startup: dict = dataclasses.field(default_factory=dict)
    in_process: bool = False  # ran in this process, with no Dask cluster
    tasks: int = 0  # tasks the shards were grouped into

    @property
    def startup_seconds(self) -> float:
        return float(sum(self.startup.values()))

    @property
    def text_bytes(self) -> int:
        return int(self.manifest["totals"]["text_bytes"] or 0)


def _check_out_dir(
    out_dir: str, names: set[str], settings: dict, overwrite: bool
) -> tuple[dict, set[str]]:
    """(entries of an existing manifest to resume from, the shards whose entry files are
    there); refuses to mix runs."""
    os.makedirs(out_dir, exist_ok=True)
    man = _load_json(os.path.join(out_dir, MANIFEST))
    listing = os.listdir(out_dir)
    _remove_stale_all(out_dir, names, listing)  # a killed run's temporary files
    ours = [f for f in listing if _SHARD_RE.match(f)]
    if overwrite:
        for f in ours + [MANIFEST]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(out_dir, f))
        return {}, set()
    if man is not None and man.get("settings") != settings:
        old = man.get("settings") or {}
        diff = ", ".join(
            f"{k}: {old.get(k)!r} there, {settings.get(k)!r} now"
            for k in sorted(set(old) | set(settings))
            if old.get(k) != settings.get(k)
        )
        raise CorpusError(
            f"{out_dir} holds a corpus made with other settings ({diff}); "
            "use another output directory or --overwrite"
        )
    extra = sorted({f.rsplit(".", 1)[0] for f in ours} - names)
    if extra:
        raise CorpusError(
            f"{out_dir} holds shards that are not part of this run ({', '.join(extra[:5])}"
            f"{', ...' if len(extra) > 5 else ''}); use another output directory or --overwrite"
        )
    entries = {e["name"]: e for e in (man or {}).get("shards", []) if isinstance(e, dict)}
    return entries, {f[:-5] for f in ours if f.endswith(".json")}


def shard_spec(
    common: ShardSpec | dict,
    path: str,
    base: str,
    name: str,
    out_dir: str,
    **settings,
) -> ShardSpec:
    """The task ``tokenize_shard`` takes for the input ``path`` (its shard ``name`` in
    ``out_dir``): ``common`` (the run's format, field, text_separator, eot, errors, skip_empty:
    a ShardSpec or a dict of them) with ``settings`` (ShardSpec's other fields) over it."""
    if isinstance(common, dict):
        common = ShardSpec(**common)
    return dataclasses.replace(
        common,
        path=path,
        source=os.path.relpath(path, base),
        name=name,
        out_dir=out_dir,
        **settings,
    )


def tokenize_corpus(
    inputs,
    out_dir,
    *,
    format: str = "auto",  # noqa: A002 - mirrors the CLI option
    field: str = "text",
    text_separator: str | None = None,
    eot: bool = True,
    errors: str = "strict",
    skip_empty: bool = False,
    device: str = "auto",
    num_threads: int | None = None,
    client=None,
    scheduler: str | None = None,
    n_workers: int | None = None,
    processes: bool = True,
    dashboard: bool = True,
    progress: bool = True,
    overwrite: bool = False,
    batch_bytes: int | None = None,
    min_batch_bytes: int | None = None,
    threads_per_worker: int | None = None,
    workers_per_gpu: int | None = None,
    fsync: bool = True,
    parquet_decoder: str = "auto",
    max_expansion: float = MAX_EXPANSION,
    hash: str = DEFAULT_HASH,  # noqa: A002 - mirrors the CLI option
    in_process: bool | None = None,
    in_process_below: int = IN_PROCESS_BELOW_BYTES,
    cpu_below: int | None = None,
    task_bytes: int = DEFAULT_TASK_BYTES,
    log: Callable[[str], None] | None = None,
    _fault: dict | None = None,
) -> CorpusRun:
    """Tokenize every input shard, in this process or on a Dask cluster (the parameters: this
    module's doc; docs/corpus.md). Returns a CorpusRun; CorpusError names the failed shards."""
    log = log or (lambda msg: print(msg, flush=True))
    _check_run_args(parquet_decoder, errors, hash, device, max_expansion, cpu_below)
    t_start = time.perf_counter()
    out_dir = os.path.abspath(os.fspath(out_dir))
    base, paths, fmt, names = plan_shards(inputs, format, exclude=out_dir)
    sizes = [_file_size(p) for p in paths]
    opts = _ClusterOptions(
        scheduler=scheduler, n_workers=n_workers, processes=processes, device=device,
        dashboard=dashboard, log=log, threads_per_worker=threads_per_worker,
        workers_per_gpu=workers_per_gpu,
    )  # fmt: skip
    here = _choose_in_process(in_process, in_process_below, client, opts, sum(sizes))
    device = _small_run_device(device, here, cpu_below, text_estimate(paths, sizes, fmt), log)
    opts = dataclasses.replace(opts, device=device)
    # In process, the tokenizer builds while the run checks its inputs and reads its first
    # shards (start_tokenizer).
    with _building(here and bool(paths), device) as build:
        if paths and fmt != "text":
            check_field_sample(paths, fmt, field)
        common = ShardSpec(
            format=fmt, field=field, text_separator=text_separator, eot=eot, errors=errors,
            skip_empty=skip_empty, max_expansion=max_expansion,
        )  # fmt: skip
        settings = _settings(common)
        previous, on_disk = _check_out_dir(out_dir, set(names), settings, overwrite)
        if batch_bytes is None:
            batch_bytes = TEXT_BATCH_BYTES if fmt == "text" else DEFAULT_BATCH_BYTES
        task = dict(device=device, num_threads=num_threads, batch_bytes=batch_bytes,
                    min_batch_bytes=min_batch_bytes, fsync=fsync, hash=hash, fault=_fault,
                    parquet_decoder=parquet_decoder_for_run(parquet_decoder, sum(sizes)))  # fmt: skip
        specs = [
            shard_spec(common, p, base, n, out_dir, manifest_entry=previous.get(n), size=size,
                       entry_absent=n not in on_disk, **task)
            for p, n, size in zip(paths, names, sizes, strict=True)
        ]  # fmt: skip
        what = f"{fmt} shard(s) from {base} -> {out_dir}"
        plan = _TaskPlan(sizes, int(task_bytes), what, progress)
        if here:
            results, failures, startup, tasks = _run_here(build, opts, specs, plan)
        else:
            results, failures, startup, tasks = _run_on_cluster(client, opts, specs, plan)
        extra = {"startup": startup, "in_process": here, "tasks": tasks}
        return _finish(out_dir, settings, base, fmt, names, results, failures, t_start, extra)


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _small_run_device(device: str, here: bool, cpu_below: int | None, text: int, log) -> str:
    """The device of a run: "cpu" for device="auto" in process with about ``text`` bytes of
    text below ``cpu_below`` (None: tasks.default_cpu_below: there a GPU's start-up costs
    more than it saves, and none is started), else ``device``."""
    if cpu_below is None:
        cpu_below = default_cpu_below()
    if device != "auto" or not here or text >= cpu_below:
        return device
    if _gpu_files():  # where there is no GPU to skip, the choice goes unsaid
        log(
            f"on the CPU path: the inputs hold about {text / 1e6:.1f} MB of text, under "
            f"{cpu_below / 1e6:.0f} MB, where a GPU's start-up costs more than it saves "
            "(--device cuda for the GPU)"
        )
    return "cpu"


def _gpu_files() -> bool:
    """Whether this host has NVIDIA device files (asking CUDA would start its driver)."""
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def _choose_in_process(
    in_process: bool | None, below: int, client, opts: _ClusterOptions, total: int
) -> bool:
    """In this process when told so, or by default when nothing names a cluster (no client,
    scheduler, worker count, workers per GPU or thread workers) and the inputs hold fewer
    than ``below`` bytes; a Dask cluster otherwise."""
    named = client is not None or opts.scheduler is not None
    if in_process is not None:
        if in_process and named:
            raise ValueError("in_process=True runs no cluster: give no client or scheduler")
        return bool(in_process)
    shaped = opts.n_workers is not None or opts.workers_per_gpu is not None or not opts.processes
    return not named and not shaped and total < below


def _check_run_args(
    parquet_decoder: str,
    errors: str,
    hash: str,  # noqa: A002
    device: str,
    max_expansion: float,
    cpu_below: int | None,
) -> None:
    if not max_expansion >= 0:  # NaN too
        raise ValueError(f"max_expansion must be 0 (no limit) or more, got {max_expansion!r}")
    if parquet_decoder not in PARQUET_DECODERS:
        raise ValueError(
            f"parquet_decoder must be one of {PARQUET_DECODERS}, got {parquet_decoder!r}"
        )
    if errors not in ERROR_POLICIES:
        raise ValueError(f"errors must be one of {ERROR_POLICIES}, got {errors!r}")
    new_hasher(hash)  # an unknown name, or xxhash missing here, fails before any work
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if cpu_below is not None and (
        isinstance(cpu_below, bool) or not isinstance(cpu_below, int) or cpu_below < 0
    ):
        raise ValueError(f"cpu_below must be None or bytes >= 0 (0: never), got {cpu_below!r}")


def _finish(
    out_dir, settings, base, fmt, names, results, failures, t_start, extra: dict
) -> CorpusRun:
    """Writes the manifest; the run (``extra``: CorpusRun's start-up, in_process and tasks),
    or CorpusError naming the failed shards."""
    _remove_stale_all(out_dir, set(names))  # those of this run's killed attempts, if any
    entries = [results[n]["entry"] for n in names if n in results]
    manifest = build_manifest(settings, base, fmt, entries, complete=not failures)
    atomic_write_bytes(os.path.join(out_dir, MANIFEST), manifest_bytes(manifest))
    run = CorpusRun(
        out_dir=out_dir,
        manifest=manifest,
        written=[n for n in names if results.get(n, {}).get("status") == "written"],
        verified=[n for n in names if results.get(n, {}).get("status") == "verified"],
        seconds=time.perf_counter() - t_start,
        devices=sorted({r["device"] for r in results.values() if r.get("device")}),
        stage_seconds=sum_stages(results.values()),
        **extra,
    )
    if failures:
        raise CorpusError(
            f"{len(failures)} of {len(names)} shard(s) failed (the others are written; a "
            "rerun resumes):\n  "
            + "\n  ".join(failures[:20])
            + (f"\n  ... and {len(failures) - 20} more" if len(failures) > 20 else "")
        )
    return run
