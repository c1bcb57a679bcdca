"""The CPU path's shared pretoken cache: exact ids cold, warm, full, off and under
concurrent calls, and a memory cap that holds."""

from __future__ import annotations

import platform
import random
import threading
from pathlib import Path

import numpy as np
import pytest

import gputok
from references import gpt2_files

# Pieces that are not tokens, share their first 16 bytes (so the cache must compare the
# rest), or give more ids than a slot holds inline (so they spill to the arena).
TRICKY = [
    " Достопримечательности",
    " Достопримечательностями",
    " Достопримечательность",
    " 東京特許許可局長今日急遽休暇許可拒否",
    " 東京特許許可局長今日急遽休暇許可拒否す",
    " Ωραίαμέραγιαπεριπάτουστηνπαραλία",
    " xqzjvkwpxqzjvkwpxqzjvkwpxqzjvkwp",
    " xqzjvkwpxqzjvkwpxqzjvkwpxqzjvkwq",
]


def _docs(corpus, n=300, seed=0):
    rng = random.Random(seed)
    docs = list(corpus[:n]) + [" ".join(rng.sample(TRICKY, k=len(TRICKY))) for _ in range(20)]
    rng.shuffle(docs)
    return docs


def _rows(tok, docs, **kw):
    ids, offsets = tok.encode_batch_flat(docs, disallowed_special=(), **kw)
    return [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]


def test_cold_warm_and_off_give_tiktokens_ids(corpus, ref):
    docs = _docs(corpus)
    want = ref.encode_ordinary_batch(docs, num_threads=2)
    assert sum(map(len, want)) > 0
    tok = gputok.gpt2(device="cpu")
    off = gputok.gpt2(device="cpu", piece_cache_bytes=0)
    assert off.piece_cache_stats()["capacity_bytes"] == 0
    assert _rows(off, docs) == want
    assert _rows(tok, docs) == want  # cold
    filled = tok.piece_cache_stats()["entries"]
    assert filled > 0
    assert _rows(tok, docs) == want  # warm: every cacheable piece is now a hit
    assert tok.piece_cache_stats()["entries"] == filled
    assert [tok.encode_ordinary(d) for d in docs[:50]] == want[:50]


def test_memory_cap_holds_and_a_full_cache_stays_exact(corpus, ref):
    docs = _docs(corpus, n=len(corpus))
    want = ref.encode_ordinary_batch(docs, num_threads=2)
    cap = 64 * 1024
    tok = gputok.gpt2(device="cpu", piece_cache_bytes=cap)
    for _ in range(2):
        assert _rows(tok, docs) == want
        st = tok.piece_cache_stats()
        assert 0 < st["capacity_bytes"] <= cap
        assert st["entries"] == st["max_entries"]  # it filled, then froze
        assert st["arena_used"] <= st["arena_bytes"]
    with pytest.raises(ValueError, match="piece_cache_bytes"):
        tok.set_piece_cache_bytes(-1)
    # Past 8 GiB the arena's 32-bit offsets would wrap: refused before anything is allocated.
    with pytest.raises(ValueError, match="piece_cache_bytes must be <= 8589934592"):
        tok.set_piece_cache_bytes((8 << 30) + 1)
    assert _rows(tok, docs[:20]) == want[:20]  # the old cache still serves


def test_concurrent_calls_give_cacheless_ids(corpus):
    docs = _docs(corpus, n=400, seed=1)
    want = _rows(gputok.gpt2(device="cpu", piece_cache_bytes=0), docs)
    assert sum(map(len, want)) > 0
    # A small cache fills and freezes while the threads race to insert into it.
    for cap in (None, 256 * 1024):
        tok = gputok.gpt2(device="cpu", piece_cache_bytes=cap)
        got: dict[int, list] = {}
        errors: list[BaseException] = []

        def work(i, tok=tok, got=got, errors=errors):
            try:
                order = list(range(len(docs)))
                random.Random(i).shuffle(order)
                mine = [docs[j] for j in order]
                rows = _rows(tok, mine, num_threads=1 + i % 2)
                one = [tok.encode_ordinary(d) for d in mine[:40]]
                back = [None] * len(docs)
                for j, row in zip(order, rows, strict=True):
                    back[j] = row
                got[i] = [back, [want[j] for j in order[:40]] == one]
            except BaseException as e:  # noqa: BLE001  (reported below)
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for back, singles_ok in got.values():
            assert back == want and singles_ok


def test_replacing_the_cache_keeps_ids(corpus):
    docs = _docs(corpus, n=100, seed=2)
    tok = gputok.gpt2(device="cpu")
    want = _rows(tok, docs)
    tok.set_piece_cache_bytes(1 << 20)
    assert tok.piece_cache_stats()["entries"] == 0
    assert _rows(tok, docs) == want
    ids, _ = tok.encode_batch_flat(docs)
    assert np.array_equal(ids, np.concatenate([np.asarray(r, np.int32) for r in want]))


