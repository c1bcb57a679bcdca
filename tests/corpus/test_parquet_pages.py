"""gputok's Parquet page reader (csrc/corpus/parquet.cpp, corpus/cuda/parquet.cu; read_parquet's
``decoder``): the documents must be exactly Arrow's, for every layout pyarrow writes (pages v1
and v2, dictionary and PLAIN, nullable and required, many small pages), on the CPU and, where
there is one, on the GPU. Chunks it cannot read go to Arrow; malformed ones raise, never crash.
The chunks built by hand, which check the Thrift parser and the snappy decoder apart from
pyarrow, are test_parquet_snappy.py's."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from page_decoders import (
    DECODERS,
    GPU_OK,
    GPU_WHY,
    HOSTILE_DECODERS,
    decode_all,
    first_chunk,
    make_values,
    pa,
    pq,
    read_docs,
)

import gputok
from gputok import _corpus_native as native
from gputok import corpus as C

LAYOUTS = {
    "default": {},
    "no-dictionary": {"use_dictionary": False},
    "v2": {"data_page_version": "2.0"},
    "v2-uncompressed": {"data_page_version": "2.0", "compression": "none"},
    "small-pages": {"data_page_size": 2000, "dictionary_pagesize_limit": 3000},
    "small-pages-v2": {"data_page_size": 700, "data_page_version": "2.0", "use_dictionary": False},
    "uncompressed": {"compression": "none"},
    "tiny-dictionary": {"dictionary_pagesize_limit": 64},
    # header fields the reader skips: CRCs, min/max statistics (binary), page indexes
    "checksums-statistics-index": {
        "write_page_checksum": True,
        "write_statistics": True,
        "write_page_index": True,
        "data_page_size": 5000,
    },
    "plain-encoding": {"use_dictionary": False, "column_encoding": {"text": "PLAIN"}},
}


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("nullable", [True, False], ids=["optional", "required"])
def test_documents_are_arrows(tmp_path, decoder, layout, nullable):
    values = make_values(900, seed=len(layout))
    field = pa.field("text", pa.string(), nullable=nullable)
    table = pa.Table.from_arrays([pa.array(values, pa.string())], schema=pa.schema([field]))
    p = tmp_path / "a.parquet"
    kw = {"compression": "snappy", **LAYOUTS[layout]}
    pq.write_table(table, p, row_group_size=300, **kw)
    got = read_docs(p, decoder)
    assert got and got == [v.encode() for v in values]
    # and batch by batch, the rows are named where they are
    where = [
        b.locate(i)
        for b in C.read_parquet(str(p), "text", 5000, min_batch_bytes=1, decoder=decoder)
        for i in range(len(b))
    ]
    assert where == [f"{p}: row {r}" for r in range(len(values))]


@pytest.mark.parametrize("decoder", DECODERS)
def test_bench_like_shard_is_exact(tmp_path, decoder):
    """~1 MB row groups of multi-KB documents: several 64 KiB fragments per page, the
    dictionary page of pyarrow's defaults, and fragment-parallel decoding on the GPU."""
    rng = random.Random(3)
    alphabet = "abcdefghij klmnop\nqrstuvwxyzäöü日本"
    values = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9000))) for _ in range(600)
    ]
    p = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": values}), p, row_group_size=250)
    assert read_docs(p, decoder, 1 << 20) == [v.encode() for v in values]


@pytest.mark.parametrize("typ", [pa.large_string(), pa.binary(), pa.large_binary()])
def test_other_string_types(tmp_path, typ):
    values = ["", "a", "ß" * 50] * 30
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": pa.array(values, typ)}), p, row_group_size=40)
    assert read_docs(p, native.parquet_decode) == [v.encode() for v in values]


@pytest.mark.parametrize(
    "kw",
    [
        {"compression": "zstd"},
        {"compression": "gzip"},
        {"use_dictionary": False, "column_encoding": {"text": "DELTA_BYTE_ARRAY"}},
        {"use_dictionary": False, "column_encoding": {"text": "DELTA_LENGTH_BYTE_ARRAY"}},
    ],
    ids=["zstd", "gzip", "delta-byte-array", "delta-length"],
)
def test_what_it_cannot_read_goes_to_arrow(tmp_path, kw):
    values = make_values(200, seed=5)
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": values}), p, row_group_size=64, **kw)
    batches = list(
        C.read_parquet(str(p), "text", 4096, min_batch_bytes=1, decoder=native.parquet_decode)
    )
    assert all(b.arrow is not None for b in batches)  # Arrow read every row group
    assert [d for b in batches for d in b.doc_list()] == [v.encode() for v in values]
    md = pq.ParquetFile(p).metadata.row_group(0).column(0)
    chunk = p.read_bytes()[
        md.data_page_offset if not md.has_dictionary_page else md.dictionary_page_offset :
    ]
    with pytest.raises(native.ParquetUnsupported):
        native.parquet_decode(chunk[: md.total_compressed_size], md.compression, md.num_values, 1)


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_null_names_its_row(tmp_path, decoder, version):
    values = make_values(250, seed=9)
    values[213] = None
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": values}), p, row_group_size=100, data_page_version=version)
    with pytest.raises(C.CorpusInputError, match=r"row 213: column 'text' is null"):
        read_docs(p, decoder)


