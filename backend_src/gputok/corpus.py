"""Corpus tokenization on dask.distributed: text / JSONL / Parquet shards -> uint16 token shards.

One input file is one task and one output shard. Each Dask worker tokenizes with gputok (the
GPU where one is usable, else the native CPU path) and writes, per shard ``NAME``:

* ``NAME.bin``  raw little-endian uint16 token ids (nanoGPT's ``train.bin`` format, no header);
* ``NAME.idx``  raw little-endian int64 document offsets, ``documents + 1`` of them, starting at
  0 and ending at the token count: document ``i`` is ``bin[idx[i]:idx[i+1]]`` (with ``eot``,
  that slice ends with ``<|endoftext|>``);
* ``NAME.json`` the shard's manifest entry (counts, sizes, the hash of both files:
  xxh3_128 by default, or sha256; HASHES).

and the driver writes ``manifest.json`` (all entries plus totals). See docs/corpus.md.

Crash safety: every file is written to ``NAME.<ext>.tmp-<pid>-<rand>`` (unique per task and
file, also among the tasks one worker process runs at once), fsynced and renamed; the entry
``NAME.json`` is written last the same way, after the old one was removed, and the directory
fsync after its rename makes all three renames durable. Shard files start their writeback
while they are written (WRITEBACK_BYTES), so the fsync at a shard's end waits for its tail. A shard counts as done only when its entry exists and both files match the entry's
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
are the bound now, the GPU encodes ~1-3 s of the shards' time (docs/benchmarks.md). Early
writeback (_HashedFile, 07:51 UTC): one GPU 0.77 -> 0.89 GB/s on that disk, fsyncs 2.3 -> 1.3 s
summed; on tmpfs one GPU 1.15-1.27 GB/s and two 1.52-1.86 (scale 8-32). 2026-11-23, one H200
on a 16-core host, 1.36 GB in 64 Parquet shards on tmpfs: several worker processes per GPU
(default_workers_per_gpu) took one GPU from 0.86-0.97 to 1.65-1.89 GB/s (threads of one
worker take turns on its GIL between native calls), keeping freed memory in the workers
(WORKER_MALLOC_ENV) 1.60 -> 1.75; per GB of text a GPU worker's pipeline costs ~4.9 CPU s
(Parquet 2.2, gputok's host side 1.2, pack 0.4, sha256 0.7, write 0.3) and gigatoken's ~12,
so the host's cores bound both (bench/corpus_stages.py, docs/benchmarks.md). Later that day
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

import bz2
import collections
import contextlib
import dataclasses
import glob as _glob
import gzip
import hashlib
import json
import lzma
import os
import queue
import re
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

FORMAT_NAME = "gputok-corpus"
FORMAT_VERSION = 1
FORMATS = ("text", "jsonl", "parquet")
ERROR_POLICIES = ("strict", "replace", "skip")
MANIFEST = "manifest.json"
STAGES = ("read_wait", "encode", "write_wait", "finish")  # CorpusRun.stage_seconds
MAX_ID = 65535  # uint16
DEFAULT_BATCH_BYTES = 32 << 20  # text per tokenizer call at most: bounds memory, amortizes it
# A shard is cut into at least this many batches (of at least the minimum batch), so that its
# reading, tokenizing and writing overlap even when it is smaller than batch_bytes.
PIPELINE_BATCHES = 4
MIN_BATCH_BYTES = 1 << 20  # the minimum batch on the CPU
# ... and on the GPU, where a call has a fixed cost (launches, copies: a 1 MB batch took 30 ms
# per 16.7 MB on an H200, i.e. ~1.8 ms per call) that bigger batches amortize.
GPU_MIN_BATCH_BYTES = 4 << 20
# Shards a GPU worker tokenizes at once (Dask threads per worker) at most; see
# default_threads_per_worker.
MAX_GPU_THREADS_PER_WORKER = 4
# Worker processes per GPU of a local cluster at most; see default_workers_per_gpu.
MAX_GPU_WORKERS_PER_GPU = 4

_EXTENSIONS = {
    ".txt": "text",
    ".text": "text",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_COMPRESSION = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_SHARD_RE = re.compile(r"^shard_\d+\.(bin|idx|json)$")


class CorpusError(RuntimeError):
    """A corpus run could not finish (bad output directory, or some shards failed)."""


class CorpusInputError(ValueError):
    """An input shard is unreadable or malformed; the message names the file and place."""


# ---------------------------------------------------------------------------------------------
# Input discovery


def _split_ext(path: str) -> tuple[str, str | None]:
    """(format extension, compression extension or None), e.g. ('.jsonl', '.gz')."""
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    comp = suffixes[-1] if suffixes and suffixes[-1] in _COMPRESSION else None
    rest = suffixes[:-1] if comp else suffixes
    return (rest[-1] if rest else ""), comp


def detect_format(path: str, fmt: str = "auto") -> str:
    """The input format of ``path``: ``fmt`` unless "auto", else from its extension."""
    if fmt != "auto":
        if fmt not in FORMATS:
            raise ValueError(f"format must be 'auto' or one of {FORMATS}, got {fmt!r}")
        return fmt
    ext, _ = _split_ext(path)
    if ext not in _EXTENSIONS:
        raise CorpusInputError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            f"known: {', '.join(sorted(_EXTENSIONS))} (optionally .gz/.bz2/.xz); "
            "pass --format text|jsonl|parquet (JSON Lines in .json files: --format jsonl)"
        )
    return _EXTENSIONS[ext]


def find_shards(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    fmt: str = "auto",
    exclude: str | os.PathLike | None = None,
):
    """Sorted input files for ``inputs``: files, directories (searched recursively for files
    of the format, or any known format when "auto"; ``.json`` files only with format
    "jsonl", since a directory's ``.json`` is often metadata) and glob patterns (``**``
    allowed). Nothing under ``exclude`` (the output directory) is taken. Returns (base
    directory, [absolute paths]). Raises CorpusInputError when nothing matches."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    skip = os.path.abspath(os.fspath(exclude)) + os.sep if exclude is not None else None
    found: list[str] = []
    for item in inputs:
        item = os.fspath(item)
        if os.path.isdir(item):
            for root, _dirs, files in os.walk(item):
                for f in files:
                    ext, _ = _split_ext(f)
                    known = _EXTENSIONS.get(ext) or ("jsonl" if ext == ".json" else None)
                    if known and (fmt == known or (fmt == "auto" and ext != ".json")):
                        found.append(os.path.join(root, f))
        elif os.path.lexists(item):
            found.append(item)
        else:
            matches = [m for m in _glob.glob(item, recursive=True) if not os.path.isdir(m)]
            if not matches:
                raise CorpusInputError(f"{item}: no such file, directory or matching glob")
            found.extend(matches)
    paths = sorted({os.path.abspath(p) for p in found})
    if skip:
        paths = [p for p in paths if not p.startswith(skip)]
    if not paths:
        raise CorpusInputError(f"no input files of format {fmt!r} found in {list(inputs)}")
    base = os.path.commonpath([os.path.dirname(p) for p in paths])
    return base, paths


# ---------------------------------------------------------------------------------------------
# Readers: each yields Batches of ~batch_bytes of text. A Batch is either one buffer of UTF-8
# bytes with document bounds into it (text, Arrow JSON, Parquet: no Python object per
# document; gputok validates the UTF-8 itself) or a list of documents (str or bytes: the
# line-by-line JSONL path). Batch.locate(i) names where document i came from.


