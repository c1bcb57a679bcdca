"""Hostile Parquet files, built by hand: a Thrift compact-protocol codec (enough for Parquet's
footer and page headers) and the crafted files the corpus reader must survive. Shared by the
corpus tests and fuzz/fuzz_parquet.py.

A struct is a dict {field id: (type, value)}; a list is (element type, [values]). Types are
the compact protocol's: 1/2 bool, 3 byte, 4 i16, 5 i32, 6 i64, 7 double, 8 binary, 9 list,
10 set, 11 map (not used by Parquet's footer), 12 struct."""

from __future__ import annotations

import struct

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)


class ThriftError(ValueError):
    pass


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


class _Reader:
    def __init__(self, data: bytes, pos: int = 0):
        self.d, self.p = data, pos

    def byte(self) -> int:
        if self.p >= len(self.d):
            raise ThriftError("past the end")
        self.p += 1
        return self.d[self.p - 1]

    def varint(self) -> int:
        v, shift = 0, 0
        while True:
            b = self.byte()
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift > 70:
                raise ThriftError("varint too long")

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def value(self, t: int, depth: int = 0):
        if depth > 40:
            raise ThriftError("too deep")
        if t in (BOOL_TRUE, BOOL_FALSE):
            return t == BOOL_TRUE
        if t == BYTE:
            return self.byte()
        if t in (I16, I32, I64):
            return self.zigzag()
        if t == DOUBLE:
            if self.p + 8 > len(self.d):
                raise ThriftError("past the end")
            self.p += 8
            return self.d[self.p - 8 : self.p]
        if t == BINARY:
            n = self.varint()
            if self.p + n > len(self.d):
                raise ThriftError("past the end")
            self.p += n
            return self.d[self.p - n : self.p]
        if t in (LIST, SET):
            h = self.byte()
            n, et = h >> 4, h & 0x0F
            if n == 15:
                n = self.varint()
            if n > len(self.d):
                raise ThriftError("list too long")
            items = []
            for _ in range(n):
                items.append(self.byte() == 1 if et in (1, 2) else self.value(et, depth + 1))
            return (et, items)
        if t == STRUCT:
            return self.struct(depth + 1)
        raise ThriftError(f"type {t}")

    def struct(self, depth: int = 0) -> dict:
        out, last = {}, 0
        while True:
            h = self.byte()
            if h == 0:
                return out
            t, delta = h & 0x0F, h >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            out[fid] = (t, self.value(t, depth))


def decode_struct(data: bytes, pos: int = 0) -> tuple[dict, int]:
    """(struct, end position) of the struct at data[pos:]."""
    r = _Reader(data, pos)
    return r.struct(), r.p


def _write_value(out: bytearray, t: int, v) -> None:
    if t in (BOOL_TRUE, BOOL_FALSE):
        return
    if t == BYTE:
        out.append(v & 0xFF)
    elif t in (I16, I32, I64):
        out += _varint(_zigzag(v) & ((1 << 64) - 1))
    elif t == DOUBLE:
        out += bytes(v)
    elif t == BINARY:
        v = v.encode() if isinstance(v, str) else bytes(v)
        out += _varint(len(v)) + v
    elif t in (LIST, SET):
        et, items = v
        out += bytes([(len(items) << 4) | et]) if len(items) < 15 else bytes([0xF0 | et])
        if len(items) >= 15:
            out += _varint(len(items))
        for item in items:
            if et in (1, 2):
                out.append(1 if item else 2)
            else:
                _write_value(out, et, item)
    elif t == STRUCT:
        out += encode_struct(v)
    else:
        raise ThriftError(f"type {t}")


def encode_struct(s: dict) -> bytes:
    out, last = bytearray(), 0
    for fid in sorted(s):
        t, v = s[fid]
        if t in (BOOL_TRUE, BOOL_FALSE):
            t = BOOL_TRUE if v else BOOL_FALSE
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | t)
        else:
            out.append(t)
            out += _varint(_zigzag(fid))
        last = fid
        _write_value(out, t, v)
    out.append(0)
    return bytes(out)


