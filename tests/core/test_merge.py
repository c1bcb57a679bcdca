"""The merge table and the merge loops against their simplest statement."""

from __future__ import annotations

import random

import pytest

import gputok


@pytest.fixture(scope="module")
def vocab():
    return gputok.gpt2_vocab()


def test_pair_table_is_tiktokens_concatenation_lookup(vocab, ref):
    # Every pair (a, b) whose bytes concatenate to a token merges to it, at its rank.
    ranks = ref._mergeable_ranks
    rng = random.Random(0)
    tokens = rng.sample(sorted(ranks, key=ranks.get), 3000)
    for t in tokens:
        for k in range(1, len(t)):
            left, right = ranks.get(t[:k]), ranks.get(t[k:])
            if left is not None and right is not None:
                assert vocab.pair(left, right) == (ranks[t], ranks[t])
    assert vocab.pair(31373, 995) is None  # "hello" + " world" is no token
    assert vocab.table_capacity >= 2 * vocab.n_pairs  # load <= 50%


@pytest.mark.parametrize("n", [2, 5, 31, 32, 33, 127, 128, 500, 3000])
def test_heap_merge_equals_reference(vocab, n):
    rng = random.Random(n)
    for alphabet in (b"a", b"ab", b"aab ", bytes(range(256)), "日本🎉".encode()):
        piece = bytes(rng.choice(alphabet) for _ in range(n))
        assert vocab.merge(piece) == vocab.merge_reference(piece)


def test_scan_merge_equals_reference_at_every_short_length(vocab, ref, corpus):
    """Pieces under 32 bytes take the array scan (merge.cpp's merge_scan): every length from 1
    to 31, alphabets that tie ranks everywhere (one letter, two) or rarely (all bytes, CJK),
    and real pieces of the corpus, against the reference and tiktoken."""
    rng = random.Random(7)
    pieces = [b"x"]
    for n in range(2, 32):
        for alphabet in (b"a", b"ab", b"aab ", b" \n", bytes(range(256)), "日本🎉".encode()):
            pieces += [bytes(rng.choice(alphabet) for _ in range(n)) for _ in range(3)]
    words = [w.encode() for d in corpus[:200] for w in d.split(" ") if 1 < len(w.encode()) < 32]
    pieces += words[:3000]
    for piece in pieces:
        got = vocab.merge(piece)
        assert got == vocab.merge_reference(piece) and got != [], piece
    for piece in words[:3000:10]:
        assert vocab.merge(piece) == ref._encode_single_piece(piece), piece


def test_whole_piece_lookup_equals_bpe(vocab, ref):
    # tiktoken returns a piece's own id when it is a token; BPE of every r50k token's bytes
    # yields that token, so the GPU (which only merges) may skip the lookup.
    for token, rank in ref._mergeable_ranks.items():
        assert vocab.merge_reference(token) == [rank]


def test_token_index_keys_carry_the_length(ref):
    # The token index keys a piece by zero-padded words and its length, and keeps tokens of
    # up to 8 bytes in a table of their own: "!" and "!\0" share their word and differ only in
    # length; tokens of 8 and 9 bytes, and their prefixes, sit on either side of the split.
    tok = gputok.gpt2(device="cpu")
    texts = [t + "\x00" * k for t in ("!", ".", "...", "!!!!!!!", "????????") for k in range(1, 10)]
    for token in ref._mergeable_ranks:
        if 7 <= len(token) <= 10:
            try:
                text = token.decode()
            except UnicodeDecodeError:
                continue
            texts += [text, text[:-1], text + "\x00"]
    got = tok.encode_batch(texts)
    want = ref.encode_ordinary_batch(texts)
    assert len(texts) > 5000 and got == want
