"""A Python model of per_word's warp merge (csrc/cuda/per_word_device.cuh), checked against
plain BPE in tiktoken's order. It runs on the CPU, so the argument in merge_per_word.cu's
header is tested in CI too, not only on the GPU machine.

The model follows the kernel step by step: a multi-rank pass (the greedy set by parity of
descending runs, the threshold T from every pair a chosen merge can create) and, when no T
above the lowest rank is safe, a single-rank pass with the cut. Besides GPT-2's ranks it runs
on small random rank tables, where merges often create lower-ranked pairs, so the fallback
and the cut are exercised as well.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

INF = float("inf")
RANKS_FILE = Path(__file__).resolve().parents[2] / "backend_src/gputok/data/gpt2.tiktoken"


def load_gpt2_ranks() -> dict[bytes, int]:
    out = {}
    for line in RANKS_FILE.read_bytes().splitlines():
        tok, rank = line.split()
        out[base64.b64decode(tok)] = int(rank)
    return out


def bpe_reference(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """tiktoken's loop: merge the lowest-ranked adjacent pair, leftmost on ties."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while True:
        best, at = INF, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1], INF)
            if r < best:
                best, at = r, i
        if at < 0:
            return parts
        parts[at : at + 2] = [parts[at] + parts[at + 1]]


class Counters:
    def __init__(self):
        self.multi = 0
        self.single = 0


def _single_rank_pass(parts, ranks, r):
    """Every non-overlapping rank-r pair, leftmost first, cut after the first merge that
    creates a lower-ranked pair."""
    rank = lambda a, b: ranks.get(a + b, INF)  # noqa: E731
    out, i = [], 0
    while i < len(parts):
        if i + 1 < len(parts) and rank(parts[i], parts[i + 1]) == r:
            merged = parts[i] + parts[i + 1]
            out.append(merged)
            i += 2
            left_low = len(out) >= 2 and rank(out[-2], merged) < r
            right_low = i < len(parts) and rank(merged, parts[i]) < r
            if left_low or right_low:
                out.extend(parts[i:])
                break
        else:
            out.append(parts[i])
            i += 1
    return out


def _multi_rank_pass(parts, ranks):
    """The kernel's multi-rank pass; None when it must fall back."""
    rank = lambda a, b: ranks.get(a + b, INF)  # noqa: E731
    m = len(parts)
    n = m - 1
    R = [rank(parts[k], parts[k + 1]) for k in range(n)]
    r = min(R)
    # descending runs of keys (R[k], k): left bit R[k-1] <= R[k], right bit R[k+1] < R[k]
    d_left = [0] * n
    for k in range(1, n):
        d_left[k] = d_left[k - 1] + 1 if R[k - 1] <= R[k] else 0
    d_right = [0] * n
    for k in range(n - 2, -1, -1):
        d_right[k] = d_right[k + 1] + 1 if R[k + 1] < R[k] else 0
    chosen = [R[k] < INF and d_left[k] % 2 == 0 and d_right[k] % 2 == 0 for k in range(n)]
    merged = {k: parts[k] + parts[k + 1] for k in range(n) if chosen[k]}
    thresh = INF
    for k, M in merged.items():
        q = INF
        if k >= 1:
            q = min(q, rank(parts[k - 1], M))
        if k >= 2 and chosen[k - 2]:
            q = min(q, rank(merged[k - 2], M))
        if k + 2 < m:
            q = min(q, rank(M, parts[k + 2]))
        if k + 2 < n and chosen[k + 2]:
            q = min(q, rank(M, merged[k + 2]))
        thresh = min(thresh, max(R[k], q))
    if thresh <= r:
        return None
    out, i = [], 0
    while i < m:
        if i < n and chosen[i] and R[i] < thresh:
            out.append(merged[i])
            i += 2
        else:
            out.append(parts[i])
            i += 1
    return out


def merge_warp_model(piece: bytes, ranks: dict[bytes, int], counters: Counters | None = None):
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        r = min(ranks.get(parts[k] + parts[k + 1], INF) for k in range(len(parts) - 1))
        if r == INF:
            break
        out = _multi_rank_pass(parts, ranks)
        if out is None:
            out = _single_rank_pass(parts, ranks, r)
            if counters:
                counters.single += 1
        elif counters:
            counters.multi += 1
        parts = out
    return parts


