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


def test_whole_piece_lookup_equals_bpe(vocab, ref):
    # tiktoken returns a piece's own id when it is a token; BPE of every r50k token's bytes
    # yields that token, so the GPU (which only merges) may skip the lookup.
    for token, rank in ref._mergeable_ranks.items():
        assert vocab.merge_reference(token) == [rank]