# ----------------------------------------------------------------------- whole files


def split_file(data: bytes) -> tuple[bytes, dict]:
    """(everything before the footer, the decoded FileMetaData)."""
    if len(data) < 12:
        raise ThriftError("too short for a footer")
    flen = struct.unpack("<I", data[-8:-4])[0]
    if flen > len(data) - 8:
        raise ThriftError("footer length past the start")
    footer = data[-8 - flen : -8]
    md, _ = decode_struct(footer)
    return data[: -8 - flen], md


def join_file(body: bytes, md: dict) -> bytes:
    footer = encode_struct(md)
    return body + footer + struct.pack("<I", len(footer)) + b"PAR1"


def column_meta(md: dict, rg: int = 0, col: int = 0) -> dict:
    """The ColumnMetaData struct (mutable) of row group rg's column col."""
    return md[4][1][1][rg][1][1][1][col][3][1]


def pyarrow_file(values, nullable: bool = True, **kw) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    field = pa.field("text", pa.string(), nullable=nullable)
    t = pa.Table.from_arrays([pa.array(values, pa.string())], schema=pa.schema([field]))
    b = io.BytesIO()
    pq.write_table(t, b, **kw)
    return b.getvalue()


def required_with_levels() -> bytes:
    """pyarrow's file of an OPTIONAL column whose footer then says REQUIRED: pyarrow 25 throws
    parquet::ParquetException through a noexcept accessor (ColumnChunk metadata) and aborts."""
    body, md = split_file(pyarrow_file(["hello", "world"]))
    schema = md[2][1][1]
    schema[1][3] = (I32, 0)  # repetition_type REQUIRED
    return join_file(body, md)


def claims_gib(gib: int = 8) -> bytes:
    """A small file whose footer claims its column chunk is `gib` GiB compressed."""
    body, md = split_file(pyarrow_file([f"doc {i}" for i in range(200)], compression="none"))
    column_meta(md)[7] = (I64, gib << 30)
    return join_file(body, md)


def _page(header: dict, payload: bytes) -> bytes:
    return encode_struct(header) + payload


def rle_bomb(
    repeats: int = 1 << 28,
    rg_rows: int | None = None,
    value: bytes = b"hello",
    rg_bytes: int | None = None,
) -> bytes:
    """A dictionary of one value and a data page whose single RLE run repeats its index
    `repeats` times: a few hundred bytes that decode to `repeats` rows. The footer's row
    group claims `rg_rows` rows (default: `repeats`, a consistent file) and `rg_bytes` bytes
    (default: the decoded text's; a writer puts the encoded pages' size there, far less)."""
    rg_rows = repeats if rg_rows is None else rg_rows
    dict_body = struct.pack("<I", len(value)) + value
    dict_page = _page(
        {
            1: (I32, 2),  # DICTIONARY_PAGE
            2: (I32, len(dict_body)),
            3: (I32, len(dict_body)),
            7: (STRUCT, {1: (I32, 1), 2: (I32, 0)}),  # 1 value, PLAIN
        },
        dict_body,
    )
    data_body = bytes([1]) + _varint(repeats << 1) + bytes([0])  # bit width 1, run of index 0
    data_page = _page(
        {
            1: (I32, 0),  # DATA_PAGE
            2: (I32, len(data_body)),
            3: (I32, len(data_body)),
            5: (STRUCT, {1: (I32, repeats), 2: (I32, 8), 3: (I32, 3), 4: (I32, 3)}),
        },
        data_body,
    )
    head = b"PAR1"
    dict_off = len(head)
    data_off = dict_off + len(dict_page)
    chunk = dict_page + data_page
    meta = {
        1: (I32, 6),  # BYTE_ARRAY
        2: (LIST, (I32, [0, 3, 8])),
        3: (LIST, (BINARY, [b"text"])),
        4: (I32, 0),  # UNCOMPRESSED
        5: (I64, repeats),
        6: (I64, len(chunk)),
        7: (I64, len(chunk)),
        9: (I64, data_off),
        11: (I64, dict_off),
    }
    md = {
        1: (I32, 1),
        2: (
            LIST,
            (
                STRUCT,
                [
                    {4: (BINARY, b"schema"), 5: (I32, 1)},
                    {1: (I32, 6), 3: (I32, 0), 4: (BINARY, b"text"), 6: (I32, 0)},
                ],
            ),
        ),
        3: (I64, rg_rows),
        4: (
            LIST,
            (
                STRUCT,
                [
                    {
                        1: (LIST, (STRUCT, [{2: (I64, dict_off), 3: (STRUCT, meta)}])),
                        2: (I64, len(value) * rg_rows if rg_bytes is None else rg_bytes),
                        3: (I64, rg_rows),
                    }
                ],
            ),
        ),
    }
    return join_file(head + chunk, md)


