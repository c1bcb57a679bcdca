"""gputok's snappy decoder (csrc/corpus/parquet.cpp's snappy_decompress; on the GPU,
corpus/cuda/parquet.cu) on chunks built by hand (snappy_craft.py), apart from pyarrow: a chunk
that checks the Thrift parser and holds a snappy stream whose copies cross the 64 KiB fragments
(the GPU's sequential path), streams with every kind of tag, hostile tags, the GPU decoder's
stream slots beside the tokenizer, and its ablation switches. Each decoder must give the exact
bytes, or raise."""

from __future__ import annotations

import random

import page_decoders
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from snappy_craft import (
    i32_field,
    one_value_page,
    page_header,
    plain_values,
    snappy_literals_and_far_copies,
    snappy_tags,
    thrift_struct,
    varint,
)

import gputok
from gputok import _corpus_native as native

pa, pq = page_decoders.pa, page_decoders.pq


@pytest.mark.parametrize("decoder", page_decoders.DECODERS)
def test_hand_built_chunk_with_a_sequential_snappy_stream(decoder):
    rng = random.Random(11)
    docs = [
        " ".join(
            rng.choice(["alpha", "beta", "gamma", "δέλτα", "日本"])
            for _ in range(rng.randint(0, 900))
        ).encode()
        for _ in range(120)
    ]
    dict_docs, page_docs = docs[:20], docs[20:]
    # dictionary page (PLAIN values, uncompressed-in-snappy: compressed as a sequential stream)
    dict_raw = plain_values(dict_docs)
    dict_body = snappy_literals_and_far_copies(dict_raw)
    chunk = page_header(
        2,
        len(dict_raw),
        len(dict_body),
        thrift_struct([(1, *i32_field(len(dict_docs))), (2, *i32_field(0))]),
    )
    chunk += dict_body
    # a v1 data page of dictionary indices (bit width 5, one bit-packed run) with levels
    idx = [rng.randrange(20) for _ in range(40)]
    levels = bytes([(40 << 1) | 0, 1])  # one RLE run of 40 ones, bit width 1
    packed = bytearray(5 * 5)
    for k, v in enumerate(idx):
        for b in range(5):
            if v >> b & 1:
                packed[(k * 5 + b) // 8] |= 1 << ((k * 5 + b) % 8)
    indices = bytes([5]) + varint((5 << 1) | 1) + bytes(packed)
    raw1 = len(levels).to_bytes(4, "little") + levels + indices
    body1 = snappy_literals_and_far_copies(raw1)
    inner1 = thrift_struct(
        [(1, *i32_field(40)), (2, *i32_field(8)), (3, *i32_field(3)), (4, *i32_field(3))]
    )
    chunk += page_header(0, len(raw1), len(body1), inner1) + body1
    # a v2 data page, PLAIN, levels stored uncompressed before the snappy values, > 64 KiB
    big = page_docs * 3
    vals = plain_values(big)
    lv = varint(len(big) << 1) + b"\x01"  # one RLE run of ones
    body2 = lv + snappy_literals_and_far_copies(vals)
    assert len(vals) > 3 * 65536
    inner2 = thrift_struct(
        [
            (1, *i32_field(len(big))),
            (2, *i32_field(0)),
            (3, *i32_field(len(big))),
            (4, *i32_field(0)),
            (5, *i32_field(len(lv))),
            (6, *i32_field(0)),
        ]
    )
    chunk += page_header(3, len(lv) + len(vals), len(body2), inner2) + body2
    rows = 40 + len(big)
    pages, spans = page_decoders.decode_all(decoder, chunk, "SNAPPY", rows, 1)
    got = [bytes(pages[a:b]) for a, b in spans.tolist()]
    assert got == [dict_docs[i] for i in idx] + big
    # the metadata's row count must be what the pages hold
    with pytest.raises(native.ParquetCorrupt):
        decoder(chunk, "SNAPPY", rows + 5, 1)


def _one_value(decoder, chunk: bytes) -> bytes:
    """The one value of a chunk made by _one_value_page, as ``decoder`` reads it."""
    pages, spans = page_decoders.decode_all(decoder, chunk, "SNAPPY", 1, 0)
    assert spans.shape == (1, 2)
    return bytes(pages[spans[0, 0] : spans[0, 1]])


@pytest.mark.parametrize("decoder", page_decoders.DECODERS)
@pytest.mark.parametrize(
    "seed,n,weights",
    [
        (1, 200_000, (3, 3, 3, 1, 1)),  # four fragments, every kind of tag
        (2, 70_000, (1, 0, 6, 2, 1)),  # copies almost everywhere: many tags per window
        (3, 131_072, (1, 3, 0, 1, 0)),  # long literals; exactly two fragments
        (4, 65_536 + 5, (8, 0, 1, 1, 1)),  # 1-8 byte literals; a 5-byte last fragment
        (5, 9, (1, 1, 1, 1, 1)),
    ],
)
def test_snappy_every_tag_kind(decoder, seed, n, weights):
    raw, body = snappy_tags(n, random.Random(seed), weights)
    assert len(raw) > 4
    assert _one_value(decoder, one_value_page(raw, body)) == raw[4:]


@pytest.mark.parametrize("decoder", page_decoders.DECODERS)
@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(5, 140_000),
    weights=st.tuples(*[st.integers(0, 5)] * 4, st.integers(1, 5)),
)
def test_property_snappy_streams_decode_exactly(decoder, seed, n, weights):
    raw, body = snappy_tags(n, random.Random(seed), weights)
    assert len(raw) == n and _one_value(decoder, one_value_page(raw, body)) == raw[4:]


