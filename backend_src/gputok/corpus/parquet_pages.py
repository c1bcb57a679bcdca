"""A column chunk's page headers, walked before Arrow reads it: what Arrow will allocate for
it, bounded before it does (see arrow_chunk_bound).

Arrow allocates what a page header claims and materialises a record batch of dictionary
values before either can be measured. A 468-byte file written by pyarrow itself (zstd, one
512 KB value as the dictionary, 100,000 rows) took 21-44 s and 3.0-3.5 GiB before the
streaming budget failed its shard: Arrow's first batch of 4,096 rows was 2 GiB of text
(2-core dev VM, 2026-11-25). gputok's page reader hands Arrow every chunk of a codec it does
not read (zstd, gzip, brotli, lz4), so this bound applies on both decoders. Walking the
headers reads a few KB a page (about 1,000 pages a GB of text at pyarrow's 1 MB pages)."""

from __future__ import annotations

from ._common import CorpusInputError

# The longest page header read, as Arrow's (parquet-cpp's kDefaultMaxPageHeaderSize, 16 MiB);
# a header is read in a window of FIRST_WINDOW bytes first, 16x more while it runs past.
MAX_PAGE_HEADER = 16 << 20
FIRST_WINDOW = 4 << 10
# Pages a chunk may hold beyond MANY_PAGES: one per PAGE_BYTES_FLOOR of it. The walk costs a
# few µs of Python a page, so a chunk of 6-byte empty pages would take minutes a GB; pyarrow's
# pages are 1 MB, and even a data_page_size of 300 bytes makes pages of about 360.
MANY_PAGES, PAGE_BYTES_FLOOR = 4096, 256
# Parquet's CompressionCodec -> pyarrow's codec name, for the dictionary page. LZ4 (5, the
# Hadoop framing) and LZO (3) are not decompressed here: their dictionary's longest value is
# taken as the page's whole size.
ARROW_CODECS = {1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}
_DICTIONARY_PAGE, _DATA_PAGES = 2, (0, 3)
_PLAIN, _PLAIN_DICTIONARY, _DELTA_BYTE_ARRAY = 0, 2, 7
_HEADER_FIELDS = ("type", "uncompressed", "compressed", "num_values", "encoding", "header_size")


def arrow_chunk_bound(f, path: str, rg: int, meta: dict, room: int | None) -> tuple[int, int]:
    """(bytes the pages of column chunk ``meta`` (from _footer_chunks: checked against the
    file) decompress to, the longest value a row of it can be, 0 where no row can expand).
    CorpusInputError when a header cannot be read, a page runs past the chunk, or the pages
    claim more than ``room`` bytes (None: no limit), before Arrow allocates any of it.

    A row's value lies in its page (PLAIN, DELTA_LENGTH_BYTE_ARRAY: no expansion), or is a
    dictionary value (the dictionary page's longest, decompressed and measured here), or
    repeats a prefix of the row before (DELTA_BYTE_ARRAY: at most its page's size)."""
    from gputok import _corpus_native as native

    pos, end = meta["start"], meta["start"] + meta["compressed"]
    total, longest, values, pages = 0, 0, 0, 0
    while pos < end and values < meta["num_values"]:
        pages += 1
        if pages > MANY_PAGES and pages * PAGE_BYTES_FLOOR > meta["compressed"]:
            raise CorpusInputError(
                f"{path}: row group {rg}: more than {pages - 1} pages in a column chunk of "
                f"{meta['compressed']} bytes (at most one per {PAGE_BYTES_FLOOR} bytes past "
                f"{MANY_PAGES})"
            )
        h = _page_header(f, pos, end, path, rg)
        body = pos + h["header_size"]
        where = f"{path}: row group {rg}: the page at byte {pos}"
        if h["compressed"] > end - body:
            raise CorpusInputError(f"{where} runs past its column chunk's end ({end})")
        total += h["uncompressed"]
        if room is not None and total > room:
            raise CorpusInputError(
                f"{where}: the pages claim {total} bytes decompressed, more than the "
                f"{room} bytes left of the file's budget"
            )
        if h["type"] == _DICTIONARY_PAGE:
            longest = max(longest, _dictionary_longest(f, body, h, meta["codec"], where, native))
        elif h["type"] in _DATA_PAGES:
            values += max(0, h["num_values"])
            if h["encoding"] == _DELTA_BYTE_ARRAY:
                longest = max(longest, h["uncompressed"])
        pos = body + h["compressed"]
    return total, longest


def _page_header(f, pos: int, end: int, path: str, rg: int) -> dict:
    from gputok import _corpus_native as native

    window = FIRST_WINDOW
    while True:
        n = min(window, end - pos)
        try:
            f.seek(pos)
            buf = f.read(n)
        except OSError as e:
            raise CorpusInputError(f"{path}: cannot read: {e.strerror or e}") from e
        try:
            return dict(zip(_HEADER_FIELDS, native.parquet_page_header(buf), strict=True))
        except native.ParquetCorrupt as e:
            if n >= end - pos or window >= MAX_PAGE_HEADER:
                raise CorpusInputError(
                    f"{path}: row group {rg}: the page header at byte {pos}: {e}"
                ) from None
            window *= 16


def _dictionary_longest(f, body: int, h: dict, codec: int, where: str, core) -> int:
    """The dictionary page's longest value: its whole size where it cannot be measured."""
    import pyarrow as pa

    if h["encoding"] not in (_PLAIN, _PLAIN_DICTIONARY) or (
        codec != 0 and codec not in ARROW_CODECS
    ):
        return h["uncompressed"]
    try:
        f.seek(body)
        raw = f.read(h["compressed"])
    except OSError as e:
        raise CorpusInputError(f"{where}: cannot read: {e.strerror or e}") from e
    try:
        page = (
            raw
            if codec == 0
            else pa.Codec(ARROW_CODECS[codec]).decompress(raw, decompressed_size=h["uncompressed"])
        )
        return core.parquet_plain_max_length(page, h["num_values"])
    except (core.ParquetCorrupt, pa.ArrowException, OSError, ValueError) as e:
        raise CorpusInputError(f"{where}: its dictionary page cannot be read: {e}") from None
