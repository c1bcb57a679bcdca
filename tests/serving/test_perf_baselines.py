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


def test_one_row_path_equals_batch_path(model, ref, corpus):
    """A one-row execute takes gigatoken's `encode` (the isolated-request case); its ids,
    shapes and dtypes are those of the batch path and of tiktoken."""
    tok = model.build()
    for text in ["hello world", "", corpus[3][:4000], "日本語 🎉 x"]:
        [(ids, lens)] = model.encode_requests(tok, [[text]], 50256)
        [(bids, blens)] = model.encode_requests(tok, [[text], [text]], 50256)[:1]
        want = ref.encode_ordinary(text)
        assert ids.dtype == np.int32 and lens.dtype == np.int32
        assert ids.shape == (1, len(want)) and lens.tolist() == [[len(want)]]
        assert ids[0].tolist() == want == bids[0, : blens[0, 0]].tolist()
    # a request with no rows beside the one row
    out = model.encode_requests(tok, [[], ["hi"]], 50256)
    assert out[0][0].shape == (0, 0) and out[0][1].shape == (0, 1)
    assert out[1][0].tolist() == [ref.encode_ordinary("hi")]


def _outputs(config: Path) -> list[tuple[str, int, list[int]]]:
    from gputok.serve import pbtxt

    return [(o.name, o.data_type, list(o.dims)) for o in pbtxt.read_config(config).output]


def test_the_baseline_declares_and_returns_our_outputs(model):
    """Same I/O as ours: the baseline declares our outputs, and a QUERY-only request (what
    perf_analyzer sends) gets the same tensors from both models, value for value, for every
    batch size and for a client that names some outputs. Until 2026-11-27 the baseline
    returned two tensors to our nine, so the comparison measured Triton's cost per output."""
    import fake_pb_utils as fake
    from model_loader import config_parameters, load_model_module

    ours = REPO / "model_repository/tokenizer/config.pbtxt"
    theirs = MODEL.parents[1] / "config.pbtxt"
    assert _outputs(theirs) == _outputs(ours) and len(_outputs(ours)) == 11

    m = load_model_module("tokenizer")
    fake.install(m)
    fake.install(model)
    a, b = m.TritonPythonModel(), model.TritonPythonModel()
    a.initialize(
        fake.model_args({"max_batch_size": 256, "parameters": config_parameters("tokenizer")})
    )
    b.initialize(fake.model_args({"parameters": {}}))
    cases = [
        (["hello world"], None),
        (["a b", "日本語 🎉"], None),
        (["x"], ["INPUT_ID", "OUT_PAD_ID"]),
    ]
    for texts, requested in cases * 2:  # the second pass answers from each model's cache
        query = np.array([[t.encode()] for t in texts], dtype=np.object_)
        (ra,) = a.execute([fake.InferenceRequest({"QUERY": query}, requested=requested)])
        (rb,) = b.execute([fake.InferenceRequest({"QUERY": query}, requested=requested)])
        assert not ra.has_error() and not rb.has_error()
        assert set(rb.tensors) == set(ra.tensors) and len(ra.tensors) >= 3
        for name, want in ra.tensors.items():
            got = rb.tensors[name]
            assert (got.dtype, got.shape) == (want.dtype, want.shape), name
            assert got.tolist() == want.tolist(), name


def test_ceiling_answers_exact_ids_from_its_memo(model, ref, corpus):
    """The ceiling (parameter `ceiling` true) tokenizes each distinct text once and then answers
    from its dict; its ids are tiktoken's either way, padded as the baseline's, and the dict
    stops growing at its limit."""
    c = model.Ceiling(limit=3)
    texts = [corpus[1][:3000], "hello world", "", corpus[2][:500]]
    reqs = [[texts[0], texts[1]], [texts[2], texts[3]]]
    for _ in range(2):  # the second pass answers from the dict
        out = model.encode_requests(c, reqs, 50256)
        for rows, (ids, lens) in zip(reqs, out, strict=True):
            for i, text in enumerate(rows):
                assert ids[i, : lens[i, 0]].tolist() == ref.encode_ordinary(text)
                assert (ids[i, lens[i, 0] :] == 50256).all()
    [(one, n)] = model.encode_requests(c, [[texts[0]]], 50256)
    assert one.dtype == np.int32 and one[0].tolist() == ref.encode_ordinary(texts[0]) != []
    assert n.tolist() == [[one.shape[1]]]
    assert len(c._ids) == 3
    # a byte cap below the first text keeps nothing, and still answers exactly
    small = model.Ceiling(limit_bytes=1000)
    for _ in range(2):
        assert small.encode(texts[0]).tolist() == ref.encode_ordinary(texts[0])
    assert small._ids == {} and small._bytes == 0
