"""GPU path: one tokenizer shared by threads (its encode slots), device memory (no allocation in
steady state, a clear and recoverable out-of-memory error), a process forked from the one that
built it, and the largest calls (slow: over 100 MB in one string, over 1 GB in one batch), each
equal to tiktoken's or the CPU path's ids.
Skipped where no CUDA device is usable; scripts/gpu_check.sh runs this file."""

from __future__ import annotations

import os

import pytest
from gpu_compare import assert_same, gpu_with

gputok = pytest.importorskip("gputok")
_ok, _why = gputok.cuda_available()
pytestmark = pytest.mark.skipif(not _ok, reason=f"no usable GPU: {_why}")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_regression_a_forked_child_runs_auto_on_the_cpu_and_cuda_refuses(corpus, tt):
    """CUDA does not survive fork(): a PyTorch DataLoader worker or a multiprocessing "fork"
    pool whose parent had built a GPU tokenizer got a CUDA initialization error from its first
    GPU-bound call (found 2026-11-27). In such a child a device="auto" tokenizer now runs every
    call on the CPU path, with the same ids, and a device="cuda" one raises
    CudaUnavailableError naming fork (and `device` says so: "cpu" and "cuda"); dropping both
    there ends cleanly, and the parent's GPU path goes on."""
    import gc
    import signal

    auto = gputok.gpt2()
    cuda = gputok.gpt2(device="cuda")
    texts = ["".join(corpus[:200]), *corpus[:50]]  # far above the crossover: the GPU's
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert all(want) and auto.path_for(len(texts[0].encode())) == "cuda" == auto.device
    assert auto.encode_ordinary_batch(texts) == want  # the parent's CUDA context is in use
    assert cuda.encode_ordinary(texts[0]) == want[0]
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 4
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # a hang kills the child
            signal.alarm(60)
            code = 3
            if (
                auto.device == "cpu"
                and cuda.device == "cuda"
                and auto.path_for(len(texts[0].encode())) == "cpu"
                and auto.encode_ordinary_batch(texts) == want
                and auto.encode_ordinary(texts[0]) == want[0]
            ):
                code = 5
                try:
                    cuda.encode_ordinary(texts[0])
                except gputok.CudaUnavailableError as e:
                    code = 0 if "fork" in str(e) else 6
            del auto, cuda
            gc.collect()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the child was killed by signal {os.WTERMSIG(status)}"
    why = {
        3: "auto: not device 'cpu' with the CPU path's ids",
        5: "cuda did not refuse",
        6: "no 'fork'",
    }
    assert os.WEXITSTATUS(status) == 0, why.get(os.WEXITSTATUS(status), os.WEXITSTATUS(status))
    assert auto.encode_ordinary_batch(texts) == want


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
    assert run(gpu_with(encode_slots=1)) == 1


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
