"""Readers of text and JSONL shards (Parquet: parquet.py); read_shard picks one by format.
Each yields Batches of about batch_bytes of text."""

from __future__ import annotations

import json
import lzma
import os
from collections.abc import Iterator

import numpy as np

from ._common import DEFAULT_BATCH_BYTES, MIN_BATCH_BYTES, CorpusInputError, import_arrow
from .batch import Batch, _arrow_batch, _at, _batch_target, native_read_bound
from .discovery import _COMPRESSION, _split_ext, detect_format
from .parquet import MAX_EXPANSION, read_parquet


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
    (as ``bytes.split`` finds them), int64. Native (csrc/corpus/split.cpp: memchr, the GIL
    released, no file-sized temporary): 0.034 CPU ns per byte for the bench's separator where
    numpy took 0.20 warmed and 0.92 on fresh memory (2-core dev VM, 2026-11-25)."""
    from gputok import _corpus_native

    return _corpus_native.find_separators(data, sep)


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

    Fast paths, for uncompressed files up to JSONL_FAST_MAX_BYTES: gputok's native reader
    (csrc/corpus/read_jsonl.cpp), which takes the field out of every record it parses the
    way json.loads does and hands anything else back; then Arrow's multi-threaded JSON
    reader. Anything neither takes cleanly (a missing or non-string field, duplicate keys,
    invalid UTF-8, lone surrogate escapes, odd JSON) sends the whole file down the
    line-by-line Python path, which decides and names the line; so every path gives the same
    documents or the same error.
    """
    fast = _read_jsonl_native(path, field, batch_bytes, min_batch_bytes)
    if fast is None:
        fast = _read_jsonl_arrow(path, field, batch_bytes, min_batch_bytes)
    if fast is not None:
        yield from fast
        return
    yield from _read_jsonl_python(path, field, errors, batch_bytes)


# Arrow parses a file's blocks on its CPU pool, one block per thread: blocks of size / cores
# (within these bounds) keep every core busy on one file, where fixed 16 MB blocks gave a 22 MB
# file two uneven blocks (16 + 6) and 16 cores two threads. A record longer than a block makes
# Arrow refuse the file ("straddling"): it is read again with blocks 8x larger, up to the max.
JSONL_MIN_BLOCK_BYTES = 1 << 20
JSONL_MAX_BLOCK_BYTES = 64 << 20


