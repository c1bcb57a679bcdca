"""Every Unicode scalar value, in several contexts, against tiktoken; and the generated
table against its pinned source."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gputok
from gputok import _core

REPO = Path(__file__).resolve().parents[2]
SCALARS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
# Each code point after a letter, after a space, before a digit, before a contraction,
# doubled, after NBSP and before a newline: every branch of the scanner sees it.
CONTEXTS = ["x{c} ", "{c}1", "{c}'s ", "{c}{c} ", "\u00a0{c}", " {c}\n", "'{c}", "{c}  {c}"]


@pytest.mark.parametrize("context", CONTEXTS)
def test_every_scalar_value(tok, ref, context):
    chunks = [
        "".join(context.format(c=chr(c)) for c in SCALARS[i : i + 256])
        for i in range(0, len(SCALARS), 256)
    ]
    want = ref.encode_ordinary_batch(chunks, num_threads=2)
    got = tok.encode_ordinary_batch(chunks)
    assert all(want), "reference returned empty ids"
    bad = [i for i in range(len(chunks)) if got[i] != want[i]]
    assert not bad, (
        f"first mismatch in chunk {bad[0]} (code points from {SCALARS[bad[0] * 256]:#x})"
    )


def test_table_matches_pinned_source():
    pytest.importorskip("unicodedata2")
    r = subprocess.run(
        [sys.executable, str(REPO / "backend_src/tools/gen_unicode_tables.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "cp,cls",
    [
        (ord("a"), 1),
        (ord("Z"), 1),
        (ord("5"), 2),
        (ord(" "), 3),
        (ord("!"), 0),
        (0x1C, 0),  # str.isspace() says yes; White_Space says no
        (0x85, 3),
        (0xA0, 3),
        (0x1680, 3),
        (0x2000, 3),
        (0x200A, 3),
        (0x2028, 3),
        (0x2029, 3),
        (0x202F, 3),
        (0x205F, 3),
        (0x3000, 3),
        (0x180E, 0),
        (0x200B, 0),
        (0xFEFF, 0),  # not White_Space
        (0x10940, 0),
        (0x11DB0, 0),  # Unicode 17 additions: not letters to tiktoken 0.14
        (0x2160, 2),
        (0xBD, 2),
        (0x4E00, 1),
    ],
)
def test_char_class_literals(cp, cls):
    assert _core.char_class(cp) == cls


def test_unicode17_letters_are_other(tok, ref):
    for cp in (0x10940, 0x11DB0):
        text = f"a{chr(cp)}b"
        assert tok.encode(text) == ref.encode_ordinary(text)


def test_version_exposed():
    assert gputok.__version__