@pytest.mark.parametrize("decoder", page_decoders.HOSTILE_DECODERS)
def test_regression_snappy_copy_with_offset_zero_is_corrupt(decoder):
    """A copy with offset 0 was read as a literal (SnappyTag marks literals by offset 0), so
    the stream decoded to garbage instead of failing as snappy itself fails it."""
    raw = (12).to_bytes(4, "little") + b"abcdabcdabcd"
    good = varint(16) + bytes([7 << 2]) + raw[:8] + bytes([((8 - 4) << 2) | 1, 4])
    assert _one_value(decoder, one_value_page(raw, good)) == raw[4:]
    for tag in (
        bytes([((8 - 4) << 2) | 1, 0]),  # kind 1
        bytes([((8 - 1) << 2) | 2, 0, 0]),  # kind 2
        bytes([((8 - 1) << 2) | 3, 0, 0, 0, 0]),  # kind 4
    ):
        # 8 more bytes: read as a literal, the copy would have yielded 16 bytes, no error
        bad = varint(16) + bytes([7 << 2]) + raw[:8] + tag + b"abcdabcd"
        with pytest.raises(native.ParquetCorrupt):
            _one_value(decoder, one_value_page(raw, bad))


@pytest.mark.skipif(not page_decoders.GPU_OK, reason=page_decoders.GPU_WHY)
def test_gpu_decodes_run_beside_each_other_and_the_tokenizer(ref):
    """The GPU decoder's calls each take one of its stream slots: threads decoding different
    chunks while others tokenize on the same GPU get every byte and id right, the slots'
    buffers are reused (not allocated per call), and a pool limit below a decode fails it
    cleanly."""
    from concurrent.futures import ThreadPoolExecutor

    tok = gputok.gpt2(device="cuda")
    gpu = native.GpuPageDecoder()
    streams = [snappy_tags(n, random.Random(seed)) for seed, n in enumerate([70_000, 300_000] * 6)]
    chunks = [(one_value_page(raw, body), raw[4:]) for raw, body in streams]
    texts = [" ".join(page_decoders.make_values(40, seed=s)) for s in range(8)]
    want_ids = [ref.encode(t, disallowed_special=()) for t in texts]
    assert all(want_ids)

    def decode(k):
        chunk, want = chunks[k % len(chunks)]
        return _one_value(gpu.parquet_decode, chunk) == want

    def encode(k):
        return tok.encode_batch(texts, disallowed_special=()) == want_ids

    with ThreadPoolExecutor(10) as ex:
        futs = [ex.submit(decode, k) for k in range(96)] + [ex.submit(encode, k) for k in range(8)]
        assert all(f.result() for f in futs)
        warm = gpu.counters()
        assert all(ex.map(decode, range(48)))
    after = gpu.counters()  # buffers only grow: at most once more per slot (4), not per call
    assert after["device_allocs"] - warm["device_allocs"] <= 4
    assert after["pinned_allocs"] - warm["pinned_allocs"] <= 8
    gpu.set_pool_limit(1 << 20)
    with pytest.raises(gputok.DeviceMemoryError):
        _one_value(gpu.parquet_decode, chunks[1][0])
    gpu.set_pool_limit(0)
    assert decode(1)


@pytest.mark.skipif(not page_decoders.GPU_OK, reason=page_decoders.GPU_WHY)
@pytest.mark.parametrize("decode", ["tagwise", "global", "windowed"])
@pytest.mark.parametrize("segment", ["256", "4096"])
def test_gpu_decode_ablations_are_exact(tmp_path, decode, segment):
    """The ablation switches (GpuPageDecoder's decode and segment_bytes) change how the GPU
    decodes, never what: every tag kind, a sequential stream, and pyarrow's own pages."""
    dec = native.GpuPageDecoder(decode=decode, segment_bytes=int(segment)).parquet_decode
    for seed, n in ((1, 200_000), (2, 70_000), (3, 131_072)):
        raw, body = snappy_tags(n, random.Random(seed))
        assert _one_value(dec, one_value_page(raw, body)) == raw[4:]
    test_hand_built_chunk_with_a_sequential_snappy_stream(dec)
    p = tmp_path / "a.parquet"
    pq.write_table(
        pa.table({"text": page_decoders.make_values(600, seed=5)}), p, row_group_size=600
    )
    chunk, md = page_decoders.first_chunk(p)
    want = page_decoders.decode_all(native.parquet_decode, chunk, md.compression, md.num_values, 1)
    got = page_decoders.decode_all(dec, chunk, md.compression, md.num_values, 1)
    assert bytes(got[0]) == bytes(want[0]) and (got[1] == want[1]).all()
