"""Corpus tokenization on dask.distributed: text / JSONL / Parquet shards -> uint16 token shards.

One input file is one output shard; small consecutive files are grouped into one task
(tasks.group_specs), and a corpus below tasks.IN_PROCESS_BELOW_BYTES runs its tasks on threads
of this process instead of a Dask cluster. Each worker tokenizes with gputok (the
GPU where one is usable, else the native CPU path) and writes, per shard ``NAME``:

* ``NAME.bin``  raw little-endian uint16 token ids (nanoGPT's ``train.bin`` format, no header);
* ``NAME.idx``  raw little-endian int64 document offsets, ``documents + 1`` of them, starting at
  0 and ending at the token count: document ``i`` is ``bin[idx[i]:idx[i+1]]`` (with ``eot``,
  that slice ends with ``<|endoftext|>``);
* ``NAME.json`` the shard's manifest entry (counts, sizes, the hash of both files:
  xxh3_128 by default, or sha256; HASHES).

and the driver writes ``manifest.json`` (all entries plus totals). See docs/corpus.md.

Crash safety: every file is written to ``NAME.<ext>.tmp-<pid>-<rand>-<n>`` (unique per task and
file, also among the tasks one worker process runs at once), fsynced and renamed; the entry
``NAME.json`` is written last the same way, after the old one was removed, and the directory
fsync after its rename makes all three renames durable. Shard files written through a
shard's own pipeline start their writeback while they are written (WRITEBACK_BYTES), so the
fsync at a shard's end waits for its tail; small shards joined into one tokenizer call are
written whole, all of the call's files in one native call (files.write_shards), in the same
order. A shard counts as done only when its entry exists and both files match the entry's
sizes and hashes, so a worker killed mid-shard leaves nothing that looks complete; a restart
re-hashes (on the workers) and skips what verifies, and redoes the rest.

Dask is imported lazily: ``import gputok`` and the readers here work without it.

Performance notes. Per worker, a reader thread parses batch k+1, gputok tokenizes batch k
straight into uint16 + EOT (GIL released) and a writer thread hashes and writes batch
k-1 (other tokenizers' ids are packed there, _pack). Batches reach the tokenizer as one buffer +
offsets (Tokenizer.encode_buffer_uint16: no Python object per document); a shard is cut into
at least PIPELINE_BATCHES batches so the stages overlap within it; a GPU worker runs several shards at once (Dask threads, sharing its one
tokenizer) because one shard's stream is capped by one-core stages. Measured 2026-11-22 (in
process, 16.7 MB in 4 Parquet shards of one row group, snappy, fsync): on an H200 host (16 cores)
the pipeline alone went 0.207 -> 0.266 GB/s and with the GPU tokenizer 0.144 -> 0.176 GB/s per
shard with the buffer path; per 16.7 MB, Parquet decoding 33 ms (0.51 GB/s, one core), GPU
encode in 1 MB batches 30 ms (hence GPU_MIN_BATCH_BYTES), pack 10, sha256 11, write 5.5, fsync
13 ms. On the 2-core dev VM, 2 shards at once lifted the pipeline alone 0.158 -> 0.245 GB/s
(no gain past 2 there) and gigatoken's stream 0.068 -> 0.115, which is why bench_corpus.py
gives gigatoken the same shard concurrency. CPU workers keep one shard each: a local CPU
cluster already runs min(cores, 8) workers. On 2 x H200 (06:00 UTC, 681 MB in 32 shards, 4-8
at once per worker, stage_seconds): one GPU 0.58-0.63 GB/s, two 0.70-0.75 (1.49 without
fsync), gigatoken 0.51-0.70. Packing in native code with the GIL released (_pack)
took the writer waits from 5-6 s to 0.3 s (summed over shards); fsync to one disk and reading
are the bound now, the GPU encodes ~1-3 s of the shards' time (bench/results/2026-11-25-benchmarks-history.md). Early
writeback (_HashedFile, 07:51 UTC): one GPU 0.77 -> 0.89 GB/s on that disk, fsyncs 2.3 -> 1.3 s
summed; on tmpfs one GPU 1.15-1.27 GB/s and two 1.52-1.86 (scale 8-32). 2026-11-23, one H200
on a 16-core host, 1.36 GB in 64 Parquet shards on tmpfs: several worker processes per GPU
(default_workers_per_gpu) took one GPU from 0.86-0.97 to 1.65-1.89 GB/s (threads of one
worker take turns on its GIL between native calls), keeping freed memory in the workers
(WORKER_MALLOC_ENV) 1.60 -> 1.75; per GB of text a GPU worker's pipeline costs ~4.9 CPU s
(Parquet 2.2, gputok's host side 1.2, pack 0.4, sha256 0.7, write 0.3) and gigatoken's ~12,
so the host's cores bound both (bench/corpus_stages.py, bench/results/2026-11-25-benchmarks-history.md). Later that day
(18:12-18:19 UTC, same host and input): the ids narrowed to uint16 in gputok's copy-out
(encode_buffer_uint16, no int32 array, no host pack) took one GPU from 1.77-1.97 to 2.05-2.21
GB/s, and gathering the shards' results in one round trip instead of one per shard (0.17 s of
a 0.9 s run on the dev VM) to 2.25 GB/s, host cores 82% busy: 2.04-2.33x gigatoken's best.
2026-11-24, same host, 2.7 GB in 128 shards: GPU workers decompress Parquet's snappy pages on
their GPU (parquet_decoder "auto"; the decode ~2.5x faster per call than the day before, and
concurrent): 3.31-3.46 GB/s, host cores 61-67% busy, 2.91-3.42x gigatoken's best (the page
reader on the CPU: 2.22-2.34, 73% busy). 2026-11-25, one H100 host: 3.4-4.1 GB/s whatever the
call size, shards in flight, processes or copy threads, while the GPU tokenizer alone takes 9.4
GB/s from 4 processes and the pipeline with no tokenizer does 5.1 on text shards: the host
work here, not the GPU, bounds one GPU (docs/corpus.md, "What bounds one GPU now").
"""

