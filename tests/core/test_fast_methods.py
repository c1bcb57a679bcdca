"""encode(), encode_ordinary() and encode_to_numpy() as builtins on each Tokenizer
(gputok/_fast_methods.py): a lone text is encoded natively, every other call goes to the
class's method unchanged, a subclass keeps its own methods, and a Tokenizer is still freed."""

from __future__ import annotations

import gc
import pickle
import weakref

import numpy as np
import pytest

gputok = pytest.importorskip("gputok")

TEXTS = [
    "",
    "hello world",
    " 日本語 and 'll ",
    "x" * 3000,
    "a <|endoftext|> b",
    b"bytes \xe2\x82\xac",
]
NAMES = ("encode", "encode_ordinary", "encode_to_numpy")


def _same(a, b) -> bool:
    return np.array_equal(np.asarray(a), np.asarray(b)) and type(a) is type(b)


def test_a_lone_text_takes_the_builtin_and_gives_the_methods_ids():
    """The three are builtins on the object (the fast path is in place), named and documented
    as the methods, and give what the class's methods give, error for error."""
    tok = gputok.gpt2(device="cpu")
    for name in NAMES:
        fast, method = getattr(tok, name), getattr(gputok.Tokenizer, name)
        assert type(fast).__name__ == "builtin_function_or_method", name
        assert fast.__name__ == name and fast.__doc__ == method.__doc__
        for text in TEXTS:
            try:
                want = method(tok, text)
            except ValueError as e:
                with pytest.raises(type(e)):
                    fast(text)
                continue
            assert _same(fast(text), want), (name, text)
    assert tok.encode("hello world") == [31373, 995]


def test_other_calls_go_to_the_method():
    """Keywords, extra or missing arguments: the method's own answers (its keyword handling,
    its TypeErrors)."""
    tok = gputok.gpt2(device="cpu")
    assert tok.encode("a <|endoftext|>", allowed_special="all") == [64, 220, 50256]
    assert tok.encode("a <|endoftext|>", disallowed_special=()) == tok.encode_ordinary(
        "a <|endoftext|>"
    )
    assert tok.encode_to_numpy("a <|endoftext|>", allowed_special="all").tolist() == [
        64,
        220,
        50256,
    ]
    assert tok.encode_ordinary(b"\xff", errors="replace") == tok.encode_ordinary("\ufffd")
    with pytest.raises(TypeError, match="positional"):
        tok.encode("x", "y")
    with pytest.raises(TypeError, match="missing"):
        tok.encode()
    with pytest.raises(TypeError):
        tok.encode(text="x", bogus=1)
    # more arguments than the native side's array on the stack holds (8): a vector instead
    with pytest.raises(TypeError, match="unexpected keyword"):
        tok.encode("x", **{f"k{i}": i for i in range(9)})
    assert tok.encode("<|endoftext|>", allowed_special="all", disallowed_special="all") == [50256]


def test_a_subclass_keeps_its_own_methods():
    class Mine(gputok.Tokenizer):
        def encode(self, text, **kwargs):
            return ["mine", *super().encode(text, **kwargs)]

    tok = Mine(gputok.gpt2_vocab(), gputok.GPT2_SPECIALS, device="cpu")
    assert tok.encode("hello world") == ["mine", 31373, 995]
    assert type(tok.encode_ordinary).__name__ == "builtin_function_or_method"


def test_a_tokenizer_is_freed_and_a_kept_function_keeps_it():
    """The builtins hold their Tokenizer, as bound methods do, in a cycle the collector sees:
    a dropped Tokenizer is freed (with the references held natively, out of the collector's
    sight, it leaked here), and a function kept past its name keeps it whole."""
    tok = gputok.gpt2(device="cpu")
    ref = weakref.ref(tok)
    kept = tok.encode
    del tok
    gc.collect()
    assert ref() is not None, "a kept function must keep its Tokenizer"
    assert kept("hello world") == [31373, 995]
    assert kept("<|endoftext|>", allowed_special="all") == [50256]
    del kept
    gc.collect()
    assert ref() is None, "the Tokenizer was not freed"


def test_a_state_stripped_of_its_tokenizer_raises_instead_of_crashing():
    """The native side reaches the Tokenizer weakly: with the strong reference removed from
    the builtin's state by hand, a lone text still encodes (the native Core is held) and a
    call for the method raises ReferenceError once the Tokenizer is gone, never a crash."""
    tok = gputok.gpt2(device="cpu")
    kept = tok.encode
    del kept.__self__.target
    del tok
    gc.collect()
    assert kept("hello world") == [31373, 995]
    with pytest.raises(ReferenceError, match="freed"):
        kept("hello", allowed_special="all")


def test_a_pickled_builtin_is_the_new_tokenizers_method():
    """As a pickled bound method was (multiprocessing's pool.map(tok.encode, ...))."""
    tok = gputok.gpt2(device="cpu")
    for name in NAMES:
        again = pickle.loads(pickle.dumps(getattr(tok, name)))
        assert again.__name__ == name
        assert _same(again("hello world"), getattr(tok, name)("hello world"))
    assert pickle.loads(pickle.dumps(tok.encode))("<|endoftext|>", allowed_special="all") == [50256]


def test_a_pickled_tokenizer_gets_its_own_builtins():
    tok = pickle.loads(pickle.dumps(gputok.gpt2(device="cpu")))
    assert type(tok.encode).__name__ == "builtin_function_or_method"
    assert tok.encode("hello <|endoftext|>", allowed_special="all") == [31373, 220, 50256]
