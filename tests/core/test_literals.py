"""Exact literal vectors: tiktoken r50k_base ids, pasted as literals so that a change in
any reference library cannot silently move the expectation."""

from __future__ import annotations

import pytest

VECTORS = [
    ("hello world", [31373, 995]),
    ("DON'T do it, don't", [41173, 6, 51, 466, 340, 11, 836, 470]),
    ("a   b", [64, 220, 220, 275]),
    ("a \n\nb", [64, 220, 198, 198, 65]),
    ("1234567890 123", [10163, 2231, 30924, 3829, 17031]),
    ("  leading", [220, 3756]),
    ("trailing  ", [9535, 4386, 220, 220]),
    ("tab\tsep\t\tx", [8658, 197, 325, 79, 197, 197, 87]),
    ("x\r\ny", [87, 201, 198, 88]),
    ("\xa0nbsp\xa0 x", [1849, 77, 24145, 1849, 2124]),
    ("'s 're 've 'm 'll 'd 't", [338, 705, 260, 705, 303, 705, 76, 705, 297, 705, 67, 705, 83]),
    ("?'s", [8348, 82]),
    ("ÀÉÎ õü", [127, 222, 38351, 127, 236, 6184, 113, 9116]),
    ("日本語のテキスト", [33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302]),
    (
        "Привет, мир!",
        [140, 253, 21169, 18849, 38857, 16843, 20375, 11, 12466, 120, 18849, 21169, 0],
    ),
    ("🎉🎉 emoji 👍🏽", [8582, 236, 231, 8582, 236, 231, 44805, 50169, 235, 8582, 237, 121]),
    ("\u3000全角 space", [5099, 222, 17739, 101, 164, 100, 240, 2272]),
    ("a\u200bb", [64, 9525, 65]),
    ("x\x85y", [87, 126, 227, 88]),
    ("12,345.67", [1065, 11, 27712, 13, 3134]),
    ("<|endoftext|>", [27, 91, 437, 1659, 5239, 91, 29]),
    ("$$$ %%% ...", [13702, 3, 4064, 16626, 2644]),
    (" ' '' '''", [705, 10148, 705, 7061]),
    ("\n", [198]),
    (" ", [220]),
    ("", []),
]


@pytest.mark.parametrize("text,ids", VECTORS)
def test_encode_ordinary_literal(tok, text, ids):
    assert tok.encode_ordinary(text) == ids
    assert tok.encode_ordinary(text.encode("utf-8")) == ids


@pytest.mark.parametrize("text,ids", VECTORS)
def test_decode_literal(tok, text, ids):
    assert tok.decode(ids) == text


def test_batch_literals(tok):
    texts = [t for t, _ in VECTORS]
    assert tok.encode_ordinary_batch(texts) == [ids for _, ids in VECTORS]


def test_special_tokens_literal(tok):
    assert tok.eot_token == 50256
    assert tok.n_vocab == 50257
    assert tok.encode("a<|endoftext|>b", allowed_special="all") == [64, 50256, 65]
    assert tok.encode("a<|endoftext|>b", allowed_special={"<|endoftext|>"}) == [64, 50256, 65]
    assert tok.encode("<|endoftext|>", disallowed_special=()) == [27, 91, 437, 1659, 5239, 91, 29]
    with pytest.raises(ValueError, match="disallowed special token"):
        tok.encode("x <|endoftext|>")
    assert tok.decode([50256]) == "<|endoftext|>"


def test_lone_surrogates_literal(tok):
    # tiktoken's fix-up: through UTF-16 with "replace".
    assert tok.encode("a\ud800b") == [64, 4210, 65]
    assert tok.encode("a\ud800\udc00b") == [64, 172, 238, 222, 222, 65]
