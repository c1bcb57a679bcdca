"""GPU path: each of its device paths and switches gives tiktoken's ids (the CPU path's for
packed uint16): the fused cooperative kernel against the multi-kernel pipeline, the per-call miss
memo, the compaction's tiles, a large call cut into chunks in flight, uint16 output, and calls
small enough to run on the CPU. Skipped where no CUDA device is usable; scripts/gpu_check.sh
runs this file."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from gpu_compare import ALGORITHMS, assert_same, check_all, gpu_with

gputok = pytest.importorskip("gputok")
_ok, _why = gputok.cuda_available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"no usable GPU: {_why}")


def _mid_size_inputs(corpus):
    """Single sequences and batches between 4 KB and 1 MB, the fused cooperative kernel's
    range, with long pieces (over 32 bytes: a warp; over 256: a warp in global memory) and
    many units."""
    joined = "".join(corpus[:3000])
    rng = random.Random(5)
    out = [joined[:n] for n in (4100, 9000, 45_000, 300_000)]
    out.append(joined.encode()[: (1 << 20) - 64].decode("utf-8", "ignore"))
    out.append(
        joined[:20_000] + "a" * 600 + " " + "7" * 300 + joined[20_000:40_000] + "日本語" * 200
    )
    out.append("".join(rng.choice(["ab", " ", "aeiou", "'s", "12", "\n\n"]) for _ in range(40_000)))
    return out


def test_fused_cooperative_path_matches_tiktoken(corpus, tt):
    """Mid-size chunks (4 KB < n <= 1 MB) run as one cooperative launch; the same inputs
    with the fused path off (GpuTuning.fused_max_bytes 0) take the multi-kernel pipeline. Both
    must give tiktoken's ids, and the fused path must really be one launch per call."""
    fused = gputok.gpt2(device="cuda")
    multi = gpu_with(fused_max_bytes=0)
    texts = _mid_size_inputs(corpus)
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert all(want)
    for label, g in (("fused", fused), ("multi-kernel", multi)):
        got = [g.encode_ordinary(t) for t in texts]
        assert_same(texts, got, want, f"one by one, {label}")
        batch = list(corpus[:150])  # one call, many units
        assert_same(batch, g.encode_ordinary_batch(batch), tt.encode_ordinary_batch(batch), label)
    before = fused.gpu_counters()["launches"]
    fused.encode_ordinary(texts[2])
    assert fused.gpu_counters()["launches"] - before == 1
    before = multi.gpu_counters()["launches"]
    multi.encode_ordinary(texts[2])
    assert multi.gpu_counters()["launches"] - before > 1


def _repeated_misses(seed: int = 7) -> list[str]:
    """Over 200 KB (the multi-kernel path, with lean_max_bytes 0) of words that need the merge loop, each many
    times, beside same-length variants that differ in one byte (same memo slot length, other
    bytes), pieces for a warp (CJK runs) and pieces too long for the memo."""
    rng = random.Random(seed)
    words = [" tokenizer", " tokenizes", " tokenizxr", "ationally", " Hyperparam", "ébauches"]
    words += ["".join(rng.choice("qzxjkvw") for _ in range(rng.randint(2, 16))) for _ in range(300)]
    words += [" " + "".join(rng.choice("abcdefgh") for _ in range(20)) for _ in range(20)]
    words += [
        "".join(rng.choice("中文字符词") for _ in range(rng.randint(10, 40))) for _ in range(10)
    ]
    words += ["z" * 300, "zy" * 150, "7" * 90]  # over kMemoMaxLong; repeated digits
    docs = []
    for _ in range(60):
        docs.append(" ".join(rng.choice(words) for _ in range(rng.randint(200, 600))))
    return docs


def test_miss_memo_matches_tiktoken(tt):
    """The multi-kernel path merges each distinct miss once per call and copies its ids to
    the equal pieces (merge_per_word.cu, memo_owner). Ids must not depend on the memo: the
    default size, one slot (every piece collides; most merge by themselves after probing)
    and no memo all give tiktoken's ids, and the default really runs the two follower
    kernels (short and long pieces)."""
    texts = _repeated_misses()
    assert sum(len(t.encode()) for t in texts) > 200_000
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert all(want)
    launches = {}
    for label, env in (
        ("default", {}),
        ("one slot", {"memo_slots": 1}),
        ("no memo", {"memo_slots": 0}),
    ):
        g = gpu_with(lean_max_bytes=0, **env)  # the multi-kernel path, not the lean kernel
        assert_same(texts, g.encode_ordinary_batch(texts), want, f"memo {label}")
        joined = "\n".join(texts)
        assert g.encode_ordinary(joined) == tt.encode_ordinary(joined), f"memo {label}, one string"
        before = g.gpu_counters()["launches"]
        g.encode_ordinary_batch(texts)
        launches[label] = g.gpu_counters()["launches"] - before
    assert launches["default"] == launches["no memo"] + 2


def test_regression_compaction_at_tile_edges(gpus, cpu, tt):
    """The compaction works in tiles of 4096 bytes of `tok` (pretokenize.cu): units that end
    exactly on a tile edge, empty units (also last), a chunk that is a whole number of
    tiles, and one that is not, on every algorithm's multi-kernel path (per_word's with
    lean_max_bytes 0: its lean kernel takes these sizes by default) and the lean kernel."""
    rng = random.Random(11)
    alphabet = "abc de\n'12,é中"
    tile = ["".join(rng.choice(alphabet) for _ in range(4096))]
    # ASCII-only docs of exactly 4096 bytes end units on tile edges
    edge = ["".join(rng.choice("ab cd'1") for _ in range(4096)) for _ in range(40)]
    batch = edge[:10] + [""] + edge[10:30] + ["", "x"] + edge[30:] + ["", ""]
    whole = "".join(edge[:64])  # 40 * 4096 bytes: a whole number of tiles
    ragged = whole + "tail"
    paths = {**gpus, "per_word multi-kernel": gpu_with(lean_max_bytes=0)}
    for texts in (batch, [whole], [ragged], tile * 40):
        assert sum(len(t.encode()) for t in texts) > 128 * 1024
        check_all(texts, paths, cpu, tt, (*ALGORITHMS, "per_word multi-kernel"), "tile edges")


