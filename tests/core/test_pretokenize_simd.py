"""The pretokenizer's fast scanner (64-byte class masks, AVX2 where the CPU has it) against
its scalar twin (next_piece, itself tested against tiktoken), one piece a call (next) and a
window's pieces at once (next_many): every byte class at every position of a block,
Hypothesis text, and the AVX2 classifier against the portable one."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok import _core

# One character of each class the rules tell apart, ASCII and not: letters (the
# contraction letters among them), digits, each ASCII whitespace, U+001C..U+001F (not
# whitespace), controls, the apostrophe, punctuation, and non-ASCII L, N, White_Space, other.
PROBES = list("aZsdmtlvre5 \t\n\x0b\x0c\r\x1c\x1f\x00\x7f'.-_") + [
    "é",
    "Ж",
    "٣",
    "\u00a0",
    "\u0085",
    "\u3000",
    "\u2014",
    "😀",
    "\u200b",
]
BACKGROUNDS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmn",
    "0123456789" * 7,
    " " * 70,
    "\n" * 70,
    ".,;:!?-+" * 9,
    "don't  stop 12 it's\t\tok 'll 've 're 'd 'm\n\n  x  yy ..  ",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z 0 1 2 3 4 5",
]


# next_many's run limits: one piece a call, a few, and the encoder's block.
MANY = (1, 3, 32)


def _check(text: str) -> None:
    data = text.encode()
    want = _core.scan_pieces(data, False)
    assert sum(want) == len(data) and (want or not data)
    for many in MANY:
        assert _core.scan_pieces(data, True, many) == want, (many, text)


@pytest.mark.parametrize("background", BACKGROUNDS)
def test_every_class_at_every_position_of_a_block(background):
    for probe, pos in itertools.product(PROBES, range(33)):
        for length in (pos + 1, pos + 2, 40, 64, len(background)):
            base = background[:length]
            _check(base[:pos] + probe + base[pos + 1 :])
            _check(base[:pos] + probe + probe + base[pos + 2 :])
            _check(base[:pos] + " " + probe + base[pos + 2 :])


def test_pairs_of_classes_at_a_window_edge():
    # Two probes around bytes 31-33 and 63-65, where one 32-byte half or the window ends.
    for a, b in itertools.product(PROBES, repeat=2):
        for pos in (30, 31, 32, 62, 63, 64):
            _check("x" * pos + a + b + "yz")
            _check(" " * pos + a + b + " q")


ASCIIISH = st.text(
    alphabet=st.sampled_from(
        list(" \t\n\r'sdmtlver0123456789aZ.,-\x1c\x0b") + ["é", "\u00a0", "😀"]
    ),
    max_size=300,
)


@settings(max_examples=600, deadline=None)
@given(ASCIIISH)
def test_hypothesis_text(text):
    _check(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_hypothesis_any_unicode(text):
    _check(text)


def test_avx2_classifier_equals_portable():
    if not _core.classify_has_avx2():
        pytest.skip("this CPU has no AVX2: classify64 is the portable code itself")
    for byte in range(256):
        for pos in range(64):
            block = bytearray(b"a" * 64)
            block[pos] = byte
            for avail in (64, pos + 1, pos):
                data = bytes(block[:avail])
                assert _core.classify64(data, False) == _core.classify64(data, True), (byte, pos)
    letter, digit, space, high = _core.classify64(bytes(range(64)), True)
    assert space == sum(1 << c for c in (9, 10, 11, 12, 13, 32))  # not 0x1C..0x1F
    assert digit == sum(1 << c for c in range(48, 58))
    assert letter == high == 0


@pytest.mark.parametrize("many", MANY)
def test_contractions_inside_a_window(many):
    # A contraction ends inside the letter run after its apostrophe: the window's plan must
    # move that boundary (next_many reads several pieces from one plan).
    for word in ("don't", "it's", "we'll", "they've", "you're", "I'd", "I'm", "'s's", "x''s"):
        for pad in range(0, 66, 5):
            for tail in ("", "tail", " next", "'", "ll"):
                text = "a" * pad + " " + word + tail + " z"
                data = text.encode()
                assert _core.scan_pieces(data, True, many) == _core.scan_pieces(data, False), text
