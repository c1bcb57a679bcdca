"""Error types at the edges: every bad argument to a tokenizer call or loader raises one of
ours (or TypeError / FileNotFoundError), names what was wrong, and never reaches native code
as memory it would misread. Each test is a bug found on 2026-11-25 by probing the API as a
careless caller would; the name says which.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gputok
from gputok import _core

REPO = Path(__file__).resolve().parents[2]


def test_exceptions_are_exported_and_are_value_errors():
    for name in ("Utf8Error", "DisallowedSpecialError", "VocabError"):
        assert issubclass(getattr(gputok, name), ValueError), name
        assert name in gputok.__all__
    assert issubclass(gputok.IdRangeError, OverflowError)
    with pytest.raises(gputok.Utf8Error, match="byte offset 1"):
        gputok.gpt2(device="cpu").encode(b"a\xff")
    with pytest.raises(gputok.DisallowedSpecialError):
        gputok.gpt2(device="cpu").encode("<|endoftext|>")


def test_regression_pieces_validates_utf8_before_scanning(tok):
    """pieces() ran the pretokenizer on unvalidated bytes: a truncated 4-byte sequence at the
    end made it read past the buffer (an ASan heap-buffer-overflow). Now: Utf8Error."""
    with pytest.raises(gputok.Utf8Error, match="byte offset 100"):
        tok._vocab.pieces(b"a" * 100 + b"\xf0")
    for bad in (b"\xf0\x9f", b"\xe6", b"ok \xed\xa0\x80", b"\xc0\xaf"):
        with pytest.raises(gputok.Utf8Error):
            tok._vocab.pieces(bad)
    assert tok._vocab.pieces("a 日".encode()) == [(0, 1), (1, 4)]


@pytest.mark.parametrize("bad_id", [2**31, 2**24, -1, True, 1.5, "7"])
def test_regression_special_id_out_of_range_is_vocab_error(tmp_path, bad_id):
    """A special-token id of 2^31 raised RuntimeError (pybind's failed int32 cast)."""
    p = tmp_path / "v.tiktoken"
    p.write_bytes(gputok.GPT2_RANKS.read_bytes())
    with pytest.raises(gputok.VocabError, match="<|x|>"):
        gputok.load_tiktoken_file(p, {"<|x|>": bad_id}, device="cpu")


def test_regression_native_cast_errors_are_type_errors():
    """Arguments of the wrong type to the native Vocab raised RuntimeError ("Unable to
    cast"): now TypeError, and an id out of int32 range VocabError."""
    with pytest.raises(TypeError):
        _core.Vocab.from_ranks([b"a", 5], {})
    with pytest.raises(gputok.VocabError, match="out of range"):
        _core.Vocab.from_ranks([bytes([b]) for b in range(256)], {"<|x|>": 2**31})


@pytest.mark.parametrize(
    "ids",
    [np.array([1.5, 2.7]), [1.5, 2.7], np.array([True, False]), [31373, None], ["1"], [1, 2.0]],
    ids=["float-array", "float-list", "bool-array", "none", "str", "mixed"],
)
def test_regression_decode_of_non_integers_is_type_error(tok, ids):
    """decode(np.array([1.5, 2.7])) returned '"#': numpy cast the floats to 1 and 2."""
    for fn in (tok.decode, tok.decode_bytes, lambda x: tok.decode_batch([x])):
        with pytest.raises(TypeError, match="integer"):
            fn(ids)


def test_decode_integer_arrays_and_range(tok):
    want = tok.decode_bytes([31373, 995])
    assert want == b"hello world"
    for dtype in (np.int32, np.int64, np.uint16, np.uint32, np.uint64, np.int16):
        assert tok.decode_bytes(np.array([31373, 995], dtype=dtype)) == want
    assert tok.decode_bytes(np.array([], dtype=np.float64)) == b""
    assert tok.decode([]) == ""
    with pytest.raises(ValueError, match="64 bits"):
        tok.decode_bytes(np.array([2**64 - 1], dtype=np.uint64))
    with pytest.raises(ValueError, match="64 bits"):
        tok.decode_bytes([2**70])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.decode_bytes([50257])
    with pytest.raises(TypeError):
        tok.decode_bytes("31373")
    with pytest.raises(TypeError):
        tok.decode_single_token_bytes(1.5)
    assert tok.decode_single_token_bytes(np.int64(31373)) == b"hello"


@pytest.mark.parametrize("call", ["encode_buffer_flat", "encode_buffer_uint16"])
def test_regression_buffer_calls_refuse_object_arrays(tok, call):
    """encode_buffer_flat on an object array tokenized the array's pointers as bytes."""
    fn = getattr(tok, call)
    objs = np.array([b"ab", "cd", None], dtype=object)
    with pytest.raises(TypeError, match="Python objects"):
        fn(objs, [0, 8])
    with pytest.raises(TypeError, match="str"):
        fn("text", [0, 4])
    with pytest.raises(TypeError, match="bytes-like object is required"):
        fn(12345, [0, 1])
    ids, _ = fn(np.frombuffer(b"hello world", dtype=np.uint8), [0, 11])
    assert ids.tolist() == [31373, 995]


def test_loader_errors_name_the_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_bytes(b'{"a": ')
    with pytest.raises(gputok.VocabError, match="broken.json"):
        gputok.load_tokenizer_json(bad, device="cpu")
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(gputok.VocabError, match="broken.json"):
        gputok.load_tokenizer_json(bad, device="cpu")
    bad.write_bytes(b"[" * 100_000)  # the JSON parser's recursion limit
    with pytest.raises(gputok.VocabError, match="broken.json"):
        gputok.load_hf_files(bad, gputok.GPT2_RANKS, device="cpu")
    ranks = tmp_path / "r.tiktoken"
    ranks.write_bytes(b"YQ== 99999999999999999999999\n")
    with pytest.raises(gputok.VocabError, match="r.tiktoken"):
        gputok.load_tiktoken_file(ranks, device="cpu")


@pytest.mark.parametrize("harness", sorted(p.stem for p in (REPO / "fuzz").glob("fuzz_*.py")))
def test_fuzz_harness_runs_clean(harness):
    """Every harness in fuzz/ runs a short seeded budget on the plain build with 0 findings
    (the sanitizer builds run them under `make sanitize`)."""
    out = subprocess.run(
        [sys.executable, str(REPO / "fuzz" / f"{harness}.py"), "--budget", "300", "--seed", "7"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "300 inputs" in out.stdout and "0 findings" in out.stdout, out.stdout


def test_merge_reference_is_bounded(tok):
    """The reference merge is quadratic: a test hook must not hang on a long piece."""
    assert tok._vocab.merge_reference(b"hello") == tok._vocab.merge(b"hello") == [31373]
    with pytest.raises(ValueError, match="8192"):
        tok._vocab.merge_reference(b"x" * 8193)
    with pytest.raises(ValueError, match="empty"):
        tok._vocab.merge(b"")


def test_unknown_token_is_key_error_and_value_error(tok):
    """tiktoken raises KeyError for an id outside the vocabulary, gputok raised ValueError:
    UnknownTokenError is both, so code written for either catches it."""
    for call in (tok.decode_bytes, tok.decode, tok.decode_tokens_bytes):
        for exc in (KeyError, ValueError, gputok.UnknownTokenError):
            with pytest.raises(exc, match="50257"):
                call([31373, 50257])
    with pytest.raises(KeyError, match="-1"):
        tok.decode_single_token_bytes(-1)
    assert str(gputok.UnknownTokenError("token id 7")) == "token id 7"
