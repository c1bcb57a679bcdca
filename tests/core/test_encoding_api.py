"""tiktoken's Encoding API on gputok.Tokenizer: tiktoken 0.14's own test cases (its repository's
tests/test_encoding.py, test_offsets.py, test_misc.py, test_simple_public.py), re-expressed
for GPT-2, and each method compared with tiktoken itself on the same inputs.

Where tiktoken's test uses another encoding (cl100k_base, o200k_base), the case is kept with
GPT-2's ids, taken from tiktoken's r50k_base (``ref``) rather than written by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gputok

EOT = "<|endoftext|>"


# -- registry (test_misc.py, test_simple_public.py) ------------------------------------------


def test_get_encoding_and_names():
    assert gputok.list_encoding_names() == ["gpt2", "r50k_base"]
    for name in gputok.list_encoding_names():
        enc = gputok.get_encoding(name)
        assert isinstance(enc, gputok.Tokenizer)
        assert enc.name == name
        assert enc.encode("hello world") == [31373, 995]
        assert enc.decode([31373, 995]) == "hello world"
        assert enc.encode("hello <|endoftext|>", allowed_special="all") == [31373, 220, 50256]
        assert gputok.get_encoding(name) is enc  # cached, as tiktoken's registry is
    cpu = gputok.get_encoding("gpt2", device="cpu")
    assert cpu.device == "cpu" and cpu.name == "gpt2"
    with pytest.raises(ValueError, match="Unknown encoding"):
        gputok.get_encoding("cl100k_base")


def test_encoding_for_model():
    assert gputok.encoding_for_model("gpt2").name == "gpt2"
    assert gputok.encoding_for_model("gpt-2").name == "gpt2"
    for model in ("davinci", "text-davinci-001", "text-similarity-ada-001", "ada"):
        assert gputok.encoding_for_model(model).name == "r50k_base"
    for model in ("gpt-4", "gpt-3.5-turbo-0301", "text-davinci-003", "no-such-model"):
        with pytest.raises(KeyError, match="tiktoken"):
            gputok.encoding_for_model(model)


def test_model_table_agrees_with_tiktoken():
    from tiktoken.model import MODEL_TO_ENCODING

    from gputok._encoding_api import MODEL_TO_ENCODING as ours

    want = {m: e for m, e in MODEL_TO_ENCODING.items() if e in ("gpt2", "r50k_base")}
    assert want and ours == want


# -- test_encoding.py ----------------------------------------------------------------------


def test_simple(tok, ref):
    assert tok.encode("hello world") == [31373, 995]
    assert tok.decode([31373, 995]) == "hello world"
    assert tok.encode("hello <|endoftext|>", allowed_special="all") == [31373, 220, 50256]
    for token in range(min(10_000, tok.max_token_value - 1)):
        assert tok.encode_single_token(tok.decode_single_token_bytes(token)) == token


def test_simple_repeated(tok):
    cases = {
        "0": [15], "00": [405], "000": [830], "0000": [2388], "00000": [20483],
        "000000": [10535], "0000000": [24598], "00000000": [8269], "000000000": [10535, 830],
        "0000000000": [8269, 405], "00000000000": [8269, 830], "000000000000": [8269, 2388],
        "0000000000000": [8269, 20483], "00000000000000": [8269, 10535],
        "000000000000000": [8269, 24598], "0000000000000000": [25645],
        "00000000000000000": [8269, 10535, 830],
    }  # fmt: skip
    for text, ids in cases.items():
        assert tok.encode(text) == ids, text


def test_large_repeated(tok):
    assert tok.encode("x" * 1_000_000)


@pytest.mark.parametrize("text", ["rer", "'rer", "today\n ", "today\n \n", "today\n  \n", " \x850"])
def test_simple_regex(tok, ref, text):
    """tiktoken checks these on cl100k_base; the same texts against r50k_base's ids."""
    want = ref.encode(text)
    assert want and tok.encode(text) == want


def test_encode_empty(tok):
    assert tok.encode("") == []


def test_encode_bytes(tok):
    for i in range(10):
        bytestring = b"\x80" * i
        assert tok.decode_bytes(tok.encode(bytestring, errors="replace")) == (
            bytestring.decode("utf-8", "replace").encode()
        )


@given(bytestring=st.binary())
def test_hyp_encode_bytes(tok, ref, bytestring):
    """tiktoken's _encode_bytes round-trips raw bytes; gputok's bytes input is UTF-8 text, so
    the round trip holds for valid UTF-8 and for the U+FFFD-repaired text otherwise."""
    fixed = bytestring.decode("utf-8", "replace")
    ids = tok.encode(bytestring, errors="replace", disallowed_special=())
    assert ids == ref.encode_ordinary(fixed)
    assert tok.decode_bytes(ids) == fixed.encode()


