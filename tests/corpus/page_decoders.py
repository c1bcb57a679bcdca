"""The Parquet page reader's tests' decoders (gputok's CPU page reader, its GPU kernels, nvCOMP's
snappy where it loads) and how they read: a chunk's pages and every row's span, a file's
documents, the first column chunk of a file, and the sample values the files are written from;
whether a GPU is here, and pyarrow.
Shared by test_parquet_pages.py and test_parquet_snappy.py (tests/corpus is on sys.path)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import gputok
from gputok import _corpus_native as native
from gputok import corpus as C

# pyarrow writes the files (the test modules import these; without pyarrow they skip)
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

GPU_OK, GPU_WHY = gputok.cuda_available()


def _decoders():
    """CPU, GPU (gputok's kernels), GPU (nvCOMP's snappy, where it loads): held to one result."""
    out = [pytest.param(native.parquet_decode, id="cpu")]
    if not GPU_OK:
        skip = pytest.mark.skip(reason=GPU_WHY)
        return out + [pytest.param(None, id=k, marks=skip) for k in ("gpu", "nvcomp")]
    out.append(pytest.param(native.GpuPageDecoder().parquet_decode, id="gpu"))
    try:
        nv = native.GpuPageDecoder(nvcomp_library=C.decoders.nvcomp_library())
        out.append(pytest.param(nv.parquet_decode, id="nvcomp"))
    except RuntimeError as e:  # gputok.CudaError: nvCOMP is not installed here
        out.append(pytest.param(None, id="nvcomp", marks=pytest.mark.skip(reason=str(e))))
    return out


DECODERS = _decoders()
# nvCOMP 6.0.0.12 faulted on two hostile streams (a copy with offset 0; flipped bytes): an
# illegal address, the process's CUDA context lost (H100, 2026-11-25,
# bench/results/2026-11-25-nvcomp-ab.md). The hostile-input tests hold the other decoders.
HOSTILE_DECODERS = [d for d in DECODERS if d.id != "nvcomp"]


def decode_all(decoder, *args):
    """(pages, spans of every row) of one decode: the spans a batch at a time, joined."""
    got = decoder(*args)
    parts = []
    while len(part := got.spans(7)):
        parts.append(part)
    spans = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
    assert got.rows == len(spans)
    return got.pages, spans


def make_values(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = ["héllo", "日本語", "🙂", "the", " ", "\n", "x" * 70, "<|endoftext|>", "ünï"]
    out = []
    for i in range(n):
        k = rng.choice([0, 1, 3, 20, 200, 3000])
        out.append("".join(rng.choice(words) for _ in range(k)))
        if i % 17 == 0:
            out.append(out[-1])  # repeats: dictionary hits
    return out[:n]


def read_docs(path, decoder, batch_bytes=1 << 16) -> list[bytes]:
    out = []
    for b in C.read_parquet(str(path), "text", batch_bytes, min_batch_bytes=1, decoder=decoder):
        assert b.docs is None and b.arrow is None, "expected the page reader's buffer batches"
        mv = memoryview(b.data).cast("B")
        out += [mv[x:y].tobytes() for x, y in b.spans().tolist()]
    return out


def first_chunk(path):
    md = pq.ParquetFile(path).metadata.row_group(0).column(0)
    start = md.dictionary_page_offset if md.has_dictionary_page else md.data_page_offset
    return path.read_bytes()[start : start + md.total_compressed_size], md