def greedy_set_reference(keys):
    """Pairs taken in key order, skipping those next to a taken one (what the parity rule
    must reproduce)."""
    taken = [False] * len(keys)
    for _, k in sorted((key, k) for k, key in enumerate(keys)):
        if not (k > 0 and taken[k - 1]) and not (k + 1 < len(keys) and taken[k + 1]):
            taken[k] = True
    return taken


# ---------------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def gpt2_ranks():
    return load_gpt2_ranks()


def test_parity_rule_is_the_greedy_set():
    rng = random.Random(3)
    for _ in range(3000):
        n = rng.randint(1, 40)
        ranks = [rng.randint(0, 6) for _ in range(n)]
        keys = [(r, k) for k, r in enumerate(ranks)]
        d_left = [0] * n
        for k in range(1, n):
            d_left[k] = d_left[k - 1] + 1 if keys[k - 1] < keys[k] else 0
        d_right = [0] * n
        for k in range(n - 2, -1, -1):
            d_right[k] = d_right[k + 1] + 1 if keys[k + 1] < keys[k] else 0
        parity = [d_left[k] % 2 == 0 and d_right[k] % 2 == 0 for k in range(n)]
        assert parity == greedy_set_reference(keys), ranks


def test_literal_pieces(gpt2_ranks):
    for piece in (
        b"aaaaaaaa",
        b"aaaaaaaaa",
        "日本語のテキスト".encode(),
        b"0123456789" * 5,
        b"=" * 80,
        b"abcabcabcabc",
        b"  " * 20,
    ):
        assert merge_warp_model(piece, gpt2_ranks) == bpe_reference(piece, gpt2_ranks), piece


def test_corpus_long_pieces(gpt2_ranks):
    """Every piece over 32 bytes of the ci corpus (the ones per_word gives to a warp)."""
    import regex

    from corpus_fixture import load_corpus

    pat = regex.compile(
        r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
    )
    seen, c = set(), Counters()
    for doc in load_corpus("ci")[::4]:
        for p in pat.findall(doc):
            b = p.encode()
            if 32 < len(b) <= 300 and b not in seen:
                seen.add(b)
                assert merge_warp_model(b, gpt2_ranks, c) == bpe_reference(b, gpt2_ranks), b[:60]
    assert len(seen) > 200
    # the point of the multi-rank pass: far fewer passes than one per rank
    assert c.multi > 0


def test_random_pieces_gpt2(gpt2_ranks):
    rng = random.Random(5)
    alphabet = [b"a", b"b", b" ", b"\n", b"0", b"1", b"e", b"th", b"\xe4\xb8", b"\xad", b"="]
    for _ in range(1500):
        alpha = alphabet[: rng.randint(2, len(alphabet))]
        piece = b"".join(rng.choice(alpha) for _ in range(rng.randint(2, 60)))
        assert merge_warp_model(piece, gpt2_ranks) == bpe_reference(piece, gpt2_ranks), piece


def _random_rank_table(rng: random.Random) -> dict[bytes, int]:
    """Byte-level tokens over 'abc', each a merge of two earlier tokens, then SHUFFLED ranks,
    so that merges often create pairs ranked below the one just merged."""
    tokens = [b"a", b"b", b"c"]
    ranks = {}
    while len(ranks) < rng.randint(5, 25):
        t = rng.choice(tokens) + rng.choice(tokens)
        if t not in ranks and len(t) <= 8:
            ranks[t] = len(ranks)
            tokens.append(t)
    order = list(ranks)
    rng.shuffle(order)
    return {t: i for i, t in enumerate(order)}


def test_random_rank_tables_take_the_fallback():
    rng = random.Random(9)
    c = Counters()
    for _ in range(400):
        ranks = _random_rank_table(rng)
        for _ in range(10):
            piece = bytes(rng.choice(b"abc") for _ in range(rng.randint(2, 40)))
            assert merge_warp_model(piece, ranks, c) == bpe_reference(piece, ranks), (piece, ranks)
    assert c.single > 0 and c.multi > 0
