"""The reference tokenizers themselves: built offline, non-empty, and agreeing with each
other on a slice of the pinned corpus. If a reference is misbuilt (HF returns empty ids
silently), every equality test downstream would be meaningless, so this fails first."""

import pytest

from corpus_fixture import load_corpus_with_sources
from references import PROBES, gigatoken_gpt2, hf_gpt2, tiktoken_gpt2

SLICE_BYTES = 300_000  # HF runs ~1 MB/s/core here; keep this test a few seconds


@pytest.fixture(scope="module")
def sample():
    out, n = [], 0
    for src, text in load_corpus_with_sources("ci"):
        out.append((src, text))
        n += len(text.encode("utf-8"))
        if n > SLICE_BYTES:
            break
    # every source of the ci profile is represented (docs are in hash order, so a prefix
    # is a mix); check rather than assume
    assert len({s.split(":")[0] for s, _ in out}) >= 6
    return out


@pytest.mark.parametrize("text,ids", PROBES)
def test_probes(text, ids):
    assert tiktoken_gpt2().encode_ordinary(text) == ids
    assert hf_gpt2().encode(text).ids == ids
    assert list(gigatoken_gpt2().encode(text)) == ids


def test_references_agree_and_are_nonempty(sample):
    tt, hf, gt = tiktoken_gpt2(), hf_gpt2(), gigatoken_gpt2()
    texts = [t for _, t in sample]
    want = tt.encode_ordinary_batch(texts, num_threads=1)
    hf_ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    gt_ids = gt.encode_batch_list(texts)
    for (src, text), w, h, g in zip(sample, want, hf_ids, gt_ids, strict=True):
        assert text and w, f"tiktoken returned empty ids for {src}"
        assert h == w, f"HF differs from tiktoken on {src}"
        assert g == w, f"gigatoken differs from tiktoken on {src}"


def test_corpus_ci_is_pinned_and_unique():
    docs = [t for _, t in load_corpus_with_sources("ci")]
    assert len(docs) == len(set(docs)), "no document may repeat"
    assert sum(len(t.encode("utf-8")) for t in docs) > 3_000_000
