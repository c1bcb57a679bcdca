"""GPU path: ids equal the CPU path's and tiktoken's, for every merge algorithm.

Skipped where no CUDA device is usable (CI). On the GPU machine, scripts/gpu_check.sh runs
this file, test_gpu_paths.py (each device path and switch) and test_gpu_resources.py (threads,
device memory, the largest calls). Every comparison is GPU == CPU == tiktoken (HF where
tiktoken is known to fail), and asserts non-empty reference output.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from gpu_compare import ALGORITHMS, assert_same, check_all

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: references

gputok = pytest.importorskip("gputok")
_ok, _why = gputok.cuda_available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"no usable GPU: {_why}")


# -------------------------------------------------------------------------- literals


LITERALS = [
    ("hello world", [31373, 995]),
    ("a   b", [64, 220, 220, 275]),
    ("<|endoftext|>", [27, 91, 437, 1659, 5239, 91, 29]),
]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_literals(gpus, algorithm):
    for text, ids in LITERALS:
        assert gpus[algorithm].encode_ordinary(text) == ids


def test_tokenize_batch_returns_kernel_time(gpus):
    ids, ms = gpus["per_word"].tokenize_batch(["hello world", "a   b"])
    assert ids == [[31373, 995], [64, 220, 220, 275]]
    assert isinstance(ms, float) and ms > 0.0


def test_special_tokens_on_gpu(gpus, tt):
    t = "a<|endoftext|>b  <|endoftext|>"
    for a in ALGORITHMS:
        assert gpus[a].encode(t, allowed_special="all") == tt.encode(t, allowed_special="all")


# -------------------------------------------------------------------------- corpus


def test_corpus(corpus, gpus, cpu, tt):
    check_all(list(corpus), gpus, cpu, tt, label="corpus")


def test_corpus_one_string(corpus, gpus, cpu, tt):
    """The whole corpus as one sequence (many pieces, one unit)."""
    text = "".join(corpus[:400])
    check_all([text], gpus, cpu, tt, algorithms=("per_word", "blockbpe_optimized"), label="joined")


def test_cpu_pretokenize_option(corpus, tt):
    g = gputok.gpt2(device="cuda", gpu_pretokenize=False)
    texts = list(corpus[:300])
    assert_same(
        texts, g.encode_ordinary_batch(texts), tt.encode_ordinary_batch(texts), "cpu-pretok"
    )


# -------------------------------------------------------------------------- sweeps


def _codepoint_docs():
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    docs = []
    for i in range(0, len(cps), 512):
        parts = []
        for c in cps[i : i + 512]:
            ch = chr(c)
            parts.append(f"a{ch}b {ch}{ch} 1{ch}'s {ch}\n{ch}  {ch}")
        docs.append("".join(parts))
    return docs


def test_every_codepoint(gpus, cpu, tt):
    docs = _codepoint_docs()
    check_all(docs, gpus, cpu, tt, algorithms=("per_word", "blockbpe"), label="codepoints")


def test_every_codepoint_alone(gpus, tt):
    """Each scalar value as its own text (unit start and end on the same character)."""
    texts = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert_same(texts, gpus["per_word"].encode_ordinary_batch(texts), want, "single codepoints")


def test_every_token_merges_to_itself(gpus, cpu):
    """tiktoken returns a piece's own rank when the piece is a token; plain BPE agrees for
    r50k: BPE of a token's bytes is that token (for every token that is one piece)."""
    texts, want = [], []
    for i in range(50256):
        b = cpu.decode_single_token_bytes(i)
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(cpu._vocab.pieces(b)) != 1:
            continue
        texts.append(s)
        want.append([i])
    assert len(texts) > 40000
    for a in ALGORITHMS:
        assert_same(texts, gpus[a].encode_ordinary_batch(texts), want, f"{a} tokens")


# -------------------------------------------------------------------------- pathological