def page_type_without_its_header() -> bytes:
    """A DATA_PAGE_V2 whose type says DATA_PAGE (v1) while it carries only the v2 header:
    gputok's page reader read it as the v2 page it holds, Arrow as no rows at all, silently
    (found by fuzz/fuzz_parquet.py, seed 7, input 19027)."""
    vals = [f"row {i}" for i in range(150)]
    data = pyarrow_file(
        vals, nullable=False, data_page_version="2.0", compression="none", use_dictionary=False
    )
    _, md = split_file(data)
    at = column_meta(md)[9][1]  # data_page_offset
    hdr, end = decode_struct(data, at)
    assert hdr[1][1] == 3
    hdr[1] = (I32, 0)
    new = encode_struct(hdr)
    assert len(new) == end - at
    return data[:at] + new + data[end:]


def dictionary_bomb(value_bytes: int = 512 << 10, rows: int = 100_000, **kw) -> bytes:
    """A valid file written by pyarrow itself (zstd by default): one dictionary value of
    `value_bytes` bytes that all `rows` rows reference, 468 bytes. Arrow materialised a record
    batch of 4,096 of its rows, 2 GiB of text, before the batch could be measured."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = pa.array(["x" * value_bytes], pa.string())
    col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), values)
    b = io.BytesIO()
    kw.setdefault("compression", "zstd")
    pq.write_table(pa.table({"text": col}), b, store_schema=False, **kw)
    return b.getvalue()


def delta_prefix_bomb(value_bytes: int = 512 << 10, rows: int = 4096) -> bytes:
    """DELTA_BYTE_ARRAY by pyarrow (zstd): every row repeats the row before it as its prefix,
    so a page of `value_bytes` decompressed bytes holds `rows` copies of the value (461 bytes
    for 4,096 rows of 512 KB: 2 GiB of text). Written from one array shared by every chunk."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    one = pa.array(["x" * value_bytes], pa.string())
    b = io.BytesIO()
    pq.write_table(
        pa.table({"text": pa.chunked_array([one] * rows)}),
        b,
        compression="zstd",
        use_dictionary=False,
        column_encoding={"text": "DELTA_BYTE_ARRAY"},
    )
    return b.getvalue()


def many_empty_pages(pages: int = 20_000) -> bytes:
    """pyarrow's file of 3 rows, its column chunk led by `pages` empty index pages (7 bytes
    each): Arrow skips them; walking them costs a few µs of Python each."""
    body, md = split_file(
        pyarrow_file(["a", "b", "c"], nullable=False, compression="none", use_dictionary=False)
    )
    meta = column_meta(md)
    at = meta[9][1]  # data_page_offset
    pad = encode_struct({1: (I32, 1), 2: (I32, 0), 3: (I32, 0)}) * pages
    for fid in (6, 7):  # total_uncompressed_size, total_compressed_size
        meta[fid] = (I64, meta[fid][1] + len(pad))
    rg = md[4][1][1][0]
    rg[2] = (I64, rg[2][1] + len(pad))
    return join_file(body[:at] + pad + body[at:], md)
