"""csrc/corpus/split.cpp: the separators of a text shard (``gputok corpus --text-separator``), found
natively. Every case is checked against the plain definition: a ``bytes.find`` loop that
resumes after each match, which is where ``bytes.split`` cuts."""

from __future__ import annotations

import mmap
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok import _corpus_native
from gputok import corpus as C

MEMCHR_MAX_SEP = 8  # csrc/corpus/split.h kMemchrMaxSep: longer separators take the memmem path


def reference(data: bytes, sep: bytes) -> list[int]:
    out, p = [], data.find(sep)
    while p >= 0:
        out.append(p)
        p = data.find(sep, p + len(sep))
    return out


def found(data, sep: bytes) -> list[int]:
    got = _corpus_native.find_separators(data, sep)
    assert got.dtype == np.int64
    return got.tolist()


def test_literal_cases():
    assert found(b"a\n\nb\n\n\nc", b"\n\n") == [1, 4]  # leftmost, then resume after it
    assert found(b"aaaa", b"aa") == [0, 2]
    assert found(b"aaa", b"aa") == [0]
    assert found(b"", b"\n") == []
    assert found(b"ab", b"abc") == []  # longer than the text
    assert found(b"abc", b"abc") == [0]
    assert found(b"xyz\x1e\n", b"\x1e\n") == [3]  # at the very end
    assert found(b"\x1e", b"\x1e\n") == []  # a first byte with no room for the rest
    assert found(b"0123456789" * 3, b"0123456789") == [0, 10, 20]  # memmem path


@pytest.mark.parametrize("k", [1, 2, 3, MEMCHR_MAX_SEP, MEMCHR_MAX_SEP + 1, 12, 40])
def test_random_texts_match_the_find_loop(k):
    # A two-letter alphabet makes matches, near-matches and overlaps common, on both sides
    # of the memchr / memmem boundary.
    rng = random.Random(k)
    for _ in range(300):
        sep = bytes(rng.choice(b"ab") for _ in range(k))
        data = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 4 * k + 60)))
        if rng.random() < 0.5:  # plant copies of the separator, some overlapping
            for _ in range(rng.randint(1, 4)):
                at = rng.randint(0, len(data))
                data = data[:at] + sep + data[at + rng.randint(0, k) :]
        assert found(data, sep) == reference(data, sep), (data, sep)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300),
    st.binary(min_size=1, max_size=12),
    st.lists(st.integers(0, 300), max_size=5),
)
def test_property_equals_the_find_loop(data, sep, plants):
    for at in plants:
        data = data[:at] + sep + data[at:]
    at = found(data, sep)
    assert at == reference(data, sep)
    # and the documents between them are bytes.split's
    starts = [0] + [p + len(sep) for p in at]
    ends = [*at, len(data)]
    assert [data[a:b] for a, b in zip(starts, ends, strict=True)] == data.split(sep)


def test_long_separator_over_a_run_of_its_prefix_is_linear():
    # The case that is quadratic for "find the first byte, then compare the rest": every
    # position starts a near-match of 200 bytes. The memmem path scans it once.
    data = b"a" * 4_000_000
    assert found(data, b"a" * 200 + b"b") == []
    assert found(data + b"b", b"a" * 200 + b"b") == [len(data) - 200]
    assert found(data, b"a" * 9) == list(range(0, len(data) - 8, 9))


def test_buffer_types_and_errors(tmp_path):
    data = b"one\x1e\ntwo\x1e\nthree"
    for buf in (data, bytearray(data), memoryview(data)):
        assert found(buf, b"\x1e\n") == [3, 8]
    p = tmp_path / "a.txt"
    p.write_bytes(data)
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert found(m, b"\x1e\n") == [3, 8]
    with pytest.raises(ValueError, match="must not be empty"):
        _corpus_native.find_separators(data, b"")
    with pytest.raises(TypeError):
        _corpus_native.find_separators("text", b"\n")  # str is not a buffer


def test_corpus_reader_uses_it():
    data = b"a\x1e\nb\x1e\n\x1e\nc"
    assert C._find_all(data, b"\x1e\n").tolist() == reference(data, b"\x1e\n")
