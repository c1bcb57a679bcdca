"""The worker side: one Dask task tokenizes one input file into one shard (tokenize_shard),
with this process's tokenizer, resuming a shard that still verifies."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._common import (
    GPU_MIN_BATCH_BYTES,
    MAX_ID,
    MIN_BATCH_BYTES,
    STAGES,
    CorpusError,
    CorpusInputError,
)
from .batch import _prefetch
from .encode import _emit, _encode_batch
from .files import (
    _early_writeback,
    _HashedFile,
    _json_bytes,
    _load_json,
    atomic_write_bytes,
)
from .manifest import _settings, settings_digest, verify_entry
from .parquet import _parquet_decoder
from .readers import read_shard
from .spec import ShardSpec

_TOKENIZERS: dict = {}


_TOK_LOCK = threading.Lock()


def _worker_device_id(spec: ShardSpec) -> int:
    """The GPU of this worker: 0 under dask-cuda (it sets CUDA_VISIBLE_DEVICES per worker,
    own GPU first); with a plain LocalCluster of one worker per GPU, the worker's name."""
    gpus = int(spec.gpus or 0)
    if spec.device == "cpu" or gpus <= 1 or not spec.gpu_by_worker_name:
        return 0
    try:
        from distributed import get_worker

        return int(get_worker().name) % gpus
    except (ImportError, ValueError, TypeError):
        return 0


def _tokenizer(device: str, device_id: int):
    """This process's tokenizer for (device, device_id), built once and shared by all its
    threads: a worker running several shards at once (threads_per_worker > 1) holds one GPU
    tokenizer (one context), which runs up to 4 of their calls at once, each on a stream and
    memory pool of its own (GpuEncoder's slots); the CPU tokenizer is safe to call from several
    threads too."""
    key = (device, device_id)
    with _TOK_LOCK:
        tok = _TOKENIZERS.get(key)
        if tok is None:
            import gputok

            # GPU calls sleep while the device works (blocking_sync) instead of spinning: a
            # worker runs several shards and there may be several workers per GPU, whose
            # spinning threads took cores from Parquet decoding and hashing.
            opts = {"device_id": device_id, "blocking_sync": True} if device != "cpu" else {}
            tok = gputok.gpt2(device=device, **opts)
            if tok.n_vocab - 1 > MAX_ID:
                raise CorpusError(f"{tok.name}: {tok.n_vocab} ids do not fit uint16")
            _TOKENIZERS[key] = tok
        return tok


@dataclasses.dataclass(frozen=True)
class _Where:
    """Where this process's tokenizer for a spec runs its calls ("cuda" or "cpu", and the
    GPU), known before the tokenizer is built: what chooses by device (the Parquet decoder,
    the smallest batch) takes it, so a task reads while the tokenizer builds."""

    device: str
    device_id: int


def _where(spec: ShardSpec) -> _Where:
    """The built tokenizer's device, or the one gputok.gpt2 will give: the GPU unless
    device="cpu" or (for "auto") no GPU is usable."""
    device_id = _worker_device_id(spec)
    tok = _TOKENIZERS.get((spec.device, device_id))
    if tok is not None:
        return _Where(tok.device, device_id)
    if spec.device == "cpu":
        return _Where("cpu", device_id)
    import gputok

    gpu = spec.device == "cuda" or gputok.cuda_available()[0]
    return _Where("cuda" if gpu else "cpu", device_id)


def start_tokenizer(spec: ShardSpec) -> threading.Thread:
    """Build this process's tokenizer for ``spec`` on a thread of its own, which it returns
    (its ``seconds``: the build's). The build releases the GIL but for the vocabulary's
    parse, and makes the GPU context on yet another thread meanwhile (gputok._start_device):
    ~0.4 s on the H100 host (2026-11-28), which a run in process spends reading its first
    shards instead of waiting. Tasks wait for it in _tokenizer. A build that fails here fails
    again, named, in the first task that needs it."""

    def build() -> None:
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):  # the tasks meet it again and report it
            _tokenizer(spec.device, _worker_device_id(spec))
        thread.seconds = time.perf_counter() - t0  # type: ignore[attr-defined]

    thread = threading.Thread(target=build, name="gputok-corpus-build", daemon=True)
    thread.seconds = 0.0  # type: ignore[attr-defined]
    thread.start()
    return thread


def sum_stages(results) -> dict:
    """Per stage (STAGES), the seconds that ``tokenize_shard`` results spent in it, summed
    (results of verified shards have none), and under "task" the written shards' whole task
    time: threads x wall time beyond it is scheduling and the run's own start and end."""
    results = [r for r in results if "stages" in r]
    out = {st: sum(r["stages"].get(st, 0.0) for r in results) for st in STAGES}
    out["task"] = sum(r.get("seconds", 0.0) for r in results)
    return out


def _min_batch_bytes(spec: ShardSpec, where) -> int:
    """The run's minimum batch, or by the device of ``where`` (a _Where or a tokenizer):
    GPU_MIN_BATCH_BYTES on the GPU, else MIN_BATCH_BYTES."""
    if spec.min_batch_bytes is not None:
        return max(1, int(spec.min_batch_bytes))
    return GPU_MIN_BATCH_BYTES if getattr(where, "device", "cpu") == "cuda" else MIN_BATCH_BYTES