def test_whole_tokens_are_cached_so_a_warm_piece_is_one_probe():
    """Pieces that are whole tokens go into the cache too (one id), so a warm piece needs
    the cache alone, not the token index first: the entries count them. (A 1 MiB cache is
    too small to start with the vocabulary, so it starts empty.)"""
    tok = gputok.gpt2(device="cpu", piece_cache_bytes=1 << 20)
    text = " hello world and the rest of it"  # every piece a whole token
    assert tok.encode_ordinary(text) == [23748, 995, 290, 262, 1334, 286, 340]
    assert tok.piece_cache_stats()["entries"] == 7
    assert tok.encode_ordinary(text) == [23748, 995, 290, 262, 1334, 286, 340]
    assert tok.piece_cache_stats()["entries"] == 7


def test_one_byte_pieces_are_cached_so_no_piece_branches_on_its_length():
    """One-byte pieces go into the cache too (their byte's token): the encoder looks every
    piece up the same way, with no branch on its length, which mispredicted on the 30% of
    pieces that are one byte (encoder_segment.cpp). Five distinct one-byte pieces give five
    entries, cold and warm, with tiktoken's ids."""
    tok = gputok.gpt2(device="cpu", piece_cache_bytes=1 << 20)
    for _ in range(2):
        assert tok.encode_ordinary("a,b;c") == [64, 11, 65, 26, 66]
        assert tok.piece_cache_stats()["entries"] == 5
    off = gputok.gpt2(device="cpu", piece_cache_bytes=0)
    assert off.encode_ordinary("a,b;c") == [64, 11, 65, 26, 66]


def test_a_new_cache_starts_with_every_token(ref):
    """A new cache holds every token as its own piece, with the id a miss would find (a piece
    that is a token is that token: tiktoken's rule), so a first call finds whole tokens in
    one probe, as a warm one does (encoder.cpp, Encoder::seed). A cache that could not hold
    the vocabulary twice over starts empty; a vocabulary from merges (HF's rule: every piece
    merges) starts no cache with its tokens."""
    tok = gputok.gpt2(device="cpu")
    seeded = tok.piece_cache_stats()["entries"]
    assert seeded == len(ref._mergeable_ranks) == 50256
    text = " hello world and the rest of it"
    assert tok.encode_ordinary(text) == ref.encode_ordinary(text)
    assert tok.piece_cache_stats()["entries"] == seeded  # every piece a hit: nothing added
    tok.set_piece_cache_bytes(1 << 20)
    assert tok.piece_cache_stats()["entries"] == 0
    tok.set_piece_cache_bytes(16 << 20)
    assert tok.piece_cache_stats()["entries"] == seeded
    files = gpt2_files()
    hf = gputok.load_hf_files(files["vocab.json"], files["merges.txt"], device="cpu")
    assert hf.piece_cache_stats()["entries"] == 0
    assert hf.encode_ordinary(text) == ref.encode_ordinary(text)


def test_ids_past_16_bits_are_cached_whole(tmp_path, corpus, ref):
    """A vocabulary whose ids do not fit 16 bits keeps its cached ids in the wide form: r50k's
    ranks moved up by 100,000 give tiktoken's ids plus 100,000, cold and warm."""
    lines = (Path(gputok.__file__).parent / "data" / "gpt2.tiktoken").read_text().split()
    shifted = tmp_path / "shifted.tiktoken"
    shifted.write_text(
        "".join(f"{b} {int(r) + 100_000}\n" for b, r in zip(lines[::2], lines[1::2], strict=True))
    )
    tok = gputok.load_tiktoken_file(shifted, {"<|endoftext|>": 150_256}, device="cpu")
    docs = _docs(corpus, n=200, seed=3)
    want = [[i + 100_000 for i in row] for row in ref.encode_ordinary_batch(docs, num_threads=2)]
    assert sum(map(len, want)) > 0
    for _ in range(2):  # cold, then warm from the cache
        assert _rows(tok, docs) == want
    assert tok.piece_cache_stats()["entries"] > 0


