"""The GPU's learned cache (cuda/learned_cache.cuh): pieces the fused kernels merged, kept on
the device for later calls. Every call, cold and warm, on the one-launch paths (up to 4 KB:
small.cu; 4 KB-528 KiB: fused_lean.cu) against tiktoken; a repeated call finds what it learned
(nothing new is kept); a cache too small for the text stays exact and within its size;
threads whose calls race to learn and to read the same pieces stay exact. Skipped where no
CUDA device is usable; scripts/gpu_check.sh runs it on the GPU machine."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

gputok = pytest.importorskip("gputok")
_ok, _why = gputok.cuda_available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"no usable GPU: {_why}")


def _inputs(corpus):
    """Texts with many pieces that are not one token, of every length the cache keeps (3-255
    bytes) and beyond it: words of six scripts, CJK runs, long words, digit and space runs, and
    pieces of 200-300 letters (one thread's merge below 33 bytes, a warp's above)."""
    rng = random.Random(23)
    letters = "abcdefghijklmnopqrstuvwxyzäöüéèçñαβγδεζηθабвгдежзийклм"
    words = [
        " " + "".join(rng.choice(letters) for _ in range(rng.randint(3, 40))) for _ in range(300)
    ]
    long_words = [" " + "".join(rng.choice("qxzjkv") for _ in range(n)) for n in (200, 254, 300)]
    joined = "".join(corpus[:400])
    small = [
        "".join(rng.choice(words) for _ in range(200)).encode()[:4000].decode("utf-8", "ignore")
    ]
    mid = ["".join(rng.choice(words + long_words) for _ in range(1500))]
    mixed = [joined[:20_000] + "日本語のテキストを書く" * 300 + " 1234567890" * 50 + "   \n" * 40]
    docs = [d for d in corpus if 200 < len(d.encode()) < 2500][:30]
    return {"small": small, "mid": mid, "mixed": mixed, "docs": docs}


def _expect(ref, texts):
    want = ref.encode_ordinary_batch(texts, num_threads=8)
    flat = [t for w in want for t in w]
    assert flat, "tiktoken returned nothing: reference misbuilt"
    return np.array(flat), np.cumsum([0] + [len(w) for w in want])


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"learn_thread_min": 3},
        {"learn_thread_min": 0, "learn_thread_min_small": 0},
        {"learn_thread_min": 0, "learn_early": True},
        {"learn_thread_min": 3, "learn_early": True},
    ],
)
def test_cold_and_warm_calls_are_exact_and_a_repeat_learns_nothing(corpus, ref, fields):
    """Three calls of each input on a fresh tokenizer (cold, then warm: the second and third
    find every piece the first learned), and the same on one without the cache. A repeat that
    keeps nothing new shows the finds hit: a find that never matched would learn again.
    GpuTuning's defaults: warp pieces learn, and one-thread merges from 9 bytes (from 3 in
    the small kernel's chunks, learn_thread_min_small); 0: never; learn_early: the thread
    that lists a warp piece looks it up first."""
    tuning = gputok.GpuTuning()
    for name, value in fields.items():
        setattr(tuning, name, value)
    g = gputok.gpt2(device="cuda", gpu_tuning=tuning)
    off = gputok.gpt2(device="cuda", gpu_cache_bytes=0)
    for label, texts in _inputs(corpus).items():
        assert sum(len(t.encode()) for t in texts) <= 128 * 1024, "not a one-launch path"
        ids_want, offs_want = _expect(ref, texts)
        kept = []
        for call in range(3):
            ids, offs = g.encode_batch_flat(texts, disallowed_special=())
            assert np.array_equal(ids, ids_want), f"{label}, call {call}: ids differ"
            assert np.array_equal(offs, offs_want), f"{label}, call {call}: offsets differ"
            kept.append(g.gpu_counters()["learned_bytes"])
        assert kept[0] > 0, f"{label}: nothing learned"
        assert kept[1] == kept[0] == kept[2], f"{label}: a repeat learned again: {kept}"
        ids, _ = off.encode_batch_flat(texts, disallowed_special=())
        assert np.array_equal(ids, ids_want), f"{label}: ids differ without the cache"
        assert off.gpu_counters()["learned_bytes"] == 0
    for text in _inputs(corpus)["docs"]:  # one text at a time: encode() and its array
        assert g.encode_ordinary(text) == ref.encode_ordinary(text)
        assert g.encode_to_numpy(text).tolist() == ref.encode(text, disallowed_special=())


def test_a_full_cache_stays_exact_and_within_its_size(corpus, ref):
    """64 KiB (its least: ~48 KiB of entries) for ~90 KB of distinct words per call: it fills
    in the first call and keeps what it has."""
    g = gputok.gpt2(device="cuda", gpu_cache_bytes=1 << 16)
    rng = random.Random(5)
    for call in range(4):
        words = [
            " " + "".join(rng.choice("bcdfghklmnprstvwz") for _ in range(12)) for _ in range(7000)
        ]
        texts = ["".join(words)]
        ids_want, _ = _expect(ref, texts)
        ids, _ = g.encode_batch_flat(texts, disallowed_special=())
        assert np.array_equal(ids, ids_want), f"call {call}: ids differ"
        assert 0 < g.gpu_counters()["learned_bytes"] <= 1 << 16


def test_threads_learning_the_same_pieces_at_once_stay_exact(corpus, ref):
    """8 threads on one tokenizer (4 calls run at once, each on a stream of its own), each
    with its own mix of the same words, so one call's kernels learn pieces that another's are
    looking up."""
    g = gputok.gpt2(device="cuda")
    rng = random.Random(11)
    vocab = [
        " " + "".join(rng.choice("aeiouxyzqwrtsdfg") for _ in range(rng.randint(3, 30)))
        for _ in range(2000)
    ]
    jobs = []
    for _ in range(8):
        texts = ["".join(rng.choice(vocab) for _ in range(rng.randint(200, 3000)))]
        jobs.append((texts, _expect(ref, texts)[0]))
    failures = []

    def work(k):
        texts, want = jobs[k]
        for _ in range(6):
            ids, _ = g.encode_batch_flat(texts, disallowed_special=())
            if not np.array_equal(ids, want):
                failures.append(k)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))
    assert not failures, f"ids differ in threads {sorted(set(failures))}"
    assert g.gpu_counters()["learned_bytes"] > 0