def test_flat_column_after_a_struct_column(tmp_path):
    """The page reader finds the column's leaf by path, past a struct's leaves."""
    p = tmp_path / "a.parquet"
    t = pa.table({"meta": pa.array([{"a": 1}] * 3), "text": ["x", "y", "z"]})
    pq.write_table(t, p)
    batches = list(
        C.read_parquet(str(p), "text", 100, min_batch_bytes=1, decoder=native.parquet_decode)
    )
    assert [d for b in batches for d in b.doc_list()] == [b"x", b"y", b"z"]
    assert all(b.arrow is None for b in batches)  # read by the page reader, not Arrow


@pytest.mark.parametrize("group_bytes", [1, 1 << 30])
def test_row_groups_one_call_or_many(tmp_path, monkeypatch, group_bytes):
    """Row groups decoded one per call or all in one call: the same documents and row names."""
    monkeypatch.setattr(C.parquet, "PAGE_READER_GROUP_BYTES", group_bytes)
    values = make_values(500, seed=4)
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": values}), p, row_group_size=70)
    batches = list(
        C.read_parquet(str(p), "text", 3000, min_batch_bytes=1, decoder=native.parquet_decode)
    )
    assert read_docs(p, native.parquet_decode) == [v.encode() for v in values]
    assert [b.locate(i) for b in batches for i in range(len(b))] == [
        f"{p}: row {r}" for r in range(len(values))
    ]


@pytest.mark.parametrize("decoder", DECODERS)
def test_malformed_chunks_raise(tmp_path, decoder):
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": make_values(300, seed=1)}), p, row_group_size=300)
    chunk, md = first_chunk(p)
    for cut in (0, 1, 5, len(chunk) // 3, len(chunk) - 1):
        with pytest.raises(native.ParquetCorrupt):
            decoder(chunk[:cut], md.compression, md.num_values, 1)
    with pytest.raises(native.ParquetCorrupt):  # more rows than the pages hold
        decoder(chunk, md.compression, md.num_values + 1, 1)
    with pytest.raises(native.ParquetUnsupported):
        decoder(chunk, "LZ4", md.num_values, 1)


@pytest.mark.parametrize("decoder", HOSTILE_DECODERS)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_property_flipped_bytes_never_crash(tmp_path_factory, decoder, data):
    """Any corruption: the exact documents, a clean error, or (a flip inside a value's text)
    other documents of the right count inside the buffer, never a crash or a wild span."""
    d = tmp_path_factory.mktemp("flip")
    p = d / "a.parquet"
    version = data.draw(st.sampled_from(["1.0", "2.0"]))
    pq.write_table(
        pa.table({"text": make_values(60, seed=2)}),
        p,
        data_page_version=version,
        data_page_size=900,
    )
    chunk, md = first_chunk(p)
    buf = bytearray(chunk)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    try:
        pages, spans = decode_all(decoder, bytes(buf), md.compression, md.num_values, 1)
    except (native.ParquetCorrupt, native.ParquetUnsupported, native.ParquetNull):
        return
    assert spans.shape == (md.num_values, 2)
    assert (spans[:, 0] <= spans[:, 1]).all() and (spans >= 0).all()
    assert (spans[:, 1] <= len(pages)).all()


def test_spans_point_into_one_buffer():
    """The reader hands the tokenizer spans into the decompressed pages: no copy per value."""
    p_values = ["abc", "de", "abc"] * 10
    t = pa.table({"text": p_values})
    import io

    b = io.BytesIO()
    pq.write_table(t, b)
    path_bytes = b.getvalue()
    md = pq.ParquetFile(io.BytesIO(path_bytes)).metadata.row_group(0).column(0)
    start = md.dictionary_page_offset
    pages, spans = decode_all(
        native.parquet_decode,
        path_bytes[start : start + md.total_compressed_size],
        md.compression,
        md.num_values,
        1,
    )
    assert pages.dtype == np.uint8 and spans.dtype == np.int64 and spans.shape == (30, 2)
    # dictionary-encoded: the repeated value's rows share one span
    assert tuple(spans[0]) == tuple(spans[2])


def test_a_gpu_short_of_memory_decodes_on_the_cpu(tmp_path):
    """A GPU decoder that raises DeviceMemoryError (the device is full, or under a pool limit)
    costs the run nothing: those row groups are decoded on the CPU and the documents are
    Arrow's. Any other decoder error still propagates."""
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": make_values(400, seed=7)}), p, row_group_size=100)
    calls = []

    def full_gpu(*a):
        calls.append(1)
        raise gputok.DeviceMemoryError("cudaMalloc of 1 bytes failed: out of memory")

    want = [v.encode() for v in pq.read_table(p).column("text").to_pylist()]  # Arrow's
    assert read_docs(p, native.parquet_decode) == want
    assert read_docs(p, full_gpu) == want and calls

    def broken(*a):
        raise RuntimeError("not a memory error")

    with pytest.raises(RuntimeError, match="not a memory error"):
        read_docs(p, broken)


@pytest.mark.skipif(not GPU_OK, reason=GPU_WHY)
def test_a_gpu_pool_limit_below_the_row_groups_decodes_on_the_cpu(tmp_path):
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": make_values(400, seed=7)}), p, row_group_size=100)
    gpu = native.GpuPageDecoder(pool_limit_bytes=1 << 16)
    assert read_docs(p, gpu.parquet_decode) == read_docs(p, native.parquet_decode)
    assert gpu.counters()["device_allocs"] == 0  # every row group went to the CPU
    dec = C._parquet_decoder("auto", gputok.gpt2(device="cuda"))
    assert isinstance(dec.__self__, native.GpuPageDecoder) and dec.__self__.device_id == 0