def warm_worker(device: str = "auto", gpus: int = 0, gpu_by_worker_name: bool = False) -> str:
    """Build this worker's tokenizer (so timings exclude it); returns its device."""
    spec = ShardSpec(device=device, gpus=gpus, gpu_by_worker_name=gpu_by_worker_name)
    return _tokenizer(device, _worker_device_id(spec)).device


def _source(size: int, mtime_ns: int) -> dict:
    """A manifest entry's record of its input file."""
    return {"source_bytes": size, "source_mtime_ns": mtime_ns}


def _source_stat(path: str) -> dict:
    try:
        st = os.stat(path)
    except OSError as e:
        raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e
    return _source(st.st_size, st.st_mtime_ns)


def _resumable(spec: ShardSpec, entry: dict | None, settings_sha: str) -> bool:
    if not entry or entry.get("name") != spec.name:
        return False
    if entry.get("settings_sha256") != settings_sha or entry.get("source") != spec.source:
        return False
    return all(entry.get(k) == v for k, v in _source_stat(spec.path).items())


def _maybe_fault(spec: ShardSpec, stage: str) -> None:
    """Test hook (``_fault``): kill this worker process, or raise, once (marker file)."""
    fault = spec.fault
    if not fault or fault.get("shard") != spec.name or fault.get("stage", "mid") != stage:
        return
    marker = fault["marker"]
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    if fault["mode"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"injected failure in {spec.name} ({stage})")


def tokenize_shard(spec: ShardSpec, *, scan_stale: bool = True) -> dict:
    """Tokenize one input file into ``spec.out_dir/spec.name.{bin,idx,json}`` (the Dask
    task). Returns ``{"entry": manifest entry, "status": "written"|"verified", ...}``. Skips the
    work when an existing entry still matches the settings, the source's size and mtime, and
    the files' hashes. ``scan_stale=False``: the caller removed this shard's leftover
    temporary files already (tokenize_group, one scan for a group of shards)."""
    t0 = time.perf_counter()
    settings_sha = settings_digest(_settings(spec))
    if scan_stale:
        _remove_stale_all(spec.out_dir, {spec.name})
    kept = resume_or_clear(spec, settings_sha)
    if kept is not None:
        return {"entry": kept, "status": "verified", "seconds": time.perf_counter() - t0}

    source = _source_stat(spec.path)
    bin_f, idx_f = open_outputs(spec)
    try:
        counts, stages, tok = _pipeline(spec, bin_f, idx_f)
        t_fin = time.perf_counter()
        entry = commit_shard(spec, settings_sha, source, counts, bin_f, idx_f)
        stages["finish"] += time.perf_counter() - t_fin
    except BaseException:
        bin_f.abort()
        idx_f.abort()
        raise
    return {
        "entry": entry,
        "status": "written",
        "seconds": time.perf_counter() - t0,
        "device": tok.device,
        "stages": stages,
    }


def resume_or_clear(spec: ShardSpec, settings_sha: str) -> dict | None:
    """The shard's entry when its files still verify (the work is skipped), else None, and
    its entry file is gone, so that nothing of the old shard can pass for complete."""
    entry_path = os.path.join(spec.out_dir, f"{spec.name}.json")
    olds = [spec.manifest_entry]  # an entry file absent at the run's start is not read
    if not spec.entry_absent:
        olds.insert(0, _load_json(entry_path))
    for old in olds:
        if _resumable(spec, old, settings_sha) and verify_entry(spec.out_dir, old) is None:
            if spec.entry_absent or not os.path.exists(entry_path):  # only in manifest.json
                atomic_write_bytes(entry_path, _json_bytes(old), fsync=spec.fsync)
            return old
    if not spec.entry_absent:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry_path)
    return None


def open_outputs(spec: ShardSpec) -> tuple[_HashedFile, _HashedFile]:
    """The shard's temporary .bin and .idx (the idx starts with its leading 0)."""
    writeback = spec.fsync and _early_writeback()
    bin_f = _HashedFile(os.path.join(spec.out_dir, f"{spec.name}.bin"), writeback, spec.hash)
    try:
        idx_f = _HashedFile(os.path.join(spec.out_dir, f"{spec.name}.idx"), writeback, spec.hash)
    except BaseException:
        bin_f.abort()
        raise
    idx_f.write(np.zeros(1, dtype="<i8"))
    return bin_f, idx_f


def shard_entry(
    spec: ShardSpec, settings_sha: str, source: dict, counts: dict, bin_rec: dict, idx_rec: dict
) -> dict:
    """The shard's manifest entry, from its files' records (files.py)."""
    return {
        "name": spec.name,
        "source": spec.source,
        **source,
        "settings_sha256": settings_sha,
        **counts,
        "bin": bin_rec,
        "idx": idx_rec,
    }


