"""Pathological inputs: 1 MB runs of one character class, with a generous time bound.

tiktoken 0.14 is the reference where it works; on ~1M whitespace characters followed by a
non-space it panics (fancy-regex stack overflow), and HF tokenizers is the reference there
(REFERENCE.md). The bound (10 s) catches quadratic blow-up: O(n^2) at 1 MB is hours.
"""

from __future__ import annotations

import time

import pytest

N = 1_000_000
TIME_BOUND_S = 10.0

CASES = {
    "letters": "a" * N,
    "spaces": " " * N,
    "digits": "1" * N,
    "punctuation": "!" * N,
    "apostrophes": "'" * N,
    "emoji": "🎉" * (N // 4),
    "cjk": "日" * (N // 3),
    "alternating": "ab" * (N // 2),
    "words": "a " * (N // 2),
    "newlines": "\n" * N,
    "contractions": "'s" * (N // 2),
}
# tiktoken overflows its regex stack on these; HF tokenizers is the reference.
HF_ONLY = {
    "spaces_then_letter": " " * N + "a",
    "newlines_then_letter": "\n" * N + "a",
    "mixed_ws_then_letter": " \n" * (N // 2) + "x",
}


def _timed(fn, text):
    start = time.perf_counter()
    out = fn(text)
    return out, time.perf_counter() - start


@pytest.mark.parametrize("name", sorted(CASES))
def test_pathological_vs_tiktoken(tok, ref, name):
    text = CASES[name]
    got, elapsed = _timed(tok.encode_ordinary, text)
    want = ref.encode_ordinary(text)
    assert want, "reference returned empty ids"
    assert got == want
    assert elapsed < TIME_BOUND_S, f"{name}: {elapsed:.2f} s for 1 MB"


@pytest.mark.parametrize("name", sorted(HF_ONLY))
def test_pathological_vs_hf(tok, hf, name):
    text = HF_ONLY[name]
    got, elapsed = _timed(tok.encode_ordinary, text)
    want = hf.encode(text).ids
    assert want, "reference returned empty ids"
    assert got == want
    assert elapsed < TIME_BOUND_S


def test_long_piece_is_not_quadratic(tok):
    # Doubling the length of one piece must not quadruple the time.
    _, t1 = _timed(tok.encode_ordinary, "x" * (N // 2))
    _, t2 = _timed(tok.encode_ordinary, "x" * N)
    assert t2 < 4 * t1 + 0.2, f"{t1:.3f} s -> {t2:.3f} s"


def test_pathological_batch_threads(tok, ref):
    texts = [CASES["letters"][:200_000], CASES["digits"][:100_000], "hello " * 50_000]
    want = [ref.encode_ordinary(t) for t in texts]
    for threads in (1, 2, 4):
        assert tok.encode_ordinary_batch(texts, num_threads=threads) == want