def test_encode_surrogate_pairs(tok, ref):
    assert tok.encode("👍") == ref.encode("👍")
    assert tok.encode("\ud83d\udc4d") == ref.encode("\ud83d\udc4d") == ref.encode("👍")
    assert tok.encode("\ud83d") == tok.encode("�")


def test_catastrophically_repetitive(tok):
    for c in ["^", "0", "a", "'s", " ", "\n"]:
        big_value = c * 10_000
        assert big_value == tok.decode(tok.encode(big_value))
        big_value = " " + big_value
        assert big_value == tok.decode(tok.encode(big_value))
        big_value = big_value + "\n"
        assert big_value == tok.decode(tok.encode(big_value))


def test_basic_roundtrip(tok):
    for value in (
        "hello", "hello ", "hello  ", " hello", " hello ", " hello  ", "hello world",
        "请考试我的软件！12345",
    ):  # fmt: skip
        assert value == tok.decode(tok.encode(value))
        assert value == tok.decode(tok.encode_ordinary(value))


@given(text=st.text())
def test_hyp_roundtrip(tok, text):
    assert text == tok.decode(tok.encode(text, disallowed_special=()))


def test_single_token_roundtrip(tok, ref):
    for token in range(tok.n_vocab):
        token_bytes = tok.decode_single_token_bytes(token)
        assert token_bytes == ref.decode_single_token_bytes(token)
        assert tok.encode_single_token(token_bytes) == token
    assert tok.encode_single_token("hello") == 31373
    assert tok.encode_single_token(EOT) == tok.eot_token == 50256
    for not_one in ("hello world", "", b"\xff\xfe", "<|endoftext"):
        with pytest.raises(KeyError):
            tok.encode_single_token(not_one)
        with pytest.raises(KeyError):
            ref.encode_single_token(not_one)


def test_special_token(tok):
    eot = tok.encode_single_token(EOT)
    assert eot == tok.eot_token
    text = "<|endoftext|> hello <|endoftext|>"
    assert eot not in tok.encode(text, disallowed_special=())
    for kwargs in ({}, {"disallowed_special": "all"}, {"disallowed_special": {EOT}}):
        with pytest.raises(gputok.DisallowedSpecialError):
            tok.encode(text, **kwargs)
        with pytest.raises(ValueError):  # what tiktoken raises; ours is a subclass
            tok.encode(text, **kwargs)
    assert eot in tok.encode(text, allowed_special="all", disallowed_special=())
    assert eot in tok.encode(text, allowed_special="all", disallowed_special="all")
    assert eot in tok.encode(text, allowed_special={EOT}, disallowed_special=())


@given(text=st.text())
def test_hyp_special_ordinary(tok, text):
    assert tok.encode_ordinary(text) == tok.encode(text, disallowed_special=())


def test_batch_encode(tok):
    text1, text2 = "hello world", "goodbye world"
    assert tok.encode_batch([text1]) == [tok.encode(text1)]
    assert tok.encode_batch([text1, text2]) == [tok.encode(text1), tok.encode(text2)]
    assert tok.encode_ordinary_batch([text1]) == [tok.encode_ordinary(text1)]
    assert tok.encode_ordinary_batch([text1, text2]) == [
        tok.encode_ordinary(text1),
        tok.encode_ordinary(text2),
    ]


@given(batch=st.lists(st.text()))
def test_hyp_batch_roundtrip(tok, ref, batch):
    encoded = tok.encode_batch(batch, allowed_special="all")
    assert encoded == [tok.encode(t, allowed_special="all") for t in batch]
    assert encoded == ref.encode_batch(batch, allowed_special="all")
    assert tok.decode_batch(encoded) == batch
    assert tok.decode_bytes_batch(encoded) == ref.decode_bytes_batch(encoded)
    assert tok.decode_bytes_batch(encoded) == [t.encode("utf-8", "replace") for t in batch] or any(
        "\ud800" <= c <= "\udfff" for t in batch for c in t
    )


# -- test_offsets.py -----------------------------------------------------------------------


def _common_prefix_len(a, b):
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    return i


def _token_offsets_reference(enc, tokens):
    text = enc.decode(tokens, errors="strict")
    res = []
    for i in range(len(tokens)):
        prefix = enc.decode(tokens[:i], errors="ignore")
        res.append(_common_prefix_len(text, prefix))
    return res


@given(st.lists(st.integers(0, 50256), min_size=1, max_size=20))
def test_hyp_offsets(tok, ref, tokens):
    tokens = tok.encode(tok.decode(tokens, errors="ignore"), allowed_special="all")
    got = tok.decode_with_offsets(tokens)
    assert got[1] == _token_offsets_reference(tok, tokens)
    assert got == ref.decode_with_offsets(tokens)