def test_regression_large_call_in_many_chunks(corpus, cpu, tt):
    """A large call cut into many chunks with up to 3 in flight (GpuTuning.chunk_bytes and
    .lanes, or a pool limit that shrinks the chunks), as documents, as one str that spans
    every chunk, and packed as uint16 with a separator: every id and offset equals the CPU
    path's, and the pool stays under its limit. Before chunks were pipelined, a second chunk
    moved the first one's ids; this pins the stitching of chunk after chunk."""
    docs = list(corpus)
    joined = "".join(docs)
    assert len(joined.encode()) > 3_000_000
    want = cpu.encode_batch_flat(docs, disallowed_special=())
    want_one = cpu.encode_batch_flat([joined], disallowed_special=())
    want16 = cpu.encode_batch_uint16(docs, separator=50256, disallowed_special=())
    assert len(want[0]) and len(want_one[0])
    rows = tt.encode_ordinary_batch(docs[:50], num_threads=8)
    assert want[0][: want[1][50]].tolist() == [t for r in rows for t in r]
    limited = gputok.gpt2(device="cuda", pool_limit_bytes=48 << 20)  # 1 MiB chunks, 2 lanes
    for label, g in (
        ("4 KiB x 2", gpu_with(chunk_bytes=4096, lanes=2)),
        ("64 KiB x 3", gpu_with(chunk_bytes=65536, lanes=3)),
        ("1 MiB x 1", gpu_with(chunk_bytes=1 << 20, lanes=1)),
        ("pool limit 48 MiB", limited),
    ):
        for got, ref, what in (
            (g.encode_batch_flat(docs, disallowed_special=()), want, "docs"),
            (g.encode_batch_flat([joined], disallowed_special=()), want_one, "one str"),
            (g.encode_batch_uint16(docs, separator=50256, disallowed_special=()), want16, "u16"),
        ):
            assert np.array_equal(got[0], ref[0]), f"{label}, {what}: ids"
            assert np.array_equal(got[1], ref[1]), f"{label}, {what}: offsets"
    assert 0 < limited.gpu_counters()["device_bytes"] <= 48 << 20


@pytest.mark.parametrize("copy_threads", [0, 1])
def test_uint16_output_on_every_path(corpus, gpus, cpu, copy_threads):
    """encode_buffer_uint16 on the GPU (ids narrowed and spaced for <|endoftext|> in the
    copy-out) equals the CPU's packed ids, for batches that take each device path: one block
    (<= 16 KB), cooperative (<= 128 KB; the lean kernel to 528 KiB), multi-kernel with ids in mapped memory (<= 4 MB) and
    copied back (> 4 MB), several 64 MB chunks; empty documents and long ones (several units)
    among them; with the copy pool and without (copy_threads=1, the corpus workers')."""
    import numpy as np

    eot = 50256
    docs = [d for d in corpus if d]
    big = "".join(docs[:400])
    toks = dict(gpus)
    toks["per_word, copy_threads"] = gputok.gpt2(device="cuda", copy_threads=copy_threads)
    for size in (10_000, 100_000, 300_000, 3_000_000, 12_000_000, 140_000_000):
        batch, n = [], 0
        for i, d in enumerate(itertools.cycle(docs)):
            batch.append("" if i % 7 == 3 else (big if i % 50 == 11 else d))
            n += len(batch[-1].encode())
            if n >= size:
                break
        raw = [t.encode() for t in batch]
        data, bounds = b"".join(raw), np.cumsum([0] + [len(r) for r in raw])
        want, want_ends = cpu.encode_buffer_uint16(
            data, bounds, separator=eot, disallowed_special=()
        )
        assert len(want) > len(batch)
        for name, g in toks.items():
            if size > 20_000_000 and name.startswith("blockbpe"):
                continue  # 16 bytes of scratch per byte; the copy-out is the same code
            got, ends = g.encode_buffer_uint16(data, bounds, separator=eot, disallowed_special=())
            assert np.array_equal(ends, want_ends), (name, size)
            assert np.array_equal(got, want), (name, size)


def test_cpu_below_bytes_small_calls_take_the_cpu_path(corpus, tt):
    """set_cpu_below_bytes: calls under the threshold run on the CPU (no kernel time) with the
    same ids; calls over it still use the GPU."""
    g = gputok.gpt2(device="cuda")
    texts = [d for d in corpus[:50] if d]
    want = tt.encode_ordinary_batch(texts)
    assert all(want)
    total = sum(len(t.encode()) for t in texts)
    g.set_cpu_below_bytes(total + 1)
    ids, ms = g.tokenize_batch(texts)
    assert ms == 0.0
    assert_same(texts, ids, want, "cpu_below_bytes, CPU side")
    g.set_cpu_below_bytes(total)  # not below: the GPU
    ids, ms = g.tokenize_batch(texts)
    assert ms > 0.0
    assert_same(texts, ids, want, "cpu_below_bytes, GPU side")
    with pytest.raises(ValueError):
        g.set_cpu_below_bytes(-1)