from __future__ import annotations

from ._common import (  # noqa: F401
    DEFAULT_BATCH_BYTES,
    ERROR_POLICIES,
    FORMAT_NAME,
    FORMAT_VERSION,
    FORMATS,
    GPU_MIN_BATCH_BYTES,
    MANIFEST,
    MAX_GPU_THREADS_PER_WORKER,
    MAX_GPU_WORKERS_PER_GPU,
    MAX_ID,
    MAX_IN_PROCESS_CPU_THREADS,
    MAX_IN_PROCESS_GPU_THREADS,
    MIN_BATCH_BYTES,
    PIPELINE_BATCHES,
    STAGES,
    CorpusError,
    CorpusInputError,
)
from .batch import (  # noqa: F401
    Batch,
    _arrow_batch,
    _arrow_parts,
    _at,
    _batch_target,
    _prefetch,
    _utf8_len,
)
from .cluster import (  # noqa: F401
    WORKER_MALLOC_ENV,
    _close_quietly,
    _ClusterOptions,
    _cpu_count,
    _dashboard_kwargs,
    _gpu_count,
    _make_client,
    _start_local,
    _worker_spawn_config,
    _worker_spawn_env,
    _worker_spawn_settings,
    default_in_process_threads,
    default_threads_per_worker,
    default_workers_per_gpu,
    local_cluster,
    local_gpus,
)
from .discovery import (  # noqa: F401
    _COMPRESSION,
    _EXTENSIONS,
    _SHARD_RE,
    _split_ext,
    detect_format,
    find_shards,
    plan_shards,
    unescape_separator,
)
from .encode import (  # noqa: F401
    Encoded,
    _emit,
    _encode_batch,
    _invalid_utf8,
    _pack,
)
from .files import (  # noqa: F401
    DEFAULT_HASH,
    HASHES,
    WRITEBACK_BYTES,
    _digest_of,
    _early_writeback,
    _fsync_dir,
    _HashedFile,
    _json_bytes,
    _load_json,
    _tmp_name,
    atomic_write_bytes,
    hash_file,
    new_hasher,
)
from .manifest import (  # noqa: F401
    _settings,
    build_manifest,
    load_shard,
    settings_digest,
    verify_corpus,
    verify_entry,
)
from .parquet import (  # noqa: F401
    _BYTE_ARRAY,
    PAGE_READER_CODECS,
    PAGE_READER_GROUP_BYTES,
    PAGE_READER_MIN_BYTES,
    PARQUET_DECODERS,
    _decode_row_groups,
    _footer_chunks,
    _parquet_decoder,
    _parquet_leaf,
    _read_parquet_groups,
    _row_group_run,
    _span_batches,
    read_parquet,
)
from .readers import (  # noqa: F401
    JSONL_FAST_MAX_BYTES,
    _find_all,
    _json_type,
    _open_binary,
    _read_all,
    _read_jsonl_arrow,
    _read_jsonl_python,
    check_field,
    read_jsonl,
    read_shard,
    read_text,
)
from .run import (  # noqa: F401
    CorpusRun,
    _check_out_dir,
    shard_spec,
    tokenize_corpus,
)
from .shard import (  # noqa: F401
    _TOK_LOCK,
    _TOKENIZERS,
    _maybe_fault,
    _min_batch_bytes,
    _resumable,
    _source_stat,
    _tokenizer,
    _worker_device_id,
    sum_stages,
    tokenize_shard,
    warm_worker,
)
from .spec import ShardSpec  # noqa: F401
from .tasks import (  # noqa: F401
    DEFAULT_TASK_BYTES,
    IN_PROCESS_BELOW_BYTES,
    group_specs,
    run_in_process,
    tokenize_group,
    warm,
    warm_all,
)
