"""One long text on every core: cut at safe split points into chunks of about two per
hardware thread (8 KiB at least), the same ids as tiktoken."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def text(corpus):
    return "".join(corpus)[:700_000]


@pytest.mark.parametrize("size", [30_000, 33_000, 70_000, 250_000, 700_000])
def test_long_text_matches_tiktoken(tok, ref, text, size):
    t = text[:size]
    want = ref.encode_ordinary(t)
    assert len(want) > 1000
    assert tok.encode_ordinary(t) == want
    assert tok.encode_ordinary(t.encode()) == want


def test_split_texts_at_many_sizes_and_offsets_match_tiktoken(tok, ref, text):
    """Texts of 32-140 KB from several offsets (cut into parts of 4 KiB and up on 16 threads,
    so part boundaries land at many places): every one gives tiktoken's ids."""
    checked = 0
    for start in (0, 1_111, 47_000, 123_457):
        for size in range(32_768, 140_000, 9_001):
            t = text[start : start + size]
            want = ref.encode_ordinary(t)
            assert len(want) > 1000
            outs = [tok.encode_ordinary(t) for _ in range(2)]  # alone, then in a stream
            assert outs[0] == want and outs[1] == want, (start, size)
            checked += 1
    assert checked == 48


def test_long_text_with_specials_and_repairs(tok, ref, text):
    # 300 KB: long enough to be split on every machine (128 KiB on 2 threads)
    t = text[:150_000] + "<|endoftext|>" + text[150_000:300_000]
    want = ref.encode(t, allowed_special="all")
    assert 50256 in want
    assert tok.encode(t, allowed_special="all") == want
    bad = t.encode()[:200_000] + b"\xff" + t.encode()[200_000:]
    fixed = bad.decode("utf-8", "replace")
    assert tok.encode(bad, allowed_special="all", errors="replace") == ref.encode(
        fixed, allowed_special="all"
    )


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(
    not 2 <= (os.cpu_count() or 1) <= 4 or not os.path.isdir("/proc/self/task"),
    reason="mid-size texts (32 KiB up to 128 KiB on 2 threads, 64 KiB on 3-4) exist there only",
)
def test_a_stream_of_mid_size_texts_splits_once_the_pool_is_awake(ref, text):
    """A mid-size text runs on the calling thread when it comes alone (waking a sleeping pool
    cost ~200 us on the 2-core VM), and is split across the cores from the second call of a
    stream, whose workers are still spinning (0.4-0.7x the time there, 2026-11-27). The pool
    starts at the first split, so its threads show whether one happened; every call is exact."""
    gputok = pytest.importorskip("gputok")
    t = text[:48_000]
    want = ref.encode_ordinary(t)
    assert len(want) > 5000
    never = gputok.gpt2(device="cpu", cpu_spin_us=0)
    before = _threads()
    outs = [never.encode_ordinary(t) for _ in range(5)]
    assert all(out == want for out in outs)
    assert _threads() == before  # no window: never split, no pool
    tok = gputok.gpt2(device="cpu")
    assert tok.encode_ordinary(t) == want
    assert _threads() == before  # alone: not split
    for _ in range(20):  # back to back (a compare of the ids would take ~0.1 ms): a stream
        outs = [tok.encode_ordinary(t) for _ in range(5)]
        assert all(out == want for out in outs)
        if _threads() > before:  # (a loaded machine may stretch a gap past 50 us: retry)
            break
    assert _threads() == before + (os.cpu_count() or 1) - 1  # split


