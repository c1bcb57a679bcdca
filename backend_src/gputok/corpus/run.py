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
(None: default_threads_per_worker: up to 4 on GPU workers, 1 on CPU workers; a given
client or scheduler keeps its workers' threads). workers_per_gpu: local worker processes
per GPU, each with its own tokenizer on that GPU (None: default_workers_per_gpu, up to 4:
a GPU's host-side work, Parquet decoding, packing, hashing, then runs in several
interpreters). batch_bytes / min_batch_bytes: the most
/ the fewest bytes of text per tokenizer call (a shard is cut into at least 4 calls; None:
4 MB on the GPU, 1 MB on the CPU). client / scheduler: an existing distributed.Client, or a scheduler address; neither
starts a LocalCluster (LocalCUDACluster, one worker per GPU, where dask-cuda is installed
and a GPU is usable). Raises CorpusError when a shard fails (after the others finished;
a rerun resumes), CorpusInputError for inputs that cannot be found. fsync=False skips the
fsyncs (files are still renamed into place only when complete, and a resume re-hashes
everything, so a crash costs rework, not wrong data). parquet_decoder: who decodes
Parquet pages (PARQUET_DECODERS): "auto" (default), gputok's page reader with snappy
decompressed on the GPU of GPU workers and on the CPU of CPU workers; "gputok-gpu", the
same; "gputok", the page reader on the CPU everywhere; "arrow", Arrow. Row groups the page
reader cannot read (other codecs or encodings) go to Arrow; the output is the same either
way (docs/corpus.md, "Parquet decoding"). hash: how the shard files are hashed for the
manifest (HASHES): "xxh3_128" (default; the xxhash package) or "sha256". Shards written
earlier keep the digest they were written with, and a resume checks that one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import sys
import time
from collections.abc import Callable

from ._common import DEFAULT_BATCH_BYTES, ERROR_POLICIES, MANIFEST, CorpusError, CorpusInputError
from .cluster import _close_quietly, _ClusterOptions, _cpu_count, _make_client
from .discovery import _SHARD_RE, plan_shards
from .files import DEFAULT_HASH, _json_bytes, _load_json, atomic_write_bytes, new_hasher
from .manifest import _settings, build_manifest
from .parquet import PARQUET_DECODERS
from .readers import check_field
from .shard import sum_stages, tokenize_shard
from .spec import ShardSpec


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

    @property
    def text_bytes(self) -> int:
        return int(self.manifest["totals"]["text_bytes"] or 0)


def _check_out_dir(out_dir: str, names: set[str], settings: dict, overwrite: bool) -> dict:
    """Entries of an existing manifest to resume from; refuses to mix runs."""
    os.makedirs(out_dir, exist_ok=True)
    man = _load_json(os.path.join(out_dir, MANIFEST))
    ours = [f for f in os.listdir(out_dir) if _SHARD_RE.match(f)]
    if overwrite:
        for f in ours + [MANIFEST]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(out_dir, f))
        return {}
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
    return {e["name"]: e for e in (man or {}).get("shards", []) if isinstance(e, dict)}


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
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    min_batch_bytes: int | None = None,
    threads_per_worker: int | None = None,
    workers_per_gpu: int | None = None,
    fsync: bool = True,
    parquet_decoder: str = "auto",
    hash: str = DEFAULT_HASH,  # noqa: A002 - mirrors the CLI option
    log: Callable[[str], None] | None = None,
    _fault: dict | None = None,
) -> CorpusRun:
    """Tokenize every input shard on a Dask cluster (the parameters: this module's doc;
    docs/corpus.md). Returns a CorpusRun; raises CorpusError naming the shards that failed."""
    log = log or (lambda msg: print(msg, flush=True))
    _check_run_args(parquet_decoder, errors, hash, device)
    t_start = time.perf_counter()
    out_dir = os.path.abspath(os.fspath(out_dir))
    base, paths, fmt, names = plan_shards(inputs, format, exclude=out_dir)
    if paths and fmt != "text":
        _check_field_sample(paths, fmt, field)
    common = ShardSpec(
        format=fmt,
        field=field,
        text_separator=text_separator,
        eot=eot,
        errors=errors,
        skip_empty=skip_empty,
    )
    settings = _settings(common)
    previous = _check_out_dir(out_dir, set(names), settings, overwrite)

    opts = _ClusterOptions(
        scheduler=scheduler,
        n_workers=n_workers,
        processes=processes,
        device=device,
        dashboard=dashboard,
        log=log,
        threads_per_worker=threads_per_worker,
        workers_per_gpu=workers_per_gpu,
    )
    task = {
        "device": device,
        "num_threads": num_threads,
        "batch_bytes": batch_bytes,
        "min_batch_bytes": min_batch_bytes,
        "fsync": fsync,
        "parquet_decoder": parquet_decoder,
        "hash": hash,
        "fault": _fault,
    }
    specs = [
        shard_spec(common, p, base, n, out_dir, manifest_entry=previous.get(n), **task)
        for p, n in zip(paths, names, strict=True)
    ]
    results, failures = _run_on_cluster(
        client, opts, specs, f"{fmt} shard(s) from {base} -> {out_dir}", progress
    )
    return _finish(out_dir, settings, base, fmt, names, results, failures, t_start)


