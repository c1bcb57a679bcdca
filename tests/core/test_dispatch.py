"""The facade's choice of path (device="auto"'s CPU/GPU crossover, explicit overrides) and the
outputs that cost nothing to build (encode_to_numpy, encode()'s list from the int table)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import gputok
from gputok import _core

_ok, _why = gputok.cuda_available()
gpu = pytest.mark.skipif(not _ok, reason=f"no usable GPU: {_why}")

TEXTS = ["hello world", "", "héllo wörld 日本語 🙂\n\n  x", "a <|endoftext|> b", " 12345  \t\n"]


# ------------------------------------------------------------------ the rule


def test_rule_cpu_below_the_bound_gpu_from_it():
    uses_cpu = _core.crossover_uses_cpu
    assert uses_cpu(1000, 0, 999, 1) and not uses_cpu(1000, 0, 1000, 1)
    # Each row counts as 100 bytes more: 10 rows leave 1000 - 10 * 100 = 0 bytes to the CPU.
    assert uses_cpu(1000, 100, 899, 1) and not uses_cpu(1000, 100, 900, 1)
    assert uses_cpu(1000, 100, 99, 9) and not uses_cpu(1000, 100, 0, 10)
    # cpu_below_bytes 0: always the GPU, even for an empty call.
    assert not uses_cpu(0, 0, 0, 0) and not uses_cpu(0, 100, 0, 1)


def test_rule_saturates_instead_of_wrapping():
    """bytes + rows * bytes_per_row past 2**64 must not wrap to a small sum (which would send
    a huge call to the CPU path)."""
    huge = 2**64 - 1
    assert not _core.crossover_uses_cpu(huge, 2**40, 10, 2**30)
    assert not _core.crossover_uses_cpu(huge, 1, huge - 3, 5)
    assert _core.crossover_uses_cpu(huge, 1, huge - 6, 5)


def test_default_rule_is_autos_and_cuda_is_always_gpu_unless_told():
    assert gputok.default_crossover()[0] > 0
    assert gputok.gpt2().crossover == gputok.default_crossover()
    assert gputok.gpt2(device="cpu", cpu_below_bytes=10).crossover == (10, 0, 0)
    assert gputok.gpt2(device="cpu", bytes_per_row=7).crossover == (0, 7, 0)
    assert gputok.gpt2(device="cpu", stream_below_bytes=9).crossover == (0, 0, 9)


def test_bad_rule_values_raise_value_error():
    with pytest.raises(ValueError, match="cpu_below_bytes must be >= 0"):
        gputok.gpt2(device="cpu", cpu_below_bytes=-1)
    with pytest.raises(ValueError, match="bytes_per_row must be >= 0"):
        gputok.gpt2(device="cpu", bytes_per_row=-5)
    with pytest.raises(ValueError, match="stream_below_bytes must be >= 0"):
        gputok.gpt2(device="cpu", stream_below_bytes=-5)


def test_cpu_tokenizer_never_routes_to_gpu():
    tok = gputok.gpt2(device="cpu", cpu_below_bytes=0)
    assert tok.path_for(10**9, 1) == "cpu" and tok.path_for(0, 0) == "cpu"


@gpu
def test_gpu_routing_follows_injected_constants():
    tok = gputok.gpt2(device="cuda", cpu_below_bytes=1000, bytes_per_row=100)
    assert tok.crossover == (1000, 100, 0)
    # One row counts 100 bytes: 899 stay on the CPU; ten rows leave no bytes to it.
    assert tok.path_for(899) == "cpu" and tok.path_for(900) == "cuda"
    assert tok.path_for(99, 9) == "cpu" and tok.path_for(0, 10) == "cuda"


def _launches(tok, call):
    before = tok.gpu_counters()["launches"]
    out = call()
    return tok.gpu_counters()["launches"] - before, out


@gpu
def test_small_calls_take_the_cpu_large_the_gpu_with_the_same_ids(corpus):
    cpu = gputok.gpt2(device="cpu")
    tok = gputok.gpt2(device="cuda", cpu_below_bytes=4096, bytes_per_row=0)
    small, large = "hello world " * 10, "".join(corpus[:50])
    assert len(large.encode()) > 4096
    for text, launched in ((small, False), (large, True)):
        for call in (tok.encode, tok.encode_to_numpy, lambda t: tok.encode_batch_flat([t])[0]):
            n, got = _launches(tok, lambda c=call, t=text: c(t))
            assert (n > 0) == launched, (len(text), call)
            assert list(got) == cpu.encode(text) and len(got) > 0
    n, (ids, _) = _launches(tok, lambda: tok.encode_batch_uint16([small], separator=50256))
    assert n == 0 and ids.tolist() == cpu.encode(small) + [50256]


@gpu
def test_explicit_overrides_are_honoured():
    tiny = "hi"
    cuda = gputok.gpt2(device="cuda")  # no rule given: always the GPU
    assert _launches(cuda, lambda: cuda.encode(tiny))[0] > 0
    auto = gputok.gpt2()  # the default rule: a tiny text stays on the CPU
    assert _launches(auto, lambda: auto.encode(tiny))[0] == 0
    auto.set_cpu_below_bytes(0)  # told otherwise: the GPU for everything
    assert auto.crossover == (0, 0, 0)
    assert _launches(auto, lambda: auto.encode(tiny))[0] > 0
    auto.set_cpu_below_bytes(*gputok.default_crossover())
    assert _launches(auto, lambda: auto.encode(tiny))[0] == 0


@gpu
def test_stream_rule_keeps_back_to_back_calls_on_the_cpu(corpus):
    """In the stream rule's range a call that comes alone takes the GPU, and one that starts
    within the CPU pool's spin window of the last one's end takes the CPU; a call that raised
    ends its count too (a leaked count would look like a concurrent call: the GPU for good)."""
    text = "".join(corpus)[:40_000]
    want = gputok.gpt2(device="cpu").encode(text)
    assert len(want) > 1000
    tok = gputok.gpt2(
        device="cuda", cpu_below_bytes=1000, stream_below_bytes=1 << 20, cpu_spin_us=10_000
    )
    assert tok.crossover == (1000, 0, 1 << 20) and tok.path_for(len(text)) == "cuda"

    def on_gpu(call) -> bool:
        n, got = _launches(tok, call)
        assert list(got) == want
        return n > 0

    for call in (
        lambda: tok.encode_to_numpy(text),
        lambda: tok.encode_batch_flat([text])[0],
        lambda: tok.encode_batch_uint16([text])[0],
    ):
        time.sleep(0.05)  # past the spin window: alone
        assert on_gpu(call)
        assert not on_gpu(call) and not on_gpu(call)
    with pytest.raises(ValueError):
        tok.encode_to_numpy(text.encode() + b"\xff")  # strict UTF-8: raises inside the call
    assert not on_gpu(lambda: tok.encode_to_numpy(text))
    one_thread = lambda: tok.encode_batch_flat([text], num_threads=1)[0]  # noqa: E731
    assert on_gpu(one_thread) and on_gpu(one_thread)  # fewer CPU threads: the rule by size
    tok.set_cpu_spin_us(0)  # no spin window, no stream
    assert on_gpu(lambda: tok.encode_to_numpy(text)) and on_gpu(lambda: tok.encode(text))
    tok.set_cpu_spin_us(10_000)
    tok.set_cpu_below_bytes(1000)  # no stream term
    assert on_gpu(lambda: tok.encode_to_numpy(text)) and on_gpu(lambda: tok.encode(text))


def _bucket(tok, kind: str, weight: int) -> dict:
    (b,) = [
        r
        for r in tok._core.learned_routes()
        if r["kind"] == kind and r["weights"][0] <= weight < r["weights"][1]
    ]
    return b


@gpu
def test_learned_routes_time_both_paths_near_the_rule_and_take_the_faster(corpus):
    """gpt2() learns, per weight bucket near the rule's threshold, which path is faster on
    this host for calls that come alone (route_learner.h): one text and batch calls each time
    both paths, every id exact; a bucket answers with the path whose mean is lower; a stream
    keeps the stream rule, untimed; a call that raised is not timed; a rule given or set
    learns nothing."""
    text = "".join(corpus)[:20_000]
    batch = [text[i::4] for i in range(4)]
    cpu = gputok.gpt2(device="cpu")
    want, want_batch = cpu.encode(text), [i for t in batch for i in cpu.encode(t)]
    assert len(want) > 1000 and len(want_batch) > 1000
    tok = gputok.gpt2()
    routes = tok._core.learned_routes()
    assert len(routes) == 24 and {r["kind"] for r in routes} == {"one", "batch"}
    w_one, w_batch = len(text.encode()) + 12, sum(len(t.encode()) + 12 for t in batch)
    for _ in range(40):
        time.sleep(0.002)  # past the CPU pool's spin window: alone
        assert tok.encode_to_numpy(text).tolist() == want
        time.sleep(0.002)
        assert tok.encode_batch_flat(batch)[0].tolist() == want_batch
    for kind, w in (("one", w_one), ("batch", w_batch)):
        b = _bucket(tok, kind, w)
        (n_cpu, cpu_us), (n_gpu, gpu_us) = b["cpu"], b["gpu"]
        assert n_cpu >= 4 and n_gpu >= 4 and cpu_us > 0 and gpu_us > 0, b
        assert b["path"] == ("cuda" if gpu_us < cpu_us else "cpu"), b
    # Back to back (a stream): the stream rule (the CPU here), and nothing timed but the first.
    time.sleep(0.002)
    calls = _bucket(tok, "one", w_one)["calls"]
    n, streamed = _launches(tok, lambda: [tok.encode_to_numpy(text) for _ in range(60)])
    assert all(ids.tolist() == want for ids in streamed)
    assert n <= 5 and _bucket(tok, "one", w_one)["calls"] - calls <= 5
    # A batch call the CPU path runs on the caller (under 16 KiB) is timed in a stream too.
    small = [t.encode()[:2400].decode(errors="ignore") for t in batch]
    w_small = sum(len(t.encode()) + 12 for t in small)
    calls = _bucket(tok, "batch", w_small)["calls"]
    streamed = [tok.encode_batch_flat(small)[0] for _ in range(40)]
    assert all(ids.tolist() == [i for t in small for i in cpu.encode(t)] for ids in streamed)
    assert _bucket(tok, "batch", w_small)["calls"] - calls == 40
    time.sleep(0.002)
    before = _bucket(tok, "one", w_one)
    with pytest.raises(ValueError):
        tok.encode_to_numpy(text.encode() + b"\xff")  # strict UTF-8: raises inside
    after = _bucket(tok, "one", w_one)
    assert after["calls"] == before["calls"] + 1
    assert after["cpu"][0] + after["gpu"][0] == before["cpu"][0] + before["gpu"][0]
    tok.set_cpu_below_bytes(*gputok.default_crossover())  # told: the rule as it is
    assert tok._core.learned_routes() == []
    assert gputok.gpt2(cpu_below_bytes=14387)._core.learned_routes() == []
    assert gputok.gpt2(device="cuda")._core.learned_routes() == []


# ------------------------------------------------------------------ outputs


DEVICES = ["cpu", pytest.param("cuda", marks=gpu)]


@pytest.fixture(scope="module", params=DEVICES)
def dev_tok(request):
    return gputok.gpt2(device=request.param)


@pytest.mark.parametrize("policy", [{}, {"allowed_special": "all"}, {"disallowed_special": ()}])
def test_encode_to_numpy_is_uint32_and_equals_encode(dev_tok, ref, policy):
    for text in TEXTS:
        if "<|" in text and not policy:
            continue
        got = dev_tok.encode_to_numpy(text, **policy)
        assert got.dtype == np.uint32 and got.ndim == 1
        assert got.tolist() == dev_tok.encode(text, **policy) == ref.encode(text, **policy)
    with pytest.raises(ValueError, match="special"):
        dev_tok.encode_to_numpy("a <|endoftext|>")
    bad = b"ok\xff"
    assert dev_tok.encode_to_numpy(bad, errors="replace").tolist() == ref.encode("ok\ufffd")


def test_encode_list_equals_reference_on_the_corpus(dev_tok, ref, corpus):
    texts = list(corpus[:200]) + ["".join(corpus[200:260])]
    for text in texts:
        got = dev_tok.encode(text, disallowed_special=())
        assert got == ref.encode(text, disallowed_special=()), text[:80]
        assert all(type(i) is int for i in got)
    assert sum(len(dev_tok.encode(t, disallowed_special=())) for t in texts) > 10_000
    batch = dev_tok.encode_batch(texts, disallowed_special=())
    assert batch == [ref.encode(t, disallowed_special=()) for t in texts]
