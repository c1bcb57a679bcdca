"""Fuzzing the native entry points with Hypothesis: arbitrary bytes into encode,
arbitrary integers into decode, arbitrary file contents into the three loaders.

The contract checked: bad input raises ValueError and nothing else (for the loaders: exactly
gputok.VocabError, or FileNotFoundError for a missing path; a bare ValueError escaping a
loader is an unwrapped library error and fails); valid input gives tiktoken's ids, and a
vocabulary that loads round-trips bytes. A crash (segfault, abort) takes
the pytest process down, which fails CI loudly; every one found becomes a named regression test
at the bottom of this file.

Time: bounded in CI. Each test runs GPUTOK_FUZZ_EXAMPLES examples (default 200; the whole file
takes about 10 s on the 2-core CPU machine). For a longer run on demand:
`GPUTOK_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest tests/core/test_fuzz.py -q`. The seeded,
budgeted harnesses for the sanitizer builds live in fuzz/ (`make sanitize`).
"""

from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gputok

EXAMPLES = int(os.environ.get("GPUTOK_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES)  # the rest: conftest.py's profile
N_VOCAB = 50257
EOT = "<|endoftext|>"

# Byte fragments that reach the interesting branches: every UTF-8 error class (stray
# continuation, overlong, surrogate, > U+10FFFF, truncated), NUL, whitespace runs, contractions,
# the special token and pieces of it, and multi-byte letters.
FRAGMENTS = [
    b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf",
    b"\xf4\x90\x80\x80", b"\xf5", b"\xff", b"\xfe", b"\xe2\x82", b"\xf0\x9f\x98", b"\x00",
    b" ", b"  ", b"\n", b"\r\n", b"\t", b"'s", b"'ll", b"DON'T", EOT.encode(), b"<|endof",
    b"text|>", "é".encode(), "日本".encode(), "🎉".encode(), "\u00a0".encode(), b"123", b"a",
]  # fmt: skip
fuzz_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=8)), max_size=60).map(
        b"".join
    ),
)
ids = st.integers(min_value=-(2**63), max_value=2**63 - 1)
small_ids = st.integers(min_value=-3, max_value=N_VOCAB + 3)


def _utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- encode -----------------------------------------------------------------------------------


@FUZZ
@given(fuzz_bytes)
def test_encode_strict(tok, ref, b):
    """strict: invalid UTF-8 or the special token -> ValueError; otherwise tiktoken's ids."""
    s = _utf8(b)
    try:
        got = tok.encode(b)
    except ValueError:
        got = None
    if s is None:
        assert got is None, f"invalid UTF-8 accepted: {b!r}"
        return
    try:
        want = ref.encode(s)
    except ValueError:  # tiktoken: disallowed special token
        want = None
    assert got == want


@FUZZ
@given(fuzz_bytes)
def test_encode_replace_never_raises(tok, ref, b):
    s = b.decode("utf-8", "replace")
    want = ref.encode_ordinary(s)
    if b:
        assert want, "reference returned empty ids"
    assert tok.encode(b, errors="replace", disallowed_special=()) == want
    assert tok.encode(b, errors="replace", allowed_special="all") == ref.encode(
        s, allowed_special="all"
    )


@FUZZ
@given(st.lists(fuzz_bytes, max_size=12), st.integers(1, 3))
def test_encode_batch_flat(tok, ref, rows, threads):
    flat, offsets = tok.encode_batch_flat(
        rows, errors="replace", disallowed_special=(), num_threads=threads
    )
    assert len(offsets) == len(rows) + 1 and offsets[0] == 0 and offsets[-1] == len(flat)
    got = [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(rows))]
    assert got == [ref.encode_ordinary(r.decode("utf-8", "replace")) for r in rows]
    strict_ok = all(_utf8(r) is not None for r in rows)
    try:
        sflat, soff = tok.encode_batch_flat(rows, disallowed_special=(), num_threads=threads)
    except ValueError:
        assert not strict_ok, "valid UTF-8 rejected"
    else:
        assert strict_ok, "invalid UTF-8 accepted"
        assert sflat.tolist() == flat.tolist() and soff.tolist() == offsets.tolist()


