"""Tokenizer.encode_batch_uint16 / encode_buffer_uint16: the corpus shard format (uint16 ids,
an optional separator after every document) made by the tokenizer itself. It must equal
encode_batch_flat's ids packed one document at a time by a plain loop, on every path: the
CPU, and on the GPU both the narrowing copy-out (no allowed specials) and the packed-after
path (allowed specials stitched in); and an id outside uint16 must raise, never wrap."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gputok

EOT = 50256
DOCS = [
    "hello world",
    "",
    "héllo wörld 日本語 🙂\n\n  x",
    "a <|endoftext|> b",
    "",
    "Привет, мир! It's 12345 tokens\t\tand   spaces  ",
    "",
]

_ok, _why = gputok.cuda_available()
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not _ok, reason=_why))]


@pytest.fixture(scope="module", params=DEVICES)
def dev_tok(request):
    return gputok.gpt2(device=request.param)


def plain_pack(ids, offsets, separator):
    """The reference: each document's ids, then the separator, one by one."""
    out, ends = [], []
    for a, b in itertools.pairwise(offsets.tolist()):
        out += ids[a:b].tolist() + ([] if separator is None else [separator])
        ends.append(len(out))
    return out, ends


def buffer_of(docs):
    raw = [d.encode() for d in docs]
    return b"".join(raw), np.cumsum([0] + [len(r) for r in raw])


def check(tok, docs, separator, **kw):
    ids, offsets = tok.encode_batch_flat(docs, **kw)
    want, want_ends = plain_pack(ids, offsets, separator)
    assert want or not any(docs), "reference produced nothing"
    got = tok.encode_batch_uint16(docs, separator=separator, **kw)
    data, bounds = buffer_of(docs)
    got_buf = tok.encode_buffer_uint16(data, bounds, separator=separator, **kw)
    for ids16, ends in (got, got_buf):
        assert ids16.dtype == np.uint16 and ends.dtype == np.int64
        assert ids16.tolist() == want
        assert ends.tolist() == want_ends


@pytest.mark.parametrize("separator", [None, EOT, 0])
@pytest.mark.parametrize(
    "policy",
    [{"disallowed_special": ()}, {"allowed_special": "all"}],
    ids=["ordinary", "specials"],
)
def test_equals_flat_ids_packed_one_by_one(dev_tok, separator, policy):
    check(dev_tok, DOCS, separator, **policy)


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_corpus_documents(dev_tok, corpus, threads):
    # Long documents too: over the CPU path's 64 KB split, so one text is several units.
    docs = list(corpus[:300]) + ["".join(corpus[300:340])] * 2 + [""] * 3
    assert max(len(d.encode()) for d in docs) > 64 * 1024
    check(dev_tok, docs, EOT, num_threads=threads, disallowed_special=())


def test_matches_tiktoken(dev_tok, corpus, ref):
    docs = list(corpus[:200])
    ids, ends = dev_tok.encode_batch_uint16(docs, separator=EOT, disallowed_special=())
    want = [t for d in docs for t in ref.encode_ordinary(d) + [EOT]]
    assert want and ids.tolist() == want
    assert ends[-1] == len(want) and len(ends) == len(docs)


def test_no_documents(dev_tok):
    for got in (
        dev_tok.encode_batch_uint16([], separator=EOT),
        dev_tok.encode_buffer_uint16(b"", [0], separator=EOT),
    ):
        assert got[0].tolist() == [] and got[1].tolist() == []
    ids, ends = dev_tok.encode_batch_uint16(["", ""], separator=EOT)
    assert ids.tolist() == [EOT, EOT] and ends.tolist() == [1, 2]


def test_bad_separator_and_invalid_utf8_are_refused(dev_tok):
    for bad, err in ((65536, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(err, match="separator"):
            dev_tok.encode_batch_uint16(["x"], separator=bad)
    with pytest.raises(ValueError, match="invalid UTF-8 in text 1"):
        dev_tok.encode_buffer_uint16(b"ok\xff", [0, 2, 3], separator=EOT)
    ids, _ = dev_tok.encode_buffer_uint16(b"ok\xff", [0, 2, 3], separator=EOT, errors="replace")
    assert ids.tolist() == dev_tok.encode("ok") + [EOT] + dev_tok.encode("\ufffd") + [EOT]


# ------------------------------------------------------------------ ids beyond uint16


@pytest.fixture(scope="module")
def big_vocab():
    """A byte-level vocabulary of 66,000 ids: bytes, letter pairs, then letter triples, so a
    three-letter word is one token whose id does not fit uint16."""
    letters = [bytes([c]) for c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"]
    tokens = [bytes([b]) for b in range(256)]
    tokens += [a + b for a in letters for b in letters]
    for a, b, c in itertools.product(letters, repeat=3):
        if len(tokens) == 66_000:
            break
        tokens.append(a + b + c)
    specials = {"<|big|>": 70_000}
    return gputok._core.Vocab.from_ranks(tokens, specials), specials, tokens


@pytest.mark.parametrize("device", DEVICES)
def test_ids_beyond_uint16_raise_overflow(big_vocab, device):
    vocab, specials, tokens = big_vocab
    tok = gputok.Tokenizer(vocab, specials, name="big", device=device)
    word = tokens[65_900].decode()
    assert tok.encode_ordinary(word) == [65_900]
    small = tokens[300].decode()
    docs = ["ab", small, "cd " + word]
    for call in (
        lambda: tok.encode_batch_uint16(docs, separator=1),
        lambda: tok.encode_buffer_uint16(*buffer_of(docs)),
    ):
        with pytest.raises(OverflowError, match=r"token id 65900 in text 2 does not fit uint16"):
            call()
    # A special token's id (the packed-after path) is checked the same way.
    with pytest.raises(OverflowError, match=r"token id 70000 in text 1 does not fit uint16"):
        tok.encode_batch_uint16(["ab", "x <|big|>"], separator=1, allowed_special="all")
    # What fits still packs.
    ids, ends = tok.encode_batch_uint16(["ab", small], separator=1)
    assert ids.tolist() == tok.encode("ab") + [1, 300, 1] and ends.tolist() == [2, 4]


# ------------------------------------------------------------------ properties

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_chars = st.one_of(
    st.characters(blacklist_categories=("Cs",)),
    st.sampled_from(list(" \n\t'sdmtlvre0123abc\u00a0<|endoftext|>")),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.text(_chars, max_size=60), max_size=10),
    st.sampled_from([None, EOT, 0, 65535]),
    st.booleans(),
)
def test_property_equals_flat_packed(dev_tok, docs, separator, specials):
    policy = {"allowed_special": "all"} if specials else {"disallowed_special": ()}
    check(dev_tok, docs, separator, **policy)
