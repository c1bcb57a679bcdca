"""The Parquet reader: gputok's page reader (native, the corpus module) where it can read a
row group, Arrow for the rest, every file treated as hostile."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from ._common import MIN_BATCH_BYTES, CorpusInputError
from .batch import Batch, _arrow_batch, _batch_target

# The decoder choice lives in decoders.py; its names stay importable from here.
from .decoders import PARQUET_DECODERS, _parquet_decoder, gpu_page_decoder, nvcomp_library  # noqa: F401
from .parquet_pages import arrow_chunk_bound

# Decompression bombs. Dictionary pages and RLE runs let a few bytes stand for any number of
# rows and bytes of text: a valid 149-byte file whose one RLE run repeats a 5-byte value 2^28
# times is 1.34 GB of text in 268 million rows. Memory stays bounded (a batch at a time), but
# a corpus run tokenized it for 126 s and wrote 3.2 GB for it (2-core dev VM, 2026-11-25).
# So a file may decode to at most MAX_EXPANSION times its own size, or EXPANSION_FLOOR_BYTES,
# whichever is more, counting each row as ROW_COST bytes (the span the page reader keeps for
# it) plus its text: a footer that claims more rows fails the shard before anything is read,
# and text past the budget fails it at the batch that crosses it. Text compresses 3-10x
# (snappy, zstd); 64x leaves room for repetitive text, and costs nothing to check.
MAX_EXPANSION = 64
EXPANSION_FLOOR_BYTES = 16 << 20
ROW_COST = 16
# Arrow sizes its record batches in rows and materializes one before it can be measured. The
# footer's byte counts are those of the encoded pages, so a dictionary of long values repeated
# by RLE looks tiny: 2^20 rows a batch (the cap before) of a 4 KB value made one batch of 4 GiB
# (a 4 KB crafted file: 46 s and 5.6 GiB before the budget above stopped it; 2-core dev VM,
# 2026-11-25). At most this many rows a batch bounds that to 64K times a value's length; the
# page reader (snappy and uncompressed files) keeps values as spans and is bounded by bytes.
ARROW_MAX_BATCH_ROWS = 1 << 12


def read_parquet(
    path: str,
    column: str,
    batch_bytes: int,
    *,
    min_batch_bytes: int = MIN_BATCH_BYTES,
    decoder: Callable | None = None,
    max_expansion: float = MAX_EXPANSION,
) -> Iterator[Batch]:
    """Parquet: the string (or binary) column ``column``; nulls are an error. Documents are
    handed on as buffers (bytes), so gputok validates their UTF-8 under the run's policy.

    Decoding (snappy, dictionary pages) is the cost here; it runs on the reader thread with
    the GIL released, overlapped with tokenizing and writing. ``decoder``: gputok's own page
    reader (``GpuPageDecoder.parquet_decode``: snappy on the GPU, the values never copied; see
    ``_parquet_decoder``) for the row groups it can read, Arrow for the rest; None: Arrow.

    Every file is hostile: what its footer claims (a column chunk's place and size, its value
    count) is checked against the file and the row group before anything is read, the page
    reader allocates at most ``2 * batch_bytes`` per call (PAGE_READER_MIN_BYTES at least; more
    goes to Arrow) and hands
    spans on a batch at a time, and every error, pyarrow's included, is a CorpusInputError
    naming the file. A file may decode to at most ``max_expansion`` times its own size
    (see MAX_EXPANSION); 0 lifts the limit."""
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
    budget = _decode_budget(path, pf.metadata, max_expansion)
    try:
        groups = _read_parquet_groups(
            pf, path, column, batch_bytes, min_batch_bytes, decoder, budget
        )
        yield from _within_budget(groups, path, budget, max_expansion)
    except (OSError, ValueError, pa.ArrowException) as e:
        if isinstance(e, CorpusInputError):
            raise
        raise CorpusInputError(f"{path}: cannot read as Parquet: {e}") from e


def _decode_budget(path: str, md, max_expansion: float) -> int | None:
    """The bytes (text plus ROW_COST a row) ``path`` may decode to, None without a limit;
    CorpusInputError when its footer claims more rows than that already."""
    if not max_expansion:
        return None
    size = os.path.getsize(path)
    budget = max(EXPANSION_FLOOR_BYTES, int(max_expansion * size))
    rows = max(md.num_rows, sum(md.row_group(i).num_rows for i in range(md.num_row_groups)))
    if rows * ROW_COST > budget:
        raise CorpusInputError(
            f"{path}: the footer claims {rows} rows, more than a {size}-byte file may decode "
            f"to ({budget // ROW_COST} rows at most: {_limit_text(max_expansion)}); "
            "a decompression bomb, or a genuine file to split"
        )
    return budget


def _limit_text(max_expansion: float) -> str:
    return (
        f"{max_expansion:g}x the file's size or {EXPANSION_FLOOR_BYTES >> 20} MiB, counting "
        f"{ROW_COST} bytes a row besides its text; read_parquet's max_expansion sets it"
    )


def _within_budget(
    batches: Iterator[Batch], path: str, budget: int | None, max_expansion: float
) -> Iterator[Batch]:
    """``batches`` until their text and rows exceed ``budget`` (see _decode_budget)."""
    used, rows = 0, 0
    for b in batches:
        if budget is not None:
            bounds = b.bounds  # summed in place: no per-row temporary (2M rows at 32 MiB)
            text = (
                int(b.lengths().sum())
                if bounds is None
                else int(bounds[-1]) - int(bounds[0])
                if bounds.ndim == 1
                else int(bounds[:, 1].sum()) - int(bounds[:, 0].sum())
            )
            used += text + ROW_COST * len(b)
            if used > budget:
                raise CorpusInputError(
                    f"{path}: decodes to more than {budget} bytes by row {rows + len(b)}, "
                    f"more than the file's {os.path.getsize(path)} bytes may "
                    f"({_limit_text(max_expansion)}); a decompression bomb, or a genuine "
                    "file to split"
                )
            rows += len(b)
        yield b


def _read_parquet_groups(
    pf, path: str, column: str, batch_bytes: int, min_batch_bytes: int, decoder, budget
) -> Iterator[Batch]:
    """read_parquet's row groups: runs of them through the page reader where it can read
    them, the rest through Arrow, in order, each Arrow chunk's pages bounded by ``budget``
    first (parquet_pages.arrow_chunk_bound)."""
    md = pf.metadata
    rows = max(1, md.num_rows)
    # Uncompressed bytes per row, from the row-group metadata, sizes batches in text bytes.
    total = sum(max(0, md.row_group(i).total_byte_size) for i in range(md.num_row_groups))
    avg = max(1, total // rows)
    target = _batch_target(batch_bytes, total, min_batch_bytes)
    batch_rows = int(min(max(target // avg, 64), ARROW_MAX_BATCH_ROWS))
    leaf = _parquet_leaf(pf, column)
    with open(path, "rb") as f:
        # The footer read natively (never pyarrow's ColumnChunkMetaData: see
        # _corpus_native.parquet_footer) and checked against the file, on both decoders.
        metas = (
            _footer_chunks(f, path, leaf[0], column, md.num_row_groups)
            if leaf is not None
            else None
        )
        row, rg, arrow_pages = 0, 0, 0
        while rg < md.num_row_groups:
            if md.row_group(rg).num_rows == 0:  # an empty row group (an empty file has one)
                rg += 1
                continue
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
            start, want = row, sum(md.row_group(i).num_rows for i in range(rg, upto))
            rows_cap = batch_rows
            if metas is not None:  # one row group here (upto == rg + 1)
                room = None if budget is None else budget - arrow_pages
                pages, longest = arrow_chunk_bound(f, path, rg, metas[rg], room)
                arrow_pages += pages
                # a batch of rows that each expand to `longest` bytes stays within the target
                cap = target if budget is None else min(target, budget)
                rows_cap = max(1, min(batch_rows, cap // max(1, longest)))
            for rb in pf.iter_batches(
                batch_size=rows_cap,
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
            if row - start != want:  # Arrow reads a page without its type's header as no rows
                raise CorpusInputError(
                    f"{path}: row groups {rg}-{upto - 1}: {row - start} rows read of the "
                    f"{want} the footer claims"
                )
            rg = upto


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


def _footer_chunks(f, path: str, leaf: int, column: str, pf_row_groups: int) -> list[dict] | None:
    """Each row group's chunk of column ``leaf`` as the footer claims it (see
    _corpus_native.parquet_footer), checked against the file: a chunk outside the file, or a value
    count that is not its row group's row count, fails the shard here (as Arrow fails it),
    before anything is allocated for it. None where this reader cannot read the footer
    (encrypted, or a layout it does not know): Arrow then reads the whole file."""
    from gputok import _corpus_native as native

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
        _rows, metas = native.parquet_footer(footer, leaf)
    except (native.ParquetUnsupported, native.ParquetCorrupt):
        return None
    if len(metas) != pf_row_groups:
        return None
    for rg, m in enumerate(metas):
        if m["path"] != column or m["type"] != _BYTE_ARRAY:
            return None
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
    while k < len(metas) and metas[k]["codec"] == first["codec"] and not metas[k]["empty"]:
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
