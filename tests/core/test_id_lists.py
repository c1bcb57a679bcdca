"""encode()'s list and the one-text call path (bindings/id_list.h, fast_call.h, one_text.h).

(``_core.ids_to_list`` uses the table as the tokenizers made so far grew it: each test that
calls it takes the ``tok`` fixture, so the table holds GPT-2's ids.)

The list's ints come from a process-wide table of ints that never die (immortal on CPython
3.12+, a refcount of 2**62 before): a list stores them with no incref. These tests hold the
exact ids against tiktoken for every output the fast path serves, that the ints behave as
ints, the refcount contract of each CPython version, and that many calls leak nothing.
"""

from __future__ import annotations

import gc
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import gputok
from gputok import _core

IMMORTAL = sys.version_info >= (3, 12)
# What sys.getrefcount shows of a table int: an immortal object's count (3.12, 3.13: 2**32 - 1;
# 3.14: 3 * 2**30), or before 3.12 the table's 2**62 less the items freed since.
HUGE = 2**30 if IMMORTAL else 2**61


def _text_near(base: str, nbytes: int) -> str:
    out = (base * (nbytes // len(base.encode()) + 1)).encode()[:nbytes]
    return out.decode("utf-8", "ignore")


TEXTS = [
    "hello world",
    "",
    " ",
    "héllo wörld 日本語 🙂\n\n  x",
    "a\ud800b",  # a lone surrogate, repaired as tiktoken repairs it
    " 12345  \t\n" * 30,
    # around the 1 KiB bound below which the call keeps the GIL
    _text_near("Lorem ipsum, dolor sit amet 42! ", 1023),
    _text_near("Lorem ipsum, dolor sit amet 42! ", 1024),
    _text_near("Lorem ipsum, dolor sit amet 42! ", 1025),
    _text_near("ünïcödé wörds and 数字 123 ", 40_000),  # a text cut across threads
]


@pytest.mark.parametrize("text", TEXTS, ids=[f"{i}-{len(t)}chars" for i, t in enumerate(TEXTS)])
def test_fast_path_outputs_equal_tiktoken(tok, ref, text):
    want = ref.encode_ordinary(text)
    assert want or not text
    assert tok.encode(text) == want
    assert tok.encode_ordinary(text) == want
    got = tok.encode_to_numpy(text)
    assert got.dtype == np.uint32 and got.tolist() == want
    # the array is the caller's: the thread's next calls (which reuse its id buffer) leave it
    assert tok.encode_to_numpy("hi").tolist() == [5303] and tok.encode("hey") == [20342]
    assert got.tolist() == want
    # the same text as bytes (validated, not known-valid) and the generic policy path
    if "\ud800" not in text:
        assert tok.encode(text.encode()) == want
        assert tok.encode(text, allowed_special="all") == want
        assert tok.encode_ordinary(text.encode(), errors="replace") == want
    # a second call reuses the thread's id buffer: it must not carry the first call's ids
    assert tok.encode(text) == want and tok.encode("hi") == [5303]


def test_fast_path_keeps_the_policies(tok, ref):
    eot = "x <|endoftext|> y"
    with pytest.raises(ValueError, match="disallowed special"):
        tok.encode(eot)
    with pytest.raises(ValueError, match="disallowed special"):
        tok.encode_to_numpy(eot)
    assert tok.encode_ordinary(eot) == ref.encode_ordinary(eot)
    assert tok.encode(eot, allowed_special="all") == ref.encode(eot, allowed_special="all")
    with pytest.raises(ValueError, match="UTF-8"):
        tok.encode(b"ok\xff")
    with pytest.raises(ValueError, match="UTF-8"):
        tok.encode_ordinary(b"ok\xff")
    assert tok.encode_ordinary(b"ok\xff", errors="replace") == ref.encode("ok\ufffd")
    with pytest.raises(TypeError, match="str or bytes"):
        tok.encode(3)
    with pytest.raises(TypeError):
        tok._encode_default()
    with pytest.raises(TypeError):
        tok._encode_default("a", "b")


def test_list_items_are_plain_ints(tok):
    ids = np.array([0, 1, 255, 256, 257, 995, 31373, 50255, 50256], dtype=np.int32)
    got = _core.ids_to_list(ids)
    assert got == ids.tolist()
    for item, want in zip(got, ids.tolist(), strict=True):
        fresh = int(str(want))  # an int made elsewhere, not the table's
        assert type(item) is int and item == fresh and hash(item) == hash(fresh)
        assert item + 1 == fresh + 1 and str(item) == str(fresh)
    table = {int(str(i)): i for i in ids.tolist()}
    assert all(table[i] == i for i in got)
    again = _core.ids_to_list(ids)
    assert all(a is b for a, b in zip(got, again, strict=True))  # the shared table's ints
    assert tok.encode(" world" * 3) == [995] * 3


def test_ids_outside_the_table_become_new_ints(tok):
    ids = np.array([-7, 5, 2**31 - 1, 60_000, 50_256, -(2**31)], dtype=np.int32)
    assert _core.ids_to_list(ids) == ids.tolist()
    big = np.arange(-100, 600_000, dtype=np.int32) % 70_000 - 5
    for threads in (1, 2, 4):
        assert _core.ids_to_list(big, threads) == big.tolist()
    assert _core.ids_to_list(np.zeros(0, dtype=np.int32)) == []


def test_parallel_fill_equals_serial(tok):
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 50_257, 1_100_000, dtype=np.int32)
    want = ids.tolist()
    for threads in (0, 1, 3, 8):
        assert _core.ids_to_list(ids, threads) == want


def test_refcount_contract(tok):
    """3.12+: the table's ints are immortal, a list changes no refcount. Before: their refcount
    is huge, a list built holds them without an incref and its del gives back one per item."""
    assert _core.ids_immortal() is IMMORTAL
    one = _core.ids_to_list(np.array([995], dtype=np.int32))[0]
    ids = np.full(1000, 995, dtype=np.int32)
    before = sys.getrefcount(one)
    assert before > HUGE
    lst = _core.ids_to_list(ids)
    during = sys.getrefcount(one)
    del lst
    after = sys.getrefcount(one)
    if IMMORTAL:
        assert (during, after) == (before, before)
    else:
        assert (during - before, after - before) == (0, -1000)
    assert sys.getrefcount(one) > HUGE
    # the list itself has no extra reference
    assert sys.getrefcount(_core.ids_to_list(ids)) == sys.getrefcount(ids.tolist())


def test_encoder_functions_hold_their_core_and_give_it_back(tok):
    core = tok._core
    base = sys.getrefcount(core)
    fns = [core.encoder([], [50256], "strict") for _ in range(5)]
    assert sys.getrefcount(core) == base + 5
    assert all(f("hello world") == [31373, 995] for f in fns)
    del fns
    gc.collect()
    assert sys.getrefcount(core) == base


def test_many_calls_leak_nothing(tok):
    text = "The quick brown fox, 1234 jumps — über den Zaun. " * 5
    long_text = text * 400  # ~100K bytes: the released-GIL path and a bigger list
    big = np.arange(300_000, dtype=np.int32) % 50_257

    def work():
        for _ in range(300):
            tok.encode(text)
            tok.encode_ordinary(text.encode())
            tok.encode_to_numpy(text)
            tok.encode(text, allowed_special="all")
        for _ in range(5):
            tok.encode(long_text)
            tok.encode_batch([text, long_text])
            _core.ids_to_list(big, 2)

    work()  # warm-up: caches, thread buffers, the fill pool
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            work()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    # 3 rounds built ~3,600 lists and ~4.6M list items: a leak of one list or one item's
    # array each call would be megabytes.
    assert grown < 64 * 1024, f"{grown} bytes still allocated after 3 rounds"


def test_threads_get_their_own_ids(tok, ref):
    texts = [f"thread {i}: " + "some words, 42 and ünïcode " * (i * 40 + 1) for i in range(8)]
    want = [ref.encode_ordinary(t) for t in texts]
    errors = []

    def run(i):
        for _ in range(50):
            if tok.encode(texts[i]) != want[i]:
                errors.append(i)
                return

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_gpu_tokenizer_default_path_equals_cpu(ref):
    ok, why = gputok.cuda_available()
    if not ok:
        pytest.skip(f"no usable GPU: {why}")
    gpu = gputok.gpt2(device="cuda")
    for text in TEXTS:
        assert gpu.encode(text) == gpu.encode_to_numpy(text).tolist() == ref.encode_ordinary(text)


def test_forked_child_fills_large_lists(tok):
    """The fill pool's threads do not survive fork(): a child that builds a large list must
    start its own pool instead of waiting on threads it does not have."""
    import os
    import time
    import warnings

    ids = np.arange(1_100_000, dtype=np.int32) % 50_257
    assert _core.ids_to_list(ids, 4) == ids.tolist()  # the parent's pool exists now
    with warnings.catch_warnings():  # 3.12+ warns of fork() in a process with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, just the answer in the exit code
        ok = _core.ids_to_list(ids, 4) == ids.tolist()
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 20
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung filling a list")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