@dataclasses.dataclass
class Batch:
    """The documents of one tokenizer call: ``docs`` (str or bytes), or, with ``docs`` None,
    slices of ``data`` (a bytes-like buffer) given by ``bounds``: int32/int64, shape (n + 1,)
    boundaries or (n, 2) [start, end) spans, as ``Tokenizer.encode_buffer_flat`` takes them.
    ``locate(i)`` names where document ``i`` came from (for messages, built only when
    needed). ``arrow``: the Arrow array the buffer came from, if any (to list it quickly)."""

    docs: list | None
    locate: Callable[[int], str]
    skipped_invalid_utf8: int = 0
    data: object = None
    bounds: np.ndarray | None = None
    arrow: object = None

    def __len__(self) -> int:
        if self.docs is not None:
            return len(self.docs)
        return len(self.bounds) - (self.bounds.ndim == 1)

    def spans(self) -> np.ndarray:
        """(n, 2) int64 [start, end) of every document in ``data``."""
        b = self.bounds.astype(np.int64, copy=False)
        return b if b.ndim == 2 else np.stack([b[:-1], b[1:]], axis=1)

    def lengths(self) -> np.ndarray:
        """Byte length of every document (str: of its UTF-8)."""
        if self.docs is not None:
            return np.fromiter(map(_utf8_len, self.docs), dtype=np.int64, count=len(self.docs))
        b = self.bounds.astype(np.int64, copy=False)
        return np.diff(b) if b.ndim == 1 else b[:, 1] - b[:, 0]

    def doc_list(self) -> list:
        """The documents as a list (bytes where they are slices of a buffer), for tokenizers
        that take only sequences."""
        if self.docs is not None:
            return self.docs
        if self.arrow is not None:
            import pyarrow as pa

            return self.arrow.cast(pa.large_binary()).to_pylist()
        mv = memoryview(self.data).cast("B")
        return [mv[a:b].tobytes() for a, b in self.spans().tolist()]

    def select(self, keep: np.ndarray) -> Batch:
        """The documents at positions ``keep`` (ascending), with ``locate`` still naming
        their original places."""
        keep = np.asarray(keep, dtype=np.int64)
        where = keep.tolist()
        locate = self.locate

        def sub_locate(i: int) -> str:
            return locate(where[i])

        if self.docs is not None:
            return Batch([self.docs[i] for i in where], sub_locate, self.skipped_invalid_utf8)
        return Batch(None, sub_locate, self.skipped_invalid_utf8, self.data, self.spans()[keep])


def _utf8_len(d) -> int:
    return len(d) if isinstance(d, (bytes, bytearray)) else len(d.encode("utf-8", "surrogatepass"))


