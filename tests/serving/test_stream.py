"""gputok.stream: incremental detokenization equals the one-shot decode, without a server."""

from __future__ import annotations

import itertools
import random
import time

import pytest

from gputok.stream import MAX_PENDING, IncrementalDecoder, decode_step, pending_tail

# Texts whose characters GPT-2 splits across tokens (CJK, emoji with ZWJ and skin tones, Hangul,
# combining marks), a real U+FFFD, and a 4-byte character at the very end.
HARD = [
    "日本語のテキスト、漢字とかなの混在。",
    "👩‍👩‍👧‍👦 family, 👍🏽 thumbs, 🇯🇵 flag",
    "한국어 문장입니다. e\u0301 café",
    "a real \ufffd replacement char, and \ufffd\ufffd twice",
    "ends in an emoji 😀",
]

# Byte strings that are not valid UTF-8: lone continuation bytes, a truncated 3- and 4-byte
# character mid-text and at the end, an overlong encoding, a surrogate, a code point past
# U+10FFFF, and bytes that can never occur (C0, F5, FF).
INVALID = [
    b"\x80abc",
    b"ab\xe6\x97c\xf0\x9f\x98d",
    b"tail \xf0\x9f\x98",
    b"\xc0\xaf overlong",
    b"\xed\xa0\x80 surrogate",
    b"\xf4\x90\x80\x80 past max",
    b"\xf5\xff\xfe junk",
    b"\xe2\x82",
]


def stream_chunks(tok, ids, step: int, errors="replace") -> list[str]:
    d = IncrementalDecoder(tok, errors)
    out = []
    for i in range(0, len(ids), step):
        out.append(d.feed(ids[i : i + step]))
        assert len(d.pending) <= MAX_PENDING
    out.append(d.finish())
    return out


def byte_chunks(data: bytes, cuts: list[int], errors="replace") -> list[str]:
    d = IncrementalDecoder(None, errors)
    out, start = [], 0
    for c in [*cuts, len(data)]:
        out.append(d.feed_bytes(data[start:c]))
        assert len(d.pending) <= MAX_PENDING
        start = c
    out.append(d.finish())
    return out


def stateless_chunks(data: bytes, cuts: list[int]) -> list[str]:
    out, start = [], 0
    bounds = [*cuts, len(data)]
    for k, c in enumerate(bounds):
        out.append(decode_step(data[:start], data[start:c], final=k == len(bounds) - 1))
        start = c
    return out


def test_corpus_streamed_equals_one_shot(tok, corpus):
    docs = [d for d in corpus if d][:300]
    assert docs
    for doc in docs:
        ids = tok.encode_ordinary(doc)
        whole = tok.decode(ids)
        assert whole == doc
        for step in (1, 3):  # one token per step, and several tokens per step
            assert "".join(stream_chunks(tok, ids, step)) == whole


@pytest.mark.parametrize("text", HARD)
def test_split_at_every_byte(text):
    data = text.encode()
    assert data
    for cut in range(len(data) + 1):
        chunks = byte_chunks(data, [cut])
        assert "".join(chunks) == text
        assert "\ufffd" not in "".join(chunks) or "\ufffd" in text
        # the stateless form gives the same chunk at each step (finish folded into the last)
        assert stateless_chunks(data, [cut]) == [*chunks[:-2], chunks[-2] + chunks[-1]]


@pytest.mark.parametrize("text", HARD)
def test_split_into_single_bytes_emits_each_character_once_complete(text):
    data = text.encode()
    chunks = byte_chunks(data, list(range(1, len(data))))
    assert "".join(chunks) == text
    # never moves backwards: every chunk is whole characters, each emitted at its last byte
    pos = 0
    for ch in chunks:
        assert text[pos : pos + len(ch)] == ch
        pos += len(ch)


@pytest.mark.parametrize("text", HARD)
def test_token_stream_of_hard_text(tok, text):
    ids = tok.encode(text)
    assert "".join(stream_chunks(tok, ids, 1)) == text
    assert "".join(stream_chunks(tok, ids, 2)) == text


@pytest.mark.parametrize("data", INVALID)
def test_invalid_bytes_equal_decode_replace(data):
    want = data.decode("utf-8", "replace")
    assert "\ufffd" in want
    for cut in range(len(data) + 1):
        assert "".join(byte_chunks(data, [cut])) == want
        assert "".join(stateless_chunks(data, [cut])) == want
    assert "".join(byte_chunks(data, list(range(1, len(data))))) == want


def test_invalid_bytes_strict_raises():
    with pytest.raises(UnicodeDecodeError):
        byte_chunks(b"ok \x80", [2], errors="strict")
    with pytest.raises(UnicodeDecodeError):  # a tail cut by the end of the stream
        byte_chunks(b"ok \xe6\x97", [4], errors="strict")
    assert "".join(byte_chunks("é".encode(), [1], errors="strict")) == "é"
    with pytest.raises(ValueError):
        IncrementalDecoder(None, "ignore")


def test_pending_tail_depends_on_last_three_bytes_only():
    # the lemma the stateless detokenizer rests on, checked on every 5-byte string over an
    # alphabet of the byte classes that matter
    alphabet = [
        b"a",
        b"\x80",
        b"\xa0",
        b"\xbf",
        b"\xc3",
        b"\xe0",
        b"\xe6",
        b"\xed",
        b"\xf0",
        b"\xf4",
        b"\xff",
    ]
    for combo in itertools.product(alphabet, repeat=5):
        data = b"".join(combo)
        d = IncrementalDecoder(None)
        d.feed_bytes(data)
        assert pending_tail(data) == d.pending, data


def test_random_cuts_of_random_bytes():
    rng = random.Random(1234)
    for _ in range(2000):
        data = bytes(
            rng.choice([0x41, 0x80, 0xBF, 0xC2, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80])
            for _ in range(rng.randint(0, 12))
        )
        cuts = sorted(rng.sample(range(len(data) + 1), k=min(len(data) + 1, rng.randint(0, 4))))
        want = data.decode("utf-8", "replace")
        assert "".join(byte_chunks(data, cuts)) == want
        assert "".join(stateless_chunks(data, cuts)) == want


def test_cost_per_token(tok, corpus):
    ids = tok.encode_ordinary("".join(corpus[:50]))[:20000]
    assert ids
    t = time.perf_counter()
    stream_chunks(tok, ids, 1)
    per = (time.perf_counter() - t) / len(ids) * 1e6
    print(f"IncrementalDecoder: {per:.2f} us per one-token step over {len(ids)} tokens")
    assert per < 200  # a bound for a loaded 2-core machine, not a benchmark
