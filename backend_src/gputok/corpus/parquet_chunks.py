"""Parquet footers and gputok's page reader, for corpus/parquet.py: a file's column chunks as
its footer claims them (read natively, checked against the file), the layout of a file whose
footer alone says it can be read without pyarrow, and the page reader's calls."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator

from ._common import CorpusInputError
from .batch import Batch

# Compressed bytes of consecutive row groups that the page reader takes in one call, at most
# (and at most half the run's batch_bytes, so that a call's compressed and decompressed pages
# stay within 2 * batch_bytes). The GPU's snappy kernels are latency-bound per page, so a call
# of more pages costs less than the calls it replaces: one row group a call, 3-9 MB
# compressed, took 7-11 ms each; a file's row groups in one call, 10-13 MB, 13-17 ms (H200,
# 2026-11-23, before the pointer-jumping chain; one process 1.03 -> 1.09 GB/s of text,
# bench/results/2026-11-25-benchmarks-history.md "Parquet pages"). The CPU reader groups the same way; there it only
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
    while k < len(metas) and metas[k]["codec"] == first["codec"] and not metas[k]["empty"]:
        if total + metas[k]["compressed"] > limit:
            break
        run.append(metas[k])
        total += metas[k]["compressed"]
        k += 1
    return run, k


@dataclasses.dataclass
class Layout:
    """A file's row groups as its footer gives them, for _read_parquet_groups: their row
    counts and sizes (total_byte_size), the column's leaf (index, maximum definition level;
    None where the page reader cannot read it), its chunks (_footer_chunks; None: Arrow reads
    the file) and ``arrow()``, the file as a pyarrow ParquetFile, opened on first use."""

    rows: list
    sizes: list
    num_rows: int
    leaf: tuple | None
    metas: list | None
    arrow: Callable


def native_layout(f, path: str, column: str, open_arrow: Callable) -> Layout | None:
    """The Layout of the open file ``f`` from its footer alone (no pyarrow), where the footer
    reads natively and ``column`` is a plain string column (_corpus_native.parquet_schema's
    verdict, parquet.h parquet_plain_string) whose chunks the page reader takes; None for
    anything else (pyarrow then opens the file and decides, as it always did). Chunks outside
    the file fail the shard (_footer_chunks)."""
    from gputok import _corpus_native as native

    footer, size = read_footer(f, path)
    if footer is None:
        return None
    try:
        leaf, rep, plain = (native.parquet_schema(footer, column)[k] for k in (1, 3, 6))
        if not plain:
            return None
        num_rows, metas = native.parquet_footer(footer, leaf)
    except (native.ParquetUnsupported, native.ParquetCorrupt):
        return None
    if not metas or not check_chunks(metas, path, column, size):
        return None
    rows = [m["rg_rows"] for m in metas]
    sizes = [m["rg_bytes"] for m in metas]
    return Layout(rows, sizes, num_rows, (leaf, 1 if rep == 1 else 0), metas, open_arrow)


def read_footer(f, path: str) -> tuple[bytes | None, int]:
    """(the FileMetaData bytes of the open file ``f``, its size); None for the bytes where its
    tail is not a Parquet footer (Arrow then says what is wrong)."""
    try:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - 8))
        tail = f.read(8)
        if size < 12 or tail[4:] != b"PAR1":
            return None, size
        flen = int.from_bytes(tail[:4], "little")
        if flen > size - 12:
            return None, size
        f.seek(size - 8 - flen)
        return f.read(flen), size
    except OSError as e:
        raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e


def _footer_chunks(f, path: str, leaf: int, column: str, pf_row_groups: int) -> list[dict] | None:
    """Each row group's chunk of column ``leaf`` as the footer claims it (see
    _corpus_native.parquet_footer), checked against the file (check_chunks), before anything
    is allocated for it. None where this reader cannot read the footer (encrypted, or a
    layout it does not know): Arrow then reads the whole file."""
    from gputok import _corpus_native as native

    footer, size = read_footer(f, path)
    if footer is None:
        return None
    try:
        _rows, metas = native.parquet_footer(footer, leaf)
    except (native.ParquetUnsupported, native.ParquetCorrupt):
        return None
    if len(metas) != pf_row_groups:
        return None
    return metas if check_chunks(metas, path, column, size) else None


def check_chunks(metas: list[dict], path: str, column: str, size: int) -> bool:
    """Marks each chunk's start (and empty chunks) in ``metas``; False where a chunk is not
    the column's BYTE_ARRAY chunk (Arrow reads the file). A chunk outside the file, or a
    value count that is not its row group's row count, fails the shard here (as Arrow fails
    it)."""
    for rg, m in enumerate(metas):
        if m["path"] != column or m["type"] != _BYTE_ARRAY:
            return False
        m["empty"] = m["rg_rows"] == 0 and m["num_values"] == 0
        if m["empty"]:  # nothing to read: pyarrow writes such a chunk at offset 0
            continue
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
    return True


def _decode_row_groups(
    f, run: list, max_def: int, decoder: Callable, path: str, row0: int, batch_bytes: int
):
    """The decoded pages of column chunks (one per row group, in order, as _footer_chunks
    gives them) through ``decoder`` in one call, or None where it cannot read them (another
    codec or encoding, more than the budget, or pages it finds malformed: Arrow then reads
    them and reports what is wrong). A null is an error here as on the Arrow path. The
    compressed bytes (checked against the file already) and the decompressed pages the
    headers claim stay within 2 * max(batch_bytes, PAGE_READER_MIN_BYTES) together."""
    import gputok
    from gputok import _corpus_native as native

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
        except gputok.DeviceMemoryError:
            if decoder is native.parquet_decode:
                raise
            # The GPU is short of memory (other work on it, or a pool_limit below these row
            # groups): decode them on the CPU rather than fail the shard.
            return native.parquet_decode(*args)
    except native.ParquetNull as e:
        raise CorpusInputError(
            f"{path}: row {row0 + int(e.args[1])}: column {run[0]['path']!r} is "
            "null, expected a string"
        ) from None
    except (native.ParquetUnsupported, native.ParquetCorrupt):
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