def commit_shard(
    spec: ShardSpec,
    settings_sha: str,
    source: dict,
    counts: dict,
    bin_f: _HashedFile,
    idx_f: _HashedFile,
) -> dict:
    """Finish the shard's files, rename them into place and write its entry (last): the
    entry. The caller aborts the files on an exception."""
    bin_rec, idx_rec = bin_f.finish(spec.fsync), idx_f.finish(spec.fsync)
    os.replace(bin_f.tmp, bin_f.final)
    os.replace(idx_f.tmp, idx_f.final)
    # No directory fsync here: the entry's (atomic_write_bytes, below) makes these two
    # renames durable with its own. Until then a crash can lose them, but the entry does
    # not exist yet, and an entry that survives without them fails verification (sizes,
    # hashes) and the shard is redone. One fewer journal commit per shard.
    entry = shard_entry(spec, settings_sha, source, counts, bin_rec, idx_rec)
    _maybe_fault(spec, "before_entry")
    atomic_write_bytes(
        os.path.join(spec.out_dir, f"{spec.name}.json"), _json_bytes(entry), fsync=spec.fsync
    )
    return entry


def _remove_stale_all(out_dir: str, names: set[str], listing: list[str] | None = None) -> None:
    """Temporary files of these shards are from a killed earlier attempt: never complete.
    ``listing``: the directory's names, when the caller has them. (str tests, not glob:
    fnmatch over the whole directory per shard held the GIL for ~0.3 s per 128-shard run on
    the H200 x2, py-spy, 2026-11-22.)"""
    if listing is None:
        listing = os.listdir(out_dir)
    stale = [f for f in listing if ".tmp-" in f and f.split(".", 1)[0] in names]
    for f in stale:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(out_dir, f))


def _pipeline(spec: ShardSpec, bin_f: _HashedFile, idx_f: _HashedFile) -> tuple[dict, dict, object]:
    """Read, tokenize and write the shard's batches: (the entry's counts, the seconds this
    task's thread spent in each stage: waiting for the reader, encoding, waiting for the
    writer, where a run's time goes, bench_corpus.py; the tokenizer). Three stages overlap:
    the reader thread parses batch k+1, this thread tokenizes batch k (gputok releases the
    GIL), the writer thread packs and writes batch k-1. The reader starts before this
    thread takes the tokenizer, which may still be building (start_tokenizer)."""
    eot = 50256 if spec.eot else None
    counts = dict.fromkeys(
        ("documents", "tokens", "text_bytes", "skipped_invalid_utf8", "skipped_empty"), 0
    )
    stages = dict.fromkeys(STAGES, 0.0)
    where = _where(spec)
    reader = _prefetch(shard_batches(spec, where, _min_batch_bytes(spec, where)))
    with (
        contextlib.closing(reader),  # on errors too: stops the reader thread now
        ThreadPoolExecutor(1, thread_name_prefix="gputok-corpus-writer") as writer,
    ):
        tok = _tokenizer(spec.device, where.device_id)
        pending: collections.deque = collections.deque()
        for k, batch in enumerate(_timed(reader, stages)):
            t_got = time.perf_counter()
            enc = _encode_batch(tok, batch, spec, eot)
            stages["encode"] += time.perf_counter() - t_got
            del batch  # its buffers can go once encoded
            base = counts["tokens"]
            pending.append(writer.submit(_emit, enc, eot, base, bin_f, idx_f, spec.path))
            for key, n in (
                ("tokens", enc.tokens(eot)),
                ("documents", enc.documents),
                ("text_bytes", enc.text_bytes),
                ("skipped_invalid_utf8", enc.skipped_invalid_utf8),
                ("skipped_empty", enc.skipped_empty),
            ):
                counts[key] += n
            t_wait = time.perf_counter()
            while len(pending) > 1:
                pending.popleft().result()
            stages["write_wait"] += time.perf_counter() - t_wait
            if k == 0 and spec.fault:
                pending.popleft().result()
                bin_f.flush()  # so the injected kill leaves a real partial temp file
                idx_f.flush()
                _maybe_fault(spec, "mid")
        t_wait = time.perf_counter()
        while pending:
            pending.popleft().result()
        stages["write_wait"] += time.perf_counter() - t_wait
    return counts, stages, tok


def shard_batches(spec: ShardSpec, where, min_batch_bytes: int) -> Iterator:
    """The shard's batches (read_shard with the spec's settings; Parquet decoded for the
    device of ``where``, a _Where or a tokenizer)."""
    return read_shard(
        spec.path,
        spec.format,
        field=spec.field,
        text_separator=spec.text_separator,
        errors=spec.errors,
        batch_bytes=spec.batch_bytes,
        min_batch_bytes=min_batch_bytes,
        parquet_decoder=_parquet_decoder(spec.parquet_decoder, where),
        max_expansion=spec.max_expansion,
    )


def _timed(it, stages: dict) -> Iterator:
    """The items of ``it``, the seconds waited for each (and for its end) added to
    ``stages["read_wait"]``."""
    while True:
        t = time.perf_counter()
        item = next(it, None)
        stages["read_wait"] += time.perf_counter() - t
        if item is None:
            return
        yield item