# Unicode whitespace (and near-whitespace) the pretokenizer must classify as tiktoken does.
_WHITESPACE = [
    "\u00a0",
    "\u0085",
    "\u000b",
    "\u1680",
    "\u2000",
    "\u200a",
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
    "\u180e",
    "\u200b",
    "\ufeff",
    "\u001c",
    "\t",
    "\r\n",
]
# Edge cases of contractions, whitespace runs, digits, punctuation, scripts and long runs.
_EDGE_TEXTS = [
    "",
    " ",
    "  ",
    "a",
    "'",
    "'s",
    "''s",
    "DON'T",
    "don't",
    "it's'll've're'd'm't",
    "x'S 'S 's",
    " 's",
    "  's",
    "\n's",
    "1's",
    "!'s",
    "'ll'",
    "'l",
    "'v'e",
    "a \n\nb",
    "a   b",
    "a\n\n\n",
    "   ",
    "\n",
    " \n ",
    "a \t b",
    "1000",
    "12345678901234567890",
    "$$$ ...!!!",
    "hello\u00a0world",
    "🙂🙂🙂 🙂",
    "日本語のテキスト、です。",
    "Привет, мир!",
    "a" * 5000,
    " " * 3000 + "a",
    "\n" * 3000 + "b",
    "1" * 4000,
    "ab" * 3000,
    "aaa",
    "aaaa",
    "aaaaa",
    "a" * 33,
    "a" * 513,
    "abc" * 1000,
    "." * 2000,
    "x" + "'s" * 500,
    "é" * 2000,
    "🙂" * 600,
    "ウ" * 1500,
]
# Where each of _WHITESPACE goes: alone, repeated, between letters, before a contraction.
_AROUND_WHITESPACE = [
    "{w}",
    "{w}{w}{w}",
    "a{w}b",
    "a{w}{w}b",
    "a {w}b",
    "a{w} b",
    "{w}'s",
    "a{w}",
    "{w}a",
    "x {w}{w} y",
    "1{w}2",
]


def _pathological():
    out = _EDGE_TEXTS + [t.format(w=w) for w in _WHITESPACE for t in _AROUND_WHITESPACE]
    rng = random.Random(7)
    alphabet = ["a", "b", " ", "'", "s", "l", "1", "\n", "é", "日", "!", "\u00a0", "🙂", "A", "t"]
    for _ in range(2000):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))))
    return out


def test_pathological(gpus, cpu, tt):
    texts = _pathological()
    check_all(texts, gpus, cpu, tt, label="pathological")


def test_small_inputs_one_by_one(corpus, gpus, tt):
    """Chunks of <= 4 KB take per_word's fused one-block kernel: check it text by text
    (longer ones here take the multi-kernel path)."""
    texts = _pathological()[:1200] + [d for d in corpus[:300] if len(d.encode()) <= 16384]
    texts += ["".join(chr(c) for c in range(b, b + 300)) for b in range(0, 0x30000, 4099)]
    g = gpus["per_word"]
    for t in texts:
        want = tt.encode_ordinary(t)
        assert g.encode_ordinary(t) == want, t[:80]


def test_long_pieces_per_word(gpus, cpu, tt):
    """Pieces longer than the warp's shared capacity go through global memory."""
    rng = random.Random(11)
    texts = []
    for n in (31, 32, 33, 64, 511, 512, 513, 600, 2000, 20000):
        for alpha in (
            "a",
            "ab",
            "aeiou",
            "abcdefghijklmnopqrstuvwxyz",
            "0123456789",
            "日本語",
            "éa",
            "!?.",
            "lo",
        ):
            texts.append("".join(rng.choice(alpha) for _ in range(n)))
    texts.append("a" * 200_000)
    texts.append("7" * 100_000)
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert_same(texts, gpus["per_word"].encode_ordinary_batch(texts), want, "long pieces")
    assert_same(texts, cpu.encode_ordinary_batch(texts), want, "long pieces cpu")


def test_whitespace_runs_where_tiktoken_fails(gpus, cpu):
    """tiktoken panics on ~1M spaces then a letter (fancy-regex stack overflow, tiktoken 0.14); HF is the reference."""
    from references import hf_gpt2

    hf = hf_gpt2()
    for text in (" " * 1_000_000 + "a", "\n" * 1_000_000 + "b"):
        want = hf.encode(text).ids
        assert want
        assert gpus["per_word"].encode_ordinary(text) == want
        assert cpu.encode_ordinary(text) == want


# -------------------------------------------------------------------------- hypothesis

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_chars = st.one_of(
    st.characters(blacklist_categories=("Cs",)),
    st.sampled_from(list(" \n\t'sdmtlvre0123abc\u00a0\u3000!.")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(_chars, max_size=80), min_size=1, max_size=12))
def test_hypothesis_batches(gpus, cpu, tt, texts):
    check_all(texts, gpus, cpu, tt, label="hypothesis")
