"""The perf_analyzer baseline `preprocessing_gigatoken` without a server: its pure functions give
tiktoken's ids, padded per request, and refuse what our tokenizer refuses by default."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "perf_analyzer_configs/baseline_repository/preprocessing_gigatoken/1/model.py"


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("gigatoken")
    pytest.importorskip("awkward")
    spec = importlib.util.spec_from_file_location("gigatoken_baseline", MODEL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ids_equal_tiktoken_padded_per_request(model, ref, corpus):
    tok = model.build()
    reqs = [[d[:300] for d in corpus[:5]], ["hello world"], [corpus[7][:2000], ""]]
    out = model.encode_requests(tok, reqs, 50256)
    assert len(out) == 3
    for rows, (ids, lens) in zip(reqs, out, strict=True):
        assert ids.dtype == np.int32 and lens.shape == (len(rows), 1)
        assert ids.shape[1] == lens.max()
        for i, text in enumerate(rows):
            want = ref.encode_ordinary(text)
            assert ids[i, : lens[i, 0]].tolist() == want
            assert (ids[i, lens[i, 0] :] == 50256).all()
    assert out[1][0].tolist() == [[31373, 995]]


def test_refuses_what_ours_refuses(model):
    q = np.array([[b"ok"], [b"a<|endoftext|>"]], dtype=object)
    with pytest.raises(ValueError, match="disallowed special token"):
        model.check_rows(q)
    with pytest.raises(ValueError):
        model.check_rows(np.array([[b"\xff"]], dtype=object))
    with pytest.raises(ValueError, match="shape"):
        model.check_rows(np.array([b"x"], dtype=object))
    assert model.check_rows(np.array([[b"hi"], [b""]], dtype=object)) == ["hi", ""]