# --- decode -----------------------------------------------------------------------------------


@FUZZ
@given(st.lists(st.one_of(small_ids, ids), max_size=50))
def test_decode_arbitrary_ids(tok, ref, xs):
    in_range = all(0 <= x < N_VOCAB for x in xs)
    for fn in (tok.decode_bytes, tok.decode, lambda v: tok.decode_batch([v, [31373]])):
        try:
            out = fn(xs)
        except ValueError as e:
            assert not in_range, f"in-range ids rejected: {e}"
            continue
        assert in_range, f"out-of-range ids accepted: {xs}"
    if in_range:
        want = ref.decode_bytes(xs)
        assert tok.decode_bytes(xs) == want
        assert tok.decode(xs, errors="replace") == want.decode("utf-8", "replace")
        assert out == [want.decode("utf-8", "replace"), "hello"]


@FUZZ
@given(st.lists(st.integers(0, N_VOCAB - 1), max_size=40))
def test_decode_strict_raises_valueerror_only(tok, ref, xs):
    want = ref.decode_bytes(xs)
    try:
        got = tok.decode(xs, errors="strict")
    except ValueError:
        assert _utf8(want) is None
    else:
        assert got == want.decode("utf-8")


# --- loaders ----------------------------------------------------------------------------------


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


tiktoken_line = st.one_of(
    st.tuples(st.binary(min_size=1, max_size=4), st.integers(-2, 300)).map(
        lambda t: f"{_b64(t[0])} {t[1]}"
    ),
    st.text(max_size=20),
    st.sampled_from(
        ["", " ", "=", "YQ==", "YQ== x", "YQ==  1", "!!!! 1", "YQ== 99999999999999999"]
    ),
)
tiktoken_file = st.one_of(
    st.binary(max_size=400),
    st.lists(tiktoken_line, max_size=30).map(lambda ls: "\n".join(ls).encode()),
    # a valid prefix: the 256 single bytes, then fuzz
    st.lists(tiktoken_line, max_size=10).map(
        lambda ls: "\n".join([f"{_b64(bytes([i]))} {i}" for i in range(256)] + ls).encode()
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=20,
)
vocab_json = st.one_of(
    st.binary(max_size=200),
    st.dictionaries(st.text(max_size=4), st.integers(-2, 400), max_size=40).map(
        lambda d: json.dumps(d).encode()
    ),
    json_values.map(lambda v: json.dumps(v).encode()),
)
merges_txt = st.one_of(
    st.binary(max_size=200),
    st.lists(st.tuples(st.text(max_size=3), st.text(max_size=3)).map(" ".join), max_size=20).map(
        lambda ls: "\n".join(["#version: 0.2", *ls]).encode()
    ),
)


def _tokenizer_json(v) -> dict:
    base = {
        "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
        "decoder": {"type": "ByteLevel"},
        "added_tokens": [],
    }
    path, value = v
    node = base
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return base


tokenizer_json = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.tuples(
        st.sampled_from(
            [
                ("model",),
                ("model", "type"),
                ("model", "vocab"),
                ("model", "merges"),
                ("pre_tokenizer",),
                ("pre_tokenizer", "type"),
                ("added_tokens",),
                ("decoder",),
            ]
        ),
        json_values,
    ).map(lambda v: json.dumps(_tokenizer_json(v)).encode()),
)


def _use(t) -> None:
    """A tokenizer that loaded must encode any text (errors="replace" never raises) and decode
    its own ids back to the same bytes: a byte-level BPE loses nothing."""
    for b in (b"ab", b"hello world", "é日".encode(), b"\xff"):
        ids = t.encode(b, errors="replace", disallowed_special=())
        assert t.decode_bytes(ids) == b.decode("utf-8", "replace").encode(), (b, ids)


