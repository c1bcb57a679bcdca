"""Corpus equality: gputok-CPU == tiktoken == HF tokenizers on the pinned multilingual
corpus (ci profile in CI; GPUTOK_CORPUS=bench for the full one)."""

from __future__ import annotations

import pytest


def _first_mismatch(got, want):
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return i
    return None if len(got) == len(want) else min(len(got), len(want))


def test_corpus_is_real(corpus):
    total = sum(len(d.encode("utf-8")) for d in corpus)
    assert total > 2_000_000, f"corpus too small: {total} bytes"
    scripts = {"latin": "e", "cjk": "の", "cyrillic": "и"}
    for name, probe in scripts.items():
        assert any(probe in d for d in corpus), f"no {name} text in the corpus"


def test_corpus_equals_tiktoken(tok, ref, corpus):
    want = ref.encode_ordinary_batch(corpus, num_threads=2)
    assert all(want[i] for i in range(len(corpus)) if corpus[i]), "reference returned empty ids"
    got = tok.encode_ordinary_batch(corpus)
    assert _first_mismatch(got, want) is None


def test_corpus_equals_hf(tok, hf, corpus):
    docs = corpus[:300]
    want = [e.ids for e in hf.encode_batch(docs)]
    assert all(w for w, d in zip(want, docs, strict=True) if d), "HF returned empty ids"
    assert tok.encode_ordinary_batch(docs) == want


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_corpus_thread_count_invariant(tok, corpus, threads):
    docs = corpus[:200]
    ids, offsets = tok.encode_batch_flat(docs, num_threads=threads, disallowed_special=())
    ids1, offsets1 = tok.encode_batch_flat(docs, num_threads=1, disallowed_special=())
    assert (ids == ids1).all() and (offsets == offsets1).all()


def test_corpus_as_one_long_document(tok, ref, corpus):
    # One long text is cut at safe split points across threads; the ids must not change.
    doc = "".join(corpus[:400])
    assert tok.encode_ordinary_batch([doc], num_threads=2)[0] == ref.encode_ordinary(doc)