def _arrow_parts(arr) -> tuple[object, np.ndarray, object]:
    """(data buffer, offsets int32/int64 of len(arr) + 1, the array the buffers belong to)
    of an Arrow string/binary array without copying (view types are cast first)."""
    import pyarrow as pa

    t = arr.type
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    if not (large or pa.types.is_string(t) or pa.types.is_binary(t)):
        arr, large = arr.cast(pa.large_binary()), True
    dtype = np.int64 if large else np.int32
    _validity, offs, data = arr.buffers()[:3]
    if len(arr) == 0 or offs is None:
        return b"", np.zeros(1, dtype=dtype), arr
    offsets = np.frombuffer(offs, dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
    return (data if data is not None else b""), offsets, arr


def _arrow_batch(arr, locate: Callable[[int], str]) -> Batch:
    data, offsets, arr = _arrow_parts(arr)
    return Batch(None, locate, 0, data, offsets, arr)


def _open_binary(path: str):
    _, comp = _split_ext(path)
    try:
        return _COMPRESSION[comp](path, "rb") if comp else open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e


def _read_all(path: str) -> bytes:
    with _open_binary(path) as f:
        try:
            return f.read()
        except (OSError, EOFError, lzma.LZMAError) as e:
            raise CorpusInputError(f"{path}: cannot read: {e}") from e


def _batch_target(
    batch_bytes: int, total_bytes: int, min_batch_bytes: int = MIN_BATCH_BYTES
) -> int:
    """Text bytes per batch for a shard of ``total_bytes``: ``batch_bytes``, or less so that
    the shard makes PIPELINE_BATCHES batches (but not below ``min_batch_bytes``; never above
    ``batch_bytes``)."""
    return max(1, min(batch_bytes, max(min_batch_bytes, total_bytes // PIPELINE_BATCHES)))


def unescape_separator(sep: str) -> str:
    r"""CLI separators: ``\n``, ``\r``, ``\t``, ``\0`` and ``\\`` escapes; anything else as is."""
    table = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(0)), sep)


def _at(fmt: str, values: list[int]) -> Callable[[int], str]:
    return lambda i: fmt.format(values[i])


def read_text(
    path: str,
    separator: str | None,
    batch_bytes: int,
    *,
    min_batch_bytes: int = MIN_BATCH_BYTES,
) -> Iterator[Batch]:
    """A text file: one document, or documents split on ``separator`` as ``bytes.split``
    splits (a final empty piece, from a trailing separator, is dropped). Read whole; the
    documents are spans of the file's bytes, found by ``_find_all``."""
    data = _read_all(path)
    if separator is None:
        yield Batch(None, lambda i: f"{path}: document 0", 0, data, np.array([0, len(data)]))
        return
    sep = separator.encode("utf-8")
    if not sep:
        raise ValueError("text separator must not be empty")
    at = _find_all(data, sep)
    starts = np.concatenate([[0], at + len(sep)])
    ends = np.concatenate([at, [len(data)]])
    if len(starts) > 1 and starts[-1] == ends[-1]:
        starts, ends = starts[:-1], ends[:-1]
    spans = np.stack([starts, ends], axis=1).astype(np.int64)
    # Batches end after the document that brings them to >= the target of text.
    total = np.cumsum(ends - starts)
    batch_bytes = _batch_target(batch_bytes, int(total[-1]), min_batch_bytes)
    a = 0
    while a < len(spans):
        b = int(np.searchsorted(total, (total[a - 1] if a else 0) + batch_bytes, "left")) + 1
        b = min(max(b, a + 1), len(spans))
        yield Batch(None, _at(path + ": byte {}", starts[a:b].tolist()), 0, data, spans[a:b])
        a = b


def _find_all(data: bytes, sep: bytes) -> np.ndarray:
    """Start offsets of the non-overlapping occurrences of ``sep`` in ``data``, left to right
    (as ``bytes.split`` finds them), int64. Native (csrc/split.cpp: memchr, the GIL
    released, no file-sized temporary): 0.034 CPU ns per byte for the bench's separator where
    numpy took 0.20 warmed and 0.92 on fresh memory (2-core dev VM, 2026-11-25)."""
    from gputok import _core

    return _core.find_separators(data, sep)


JSONL_FAST_MAX_BYTES = 1 << 30


def read_jsonl(
    path: str,
    field: str,
    errors: str,
    batch_bytes: int,
    *,
    min_batch_bytes: int = MIN_BATCH_BYTES,
) -> Iterator[Batch]:
    """JSON Lines: one object per line, the document is string field ``field``. Blank lines
    are skipped. Invalid UTF-8 in a line follows ``errors`` (strict / replace / skip line).

    Fast path: uncompressed files up to JSONL_FAST_MAX_BYTES are parsed whole by Arrow's
    multi-threaded JSON reader. Anything it does not take cleanly (a missing or non-string
    field, duplicate keys, invalid UTF-8, lone surrogate escapes, odd JSON) sends the whole
    file down the line-by-line Python path, which decides and names the line; so both paths
    give the same documents or the same error.
    """
    fast = _read_jsonl_arrow(path, field, batch_bytes, min_batch_bytes)
    if fast is not None:
        yield from fast
        return
    yield from _read_jsonl_python(path, field, errors, batch_bytes)


def _read_jsonl_arrow(
    path: str, field: str, batch_bytes: int, min_batch_bytes: int = MIN_BATCH_BYTES
) -> Iterator[Batch] | None:
    """Batches from Arrow's JSON reader, or None where the Python path must decide. Every
    check happens before the first batch is handed on, so a fallback never restarts."""
    if _split_ext(path)[1] is not None:
        return None
    try:
        if os.path.getsize(path) > JSONL_FAST_MAX_BYTES:
            return None
        import pyarrow as pa
        import pyarrow.json as pj
    except (OSError, ImportError):
        return None
    opts = pj.ParseOptions(
        explicit_schema=pa.schema([(field, pa.string())]), unexpected_field_behavior="ignore"
    )
    try:
        # 16 MB blocks: a record longer than a block would send the file to the slow path.
        table = pj.read_json(
            path, read_options=pj.ReadOptions(block_size=16 << 20), parse_options=opts
        )
        col = table.column(field)
        if col.null_count:
            return None
        col.validate(full=True)  # UTF-8 of every value
    except (pa.ArrowException, OSError, ValueError):
        return None

    def batches() -> Iterator[Batch]:
        row = 0
        target = _batch_target(batch_bytes, col.nbytes, min_batch_bytes)
        for chunk in col.chunks:
            n = len(chunk)
            rows = max(1, int(target // max(1, chunk.nbytes // max(n, 1))))
            for a in range(0, n, rows):
                yield _arrow_batch(
                    chunk.slice(a, rows), lambda i, r=row + a: f"{path}: record {r + i}"
                )
            row += n

    return batches()


def _read_jsonl_python(path: str, field: str, errors: str, batch_bytes: int) -> Iterator[Batch]:
    docs, lines, size, skipped = [], [], 0, 0
    where = path + ":{}"
    with _open_binary(path) as f:
        lineno = 0
        while True:
            try:
                line = f.readline()
            except (OSError, EOFError, lzma.LZMAError) as e:
                raise CorpusInputError(f"{path}: cannot read after line {lineno}: {e}") from e
            if not line:
                break
            lineno += 1
            if not line.strip():
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                if errors == "strict":
                    raise CorpusInputError(
                        f"{path}:{lineno}: invalid UTF-8 at byte {e.start} of the line "
                        f"({line[e.start : e.start + 1]!r}); use --utf8-errors replace|skip"
                    ) from None
                if errors == "skip":
                    skipped += 1
                    continue
                text = line.decode("utf-8", "replace")
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                raise CorpusInputError(f"{path}:{lineno}: invalid JSON: {e}") from None
            if not isinstance(obj, dict):
                raise CorpusInputError(
                    f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}"
                )
            if field not in obj:
                keys = ", ".join(map(repr, list(obj)[:10])) or "none"
                raise CorpusInputError(f"{path}:{lineno}: no field {field!r} (fields: {keys})")
            doc = obj[field]
            if not isinstance(doc, str):
                raise CorpusInputError(
                    f"{path}:{lineno}: field {field!r} is {_json_type(doc)}, expected a string"
                )
            docs.append(doc)
            lines.append(lineno)
            size += len(line)
            if size >= batch_bytes:
                yield Batch(docs, _at(where, lines), skipped)
                docs, lines, size, skipped = [], [], 0, 0
    if docs or skipped:
        yield Batch(docs, _at(where, lines), skipped)


def _json_type(v) -> str:
    return {
        dict: "an object",
        list: "an array",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(v), type(v).__name__)


def read_parquet(
    path: str,
    column: str,
    batch_bytes: int,
    *,
    min_batch_bytes: int = MIN_BATCH_BYTES,
    decoder: Callable | None = None,
) -> Iterator[Batch]:
    """Parquet: the string (or binary) column ``column``; nulls are an error. Documents are
    handed on as buffers (bytes), so gputok validates their UTF-8 under the run's policy.

    Decoding (snappy, dictionary pages) is the cost here; it runs on the reader thread with
    the GIL released, overlapped with tokenizing and writing. ``decoder``: gputok's own page
    reader (``Core.parquet_decode``: snappy on the GPU, the values never copied; see
    ``_parquet_decoder``) for the row groups it can read, Arrow for the rest; None: Arrow.

    Every file is hostile: what its footer claims (a column chunk's place and size, its value
    count) is checked against the file and the row group before anything is read, the page
    reader allocates at most ``2 * batch_bytes`` per call (PAGE_READER_MIN_BYTES at least; more
    goes to Arrow) and hands
    spans on a batch at a time, and every error, pyarrow's included, is a CorpusInputError
    naming the file."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - optional dependency
        raise CorpusInputError(
            "reading Parquet needs pyarrow: pip install -r requirements/corpus.txt"
        ) from e
    try:
        # pre_buffer: each row group's column chunk is read in one coalesced request instead
        # of page by page through a buffered stream. A small gain: 2.23 -> 2.11 CPU s per GB
        # of text decoded (best of 6, the bench corpus in 4 shards, 2-core dev VM,
        # 2026-11-23); decoding itself (snappy, PLAIN byte arrays) is the rest.
        pf = pq.ParquetFile(path, pre_buffer=True)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise CorpusInputError(f"{path}: cannot read as Parquet: {e}") from e
    schema = pf.schema_arrow
    if column not in schema.names:
        raise CorpusInputError(
            f"{path}: no column {column!r} (columns: {', '.join(map(repr, schema.names))})"
        )
    typ = schema.field(column).type
    if not (
        pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_binary(typ)
        or pa.types.is_large_binary(typ)
        or str(typ) in ("string_view", "binary_view")
    ):
        raise CorpusInputError(f"{path}: column {column!r} is {typ}, expected a string column")
    try:
        yield from _read_parquet_groups(pf, path, column, batch_bytes, min_batch_bytes, decoder)
    except (OSError, ValueError, pa.ArrowException) as e:
        if isinstance(e, CorpusInputError):
            raise
        raise CorpusInputError(f"{path}: cannot read as Parquet: {e}") from e


def _read_parquet_groups(
    pf, path: str, column: str, batch_bytes: int, min_batch_bytes: int, decoder
) -> Iterator[Batch]:
    """read_parquet's row groups: runs of them through the page reader where it can read
    them, the rest through Arrow, in order."""
    md = pf.metadata
    rows = max(1, md.num_rows)
    # Uncompressed bytes per row, from the row-group metadata, sizes batches in text bytes.
    total = sum(max(0, md.row_group(i).total_byte_size) for i in range(md.num_row_groups))
    avg = max(1, total // rows)
    target = _batch_target(batch_bytes, total, min_batch_bytes)
    batch_rows = int(min(max(target // avg, 64), 1 << 20))
    leaf = _parquet_leaf(pf, column)
    with open(path, "rb") as f:
        # The footer read natively (never pyarrow's ColumnChunkMetaData: see
        # _core.parquet_footer) and checked against the file, on both decoders.
        metas = (
            _footer_chunks(f, path, leaf[0], column, md.num_row_groups)
            if leaf is not None
            else None
        )
        row, rg = 0, 0
        while rg < md.num_row_groups:
            upto = rg + 1
            if decoder is not None and metas is not None:
                run, upto = _row_group_run(metas, rg, batch_bytes)
                got = _decode_row_groups(f, run, leaf[1], decoder, path, row, batch_bytes)
                if got is None and len(run) > 1:  # one at a time, Arrow for what fails
                    run, upto = run[:1], rg + 1
                    got = _decode_row_groups(f, run, leaf[1], decoder, path, row, batch_bytes)
                if got is not None:
                    yield from _span_batches(got, target, path, row)
                    row += got.rows
                    rg = upto
                    continue
            # Arrow: use_threads=False: the column is decoded on this reader thread. One
            # column gives Arrow's pool nothing to split, so the pool only adds hand-offs
            # (2.2 -> 2.0 CPU s per GB, median of 6, dev VM, 2026-11-23; on the H200 host
            # within run-to-run noise) and, with a worker's shards all queueing on it, a
            # shared bottleneck; the shards in flight are the parallelism.
            for rb in pf.iter_batches(
                batch_size=batch_rows,
                row_groups=range(rg, upto),
                columns=[column],
                use_threads=False,
            ):
                arr = rb.column(0)
                if arr.null_count:
                    first = next(i for i, v in enumerate(arr.is_null().to_pylist()) if v)
                    raise CorpusInputError(
                        f"{path}: row {row + first}: column {column!r} is null, expected a string"
                    )
                yield _arrow_batch(arr, lambda i, r=row: f"{path}: row {r + i}")
                row += len(arr)
            rg = upto


# Compressed bytes of consecutive row groups that the page reader takes in one call, at most
# (and at most half the run's batch_bytes, so that a call's compressed and decompressed pages
# stay within 2 * batch_bytes). The GPU's snappy kernels are latency-bound per page, so a call
# of more pages costs less than the calls it replaces: one row group a call, 3-9 MB
# compressed, took 7-11 ms each; a file's row groups in one call, 10-13 MB, 13-17 ms (H200,
# 2026-11-23, before the pointer-jumping chain; one process 1.03 -> 1.09 GB/s of text,
# docs/benchmarks.md "Parquet pages"). The CPU reader groups the same way; there it only
# delays a shard's first batch (one GPU's corpus run: read waits 7.2 s against Arrow's 6.6,
# summed over shards, 2026-11-23 20:38): one row group per call on the CPU is untried. (Since
# 2026-11-24 a call takes 2.6-3.8 ms on the GPU.)
PAGE_READER_GROUP_BYTES = 32 << 20
# What the page reader decompresses (the footer's CompressionCodec); other codecs go to Arrow
# without being read twice.
PAGE_READER_CODECS = {0: "UNCOMPRESSED", 1: "SNAPPY"}
_BYTE_ARRAY = 6  # the footer's physical type of a string column
# The page reader's budget per call is 2 * max(batch_bytes, this): compressed pages and what
# they decompress to together. A floor, so that a run with small batches (tests, a tiny
# --batch-bytes) still reads ordinary row groups natively.
PAGE_READER_MIN_BYTES = 8 << 20


def _footer_chunks(f, path: str, leaf: int, column: str, pf_row_groups: int) -> list[dict] | None:
    """Each row group's chunk of column ``leaf`` as the footer claims it (see
    _core.parquet_footer), checked against the file: a chunk outside the file, or a value
    count that is not its row group's row count, fails the shard here (as Arrow fails it),
    before anything is allocated for it. None where this reader cannot read the footer
    (encrypted, or a layout it does not know): Arrow then reads the whole file."""
    from gputok import _core

    try:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - 8))
        tail = f.read(8)
        if size < 12 or tail[4:] != b"PAR1":
            return None
        flen = int.from_bytes(tail[:4], "little")
        if flen > size - 12:
            return None
        f.seek(size - 8 - flen)
        footer = f.read(flen)
    except OSError as e:
        raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e
    try:
        _rows, metas = _core.parquet_footer(footer, leaf)
    except (_core.ParquetUnsupported, _core.ParquetCorrupt):
        return None
    if len(metas) != pf_row_groups:
        return None
    for rg, m in enumerate(metas):
        if m["path"] != column or m["type"] != _BYTE_ARRAY:
            return None
        start = m["data_page_offset"]
        if m["dictionary_page_offset"] > 0:
            start = min(start, m["dictionary_page_offset"])
        m["start"] = start
        if start < 4 or m["compressed"] < 0 or m["compressed"] > size - start:
            raise CorpusInputError(
                f"{path}: row group {rg}: the footer puts column {column!r} at "
                f"[{start}, {start + m['compressed']}), outside the file's {size} bytes"
            )
        if m["num_values"] != m["rg_rows"]:
            raise CorpusInputError(
                f"{path}: row group {rg}: the footer gives column {column!r} "
                f"{m['num_values']} values for {m['rg_rows']} rows"
            )
    return metas


def _row_group_run(metas: list[dict], rg: int, batch_bytes: int) -> tuple[list, int]:
    """The column chunks of row groups rg, rg + 1, ... for one page-reader call (one codec
    it reads, up to PAGE_READER_GROUP_BYTES and batch_bytes / 2 compressed) and the row group
    after them; no chunks where it cannot read row group rg (then Arrow reads it)."""
    first = metas[rg]
    batch_bytes = max(batch_bytes, PAGE_READER_MIN_BYTES)
    limit = min(PAGE_READER_GROUP_BYTES, batch_bytes // 2)
    if first["codec"] not in PAGE_READER_CODECS or first["compressed"] > batch_bytes:
        return [], rg + 1
    run, total, k = [first], first["compressed"], rg + 1
    while k < len(metas) and metas[k]["codec"] == first["codec"]:
        if total + metas[k]["compressed"] > limit:
            break
        run.append(metas[k])
        total += metas[k]["compressed"]
        k += 1
    return run, k


def _parquet_leaf(pf, column: str) -> tuple[int, int] | None:
    """(index, maximum definition level) of ``column``'s leaf in the Parquet schema when
    gputok's page reader can read it (a flat BYTE_ARRAY column, no repetition), else None."""
    for i in range(len(pf.schema)):
        c = pf.schema.column(i)
        if c.path == column:
            ok = c.physical_type == "BYTE_ARRAY" and c.max_repetition_level == 0
            return (i, c.max_definition_level) if ok and c.max_definition_level <= 1 else None
    return None


def _decode_row_groups(
    f, run: list, max_def: int, decoder: Callable, path: str, row0: int, batch_bytes: int
):
    """The decoded pages of column chunks (one per row group, in order, as _footer_chunks
    gives them) through ``decoder`` in one call, or None where it cannot read them (another
    codec or encoding, more than the budget, or pages it finds malformed: Arrow then reads
    them and reports what is wrong). A null is an error here as on the Arrow path. The
    compressed bytes (checked against the file already) and the decompressed pages the
    headers claim stay within 2 * max(batch_bytes, PAGE_READER_MIN_BYTES) together."""
    from gputok import _core

    if not run:
        return None
    batch_bytes = max(batch_bytes, PAGE_READER_MIN_BYTES)
    refs, at = [], 0
    for c in run:
        refs.append((at, c["compressed"], c["num_values"]))
        at += c["compressed"]
    if at > batch_bytes:
        return None
    buf = bytearray(at)
    view = memoryview(buf)
    try:
        for c, (off, size, _) in zip(run, refs, strict=True):
            f.seek(c["start"])
            if f.readinto(view[off : off + size]) != size:
                return None
    except OSError as e:
        raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e
    args = (buf, PAGE_READER_CODECS[run[0]["codec"]], 0, max_def, refs, 2 * batch_bytes - at)
    try:
        try:
            return decoder(*args)
        except _core.DeviceMemoryError:
            if decoder is _core.parquet_decode:
                raise
            # The GPU is short of memory (other work on it, or a pool_limit below these row
            # groups): decode them on the CPU rather than fail the shard.
            return _core.parquet_decode(*args)
    except _core.ParquetNull as e:
        raise CorpusInputError(
            f"{path}: row {row0 + int(e.args[1])}: column {run[0]['path']!r} is "
            "null, expected a string"
        ) from None
    except (_core.ParquetUnsupported, _core.ParquetCorrupt):
        return None


def _span_batches(got, target: int, path: str, row0: int) -> Iterator[Batch]:
    """Batches of about ``target`` bytes of text over decoded row groups (spans into
    ``got.pages``; each batch keeps the whole buffer alive, no copy). The spans come a
    batch at a time, at most target / 16 rows (16 bytes of spans each): a file of 2^28
    empty or repeated values costs a batch's spans, not the row group's."""
    max_rows = max(1, target // 16)
    while True:
        r = got.row
        spans = got.spans(max_rows, target)
        if not len(spans):
            return
        yield Batch(None, lambda i, r=row0 + r: f"{path}: row {r + i}", 0, got.pages, spans)


def read_shard(
    path,
    fmt,
    *,
    field="text",
    text_separator=None,
    errors="strict",
    batch_bytes=DEFAULT_BATCH_BYTES,
    min_batch_bytes=MIN_BATCH_BYTES,
    parquet_decoder=None,
) -> Iterator[Batch]:
    """Batches of documents of one input file (see read_text / read_jsonl / read_parquet):
    at most ``batch_bytes`` of text each, and at least ``min_batch_bytes`` where the shard
    has that much (the line-by-line JSONL path cuts at ``batch_bytes`` only).
    ``parquet_decoder``: read_parquet's ``decoder``."""
    fmt = detect_format(path, fmt)
    mb = {"min_batch_bytes": min_batch_bytes}
    if fmt == "text":
        return read_text(path, text_separator, batch_bytes, **mb)
    if fmt == "jsonl":
        return read_jsonl(path, field, errors, batch_bytes, **mb)
    return read_parquet(path, field, batch_bytes, decoder=parquet_decoder, **mb)


PARQUET_DECODERS = ("auto", "gputok", "gputok-gpu", "arrow")


def _parquet_decoder(mode: str, tok) -> Callable | None:
    """read_parquet's ``decoder`` for the run's ``parquet_decoder`` setting and this worker's
    tokenizer: None for "arrow"; gputok's page reader on the CPU for "gputok"; for
    "gputok-gpu", and for "auto" (the default), the page reader with snappy on the
    tokenizer's GPU where it has one (else on the CPU). See docs/corpus.md, "Parquet
    decoding", for what each costs."""
    if mode == "arrow":
        return None
    core = getattr(tok, "_core", None)
    if mode in ("auto", "gputok-gpu") and core is not None and getattr(core, "on_gpu", False):
        return core.parquet_decode
    from gputok import _core

    return _core.parquet_decode


def _prefetch(it: Iterator, depth: int = 2) -> Iterator:
    """Run ``it`` in a thread, ``depth`` items ahead: parsing overlaps tokenization (which
    releases the GIL). Exceptions re-raise in the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def put(msg) -> bool:
        """Hand ``msg`` over unless the consumer has gone (then never block: exit)."""
        while not stop.is_set():
            try:
                q.put(msg, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run():
        try:
            for item in it:
                if not put(("ok", item)):
                    return
            put(("ok", done))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            put(("err", e))

    t = threading.Thread(target=run, name="gputok-corpus-reader", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "err":
                raise item
            if item is done:
                return
            yield item
    finally:
        stop.set()


# ---------------------------------------------------------------------------------------------
# Atomic files


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_name(path: str) -> str:
    return f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"


def atomic_write_bytes(path: str, data: bytes, *, fsync: bool = True) -> None:
    """Write ``path`` via a temporary name, fsync, rename, fsync the directory."""
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        _fsync_dir(os.path.dirname(os.path.abspath(path)))


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


# How shard files are hashed (the manifest records each file's digest under the algorithm's
# name, and a resume checks it with the same one). xxh3_128 (the xxhash package, `xxhsum -H2`
# on the command line) is the default: an integrity check against torn or altered files, at
# ~9 GB/s a core against sha256's ~1 (2-core dev VM; 1.3 GB/s on the H100 host, where sha256
# was the largest host cost of a GPU worker after the tokenizer: 0.75 CPU s per GB of text,
# docs/benchmarks.md 2026-11-24). sha256 stays for users who want a cryptographic digest.
HASHES = ("xxh3_128", "sha256")
DEFAULT_HASH = HASHES[0]


def new_hasher(algorithm: str):
    """A hashlib-style object (update, hexdigest) for one of HASHES."""
    if algorithm == "sha256":
        return hashlib.sha256()
    if algorithm == "xxh3_128":
        try:
            import xxhash
        except ImportError:
            raise CorpusError(
                "hashing shards with xxh3_128 needs the xxhash package: pip install -r "
                "requirements/corpus.txt (or choose --hash sha256)"
            ) from None
        return xxhash.xxh3_128()
    raise ValueError(f"hash must be one of {HASHES}, got {algorithm!r}")


def hash_file(path: str, algorithm: str, chunk: int = 8 << 20) -> str:
    h = new_hasher(algorithm)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _digest_of(rec: dict) -> tuple[str, str] | None:
    """(algorithm, digest) that a manifest file record carries, or None."""
    for algorithm in HASHES:
        if isinstance(rec.get(algorithm), str):
            return algorithm, rec[algorithm]
    return None


# Early writeback: every WRITEBACK_BYTES written to a durable shard file, the kernel is asked
# to start writing them to disk (POSIX_FADV_DONTNEED starts writeback of dirty pages without
# waiting, and drops pages already clean), so the disk works while the shard is still being
# tokenized and the final fsync waits only for the tail, instead of the whole shard's data
# queueing behind every other shard's fsync at its end. GPUTOK_CORPUS_WRITEBACK=0 turns it
# off (ablation, bench_corpus.py).
WRITEBACK_BYTES = 8 << 20


def _early_writeback() -> bool:
    return hasattr(os, "posix_fadvise") and os.environ.get("GPUTOK_CORPUS_WRITEBACK", "1") != "0"


class _HashedFile:
    """A temporary output file that hashes what it writes (``algorithm``, one of HASHES); with
    ``writeback``, it starts the disk writes of every WRITEBACK_BYTES as they come."""

    def __init__(self, final: str, writeback: bool, algorithm: str):
        self.final = final
        self.algorithm = algorithm
        self.h = new_hasher(algorithm)  # first: an unknown algorithm leaves no temp file
        self.tmp = _tmp_name(final)
        self.f = open(self.tmp, "wb")  # noqa: SIM115 - closed in commit/abort
        self.size = 0
        self.writeback = writeback
        self.kicked = 0  # bytes whose writeback has been started

    def write(self, arr: np.ndarray) -> None:
        mv = memoryview(np.ascontiguousarray(arr)).cast("B")
        self.h.update(mv)
        self.f.write(mv)
        self.size += mv.nbytes
        if self.writeback and self.size - self.kicked >= WRITEBACK_BYTES:
            self.f.flush()
            with contextlib.suppress(OSError):  # advice only: a refusal changes nothing
                os.posix_fadvise(
                    self.f.fileno(), self.kicked, self.size - self.kicked, os.POSIX_FADV_DONTNEED
                )
            self.kicked = self.size

    def finish(self, fsync: bool = True) -> dict:
        self.f.flush()
        if fsync:
            os.fsync(self.f.fileno())
        self.f.close()
        return {
            "file": os.path.basename(self.final),
            "bytes": self.size,
            self.algorithm: self.h.hexdigest(),
        }

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.f.close()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


# ---------------------------------------------------------------------------------------------
# Worker side

_TOKENIZERS: dict = {}
_TOK_LOCK = threading.Lock()


def _worker_device_id(spec: dict) -> int:
    """The GPU of this worker: 0 under dask-cuda (it sets CUDA_VISIBLE_DEVICES per worker,
    own GPU first); with a plain LocalCluster of one worker per GPU, the worker's name."""
    gpus = int(spec.get("gpus") or 0)
    if spec.get("device") == "cpu" or gpus <= 1 or not spec.get("gpu_by_worker_name"):
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


def sum_stages(results) -> dict:
    """Per stage (STAGES), the seconds that ``tokenize_shard`` results spent in it, summed
    (results of verified shards have none), and under "task" the written shards' whole task
    time: threads x wall time beyond it is scheduling and the run's own start and end."""
    results = [r for r in results if "stages" in r]
    out = {st: sum(r["stages"].get(st, 0.0) for r in results) for st in STAGES}
    out["task"] = sum(r.get("seconds", 0.0) for r in results)
    return out


_IO_READY = False


def _worker_io() -> None:
    """Give Arrow's decoding pool this process's cores, once. Dask's nanny starts workers
    with OMP_NUM_THREADS=1 (for BLAS), and Arrow sizes its CPU pool from that variable too,
    so Parquet shards were decoded on one thread per worker: on the H200 host (2026-11-22) a
    GPU worker spent 5.4 s of its shards' time waiting for the reader against 0.9 s
    encoding, and ran at 0.30 GB/s where the same pipeline in one process reached 0.76."""
    global _IO_READY
    if _IO_READY:
        return
    _IO_READY = True
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - optional dependency
        return
    if pa.cpu_count() < _cpu_count():
        pa.set_cpu_count(_cpu_count())


def _min_batch_bytes(spec: dict, tok) -> int:
    """The run's minimum batch, or by device: GPU_MIN_BATCH_BYTES on the GPU, else
    MIN_BATCH_BYTES."""
    if spec.get("min_batch_bytes") is not None:
        return max(1, int(spec["min_batch_bytes"]))
    return GPU_MIN_BATCH_BYTES if getattr(tok, "device", "cpu") == "cuda" else MIN_BATCH_BYTES


def warm_worker(device: str = "auto", gpus: int = 0, gpu_by_worker_name: bool = False) -> str:
    """Build this worker's tokenizer (so timings exclude it); returns its device."""
    spec = {"device": device, "gpus": gpus, "gpu_by_worker_name": gpu_by_worker_name}
    return _tokenizer(device, _worker_device_id(spec)).device


def _settings(spec: dict) -> dict:
    import gputok

    return {
        "tokenizer": "gpt2",
        "ranks_sha256": gputok.GPT2_RANKS_SHA256,
        "dtype": "uint16",
        "eot": bool(spec["eot"]),
        "eot_token": 50256,
        "input_format": spec["format"],
        "field": spec["field"] if spec["format"] != "text" else None,
        "text_separator": spec["text_separator"] if spec["format"] == "text" else None,
        "utf8_errors": spec["errors"],
        "skip_empty": bool(spec["skip_empty"]),
    }


def settings_digest(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def verify_entry(out_dir: str, entry: dict, *, hashes: bool = True) -> str | None:
    """None when the shard's files match ``entry`` (sizes, and the recorded digest, xxh3_128 or
    sha256, when ``hashes``), else why not."""
    for part in ("bin", "idx"):
        rec = entry.get(part) or {}
        if rec.get("file") != f"{entry.get('name')}.{part}":
            return f"{part}: the entry names {rec.get('file')!r}"
        path = os.path.join(out_dir, rec["file"])
        if not os.path.isfile(path):
            return f"{rec['file']} missing"
        if os.path.getsize(path) != rec.get("bytes"):
            return f"{rec['file']}: size {os.path.getsize(path)} != {rec.get('bytes')}"
        if hashes:
            recorded = _digest_of(rec)
            if recorded is None:
                return f"{rec['file']}: the entry has no hash"
            algorithm, digest = recorded
            if hash_file(path, algorithm) != digest:
                return f"{rec['file']}: {algorithm} differs from the manifest"
    return None


def _load_json(path: str):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None


def _source_stat(path: str) -> dict:
    try:
        st = os.stat(path)
    except OSError as e:
        raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e
    return {"source_bytes": st.st_size, "source_mtime_ns": st.st_mtime_ns}


def _resumable(spec: dict, entry: dict | None, settings_sha: str) -> bool:
    if not entry or entry.get("name") != spec["name"]:
        return False
    if entry.get("settings_sha256") != settings_sha or entry.get("source") != spec["source"]:
        return False
    return all(entry.get(k) == v for k, v in _source_stat(spec["path"]).items())


def _maybe_fault(spec: dict, stage: str) -> None:
    """Test hook (``_fault``): kill this worker process, or raise, once (marker file)."""
    fault = spec.get("_fault")
    if not fault or fault.get("shard") != spec["name"] or fault.get("stage", "mid") != stage:
        return
    marker = fault["marker"]
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    if fault["mode"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"injected failure in {spec['name']} ({stage})")


def _invalid_utf8(batch: Batch) -> list[tuple[int, int]]:
    """[(document, byte offset)] of the documents (bytes) that are not valid UTF-8."""
    out = []
    if batch.docs is not None:
        docs = enumerate(batch.docs)
    else:
        mv = memoryview(batch.data).cast("B")
        docs = ((i, mv[a:b]) for i, (a, b) in enumerate(batch.spans().tolist()))
    for i, d in docs:
        if not isinstance(d, str):
            try:
                str(d, "utf-8")
            except UnicodeDecodeError as e:
                out.append((i, e.start))
    return out


@dataclasses.dataclass
class Encoded:
    """One batch tokenized. ``packed``: ``ids`` is already the shard's uint16 (with EOT when
    asked) and ``offsets`` each document's end in it (gputok's ``encode_*_uint16``);
    otherwise ``ids`` are int32/int64 and ``offsets`` the n + 1 document bounds in them,
    packed on the writer thread (``_pack``; other tokenizers)."""

    ids: np.ndarray
    offsets: np.ndarray
    packed: bool
    documents: int
    text_bytes: int
    skipped_invalid_utf8: int
    skipped_empty: int

    def tokens(self, eot: int | None) -> int:
        """Tokens this batch adds to the shard."""
        return int(self.ids.size) + (0 if self.packed or eot is None else self.documents)


def _encode_batch(tok, batch: Batch, spec: dict, eot: int | None = None) -> Encoded:
    """Tokenize one batch. A buffer batch goes to ``encode_buffer_uint16`` (or
    ``encode_buffer_flat``: no Python object per document) where the tokenizer has it, else
    its documents are listed. gputok packs uint16 + ``eot`` itself; other tokenizers' ids
    are packed later (``_emit``). UTF-8 is checked by gputok itself; only when it refuses a
    batch are the documents scanned here, to name the place (strict) or drop the bad ones
    (skip)."""
    errors = spec["errors"]
    skipped_bad, skipped_empty = batch.skipped_invalid_utf8, 0
    lengths = batch.lengths()
    if spec["skip_empty"]:
        keep = np.flatnonzero(lengths)
        if len(keep) < len(lengths):
            skipped_empty = len(lengths) - len(keep)
            batch, lengths = batch.select(keep), lengths[keep]
    kw = {
        "num_threads": spec["num_threads"],
        "disallowed_special": (),
        "errors": "replace" if errors == "replace" else "strict",
    }
    buffer = batch.docs is None
    packed = hasattr(tok, "encode_buffer_uint16" if buffer else "encode_batch_uint16")
    if packed:
        kw["separator"] = eot
    for _attempt in range(2):
        try:
            if buffer and packed:
                ids, offsets = tok.encode_buffer_uint16(batch.data, batch.bounds, **kw)
            elif buffer and hasattr(tok, "encode_buffer_flat"):
                ids, offsets = tok.encode_buffer_flat(batch.data, batch.bounds, **kw)
            elif packed:
                ids, offsets = tok.encode_batch_uint16(batch.doc_list(), **kw)
            else:
                ids, offsets = tok.encode_batch_flat(batch.doc_list(), **kw)
            return Encoded(
                ids,
                offsets,
                packed,
                len(lengths),
                int(lengths.sum()),
                skipped_bad,
                skipped_empty,
            )
        except OverflowError as e:  # an id outside uint16 (gputok's packed output)
            raise CorpusError(f"{spec.get('path', '?')}: {e}") from None
        except ValueError:
            bad = _invalid_utf8(batch)
            if not bad or errors not in ("strict", "skip"):
                raise
            if errors == "strict":
                i, off = bad[0]
                raise CorpusInputError(
                    f"{batch.locate(i)}: invalid UTF-8 at byte {off} of the document; "
                    "use --utf8-errors replace|skip"
                ) from None
            keep = np.setdiff1d(np.arange(len(lengths)), [i for i, _ in bad])
            skipped_bad += len(lengths) - len(keep)
            batch, lengths = batch.select(keep), lengths[keep]
    raise AssertionError("unreachable: the second attempt has only valid UTF-8")


def _pack(
    ids: np.ndarray, offsets: np.ndarray, eot: int | None
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(uint16 tokens with ``eot`` after every document, each document's end in them, the
    first id outside uint16 or None). Documents are ``ids[offsets[i] - offsets[0] :
    offsets[i + 1] - offsets[0]]``. Packed by gputok's native packer (csrc/pack.cpp) with the
    GIL released: the numpy way (a range check, then a boolean-mask scatter) held it, so the
    writer threads of a worker running several shards took turns."""
    from gputok import _core

    if ids.dtype != np.int32:  # check before narrowing, which would wrap
        outside = (ids < 0) | (ids > MAX_ID)
        if ids.size and outside.any():
            return np.empty(0, "<u2"), np.empty(0, np.int64), int(ids[np.argmax(outside)])
    ids32 = np.ascontiguousarray(ids, dtype=np.int32)
    offs = np.ascontiguousarray(offsets, dtype=np.int64)
    out, ends, bad = _core.pack_uint16(ids32, offs, -1 if eot is None else int(eot))
    return out, ends, (None if bad < 0 else int(ids32[bad]))


def _emit(enc: Encoded, eot, base: int, bin_f: _HashedFile, idx_f: _HashedFile, path: str):
    """Write one batch as uint16 (+ <|endoftext|> after each document; packed here unless
    the tokenizer did it), with its document ends shifted by ``base``, the shard's tokens so
    far. Runs on the writer thread."""
    out, ends = enc.ids, enc.offsets
    if not enc.packed:
        out, ends, bad = _pack(enc.ids, enc.offsets, eot)
        if bad is not None:
            raise CorpusError(f"{path}: token id {bad} does not fit uint16")
    bin_f.write(out)
    idx_f.write((ends + base).astype("<i8", copy=False))


def tokenize_shard(spec: dict) -> dict:
    """Tokenize one input file into ``spec['out_dir']/spec['name'].{bin,idx,json}`` (the Dask
    task). Returns ``{"entry": manifest entry, "status": "written"|"verified", ...}``. Skips the
    work when an existing entry still matches the settings, the source's size and mtime, and
    the files' sha256."""
    t0 = time.perf_counter()
    out_dir, name = spec["out_dir"], spec["name"]
    settings = _settings(spec)
    settings_sha = settings_digest(settings)
    entry_path = os.path.join(out_dir, f"{name}.json")
    # Temporary files of this shard are from a killed earlier attempt: never complete.
    # (os.scandir + str tests, not glob: fnmatch over the whole directory per shard held the
    # GIL for ~0.3 s per 128-shard run on the H200 x2, py-spy, 2026-11-22.)
    prefix = name + "."
    with os.scandir(out_dir) as it:
        stale = [e.path for e in it if e.name.startswith(prefix) and ".tmp-" in e.name]
    for path in stale:
        with contextlib.suppress(OSError):
            os.unlink(path)
    for old in (_load_json(entry_path), spec.get("manifest_entry")):
        if _resumable(spec, old, settings_sha) and verify_entry(out_dir, old) is None:
            if not os.path.exists(entry_path):  # kept only in manifest.json: restore it
                atomic_write_bytes(entry_path, _json_bytes(old), fsync=spec.get("fsync", True))
            return {"entry": old, "status": "verified", "seconds": time.perf_counter() - t0}

    # Redo: first make sure nothing of the old shard can pass for complete.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(entry_path)

    _worker_io()
    device_id = _worker_device_id(spec)
    tok = _tokenizer(spec["device"], device_id)
    source = _source_stat(spec["path"])
    eot = 50256 if spec["eot"] else None
    writeback = spec.get("fsync", True) and _early_writeback()
    algorithm = spec.get("hash", DEFAULT_HASH)
    bin_f = _HashedFile(os.path.join(out_dir, f"{name}.bin"), writeback, algorithm)
    idx_f = _HashedFile(os.path.join(out_dir, f"{name}.idx"), writeback, algorithm)
    docs_n = tokens_n = text_bytes = skipped_bad = skipped_empty = 0
    # Seconds this task's thread spent in each stage: waiting for the reader, encoding,
    # waiting for the writer, fsync + rename. Where a run's time goes (bench_corpus.py).
    stages = dict.fromkeys(STAGES, 0.0)
    try:
        idx_f.write(np.zeros(1, dtype="<i8"))
        batches = read_shard(
            spec["path"],
            spec["format"],
            field=spec["field"],
            text_separator=spec["text_separator"],
            errors=spec["errors"],
            batch_bytes=spec["batch_bytes"],
            min_batch_bytes=_min_batch_bytes(spec, tok),
            parquet_decoder=_parquet_decoder(spec.get("parquet_decoder", "auto"), tok),
        )
        # Three stages overlap: the reader thread parses batch k+1, this thread tokenizes
        # batch k (gputok releases the GIL), the writer thread packs and writes batch k-1.
        reader = _prefetch(batches)
        with (
            contextlib.closing(reader),  # on errors too: stops the reader thread now
            ThreadPoolExecutor(1, thread_name_prefix="gputok-corpus-writer") as writer,
        ):
            pending: collections.deque = collections.deque()
            k = -1
            while True:
                t_wait = time.perf_counter()
                batch = next(reader, None)
                t_got = time.perf_counter()
                stages["read_wait"] += t_got - t_wait
                if batch is None:
                    break
                k += 1
                enc = _encode_batch(tok, batch, spec, eot)
                stages["encode"] += time.perf_counter() - t_got
                del batch  # its buffers can go once encoded
                skipped_bad += enc.skipped_invalid_utf8
                skipped_empty += enc.skipped_empty
                pending.append(writer.submit(_emit, enc, eot, tokens_n, bin_f, idx_f, spec["path"]))
                tokens_n += enc.tokens(eot)
                docs_n += enc.documents
                text_bytes += enc.text_bytes
                t_wait = time.perf_counter()
                while len(pending) > 1:
                    pending.popleft().result()
                stages["write_wait"] += time.perf_counter() - t_wait
                if k == 0 and spec.get("_fault"):
                    pending.popleft().result()
                    bin_f.f.flush()  # so the injected kill leaves a real partial temp file
                    idx_f.f.flush()
                    _maybe_fault(spec, "mid")
            t_wait = time.perf_counter()
            while pending:
                pending.popleft().result()
            stages["write_wait"] += time.perf_counter() - t_wait
        t_fin = time.perf_counter()
        durable = spec.get("fsync", True)
        bin_rec, idx_rec = bin_f.finish(durable), idx_f.finish(durable)
        os.replace(bin_f.tmp, bin_f.final)
        os.replace(idx_f.tmp, idx_f.final)
        # No directory fsync here: the entry's (atomic_write_bytes, below) makes these two
        # renames durable with its own. Until then a crash can lose them, but the entry does
        # not exist yet, and an entry that survives without them fails verification (sizes,
        # sha256) and the shard is redone. One fewer journal commit per shard.
        stages["finish"] += time.perf_counter() - t_fin
    except BaseException:
        bin_f.abort()
        idx_f.abort()
        raise
    entry = {
        "name": name,
        "source": spec["source"],
        **source,
        "settings_sha256": settings_sha,
        "documents": docs_n,
        "tokens": tokens_n,
        "text_bytes": text_bytes,
        "skipped_invalid_utf8": skipped_bad,
        "skipped_empty": skipped_empty,
        "bin": bin_rec,
        "idx": idx_rec,
    }
    _maybe_fault(spec, "before_entry")
    atomic_write_bytes(entry_path, _json_bytes(entry), fsync=spec.get("fsync", True))
    return {
        "entry": entry,
        "status": "written",
        "seconds": time.perf_counter() - t0,
        "device": tok.device,
        "stages": stages,
    }


# ---------------------------------------------------------------------------------------------
# Driver side


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


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


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
    here): both are set for the start, and the environment is put back afterwards."""
    import dask

    env = _worker_spawn_env()
    old = {k: os.environ.get(k) for k in env}
    try:
        os.environ.update(env)
        with dask.config.set(_worker_spawn_config()):
            yield
    finally:
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
            cluster = LocalCUDACluster(n_workers=n, threads_per_worker=tpw, **dash)
            return Client(cluster), cluster, gpus, False
        opts.log(f"{n} plain workers on {gpus} GPU(s), each GPU chosen by worker name")
        cluster = LocalCluster(
            n_workers=n, threads_per_worker=tpw, processes=opts.processes, **dash
        )
        return Client(cluster), cluster, gpus, True
    n = opts.n_workers or max(1, min(_cpu_count(), 8))
    cluster = LocalCluster(n_workers=n, threads_per_worker=tpw, processes=opts.processes, **dash)
    return Client(cluster), cluster, 0, False


def plan_shards(inputs, fmt: str = "auto", exclude=None) -> tuple[str, list[str], str, list[str]]:
    """(base directory, sorted input paths, their one format, output shard names)."""
    base, paths = find_shards(inputs, fmt, exclude)
    formats = {detect_format(p, fmt) for p in paths}
    if len(formats) > 1:
        raise CorpusInputError(
            f"inputs mix formats {sorted(formats)}; pass one format per run (--format)"
        )
    width = max(5, len(str(len(paths) - 1)))
    return base, paths, formats.pop(), [f"shard_{i:0{width}d}" for i in range(len(paths))]


def shard_spec(
    common: dict,
    path: str,
    base: str,
    name: str,
    out_dir: str,
    *,
    device: str = "auto",
    num_threads: int = 0,
    gpus: int = 0,
    gpu_by_worker_name: bool = False,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    min_batch_bytes: int | None = None,
    fsync: bool = True,
    parquet_decoder: str = "auto",
    hash: str = DEFAULT_HASH,  # noqa: A002 - mirrors the CLI option
    manifest_entry: dict | None = None,
    _fault: dict | None = None,
) -> dict:
    """The task description ``tokenize_shard`` takes (plain data, pickled to workers).
    ``common``: format, field, text_separator, eot, errors, skip_empty."""
    return {
        **common,
        "path": path,
        "source": os.path.relpath(path, base),
        "name": name,
        "out_dir": out_dir,
        "device": device,
        "num_threads": int(num_threads),
        "gpus": gpus,
        "gpu_by_worker_name": gpu_by_worker_name,
        "batch_bytes": int(batch_bytes),
        "min_batch_bytes": None if min_batch_bytes is None else int(min_batch_bytes),
        "fsync": bool(fsync),
        "parquet_decoder": parquet_decoder,
        "hash": hash,
        "manifest_entry": manifest_entry,
        "_fault": _fault,
    }


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
    """Tokenize every input shard on a Dask cluster; see the module doc and docs/corpus.md.

    inputs: file(s), directories and/or glob patterns. format: "auto" (by extension), "text",
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
    log = log or (lambda msg: print(msg, flush=True))
    if parquet_decoder not in PARQUET_DECODERS:
        raise ValueError(
            f"parquet_decoder must be one of {PARQUET_DECODERS}, got {parquet_decoder!r}"
        )
    if errors not in ERROR_POLICIES:
        raise ValueError(f"errors must be one of {ERROR_POLICIES}, got {errors!r}")
    new_hasher(hash)  # an unknown name, or xxhash missing here, fails before any work
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    t_start = time.perf_counter()
    out_dir = os.path.abspath(os.fspath(out_dir))
    base, paths, fmt, names = plan_shards(inputs, format, exclude=out_dir)
    common = {
        "format": fmt,
        "field": field,
        "text_separator": text_separator,
        "eot": eot,
        "errors": errors,
        "skip_empty": skip_empty,
    }
    settings = _settings(common)
    previous = _check_out_dir(out_dir, set(names), settings, overwrite)

    import distributed

    own = client is None
    cluster = None
    gpus, by_name = getattr(client, "_gputok_gpu_info", (0, False))
    if own:
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
        client, cluster, gpus, by_name = _make_client(opts)
    elif threads_per_worker is not None or workers_per_gpu is not None:
        log("threads_per_worker / workers_per_gpu: ignored, the given client keeps its workers")
    try:
        info = client.scheduler_info(n_workers=-1).get("workers", {})
        workers = max(1, len(info))
        slots = max(workers, sum(int(w.get("nthreads") or 1) for w in info.values()))
        if num_threads is None:
            # Each Dask thread makes one tokenizer call at a time: split the cores among all
            # of them (no oversubscription). On a remote cluster 0 = all cores; there calls
            # of more than 1 thread take turns on the tokenizer's pool.
            num_threads = max(1, _cpu_count() // slots) if cluster is not None else 0
        if dashboard and client.dashboard_link:
            log(f"dask dashboard: {client.dashboard_link}")
        specs = [
            shard_spec(
                common,
                p,
                base,
                n,
                out_dir,
                device=device,
                num_threads=num_threads,
                gpus=gpus,
                gpu_by_worker_name=by_name,
                batch_bytes=batch_bytes,
                min_batch_bytes=min_batch_bytes,
                fsync=fsync,
                parquet_decoder=parquet_decoder,
                hash=hash,
                manifest_entry=previous.get(n),
                _fault=_fault,
            )
            for p, n in zip(paths, names, strict=True)
        ]
        log(
            f"tokenizing {len(specs)} {fmt} shard(s) from {base} -> {out_dir} "
            f"on {workers} worker(s), {slots} shard(s) at a time"
        )
        token = secrets.token_hex(4)
        futures = client.map(
            tokenize_shard, specs, key=[f"tokenize_shard-{n}-{token}" for n in names], pure=False
        )
        if progress:
            # A bar redrawn every 100 ms suits a terminal; a log file gets one a second. (The
            # interval also delays noticing the end, so it cannot be long.)
            interval = "100ms" if sys.stdout.isatty() else "1s"
            distributed.progress(futures, multi=False, notebook=False, interval=interval)
            print(flush=True)
        distributed.wait(futures)
        # The finished shards' results in one gather: one round trip, where a result() per
        # future took ~2.7 ms each (0.17 s of a 0.9 s run of 64 shards, 2-core dev VM,
        # 2026-11-23). Failures are rare and fetched one by one.
        done = [(n, f) for n, f in zip(names, futures, strict=True) if f.status == "finished"]
        results = dict(zip([n for n, _ in done], client.gather([f for _, f in done]), strict=True))
        failures = []
        for n, fut in zip(names, futures, strict=True):
            if n not in results:
                exc = fut.exception()
                failures.append(
                    f"{n} ({specs[names.index(n)]['source']}): {type(exc).__name__}: {exc}"
                )
    finally:
        if own:
            _close_quietly(client, cluster)

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


def build_manifest(
    settings: dict, base: str, fmt: str, entries: list[dict], *, complete: bool
) -> dict:
    """manifest.json: deterministic (no times or hosts), so reruns can be compared."""

    def total(key):
        vals = [e.get(key) for e in entries]
        return None if any(v is None for v in vals) else sum(vals)

    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "layout": {
            "bin": "raw little-endian uint16 token ids, no header",
            "idx": "raw little-endian int64 offsets into .bin, documents + 1, from 0",
        },
        "settings": settings,
        "settings_sha256": settings_digest(settings),
        "input_root": base,
        "complete": complete,
        "totals": {
            "shards": len(entries),
            "documents": total("documents"),
            "tokens": total("tokens"),
            "text_bytes": total("text_bytes"),
            "skipped_invalid_utf8": total("skipped_invalid_utf8"),
            "skipped_empty": total("skipped_empty"),
        },
        "shards": entries,
    }


# ---------------------------------------------------------------------------------------------
# Reading the output


def load_shard(out_dir, name: str) -> tuple[np.memmap, np.memmap]:
    """(tokens uint16, offsets int64) of one shard, memory-mapped."""
    out_dir = os.fspath(out_dir)
    tokens = np.memmap(os.path.join(out_dir, f"{name}.bin"), dtype="<u2", mode="r")
    offsets = np.memmap(os.path.join(out_dir, f"{name}.idx"), dtype="<i8", mode="r")
    return tokens, offsets


def verify_corpus(out_dir, *, hashes: bool = True) -> list[str]:
    """Problems found checking every manifest entry against its files ([] = all good)."""
    out_dir = os.fspath(out_dir)
    man = _load_json(os.path.join(out_dir, MANIFEST))
    if man is None:
        return [f"{out_dir}: no readable {MANIFEST}"]
    problems = []
    if not man.get("complete"):
        problems.append("manifest says the run is not complete")
    for e in man.get("shards", []):
        why = verify_entry(out_dir, e, hashes=hashes)
        if why:
            problems.append(f"{e.get('name')}: {why}")
            continue
        tokens, offsets = load_shard(out_dir, e["name"])
        if (
            len(offsets) != e["documents"] + 1
            or int(offsets[0]) != 0
            or int(offsets[-1]) != len(tokens)
            or len(tokens) != e["tokens"]
        ):
            problems.append(f"{e['name']}: index does not match the token file")
    return problems
