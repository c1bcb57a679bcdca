"""UTF-8 validation (csrc/utf8.cpp): the SIMD whole-buffer check in front of the
byte-by-byte decoder must never change an answer. Every answer is compared with CPython's
strict decoder (the offset of the first invalid byte, or the length) and with the scalar
reference, for inputs placed across the 32-byte blocks the SIMD check works in, in ASCII and in
non-ASCII surroundings (its ASCII-block shortcut and its full path)."""

from __future__ import annotations

import random

import pytest

from gputok import _core

BACKGROUNDS = {
    "ascii": b"a" * 96,
    "latin": "é".encode() * 48,  # every block non-ASCII
    "cjk": "中".encode() * 32,
}
# Offsets around the block edges at 32 and 64 (and 63/65: an input spans two blocks).
OFFSETS = (0, 29, 30, 31, 32, 33, 61, 62, 63, 64)


def python_first_invalid(b: bytes) -> int:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return len(b)


def check(b: bytes) -> None:
    want = python_first_invalid(b)
    assert _core.utf8_first_invalid_reference(b) == want, b
    assert _core.utf8_first_invalid(b) == want, b


def place(bg: bytes, at: int, piece: bytes) -> bytes:
    """``piece`` written over ``bg`` at ``at``, cut so that only whole background characters
    remain before it (a background of 2- or 3-byte characters stays valid around it)."""
    unit = 1 if bg[0] < 0x80 else len(bg[:4].decode("utf-8", "ignore")[0].encode())
    at -= at % unit
    rest = bg[at + len(piece) :]
    skip = (-len(piece)) % unit if unit > 1 else 0
    return bg[:at] + piece + (rest[skip:] if len(rest) > skip else b"")


@pytest.mark.parametrize("bg", list(BACKGROUNDS), ids=list(BACKGROUNDS))
def test_every_byte_pair_at_block_edges(bg):
    back = BACKGROUNDS[bg]
    for at in (30, 31, 32, 33):
        for a in range(256):
            for c in range(256):
                check(place(back, at, bytes((a, c))))


@pytest.mark.parametrize("bg", list(BACKGROUNDS), ids=list(BACKGROUNDS))
def test_three_and_four_byte_leads_at_block_edges(bg):
    back = BACKGROUNDS[bg]
    seconds = range(0x70, 0xC8)
    others = (0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xE0, 0xF0, 0xFF)
    for at in OFFSETS:
        for lead in range(0xE0, 0x100):
            for s in seconds:
                for t in others:
                    check(place(back, at, bytes((lead, s, t))))
                    if lead >= 0xF0:
                        for f in (0x41, 0x80, 0xBF, 0xC2):
                            check(place(back, at, bytes((lead, s, t, f))))


def test_ends_inside_a_sequence():
    """A sequence cut off by the end of the buffer, at every length around the block edges:
    the SIMD check's zero-padded last block must still see it."""
    for n in range(60, 100):
        for piece in ("é".encode(), "中".encode(), "😀".encode()):
            for cut in range(1, len(piece) + 1):
                b = b"a" * (n - cut) + piece[:cut]
                check(b)
                check("é".encode() * (n // 2) + piece[:cut])


def test_random_mixtures():
    """Valid characters of every length, boundary code points, overlongs, surrogates, stray
    continuations and cut sequences, mixed at random (a fixed seed: the same cases every run)."""
    rng = random.Random(20261123)
    valid = [
        c.encode() for c in ("a", " ", "\n", "é", "ÿ", "ߋ", "\u0800", "中", "\ud7ff", "\ue000")
    ]
    valid += [chr(c).encode() for c in (0xFFFF, 0x10000, 0x10FFFF, 0x1F600)]
    bad = [
        b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf",
        b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf",
        b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xfe", b"\xe4\xb8", b"\xf0\x9f\x98",
        b"\xc3",
    ]  # fmt: skip
    for _ in range(20000):
        parts = [rng.choice(valid) for _ in range(rng.randint(0, 120))]
        if rng.random() < 0.7:
            parts.insert(rng.randint(0, len(parts)), rng.choice(bad))
        check(b"".join(parts))
    for _ in range(300):  # long valid runs with one fault far in (the early-exit path)
        parts = [rng.choice(valid) for _ in range(rng.randint(20000, 40000))]
        if rng.random() < 0.5:
            parts.insert(rng.randint(0, len(parts)), rng.choice(bad))
        check(b"".join(parts))


def test_accepts_any_bytes_like():
    b = "naïve café 中文 😀".encode() * 10
    assert _core.utf8_first_invalid(bytearray(b)) == len(b)
    assert _core.utf8_first_invalid(memoryview(b)) == len(b)
    assert _core.utf8_first_invalid(b + b"\xff") == len(b)