@pytest.mark.parametrize(
    "prompt",
    ["hello world", "hello world<|endoftext|> green cow", "我非常渴望与人工智能一起工作",
     "நடிகர் சூர்யா", " Ġ除"],
)  # fmt: skip
def test_basic_offsets(tok, ref, prompt):
    """tiktoken checks these prompts' offsets on cl100k_base; here r50k_base's, which come
    from the same rule and which tiktoken computes for the same ids."""
    tokens = tok.encode(prompt, allowed_special="all")
    p, o = tok.decode_with_offsets(tokens)
    assert p == prompt
    assert o and (p, o) == ref.decode_with_offsets(tokens)
    assert o == _token_offsets_reference(tok, tokens)
    if prompt == "hello world":
        assert o == [0, 5]


def test_offsets_of_invalid_utf8_raise_like_tiktoken(tok, ref):
    tokens = tok.encode("日本", disallowed_special=())[:1]  # a partial character
    with pytest.raises(UnicodeDecodeError):
        ref.decode_with_offsets(tokens)
    with pytest.raises(UnicodeDecodeError):
        tok.decode_with_offsets(tokens)


# -- the other methods, against tiktoken -----------------------------------------------------


def test_properties_match_tiktoken(tok, ref):
    assert tok.pat_str == ref._pat_str
    assert tok.max_token_value == ref.max_token_value == 50256
    assert tok.n_vocab == ref.n_vocab
    assert tok.eot_token == ref.eot_token
    assert tok.special_tokens_set == ref.special_tokens_set
    for t in (0, 31373, 50255, 50256, 50257, -1):
        assert tok.is_special_token(t) == ref.is_special_token(t), t
    values = tok.token_byte_values()
    assert len(values) == 50256 and values == ref.token_byte_values()
    assert tok._mergeable_ranks == ref._mergeable_ranks


def test_decode_tokens_bytes(tok, ref):
    assert tok.decode_tokens_bytes([31373, 995]) == [b"hello", b" world"]
    ids = tok.encode("日本 🎉 <|endoftext|>", allowed_special="all")
    assert tok.decode_tokens_bytes(ids) == ref.decode_tokens_bytes(ids)
    assert tok.decode_tokens_bytes(np.array(ids)) == ref.decode_tokens_bytes(ids)
    assert tok.decode_tokens_bytes([]) == []


UNSTABLE_CASES = [
    "hello fanta", "hello", "hello ", "hello  ", "hello\n\n", "a\n \n", " ", "", "x" * 40,
    "12345", "don't", "日本", "🎉", "hello <|endoftext|>", "hello <|endoftext|> wor", "a\t \t",
    "caf\u00e9", "naïve ", "hello\u00a0", "a \u3000", "foo!!!", "x\x1f",
]  # fmt: skip


@pytest.mark.parametrize("text", UNSTABLE_CASES)
def test_encode_with_unstable(tok, ref, text):
    for allowed in (frozenset(), "all"):
        if EOT in text and not allowed:
            with pytest.raises(ValueError):
                ref.encode_with_unstable(text, allowed_special=allowed)
            with pytest.raises(gputok.DisallowedSpecialError):
                tok.encode_with_unstable(text, allowed_special=allowed)
            continue
        stable, completions = tok.encode_with_unstable(text, allowed_special=allowed)
        want_stable, want_completions = ref.encode_with_unstable(text, allowed_special=allowed)
        assert stable == want_stable
        assert sorted(map(tuple, completions)) == sorted(map(tuple, want_completions))
        data = text.encode()
        assert data.startswith(tok.decode_bytes(stable))
        for seq in completions:
            assert tok.decode_bytes(stable + list(seq)).startswith(data)
    if text == "hello fanta":
        assert stable == [31373] and completions


@given(st.text(st.sampled_from(list("ab \n\t0'sé日🎉!\u00a0")), max_size=12))
def test_hyp_encode_with_unstable(tok, ref, text):
    stable, completions = tok.encode_with_unstable(text)
    want_stable, want_completions = ref.encode_with_unstable(text)
    assert stable == want_stable
    assert sorted(map(tuple, completions)) == sorted(map(tuple, want_completions))


def test_encode_with_unstable_refuses_disallowed_special(tok):
    with pytest.raises(gputok.DisallowedSpecialError):
        tok.encode_with_unstable("hi <|endoftext|>")


def test_encoding_api_methods_have_docstrings(ref):
    """Every public method and property of tiktoken's Encoding (read from tiktoken, so a name
    it adds is checked too) and the registry functions carry a docstring here."""
    names = [n for n in dir(type(ref)) if not n.startswith("_")]
    assert {"encode", "encode_batch", "decode", "eot_token", "n_vocab"} <= set(names)
    missing = [
        n
        for n in names
        if not (doc := getattr(gputok.Tokenizer, n).__doc__) or len(doc.strip()) <= 20
    ]
    for fn in (
        "get_encoding",
        "encoding_for_model",
        "encoding_name_for_model",
        "list_encoding_names",
    ):
        if len((getattr(gputok, fn).__doc__ or "").strip()) <= 20:
            missing.append(fn)
    assert not missing, missing
