"""The Parquet reader: gputok's page reader (native, the corpus module) where it can read a
row group, Arrow for the rest, every file treated as hostile."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from ._common import MIN_BATCH_BYTES, CorpusInputError, import_arrow
from .batch import Batch, _arrow_batch, _batch_target

# The decoder choice lives in decoders.py; its names stay importable from here.
from .decoders import PARQUET_DECODERS, _parquet_decoder, gpu_page_decoder, nvcomp_library  # noqa: F401
from .parquet_chunks import (  # noqa: F401 - importable from here as before
    _BYTE_ARRAY,
    PAGE_READER_CODECS,
    PAGE_READER_GROUP_BYTES,
    PAGE_READER_MIN_BYTES,
    Layout,
    _decode_row_groups,
    _footer_chunks,
    _row_group_run,
    _span_batches,
    native_layout,
)
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
    whole = _read_whole(path, column, batch_bytes, min_batch_bytes, decoder, max_expansion)
    if whole is not None:
        yield from whole
        return
    if decoder is not None:
        with _open(path) as f:
            layout = native_layout(f, path, column, lambda: _open_arrow(path))
            if layout is not None:
                yield from _read_layout(f, layout, path, column, batch_bytes, min_batch_bytes,
                                        decoder, max_expansion)  # fmt: skip
                return
    pf = _open_arrow(path)
    pa = import_arrow()
    schema = pf.schema_arrow
    if column not in schema.names:
        raise CorpusInputError(
            f"{path}: no column {column!r} (columns: {', '.join(map(repr, schema.names))})"
        )
    typ = schema.field(column).type
    # A dictionary of strings (a pandas categorical) is its values: the page reader reads
    # such a file's pages as strings, and so does this path.
    values = typ.value_type if pa.types.is_dictionary(typ) else typ
    if not (
        pa.types.is_string(values)
        or pa.types.is_large_string(values)
        or pa.types.is_binary(values)
        or pa.types.is_large_binary(values)
        or str(values) in ("string_view", "binary_view")
    ):
        raise CorpusInputError(f"{path}: column {column!r} is {typ}, expected a string column")
    md = pf.metadata
    rgs = [md.row_group(i) for i in range(md.num_row_groups)]
    leaf = _parquet_leaf(pf, column)
    with _open(path) as f:
        # The footer read natively (never pyarrow's ColumnChunkMetaData: see
        # _corpus_native.parquet_footer) and checked against the file, on both decoders.
        metas = _footer_chunks(f, path, leaf[0], column, len(rgs)) if leaf is not None else None
        rows, sizes = [g.num_rows for g in rgs], [g.total_byte_size for g in rgs]
        layout = Layout(rows, sizes, md.num_rows, leaf, metas, lambda: pf)
        yield from _read_layout(f, layout, path, column, batch_bytes, min_batch_bytes, decoder,
                                max_expansion)  # fmt: skip


def _read_whole(path, column, batch_bytes, min_batch_bytes, decoder, max_expansion):
    """A file's batches from one native call (the file, footer, schema, checks and pages:
    _corpus_native.parquet_read_file) where the CPU page reader takes all of it at once, or
    None (the readers below then decide, and name what is wrong). With 16 readers in one
    process, the dozen calls a file of the path below each gave up the GIL and waited to take
    it back: 1 GB in 1 MB Parquet shards took 1.46-2.02 s against text's 1.03-1.39 (H100 host,
    2026-11-28)."""
    from gputok import _corpus_native as native

    if decoder is not native.parquet_decode:
        return None
    bb = max(batch_bytes, PAGE_READER_MIN_BYTES)
    # A footer's claim of rows over the file's budget is left to the reader below, which fails
    # it before reading anything; any claim passes at the floor's budget at least (no stat).
    max_rows = -1 if not max_expansion else EXPANSION_FLOOR_BYTES // ROW_COST
    try:
        got = native.parquet_read_file(
            path, column, min(PAGE_READER_GROUP_BYTES, bb // 2), 2 * bb, max_rows
        )
    except native.ParquetNull as e:
        raise CorpusInputError(
            f"{path}: row {int(e.args[1])}: column {column!r} is null, expected a string"
        ) from None
    if got is None:
        return None
    pages, size, rows, rg_bytes = got
    budget = _decode_budget(path, size, rows, max_expansion)
    target = _batch_target(batch_bytes, rg_bytes, min_batch_bytes)
    return _within_budget(_span_batches(pages, target, path, 0), path, budget, max_expansion)


def _open(path: str):
    """``path`` open for reading (CorpusInputError naming it where it cannot be)."""
    try:
        return open(path, "rb")  # noqa: SIM115 - the caller's with-block closes it
    except OSError as e:
        raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e


def _open_arrow(path: str):
    """``path`` as a pyarrow ParquetFile (CorpusInputError where it is not one)."""
    try:
        pa = import_arrow()
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
        return pq.ParquetFile(path, pre_buffer=True)
    except (OSError, ValueError, pa.ArrowException) as e:
        raise CorpusInputError(f"{path}: cannot read as Parquet: {e}") from e


def _read_layout(
    f, layout: Layout, path, column, batch_bytes, min_batch_bytes, decoder, max_expansion
) -> Iterator[Batch]:
    """The batches of ``layout``'s row groups within the file's decoding budget, every error
    (pyarrow's included) a CorpusInputError naming the file."""
    size = os.fstat(f.fileno()).st_size
    budget = _decode_budget(path, size, max(layout.num_rows, sum(layout.rows)), max_expansion)
    try:
        groups = _read_parquet_groups(
            f, layout, path, column, batch_bytes, min_batch_bytes, decoder, budget
        )
        yield from _within_budget(groups, path, budget, max_expansion)
    except CorpusInputError:
        raise
    except Exception as e:
        if isinstance(e, (OSError, ValueError)) or type(e).__module__.startswith("pyarrow"):
            raise CorpusInputError(f"{path}: cannot read as Parquet: {e}") from e
        raise


def _decode_budget(path: str, size: int, rows: int, max_expansion: float) -> int | None:
    """The bytes (text plus ROW_COST a row) ``path`` (of ``size`` bytes) may decode to, None
    without a limit; CorpusInputError when its footer claims more ``rows`` than that already."""
    if not max_expansion:
        return None
    budget = max(EXPANSION_FLOOR_BYTES, int(max_expansion * size))
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
    f,
    layout: Layout,
    path: str,
    column: str,
    batch_bytes: int,
    min_batch_bytes: int,
    decoder,
    budget,
) -> Iterator[Batch]:
    """read_parquet's row groups: runs of them through the page reader where it can read
    them, the rest through Arrow (``layout.arrow()``), in order, each Arrow chunk's pages
    bounded by ``budget`` first (parquet_pages.arrow_chunk_bound)."""
    rows = max(1, layout.num_rows)
    # Uncompressed bytes per row, from the row-group metadata, sizes batches in text bytes.
    total = sum(max(0, b) for b in layout.sizes)
    avg = max(1, total // rows)
    target = _batch_target(batch_bytes, total, min_batch_bytes)
    batch_rows = int(min(max(target // avg, 64), ARROW_MAX_BATCH_ROWS))
    leaf, metas, n_groups = layout.leaf, layout.metas, len(layout.rows)
    row, rg, arrow_pages = 0, 0, 0
    while rg < n_groups:
        if layout.rows[rg] == 0:  # an empty row group (an empty file has one)
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
        start, want = row, sum(layout.rows[rg:upto])
        rows_cap = batch_rows
        if metas is not None:  # one row group here (upto == rg + 1)
            room = None if budget is None else budget - arrow_pages
            pages, longest = arrow_chunk_bound(f, path, rg, metas[rg], room)
            arrow_pages += pages
            # a batch of rows that each expand to `longest` bytes stays within the target
            cap = target if budget is None else min(target, budget)
            rows_cap = max(1, min(batch_rows, cap // max(1, longest)))
        for rb in layout.arrow().iter_batches(
            batch_size=rows_cap, row_groups=range(rg, upto), columns=[column], use_threads=False
        ):
            arr = rb.column(0)
            if hasattr(arr, "dictionary_decode"):  # a dictionary of strings: its values
                arr = arr.dictionary_decode()
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


def _parquet_leaf(pf, column: str) -> tuple[int, int] | None:
    """(index, maximum definition level) of ``column``'s leaf in the Parquet schema when
    gputok's page reader can read it (a flat BYTE_ARRAY column, no repetition), else None."""
    for i in range(len(pf.schema)):
        c = pf.schema.column(i)
        if c.path == column:
            ok = c.physical_type == "BYTE_ARRAY" and c.max_repetition_level == 0
            return (i, c.max_definition_level) if ok and c.max_definition_level <= 1 else None
    return None
