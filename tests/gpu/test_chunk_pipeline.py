"""The GPU path's large-call pipeline, checked on any machine: its chunk plan (segments cut
at safe split positions into chunks), its lanes (several chunks in flight, collected in
order) and its stitching (ids appended, segment ends) run here with the CPU encoder doing
each chunk's work (``_core.encode_chunked_cpu``, the same C++ as the GPU's ``encode``). The
result must equal one whole-text encode of the CPU path. tests/gpu/test_gpu.py runs the real
device pipeline with small chunks and pool limits on the GPU machine.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

gputok = pytest.importorskip("gputok")


@pytest.fixture(scope="module")
def cpu():
    return gputok.gpt2(device="cpu")


def _check(cpu, texts, chunk_bytes, lanes):
    want_ids, want_offs = cpu.encode_batch_flat(texts, disallowed_special=())
    ids, offs = gputok._core.encode_chunked_cpu(cpu._vocab, texts, chunk_bytes, lanes)
    label = f"chunk_bytes={chunk_bytes} lanes={lanes}"
    assert offs.tolist() == want_offs.tolist(), label
    assert np.array_equal(ids, want_ids), label
    return ids


def test_many_chunks_and_lanes_match_one_encode(cpu, corpus):
    """The corpus as docs and as one string, in chunks from 1 byte (every safe split is a cut)
    to larger than the call, with 1-4 lanes: every id and every offset as one encode."""
    docs = list(corpus[:300])
    joined = "".join(docs)
    assert len(joined.encode()) > 100_000
    for chunk_bytes, lanes in ((4096, 1), (4096, 3), (30_000, 2), (65_536, 4), (1 << 30, 2)):
        assert len(_check(cpu, docs, chunk_bytes, lanes)) > 0
        _check(cpu, [joined], chunk_bytes, lanes)
    # Every safe split a cut (each chunk a few bytes): a few KB of the same text.
    for chunk_bytes, lanes in ((1, 1), (1, 2), (5, 4), (300, 3)):
        _check(cpu, docs[:3] + [joined[:3000]], chunk_bytes, lanes)


def test_regression_segments_that_cannot_be_cut(cpu):
    """A segment with no safe split (no ' ' after a printable character) larger than a chunk
    is one chunk of its own; empty segments still get their end; a segment that ends exactly
    on a chunk's edge closes it; a safe split right at the chunk size is taken."""
    texts = [
        "a" * 10_000,
        "",
        "x y",
        "  \n\n  " * 500,
        "word " * 2000,
        "",
        "日本語 テキスト " * 300,
        "é" * 3000 + " b",
        "",
    ]
    for chunk_bytes in (1, 3, 4, 5, 6, 1000, 9999, 10_000, 10_001):
        for lanes in (1, 2, 4):
            _check(cpu, texts, chunk_bytes, lanes)
    _check(cpu, [], 64, 2)
    _check(cpu, ["", ""], 64, 2)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.text(alphabet=st.sampled_from(list("ab '\n.1é中 \t")), max_size=300), max_size=12
    ),
    chunk_bytes=st.integers(1, 400),
    lanes=st.integers(1, 4),
)
def test_property_chunked_equals_whole(cpu, texts, chunk_bytes, lanes):
    _check(cpu, texts, chunk_bytes, lanes)


def test_long_single_text_in_random_chunks(cpu):
    """One ~1 MB string of words, spaces, newlines and punctuation in random chunk sizes."""
    rng = random.Random(3)
    words = ["the", " ", "  ", "\n", "'s", "don't", "123", "é", "x" * 40, ".", "中文"]
    text = "".join(rng.choice(words) for _ in range(200_000))
    for _ in range(4):
        _check(cpu, [text], rng.randrange(1, 300_000), rng.randrange(1, 5))
