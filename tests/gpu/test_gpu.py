"""GPU path: ids equal the CPU path's and tiktoken's, for every merge algorithm.

Skipped where no CUDA device is usable (CI). On the GPU machine, scripts/gpu_check.sh runs
this file. Every comparison is GPU == CPU == tiktoken (HF where tiktoken is known to fail),
and asserts non-empty reference output.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: references

gputok = pytest.importorskip("gputok")
_ok, _why = gputok.cuda_available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"no usable GPU: {_why}")

ALGORITHMS = ("per_word", "blockbpe", "blockbpe_optimized")


@pytest.fixture(scope="module")
def cpu():
    return gputok.gpt2(device="cpu")


@pytest.fixture(scope="module")
def gpus():
    return {a: gputok.gpt2(device="cuda", algorithm=a) for a in ALGORITHMS}


@pytest.fixture(scope="module")
def tt():
    from references import tiktoken_gpt2

    return tiktoken_gpt2()


def _first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def assert_same(texts, got, want, label):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g != w:
            k = _first_diff(g, w)
            raise AssertionError(
                f"{label}: text {i} ({len(texts[i])} chars, {texts[i][:60]!r}...) differs at "
                f"token {k}: got {g[max(0, k - 3) : k + 3]} want {w[max(0, k - 3) : k + 3]}"
            )


def check_all(texts, gpus, cpu, tt, algorithms=ALGORITHMS, label=""):
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert any(want) or not any(texts), "tiktoken returned nothing: reference misbuilt"
    assert_same(texts, cpu.encode_ordinary_batch(texts), want, f"cpu {label}")
    for a in algorithms:
        assert_same(texts, gpus[a].encode_ordinary_batch(texts), want, f"{a} {label}")


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


def _pathological():
    ws = [
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
    out = [
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
    for w in ws:
        out += [
            w,
            w * 3,
            f"a{w}b",
            f"a{w}{w}b",
            f"a {w}b",
            f"a{w} b",
            f"{w}'s",
            f"a{w}",
            f"{w}a",
            f"x {w}{w} y",
            f"1{w}2",
        ]
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


def _gpu_with(**fields):
    """A per_word GPU tokenizer built with these GpuTuning fields (read at construction)."""
    tuning = gputok.GpuTuning()
    for name, value in fields.items():
        setattr(tuning, name, value)
    return gputok.gpt2(device="cuda", gpu_tuning=tuning)


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
    multi = _gpu_with(fused_max_bytes=0)
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
    """Over 128 KB (the multi-kernel path) of words that need the merge loop, each many
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
        g = _gpu_with(**env)
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
    tiles, and one that is not, on every algorithm's multi-kernel path."""
    rng = random.Random(11)
    alphabet = "abc de\n'12,é中"
    tile = ["".join(rng.choice(alphabet) for _ in range(4096))]
    # ASCII-only docs of exactly 4096 bytes end units on tile edges
    edge = ["".join(rng.choice("ab cd'1") for _ in range(4096)) for _ in range(40)]
    batch = edge[:10] + [""] + edge[10:30] + ["", "x"] + edge[30:] + ["", ""]
    whole = "".join(edge[:64])  # 40 * 4096 bytes: a whole number of tiles
    ragged = whole + "tail"
    for texts in (batch, [whole], [ragged], tile * 40):
        assert sum(len(t.encode()) for t in texts) > 128 * 1024
        check_all(texts, gpus, cpu, tt, label="tile edges")


@pytest.mark.parametrize("blocking_sync", [False, True], ids=["spin", "blocking-sync"])
def test_concurrent_calls_share_one_gpu_tokenizer(corpus, tt, blocking_sync):
    """Threads calling one GPU tokenizer at once (as a corpus worker's shards do): up to 4
    calls run at once on slots of their own, the others wait for one, and every thread gets
    its own ids, whichever path
    (one block, cooperative, multi-kernel) its input takes, one text or a batch; with the
    default spin-wait and with blocking_sync (the corpus workers' setting)."""
    from concurrent.futures import ThreadPoolExecutor

    g = gputok.gpt2(device="cuda", blocking_sync=blocking_sync)
    joined = "".join(corpus[:2000])
    texts = [joined[:n] for n in (300, 5_000, 40_000, 200_000, 1_500_000, 3_000_000)] * 4
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert all(want)

    heads = [t[:999] for t in texts]
    want_heads = tt.encode_ordinary_batch(heads, num_threads=8)

    def call(k):
        if k % 2:  # a batch of two: both documents' ids must come back in order
            out = g.encode_ordinary_batch([heads[k], texts[k]])
            return out[1] if out[0] == want_heads[k] else []
        return g.encode_ordinary(texts[k])

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(call, range(len(texts))))
    assert_same(texts, got, want, "concurrent")


