"""The client's large-file splitter: token ids of the pieces, concatenated, equal the whole's."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok_client.chunking import char_class, is_safe_cut, split_text

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


# Lines with no whitespace at all (the 6 MB line case) are cut at class changes only.
NO_SPACE = list("abZ9'.,;-é日本\u3002\uff0c\u00a0") + ["'s", "<|endoftext|>", "🎉", "Ж", "٣"]


@pytest.mark.parametrize("alphabet", [ALPHABET, NO_SPACE], ids=["spaces", "no-spaces"])
@settings(max_examples=300, deadline=None)
@given(data=st.data(), target=st.integers(2, 64))
def test_pieces_equal_whole_random(ref, alphabet, data, target):
    text = "".join(data.draw(st.lists(st.sampled_from(alphabet), max_size=300)))
    try:
        got = pieces_ids(ref, text.encode("utf-8"), target)
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
    assert is_safe_cut(b"ab 9d", 2)  # rule 1: before whitespace that follows a non-space
    assert not is_safe_cut(b"abcd", 2)
    assert not is_safe_cut(b"1234", 2)
    assert not is_safe_cut(b"a,,b", 2)


def test_class_change_cuts():
    """Rule 2: between letters, numbers and other characters with no whitespace at all."""
    assert is_safe_cut(b"ab12", 2) and is_safe_cut(b"12ab", 2) and is_safe_cut(b"ab,cd", 2)
    assert is_safe_cut(b"ab,cd", 3)
    text = "数据，模型。"
    data = text.encode()
    assert is_safe_cut(data, len("数据".encode()))
    assert not is_safe_cut(data, len("数".encode()))  # one run of letters
    assert not is_safe_cut(data, 1)  # inside a character


def test_no_cut_after_an_apostrophe():
    """`'s`, `'ll`, ... are one pretoken: X = ' never starts a cut."""
    assert not is_safe_cut(b"it's", 3)
    assert not is_safe_cut(b"we'll", 3)
    assert is_safe_cut(b"it's", 2)  # before the contraction


def test_regression_never_cuts_inside_a_special_token():
    """`<|endoftext|>` has class changes inside (`<|` | `endoftext`): a cut there would hide the
    token from the server's disallowed-special check, and change the ids with allowed_special."""
    data = b"ab<|endoftext|>cd<|fim_prefix|>"
    inside = [p for p in range(3, 15)] + [p for p in range(18, len(data))]
    assert not [p for p in inside if is_safe_cut(data, p)]
    assert is_safe_cut(data, 2) and is_safe_cut(data, 15)


def _every_cut_exact(ref, step: int) -> int:
    """For every code point Python assigns (every `step`-th), beside each kind of neighbour:
    each cut is_safe_cut allows gives the ids of the whole (tiktoken classifies with Unicode 16,
    this Python's unicodedata may be older). Returns the number of cuts checked."""
    probes = ["a", "1", ".", "\u4e00", "'", " ", "\n", "\u00e9", "\u0663", "\u3000"]
    n = 0
    for cp in range(0x80, 0x110000, step):
        ch = chr(cp)
        if 0xD800 <= cp < 0xE000 or char_class(ch) is None:
            continue
        for q in probes:
            for text in (q + ch, ch + q):
                data = text.encode()
                for p in range(1, len(data)):
                    if is_safe_cut(data, p):
                        n += 1
                        a, b = data[:p].decode(), data[p:].decode()
                        assert ref.encode_ordinary(a) + ref.encode_ordinary(b) == (
                            ref.encode_ordinary(text)
                        ), (hex(cp), text, p, unicodedata.unidata_version)
    return n


def test_cuts_exact_for_sampled_code_points(ref):
    assert _every_cut_exact(ref, 97) > 1000


@pytest.mark.slow
def test_cuts_exact_for_every_code_point(ref):
    """About 90 s on the 2-core machine (Python 3.11, Unicode 14 tables: no mismatch)."""
    assert _every_cut_exact(ref, 1) > 1_000_000, sys.version


def test_no_safe_cut_raises():
    with pytest.raises(ValueError, match="no exact split point"):
        split_text(b"x" * 1000, 10, 100)
    assert split_text(b"", 10) == [(0, 0)]
    assert split_text(b"short", 10) == [(0, 5)]
