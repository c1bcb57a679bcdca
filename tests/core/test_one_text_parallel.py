"""One long text on every core: cut at safe split points into chunks of about two per
hardware thread (8 KiB at least), the same ids as tiktoken."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def text(corpus):
    return "".join(corpus)[:700_000]


@pytest.mark.parametrize("size", [30_000, 33_000, 70_000, 250_000, 700_000])
def test_long_text_matches_tiktoken(tok, ref, text, size):
    t = text[:size]
    want = ref.encode_ordinary(t)
    assert len(want) > 1000
    assert tok.encode_ordinary(t) == want
    assert tok.encode_ordinary(t.encode()) == want


def test_long_text_with_specials_and_repairs(tok, ref, text):
    # 300 KB: long enough to be split on every machine (128 KiB on 2 threads)
    t = text[:150_000] + "<|endoftext|>" + text[150_000:300_000]
    want = ref.encode(t, allowed_special="all")
    assert 50256 in want
    assert tok.encode(t, allowed_special="all") == want
    bad = t.encode()[:200_000] + b"\xff" + t.encode()[200_000:]
    fixed = bad.decode("utf-8", "replace")
    assert tok.encode(bad, allowed_special="all", errors="replace") == ref.encode(
        fixed, allowed_special="all"
    )
