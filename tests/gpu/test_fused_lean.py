"""The lean fused kernel (cuda/fused_lean.cu: three grid barriers, the GPU path's default for
one chunk of 4 KB up to 528 KiB) against the nine-barrier kernel it replaces
(GpuTuning.fused_lean = False) and tiktoken: every id and every text's offsets, on inputs
shaped for its per-block stages. Skipped where no CUDA device is usable;
scripts/gpu_latency.sh runs it on the GPU machine."""

from __future__ import annotations

import random

import numpy as np
import pytest

gputok = pytest.importorskip("gputok")
_ok, _why = gputok.cuda_available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"no usable GPU: {_why}")


def _tuned(**fields):
    tuning = gputok.GpuTuning()
    for name, value in fields.items():
        setattr(tuning, name, value)
    return gputok.gpt2(device="cuda", gpu_tuning=tuning)


def _lean_edge_inputs(corpus):
    """What the lean kernel handles per block: a block's range is whole tiles of 256 bytes,
    so ASCII docs of 256 and 512 bytes end units on block edges; contractions and multi-byte
    characters across an edge; empty units first, between and last; whitespace and digit
    runs longer than several blocks (blocks with no piece start, a piece whose ids straddle
    blocks); a CJK run of long pieces (the warps)."""
    rng = random.Random(19)
    joined = "".join(corpus[:2000])
    edge = ["".join(rng.choice("ab cd'1s") for _ in range(256)) for _ in range(24)]
    edge += ["".join(rng.choice("x y'll") for _ in range(512)) for _ in range(8)]
    batch = ["", ""] + edge[:10] + ["", "x"] + edge[10:] + ["", ""]
    contraction = ("a" * 253 + "'ll " + "b" * 250 + " it's") * 30
    spaces = joined[:5000] + " " * 9000 + "x" + "\n" * 5000 + joined[5000:9000] + "7" * 4000
    cjk = joined[:3000] + "日本語のテキスト" * 900
    docs = [d for d in corpus if len(d.encode()) < 3000][:40]
    head = "".join(corpus[:40]).encode()
    cut = [[head[:n].decode("utf-8", "ignore")] for n in (12_200, 13_000)]
    return [batch, [contraction], [spaces], [cjk], [joined[:40_000]], docs, *cut]


def test_fused_lean_matches_the_nine_barrier_kernel(corpus, ref):
    """With one block per SM, with 3 blocks (4 KB per block, its most: the 13 KB text then
    takes the nine-barrier kernel) and with warps taking listed pieces early
    (GpuTuning.lean_take_early); one launch per call either way. A build whose add_tokens
    counted all of a piece's ids for its first block failed here (offsets differ)."""
    nine = _tuned(fused_lean=False)
    lean = {
        "lean": gputok.gpt2(device="cuda"),
        "lean, 3 blocks": _tuned(coop_blocks=3),
        "lean, early": _tuned(lean_take_early=True),
    }
    for texts in _lean_edge_inputs(corpus):
        assert 4096 < sum(len(t.encode()) for t in texts) <= 128 * 1024, "not the fused range"
        want = ref.encode_ordinary_batch(texts, num_threads=8)
        flat = [t for w in want for t in w]
        assert flat, "tiktoken returned nothing: reference misbuilt"
        ref_ids, ref_offs = nine.encode_batch_flat(texts, disallowed_special=())
        assert ref_ids.tolist() == flat, "the nine-barrier kernel differs from tiktoken"
        assert ref_offs.tolist() == np.cumsum([0] + [len(w) for w in want]).tolist()
        for label, g in lean.items():
            ids, offs = g.encode_batch_flat(texts, disallowed_special=())
            assert np.array_equal(offs, ref_offs), f"{label}: offsets differ"
            assert np.array_equal(ids, ref_ids), f"{label}: ids differ"
            before = g.gpu_counters()["launches"]
            g.encode_batch_flat(texts, disallowed_special=())
            assert g.gpu_counters()["launches"] - before == 1, label


def test_the_lean_kernels_own_clock_gives_its_time(corpus):
    """Without events (GpuTuning.kernel_events False, the default) the lean kernel writes its
    start and end into mapped memory: the kernel time is positive, within the call's wall time,
    and of the order of the events' figure for the same calls (kernel_events True)."""
    import time

    texts = ["".join(corpus[:200]).encode()[:40_000].decode("utf-8", "ignore")]
    clocked, evented = gputok.gpt2(device="cuda"), _tuned(kernel_events=True)
    for g in (clocked, evented):
        g.tokenize_batch(texts)
    own, events = [], []
    for _ in range(20):
        t0 = time.perf_counter()
        _, ms = clocked.tokenize_batch(texts)
        wall_ms = (time.perf_counter() - t0) * 1e3
        assert 0.0 < ms < wall_ms, (ms, wall_ms)
        own.append(ms)
        events.append(evented.tokenize_batch(texts)[1])
    own.sort()
    events.sort()
    assert events[10] / 3 < own[10] < events[10] * 3, (own[10], events[10])


def _exact_bytes(head: bytes, n: int) -> str:
    """A str of exactly n UTF-8 bytes from the corpus: cut, then padded with ASCII."""
    text = head[:n].decode("utf-8", "ignore")
    return text + "x" * (n - len(text.encode()))


def test_lean_kernel_takes_chunks_past_the_cooperative_limit(corpus, ref):
    """Above fused_max_bytes (128 KiB) the lean kernel takes a chunk up to its capacity, 4 KiB
    per block: with coop_blocks 40, 160 KiB in one launch, and one byte more on the
    multi-kernel pipeline; with lean_max_bytes 0, 150 KB on the pipeline too. Every result
    equals tiktoken's. A build whose lean kernel stopped at fused_max_bytes (160 KiB on the
    pipeline) failed here."""
    cap = 40 * 4096
    head = "".join(corpus[:800]).encode()
    assert len(head) > cap + 1, "corpus too small for the test"
    capped = _tuned(coop_blocks=40)
    off = _tuned(coop_blocks=40, lean_max_bytes=0)
    cases = [(capped, cap, True), (capped, cap + 1, False), (capped, 150_000, True)]
    cases += [(off, 150_000, False), (off, 100_000, True)]
    for g, n, one_launch in cases:
        text = _exact_bytes(head, n)
        want = ref.encode_ordinary(text)
        assert want, "tiktoken returned nothing: reference misbuilt"
        for _ in range(2):  # the second call meets its pieces in the learned cache
            before = g.gpu_counters()["launches"]
            ids, _ = g.encode_batch_flat([text], disallowed_special=())
            launches = g.gpu_counters()["launches"] - before
            assert ids.tolist() == want, f"{n} bytes: ids differ"
            assert (launches == 1) == one_launch, (n, launches)