def _smaps_kb(field: str) -> int | None:
    """A field of this process's /proc/self/smaps_rollup in kB (None where there is none)."""
    try:
        text = Path("/proc/self/smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def _anon_huge_kb() -> int | None:
    return _smaps_kb("AnonHugePages")


def test_the_cache_is_on_huge_pages_where_the_kernel_offers_them(corpus):
    """Its slots are advised onto 2 MiB pages (every lookup is a random access; on 4 KiB
    pages each also missed the TLB)."""
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        pytest.skip("no transparent huge pages here")
    if "[never]" in mode or _anon_huge_kb() is None:
        pytest.skip(f"transparent huge pages off: {mode.strip()}")
    before = _anon_huge_kb()
    tok = gputok.gpt2(device="cpu")
    tok.encode_batch_flat(list(corpus[:300]), num_threads=1)
    assert _anon_huge_kb() - before >= 2048


def _advised_bytes(lo: int, hi: int) -> int:
    """Bytes of [lo, hi) in this process's mappings that carry MADV_HUGEPAGE ("hg")."""
    advised, rng = 0, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            a, b = (int(x, 16) for x in head.split("-"))
            rng = (max(a, lo), min(b, hi))
        elif line.startswith("VmFlags:") and rng and rng[0] < rng[1] and " hg" in line:
            advised += rng[1] - rng[0]
    return advised


@pytest.mark.parametrize("threads", [1, 2])
def test_a_large_result_is_on_huge_pages(corpus, threads):
    """A batch's ids buffer of 8 MiB and up is advised onto 2 MiB pages before it is written
    (on 4 KiB pages its first writes faulted once a page: 5-19% of a one-thread run on the
    2-core VM). Only the "madvise" mode tells: under "always" every buffer gets them. The
    advice is what is checked (the mapping's "hg" flag), not the process's huge pages: a
    buffer that malloc takes from memory an earlier call already touched stays on the small
    pages it has (seen when earlier tests had grown the heap), and that costs no faults."""
    try:
        mode = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        pytest.skip("no transparent huge pages here")
    if "[madvise]" not in mode or not Path("/proc/self/smaps").exists():
        pytest.skip(f"transparent huge pages not in madvise mode: {mode.strip()}")
    tok = gputok.gpt2(device="cpu")
    docs = list(corpus[:400])
    big = docs * max(1, (24 << 20) // sum(len(d.encode()) for d in docs))
    ids, offsets = tok.encode_batch_flat(big, num_threads=threads)
    assert ids.nbytes >= 16 << 20 and int(offsets[-1]) == ids.size
    huge = 2 << 20
    lo = (ids.ctypes.data + huge - 1) // huge * huge
    hi = (ids.ctypes.data + ids.nbytes) // huge * huge
    assert _advised_bytes(lo, hi) == hi - lo, f"{_advised_bytes(lo, hi)} of {hi - lo} B advised"


def _anon_kb() -> int | None:
    return _smaps_kb("Anonymous")


def _kernel_populates() -> bool:
    """MADV_POPULATE_WRITE came in Linux 5.14."""
    try:
        major, minor = (int(x) for x in platform.release().split(".")[:2])
    except ValueError:
        return False
    return platform.system() == "Linux" and (major, minor) >= (5, 14)


def test_the_cache_is_faulted_in_when_built_not_on_the_first_call():
    """A fresh 64 MiB cache's first lookups landed all over its 32 MiB of slots, each first
    touch of a 2 MiB page zeroing it: a tokenizer's first 64-token call took 1-5 ms (H100
    host, 2026-11-27). The slots are now faulted in while the tokenizer is built; a cache
    larger than 256 MiB stays lazy (its memory grows as it fills)."""
    if not _kernel_populates() or _anon_kb() is None:
        pytest.skip("needs Linux 5.14+ and /proc/self/smaps_rollup")
    gputok.gpt2(device="cpu")  # the shared vocabulary, loaded once
    before = _anon_kb()
    tok = gputok.gpt2(device="cpu", piece_cache_bytes=64 << 20)
    grown_mb = (_anon_kb() - before) / 1024
    assert grown_mb >= 24, f"the cache's slots were not faulted in at build: {grown_mb:.1f} MB"
    del tok
    before = _anon_kb()
    big = gputok.gpt2(device="cpu", piece_cache_bytes=1 << 30)
    grown_mb = (_anon_kb() - before) / 1024
    assert grown_mb < 64, f"a 1 GiB cache was faulted in at build: {grown_mb:.1f} MB"
    assert big.encode_ordinary("hello world") == [31373, 995]


@pytest.mark.parametrize("bad", [-1, 100, (1 << 34) + 1, True, 1.5, "64M"])
def test_gpu_cache_bytes_out_of_range_is_refused_before_any_build(bad):
    """The GPU's learned cache (gpu_cache_bytes): 0 or 64 KiB-16 GiB, checked in Python on
    every machine (a CPU tokenizer takes the argument and has no use for it)."""
    with pytest.raises(ValueError, match="gpu_cache_bytes"):
        gputok.gpt2(device="cpu", gpu_cache_bytes=bad)


def test_gpu_cache_bytes_in_range_builds():
    for ok in (0, 1 << 16, 1 << 34):
        tok = gputok.gpt2(device="cpu", gpu_cache_bytes=ok)
        assert tok.encode_ordinary("hello world") == [31373, 995]