def _load(fn, *paths):
    """Loads, and uses what loaded. Only VocabError may refuse a file that exists: any other
    error (a bare ValueError from int(), a JSON or codec error, a RuntimeError from the
    bindings) escaped the loader unwrapped and fails the test."""
    try:
        t = fn(*paths, device="cpu")
    except gputok.VocabError:
        return
    _use(t)


@FUZZ
@given(tiktoken_file)
def test_load_tiktoken_file(tmp_path, data):
    p = tmp_path / "fuzz.tiktoken"
    p.write_bytes(data)
    _load(gputok.load_tiktoken_file, str(p))


@FUZZ
@given(vocab_json, merges_txt)
def test_load_hf_files(tmp_path, vocab, merges):
    v, m = tmp_path / "vocab.json", tmp_path / "merges.txt"
    v.write_bytes(vocab)
    m.write_bytes(merges)
    _load(gputok.load_hf_files, str(v), str(m))


@FUZZ
@given(tokenizer_json)
def test_load_tokenizer_json(tmp_path, data):
    p = tmp_path / "tokenizer.json"
    p.write_bytes(data)
    _load(gputok.load_tokenizer_json, str(p))


LOADERS = {
    "load_tiktoken_file": lambda p: gputok.load_tiktoken_file(p, device="cpu"),
    "load_tokenizer_json": lambda p: gputok.load_tokenizer_json(p, device="cpu"),
    "load_hf_files(vocab)": lambda p: gputok.load_hf_files(p, gputok.GPT2_RANKS, device="cpu"),
}


@pytest.mark.parametrize("fn", sorted(LOADERS))
def test_loader_missing_path_is_file_not_found(tmp_path, fn):
    """A missing vocabulary file raises FileNotFoundError naming it, as open() does (it
    raised VocabError); a directory is no vocabulary: VocabError."""
    missing = tmp_path / "missing.file"
    with pytest.raises(FileNotFoundError, match="missing.file") as e:
        LOADERS[fn](str(missing))
    assert not isinstance(e.value, gputok.VocabError) and e.value.filename == str(missing)
    with pytest.raises(gputok.VocabError, match=str(tmp_path)):
        LOADERS[fn](str(tmp_path))


def test_load_hf_files_missing_merges_is_file_not_found(tmp_path):
    v = tmp_path / "vocab.json"
    v.write_text('{"a": 0}')
    with pytest.raises(FileNotFoundError, match="merges.txt"):
        gputok.load_hf_files(str(v), str(tmp_path / "merges.txt"), device="cpu")


# --- regressions found by fuzzing -------------------------------------------------------------
# Each found by the tests above; the input is the one Hypothesis shrank to.


@pytest.mark.parametrize(
    "data",
    [
        b'{"model": true}',
        b'{"model": {"type": "BPE", "vocab": true}, "pre_tokenizer": {"type": "ByteLevel"}}',
        b'{"model": {"type": "BPE", "vocab": {}, "merges": [5]}, '
        b'"pre_tokenizer": {"type": "ByteLevel"}}',
        b'{"model": {"type": "BPE", "vocab": {}}, "pre_tokenizer": {"type": "ByteLevel"}, '
        b'"added_tokens": [1]}',
        b'{"model": {"type": "BPE"}, "pre_tokenizer": {"type": "Sequence", '
        b'"pretokenizers": [1, 2]}}',
    ],
    ids=[
        "model-not-object",
        "vocab-not-object",
        "merge-not-pair",
        "added-token-not-object",
        "sequence-steps-not-objects",
    ],
)
def test_regression_tokenizer_json_wrong_shapes_are_vocab_errors(tmp_path, data):
    """load_tokenizer_json raised AttributeError/TypeError (not VocabError) on JSON of the
    wrong shape, e.g. {"model": true}: found by test_load_tokenizer_json, 2026-11-22."""
    p = tmp_path / "tokenizer.json"
    p.write_bytes(data)
    with pytest.raises(gputok.VocabError):
        gputok.load_tokenizer_json(str(p), device="cpu")