@pytest.mark.skipif(
    not 2 <= (os.cpu_count() or 1) <= 8 or not os.path.isdir("/proc/self/task"),
    reason="mid-size calls (16 KiB up to 128 KiB on 2 threads, 64 on 3-4, 32 on 5-8) exist there",
)
def test_a_stream_of_mid_size_batches_of_one_text_splits_too(ref, text):
    """encode_batch_flat([text]) of 16-64 KB ran on one thread whatever the cores (a call of one
    item); it now follows encode_one's rule: alone on the calling thread, split from the second
    call of a stream. Its ids and offsets stay tiktoken's, for one text and for a few."""
    gputok = pytest.importorskip("gputok")
    t = text[:20_000]
    want = ref.encode_ordinary(t)
    assert len(want) > 2000
    tok = gputok.gpt2(device="cpu", cpu_spin_us=10_000)  # a window no loaded VM misses
    before = _threads()
    ids, offsets = tok.encode_batch_flat([t])
    assert ids.tolist() == want and offsets.tolist() == [0, len(want)]
    assert _threads() == before  # alone: not split, so no pool
    for _ in range(20):  # in a stream: split (a loaded machine may stretch a gap: retry)
        ids, offsets = tok.encode_batch_flat([t])
        assert ids.tolist() == want
        if _threads() > before:
            break
    assert _threads() == before + (os.cpu_count() or 1) - 1
    parts = [text[:9_000], text[9_000:9_001], "", text[30_000:52_000]]
    wants = [ref.encode_ordinary(p) for p in parts]
    for _ in range(2):
        ids, offsets = tok.encode_batch_flat(parts)
        ends = [sum(len(w) for w in wants[: k + 1]) for k in range(len(wants))]
        assert offsets.tolist() == [0, *ends]
        assert ids.tolist() == [i for w in wants for i in w]


@pytest.mark.skipif(
    (os.cpu_count() or 1) <= 8 or not os.path.isdir("/proc/self/task"),
    reason="texts of 8-16 KiB are split in a stream on 9 or more hardware threads only",
)
def test_a_stream_of_8_to_16_kib_texts_splits_on_many_cores(ref, text):
    """On 9 or more hardware threads a text of 8-16 KiB runs on the calling thread when it comes
    alone and is split from the second call of a stream (2026-11-29: 12.3 KB 39.9 -> 20.8 us on
    the H200's 16-core host); a batch call of it is not split (the served tokenizer's calls:
    several instance processes share the cores); every call is exact."""
    gputok = pytest.importorskip("gputok")
    t = text[:9_000]
    assert 8 * 1024 <= len(t.encode()) < 16 * 1024
    want = ref.encode_ordinary(t)
    assert len(want) > 1000
    tok = gputok.gpt2(device="cpu", cpu_spin_us=10_000)  # a window no loaded host misses
    before = _threads()
    for _ in range(20):  # a stream of batch calls: never split, so no pool
        ids, offsets = tok.encode_batch_flat([t])
        assert ids.tolist() == want and offsets.tolist() == [0, len(want)]
    assert _threads() == before
    assert tok.encode_ordinary(t) == want
    assert _threads() == before  # alone: not split
    for _ in range(20):
        outs = [tok.encode_ordinary(t) for _ in range(3)]
        assert all(out == want for out in outs)
        if _threads() > before:
            break
    assert _threads() == before + (os.cpu_count() or 1) - 1  # split


def test_texts_of_8_to_16_kib_in_a_stream_match_tiktoken(tok, ref, text):
    """Texts of 8-16 KB from several offsets, three times back to back (split from the second
    on 9 or more hardware threads, in parts of 2 KiB and up): tiktoken's ids every time."""
    checked = 0
    for start in (0, 3_333, 77_777):
        for size in range(8_192, 16_384, 1_499):
            t = text[start : start + size]
            want = ref.encode_ordinary(t)
            assert len(want) > 1000
            outs = [tok.encode_ordinary(t) for _ in range(3)]
            assert outs == [want] * 3, (start, size)
            checked += 1
    assert checked == 18


def test_split_batches_at_many_sizes_and_offsets_match_tiktoken(tok, ref, text):
    """One or three texts of 16-140 KB in all, twice each (the second call in a stream, so
    split on every machine with more than one thread): tiktoken's ids and ends."""
    checked = 0
    for start in (0, 2_222, 99_999):
        for size in range(16_384, 140_000, 17_001):
            t = text[start : start + size]
            third = size // 3
            for batch in ([t], [t[:third], t[third : 2 * third], t[2 * third :]]):
                wants = [ref.encode_ordinary(b) for b in batch]
                flat = [i for w in wants for i in w]
                assert len(flat) > 1000
                for _ in range(2):
                    ids, offsets = tok.encode_batch_flat(batch)
                    assert ids.tolist() == flat, (start, size, len(batch))
                    assert offsets[-1] == len(flat) and offsets.tolist()[1] == len(wants[0])
                checked += 1
    assert checked == 48