def _run_on_cluster(
    client, opts: _ClusterOptions, specs: list[ShardSpec], what: str, progress: bool
) -> tuple[dict, list[str]]:
    """Runs the specs on the given client, or on a cluster of our own (closed after); fills
    in what the cluster decides: GPUs, GPU by worker name, and num_threads where None."""
    own = client is None
    client, cluster, gpus, by_name = _open_client(client, opts)
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
        opts.log(
            f"tokenizing {len(specs)} {what} on {workers} worker(s), {slots} shard(s) at a time"
        )
        return _run_tasks(client, specs, progress)
    finally:
        if own:
            _close_quietly(client, cluster)


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


def _check_field_sample(paths: list[str], fmt: str, field: str) -> None:
    """A wrong --field, refused before any cluster starts: when the first, middle and last
    inputs all lack it (one that has it, or cannot be read here, lets the run go on, and each
    shard without the field fails alone)."""
    sample = sorted({0, len(paths) // 2, len(paths) - 1})
    errors = []
    for i in sample:
        try:
            check_field(paths[i], fmt, field)
        except CorpusInputError as e:
            errors.append(e)
            continue
        return
    raise errors[0]


def _check_run_args(parquet_decoder: str, errors: str, hash: str, device: str) -> None:  # noqa: A002
    if parquet_decoder not in PARQUET_DECODERS:
        raise ValueError(
            f"parquet_decoder must be one of {PARQUET_DECODERS}, got {parquet_decoder!r}"
        )
    if errors not in ERROR_POLICIES:
        raise ValueError(f"errors must be one of {ERROR_POLICIES}, got {errors!r}")
    new_hasher(hash)  # an unknown name, or xxhash missing here, fails before any work
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")


def _slots(client) -> tuple[int, int]:
    """(workers, Dask threads in all) of the client's cluster."""
    info = client.scheduler_info(n_workers=-1).get("workers", {})
    workers = max(1, len(info))
    return workers, max(workers, sum(int(w.get("nthreads") or 1) for w in info.values()))


def _run_tasks(client, specs: list[ShardSpec], progress: bool) -> tuple[dict, list[str]]:
    """Runs tokenize_shard on every spec: (results by shard name, the failures' lines)."""
    import distributed

    token = secrets.token_hex(4)
    names = [s.name for s in specs]
    futures = client.map(
        tokenize_shard, specs, key=[f"tokenize_shard-{n}-{token}" for n in names], pure=False
    )
    if progress:
        sizes = [os.stat(s.path).st_size if os.path.exists(s.path) else 0 for s in specs]
        _progress(futures, sizes)
    distributed.wait(futures)
    # The finished shards' results in one gather: one round trip, where a result() per
    # future took ~2.7 ms each (0.17 s of a 0.9 s run of 64 shards, 2-core dev VM,
    # 2026-11-23). Failures are rare and fetched one by one.
    done = [(n, f) for n, f in zip(names, futures, strict=True) if f.status == "finished"]
    results = dict(zip([n for n, _ in done], client.gather([f for _, f in done]), strict=True))
    failures = []
    for spec, fut in zip(specs, futures, strict=True):
        if spec.name not in results:
            exc = fut.exception()
            failures.append(f"{spec.name} ({spec.source}): {type(exc).__name__}: {exc}")
    return results, failures


def _progress(futures, sizes: list[int]) -> None:
    """Until every task has ended: shards done, input MB done, MB/s and the ETA, redrawn on
    a terminal every 0.5 s, a line every 10 s into a log. MB are of the input files (Parquet
    and .gz as they lie on disk), which is what a run reads."""
    tty = sys.stdout.isatty()
    total, t0 = sum(sizes), time.perf_counter()
    while True:
        ended = [f.status != "pending" for f in futures]
        n = sum(ended)
        got = sum(s for s, e in zip(sizes, ended, strict=True) if e)
        took = time.perf_counter() - t0
        rate = got / took if took > 0 else 0.0
        eta = f"{(total - got) / rate:.0f} s" if rate > 0 and n < len(futures) else "-"
        line = (
            f"{n}/{len(futures)} shards, {got / 1e6:.1f}/{total / 1e6:.1f} MB of input, "
            f"{rate / 1e6:.1f} MB/s, ETA {eta}"
        )
        print("\r" + line if tty else line, end="" if tty else "\n", flush=True)
        if n == len(futures):
            if tty:
                print(flush=True)
            return
        time.sleep(0.5 if tty else 10.0)


def _finish(out_dir, settings, base, fmt, names, results, failures, t_start) -> CorpusRun:
    """Writes the manifest; the run, or CorpusError naming the failed shards."""
    entries = [results[n]["entry"] for n in names if n in results]
    manifest = build_manifest(settings, base, fmt, entries, complete=not failures)
    atomic_write_bytes(os.path.join(out_dir, MANIFEST), _json_bytes(manifest))
    run = CorpusRun(
        out_dir=out_dir,
        manifest=manifest,
        written=[n for n in names if results.get(n, {}).get("status") == "written"],
        verified=[n for n in names if results.get(n, {}).get("status") == "verified"],
        seconds=time.perf_counter() - t_start,
        devices=sorted({r["device"] for r in results.values() if r.get("device")}),
        stage_seconds=sum_stages(results.values()),
    )
    if failures:
        raise CorpusError(
            f"{len(failures)} of {len(names)} shard(s) failed (the others are written; a "
            "rerun resumes):\n  "
            + "\n  ".join(failures[:20])
            + (f"\n  ... and {len(failures) - 20} more" if len(failures) > 20 else "")
        )
    return run