def test_concurrent_calls_run_on_slots_of_their_own(corpus, tt):
    """Concurrent calls of one GPU tokenizer each take a slot (stream, pinned buffers, device
    pool) of their own: a second slot's pool appears once two calls overlap, while one caller
    at a time never uses more than the first. GpuTuning.encode_slots 1 (the ablation) keeps
    one slot, and both give tiktoken's ids."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    joined = "".join(corpus[:2000])
    texts = [joined[k * 1000 : k * 1000 + 2_000_000] for k in range(4)]
    want = tt.encode_ordinary_batch(texts, num_threads=4)
    assert all(want)

    largest = max(texts, key=lambda t: len(t.encode()))

    def run(g) -> float:
        g.encode_ordinary(largest)  # the first slot's pool at its size for all four (no doubling)
        single = g.gpu_counters()["device_bytes"]
        for t in texts:
            g.encode_ordinary(t)
        assert g.gpu_counters()["device_bytes"] == single

        def call(k, start):
            start.wait()
            return g.encode_ordinary(texts[k])

        for _round in range(5):  # overlap is likely at once; a few rounds make it certain
            with ThreadPoolExecutor(4) as pool:
                got = list(pool.map(call, range(4), [threading.Barrier(4)] * 4))
            assert_same(texts, got, want, "concurrent")
            if g.gpu_counters()["device_bytes"] > single:
                break
        return g.gpu_counters()["device_bytes"] / single

    assert run(gputok.gpt2(device="cuda")) > 1.5  # a second pool of about the same size
    assert run(_gpu_with(encode_slots=1)) == 1


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


# -------------------------------------------------------------------------- memory


def test_no_allocation_in_steady_state(corpus):
    g = gputok.gpt2(device="cuda")
    texts = list(corpus[:200])
    g.encode_ordinary_batch(texts)  # warm: the pool grows here
    before = g.gpu_counters()
    for _ in range(5):
        g.encode_ordinary_batch(texts)
        g.encode_ordinary_batch(texts[:50])
    after = g.gpu_counters()
    assert after["device_allocs"] == before["device_allocs"]
    assert after["pinned_allocs"] == before["pinned_allocs"]
    assert after["launches"] > before["launches"]


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
        ("4 KiB x 2", _gpu_with(chunk_bytes=4096, lanes=2)),
        ("64 KiB x 3", _gpu_with(chunk_bytes=65536, lanes=3)),
        ("1 MiB x 1", _gpu_with(chunk_bytes=1 << 20, lanes=1)),
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


def test_oom_is_clear_and_recoverable(corpus, tt):
    g = gputok.gpt2(device="cuda")
    text = "".join(corpus[:100])
    g.set_pool_limit(1 << 16)
    with pytest.raises(gputok.DeviceMemoryError):
        g.encode_ordinary(text)
    with pytest.raises(MemoryError):
        g.encode_ordinary(text)
    g.set_pool_limit(0)
    assert g.encode_ordinary(text) == tt.encode_ordinary(text)


# -------------------------------------------------------------------------- size


@pytest.mark.slow
def test_single_string_over_100mb(corpus, cpu):
    base = " ".join(corpus)
    text = (base + " ") * (100_000_000 // (len(base.encode()) + 1) + 1)
    assert len(text.encode()) >= 100_000_000
    got = gputok.gpt2(device="cuda").encode_ordinary(text)
    want = cpu.encode_ordinary(text)
    assert got == want


@pytest.mark.slow
def test_batch_over_1gb(corpus, cpu):
    import numpy as np

    docs = list(corpus)
    size = sum(len(d.encode()) for d in docs)
    texts = docs * (1_000_000_000 // size + 1)
    g = gputok.gpt2(device="cuda")
    ids, offsets = g.encode_batch_flat(texts, disallowed_special=())
    ids_c, offsets_c = cpu.encode_batch_flat(texts, disallowed_special=())
    assert np.array_equal(offsets, offsets_c)
    assert np.array_equal(ids, ids_c)


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


@pytest.mark.parametrize("copy_threads", [0, 1])
def test_uint16_output_on_every_path(corpus, gpus, cpu, copy_threads):
    """encode_buffer_uint16 on the GPU (ids narrowed and spaced for <|endoftext|> in the
    copy-out) equals the CPU's packed ids, for batches that take each device path: one block
    (<= 16 KB), cooperative (<= 128 KB), multi-kernel with ids in mapped memory (<= 4 MB) and
    copied back (> 4 MB), several 64 MB chunks; empty documents and long ones (several units)
    among them; with the copy pool and without (copy_threads=1, the corpus workers')."""
    import numpy as np

    eot = 50256
    docs = [d for d in corpus if d]
    big = "".join(docs[:400])
    toks = dict(gpus)
    toks["per_word, copy_threads"] = gputok.gpt2(device="cuda", copy_threads=copy_threads)
    for size in (10_000, 100_000, 3_000_000, 12_000_000, 140_000_000):
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
