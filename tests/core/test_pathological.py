"""Pathological inputs: 1 MB runs of one character class, with a generous time bound.

tiktoken 0.14 is the reference where it works; on ~1M whitespace characters followed by a
non-space it panics (fancy-regex stack overflow), and HF tokenizers is the reference there.
The bound (10 s) catches quadratic blow-up: O(n^2) at 1 MB is hours.
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


def _best_seconds(fn, text, reps: int, batches: int = 5) -> float:
    """The fastest of `batches` timings of `reps` calls: the minimum drops the noise that
    other jobs on a shared CI machine add (it only ever adds time)."""
    best = float("inf")
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(reps):
            fn(text)
        best = min(best, time.perf_counter() - start)
    return best


def test_long_piece_is_not_quadratic(tok):
    """One long piece ("x" * n: no whole-token hit, never cached) four times longer must take
    about four times longer, not sixteen. The bound, 8x, is the geometric middle of linear
    (4x) and quadratic (16x), so neither noise nor a quadratic merge passes for the other.
    Sizes are small enough that a quadratic merge fails in a second instead of hanging: at
    16 KiB the linked-list scan alone (merge.cpp's path below 32 bytes, used for every length)
    takes ~16x the heap's time. Mutation check: kHeapThreshold = 1 << 30 fails this test."""
    small, large = "x" * 4096, "x" * 16384
    assert tok.encode_ordinary(large), "empty ids"
    one = _best_seconds(tok.encode_ordinary, small, reps=1)
    reps = max(1, int(0.02 / max(one, 1e-6)))  # a batch of >= 20 ms on the small text
    t_small = _best_seconds(tok.encode_ordinary, small, reps)
    t_large = _best_seconds(tok.encode_ordinary, large, reps)
    ratio = t_large / t_small
    assert ratio < 8, f"4x the length took {ratio:.1f}x the time ({t_small:.4f} -> {t_large:.4f} s)"


def test_pathological_batch_threads(tok, ref):
    texts = [CASES["letters"][:200_000], CASES["digits"][:100_000], "hello " * 50_000]
    want = [ref.encode_ordinary(t) for t in texts]
    for threads in (1, 2, 4):
        assert tok.encode_ordinary_batch(texts, num_threads=threads) == want
