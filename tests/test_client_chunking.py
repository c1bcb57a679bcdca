"""The client's large-file splitter: token ids of the pieces, concatenated, equal the whole's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok_client.chunking import is_safe_cut, split_text

ALPHABET = list("ab Z9'.\n\t\r -é日\u00a0\u3000") + [
    "'s",
    "'ll",
    " x",
    "\n\n",
    "<|endoftext|>",
    "\u2028",
    "🎉",
]


def pieces_ids(ref, data: bytes, target: int) -> list[int]:
    out = []
    for a, b in split_text(data, target):
        out += ref.encode_ordinary(data[a:b].decode("utf-8"))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET), min_size=0, max_size=300), st.integers(2, 64))
def test_pieces_equal_whole_random(ref, parts, target):
    text = "".join(parts)
    data = text.encode("utf-8")
    try:
        got = pieces_ids(ref, data, target)
    except ValueError:
        return  # no safe cut in the window: the client sends bigger pieces instead
    assert got == ref.encode_ordinary(text)


def test_pieces_equal_whole_corpus(ref, corpus):
    text = "".join(corpus[:40])
    data = text.encode("utf-8")
    pieces = split_text(data, 4096)
    assert len(pieces) > 10
    assert pieces[0][0] == 0 and pieces[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))
    want = ref.encode_ordinary(text)
    assert want
    assert pieces_ids(ref, data, 4096) == want


def test_safe_cut_rules():
    assert is_safe_cut(b"ab\ncd", 3)
    assert not is_safe_cut(b"ab \ncd", 4)  # whitespace run before the newline
    assert not is_safe_cut(b"ab\n\ncd", 4)
    assert is_safe_cut(b"ab cd", 2)
    assert not is_safe_cut(b"ab  cd", 3)
    assert not is_safe_cut(b"ab 9d", 2)
    assert not is_safe_cut(b"abcd", 2)


def test_no_safe_cut_raises():
    with pytest.raises(ValueError, match="no safe split point"):
        split_text(b"x" * 1000, 10, 100)
    assert split_text(b"", 10) == [(0, 0)]
    assert split_text(b"short", 10) == [(0, 5)]
