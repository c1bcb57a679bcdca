"""Hypothesis properties: round trip, equality with tiktoken on random text and random
bytes, and UTF-8 repair equal to CPython's decoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok import _core

# Characters that stress the scanner: every class, contractions, the White_Space oddities.
TRICKY = list("aZ09 '\t\n\r\x0b\x0c!?.,-_") + [
    "s",
    "t",
    "re",
    "ve",
    "ll",
    "d",
    "m",
    "S",
    "T",
    "\u00a0",
    "\u0085",
    "\u1680",
    "\u2000",
    "\u2028",
    "\u3000",
    "\u200b",
    "\ufeff",
    "\u180e",
    "\x1c",
    "é",
    "日",
    "🎉",
    "\U0001f3fd",
    "Ⅻ",
    "½",
    "\u0301",
    "\U00010940",
]
texts = st.lists(
    st.one_of(st.sampled_from(TRICKY), st.characters(exclude_categories=("Cs",))),
    max_size=200,
).map("".join)
SETTINGS = settings(max_examples=400)  # deadline and health checks: conftest's profile


@SETTINGS
@given(texts)
def test_roundtrip(tok, s):
    assert tok.decode(tok.encode_ordinary(s)) == s


@SETTINGS
@given(texts)
def test_equals_tiktoken_on_text(tok, ref, s):
    assert tok.encode_ordinary(s) == ref.encode_ordinary(s)


@SETTINGS
@given(st.lists(texts, max_size=20), st.integers(1, 4))
def test_batch_equals_single(tok, ref, batch, threads):
    assert tok.encode_ordinary_batch(batch, num_threads=threads) == [
        ref.encode_ordinary(s) for s in batch
    ]


@SETTINGS
@given(st.binary(max_size=300))
def test_equals_tiktoken_on_random_bytes(tok, ref, b):
    text = b.decode("utf-8", "replace")
    assert tok.encode_ordinary(b, errors="replace") == ref.encode_ordinary(text)


@SETTINGS
@given(st.binary(max_size=64))
def test_utf8_repair_equals_cpython(b):
    assert _core.utf8_replace(b) == b.decode("utf-8", "replace").encode("utf-8")


@SETTINGS
@given(st.binary(max_size=64))
def test_strict_error_names_cpython_offset(tok, b):
    try:
        b.decode("utf-8")
    except UnicodeDecodeError as e:
        with pytest.raises(ValueError, match=f"at byte offset {e.start} "):
            tok.encode_ordinary(b)
    else:
        assert tok.encode_ordinary(b) == tok.encode_ordinary(b.decode("utf-8"))


@SETTINGS
@given(st.lists(st.integers(0, 50256), max_size=100))
def test_decode_bytes_concatenates_tokens(tok, ids):
    assert tok.decode_bytes(ids) == b"".join(tok.decode_single_token_bytes(i) for i in ids)


@SETTINGS
@given(texts, texts)
def test_specials_split_like_tiktoken(tok, ref, a, b):
    s = a + "<|endoftext|>" + b
    assert tok.encode(s, allowed_special="all") == ref.encode(s, allowed_special="all")