def _jsonl_block_bytes(size: int, cores: int) -> int:
    """Arrow's block size for a JSONL file of ``size`` bytes read on ``cores`` threads."""
    return max(JSONL_MIN_BLOCK_BYTES, min(JSONL_MAX_BLOCK_BYTES >> 2, -(-size // max(1, cores))))


def _jsonl_batch_rows(n: int, nbytes: int, batch_bytes: int, min_batch_bytes: int) -> int:
    """Records a batch of a JSONL file read whole (``n`` records, ``nbytes`` of text)."""
    target = _batch_target(batch_bytes, nbytes, min_batch_bytes)
    return max(1, int(target // max(1, nbytes // max(n, 1))))


def _read_jsonl_native(
    path: str, field: str, batch_bytes: int, min_batch_bytes: int = MIN_BATCH_BYTES
) -> Iterator[Batch] | None:
    """Batches from the native reader, or None where it does not decide the file (or cannot
    read it: the next reader names the error). The file is read whole before the first
    batch, as Arrow's path reads it."""
    if _split_ext(path)[1] is not None:
        return None
    try:
        size = os.path.getsize(path)
        name = field.encode("utf-8")
        from gputok import _corpus_native
    except (OSError, UnicodeEncodeError, ImportError):
        return None
    if size > JSONL_FAST_MAX_BYTES:
        return None
    got = _corpus_native.read_jsonl_files([path], name, **native_read_bound(size))
    data, spans, failed = got[0], got[1], got[5]
    if failed != -1:
        return None

    def batches() -> Iterator[Batch]:
        rows = _jsonl_batch_rows(len(spans), len(data), batch_bytes, min_batch_bytes)
        for a in range(0, len(spans), rows):
            yield Batch(
                None, lambda i, r=a: f"{path}: record {r + i}", 0, data, spans[a : a + rows]
            )

    return batches()


def _read_jsonl_arrow(
    path: str,
    field: str,
    batch_bytes: int,
    min_batch_bytes: int = MIN_BATCH_BYTES,
    block_bytes: int | None = None,
) -> Iterator[Batch] | None:
    """Batches from Arrow's JSON reader, or None where the Python path must decide. Every
    check happens before the first batch is handed on, so a fallback never restarts.
    ``block_bytes``: Arrow's first block size (default: _jsonl_block_bytes)."""
    if _split_ext(path)[1] is not None:
        return None
    try:
        size = os.path.getsize(path)
        if size > JSONL_FAST_MAX_BYTES:
            return None
        pa = import_arrow()
        import pyarrow.json as pj
    except (OSError, ImportError):
        return None
    opts = pj.ParseOptions(
        explicit_schema=pa.schema([(field, pa.string())]), unexpected_field_behavior="ignore"
    )
    block = block_bytes or _jsonl_block_bytes(size, pa.cpu_count())
    try:
        while True:
            try:
                table = pj.read_json(
                    path, read_options=pj.ReadOptions(block_size=block), parse_options=opts
                )
                break
            except pa.ArrowInvalid as e:
                if "straddl" not in str(e) or block >= min(size, JSONL_MAX_BLOCK_BYTES):
                    raise
                block *= 8
        # One buffer for the whole column (a copy, ~0.1 ns per byte): batches as large as
        # the target, not cut at the blocks' chunks.
        col = table.column(field).combine_chunks()
        if col.null_count:
            return None
        col.validate(full=True)  # UTF-8 of every value
    except (pa.ArrowException, OSError, ValueError):
        return None

    def batches() -> Iterator[Batch]:
        rows = _jsonl_batch_rows(len(col), col.nbytes, batch_bytes, min_batch_bytes)
        for a in range(0, len(col), rows):
            yield _arrow_batch(col.slice(a, rows), lambda i, r=a: f"{path}: record {r + i}")

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
                        f"({line[e.start : e.start + 1]!r}); rerun with --utf8-errors replace|skip and --overwrite"
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
    max_expansion=MAX_EXPANSION,
) -> Iterator[Batch]:
    """Batches of documents of one input file (see read_text / read_jsonl / read_parquet):
    at most ``batch_bytes`` of text each, and at least ``min_batch_bytes`` where the shard
    has that much (the line-by-line JSONL path cuts at ``batch_bytes`` only).
    ``parquet_decoder``, ``max_expansion``: read_parquet's ``decoder``, ``max_expansion``."""
    fmt = detect_format(path, fmt)
    mb = {"min_batch_bytes": min_batch_bytes}
    if fmt == "text":
        return read_text(path, text_separator, batch_bytes, **mb)
    if fmt == "jsonl":
        return read_jsonl(path, field, errors, batch_bytes, **mb)
    return read_parquet(
        path, field, batch_bytes, decoder=parquet_decoder, max_expansion=max_expansion, **mb
    )


def check_field(path: str, fmt: str, field: str) -> None:
    """Raises CorpusInputError when the first document of ``path`` (JSONL: the first object;
    Parquet: the schema) has no ``field``: a run checks its first input so before any cluster
    starts, instead of failing every shard on its workers. A file that cannot be read here is
    left to its shard."""
    if fmt == "parquet":
        names = _parquet_names(path)
        if names is None:
            return
        if field not in names:
            raise CorpusInputError(
                f"{path}: no column {field!r} (columns: {', '.join(map(repr, names))})"
            )
    elif fmt == "jsonl":
        try:
            with _open_binary(path) as f:
                first = next(((n, ln) for n, ln in enumerate(f, 1) if ln.strip()), None)
            if first is None:
                return
            lineno, obj = first[0], json.loads(first[1])
        except (OSError, ValueError, CorpusInputError):
            return
        if isinstance(obj, dict) and field not in obj:
            keys = ", ".join(map(repr, list(obj)[:10])) or "none"
            raise CorpusInputError(f"{path}:{lineno}: no field {field!r} (fields: {keys})")


def _parquet_names(path: str) -> list[str] | None:
    """The top-level column names of a Parquet file: from its footer natively, else (a footer
    that does not parse here) pyarrow's schema; None where neither reads it (the shard's
    reader names what is wrong). Natively, a run of a few plain files needs no pyarrow."""
    from gputok import _corpus_native as native

    from .parquet_chunks import read_footer

    try:
        with open(path, "rb") as f:
            footer, _size = read_footer(f, path)
        if footer is not None:
            names = native.parquet_schema(footer, "")[0]
            return [n.decode("utf-8", "replace") for n in names]
    except (OSError, CorpusInputError, native.ParquetCorrupt):
        pass
    try:
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    except Exception:  # noqa: BLE001 - the shard's reader names what is wrong
        return None


def check_field_sample(paths: list[str], fmt: str, field: str) -> None:
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
