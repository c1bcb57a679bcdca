"""Unit tests of model_repository/detokenizer/1/model.py's pure functions, without a server."""

from __future__ import annotations

import numpy as np
import pytest
from model_loader import config_parameters, load_model_module

m = load_model_module("detokenizer")


def test_shipped_config_parses():
    assert m.parse_settings(config_parameters("detokenizer")) == m.DetokenizerSettings()
    with pytest.raises(ValueError):
        m.parse_settings({"utf8_errors": {"string_value": "ignore"}})


def test_request_rows_3d_and_2d():
    t = np.array([[[1, 2, 3]], [[4, 5, 6]]], np.int32)
    rows, shape = m.request_rows(t, np.array([[2], [3]], np.int32), 50257, 100)
    assert [r.tolist() for r in rows] == [[1, 2], [4, 5, 6]] and shape == (2, 1)
    rows, shape = m.request_rows(t[:, 0, :], np.array([1, 0], np.int32), 50257, 100)
    assert [r.tolist() for r in rows] == [[1], []] and shape == (2, 1)


@pytest.mark.parametrize(
    "tokens, lengths, message",
    [
        (None, [[1]], "missing input TOKENS_BATCH"),
        ([[[1]]], None, "missing input SEQUENCE_LENGTH"),
        ([[[1, 50257]]], [[2]], "token id 50257"),
        ([[[-1]]], [[1]], "token id -1"),
        ([[[1, 2]]], [[3]], "SEQUENCE_LENGTH must be within"),
        ([[[1, 2]]], [[-1]], "SEQUENCE_LENGTH must be within"),
        ([[[1, 2]]], [[1], [1]], "must be"),
        ([[[1.0]]], [[1]], "integers"),
        ([[[1] * 200]], [[1]], "limit"),
    ],
)
def test_request_rows_errors(tokens, lengths, message):
    t = None if tokens is None else np.array(tokens)
    n = None if lengths is None else np.array(lengths, np.int32)
    with pytest.raises(m.RequestError, match=message):
        m.request_rows(t, n, 50257, 100)


def test_decode_requests_batch_and_isolation(tok):
    ok1 = m.request_rows(
        np.array([[[31373, 995]]], np.int32), np.array([[2]], np.int32), 50257, 100
    )
    ok2 = m.request_rows(
        np.array([[[64, 0]], [[65, 0]]], np.int32), np.array([[1], [2]], np.int32), 50257, 100
    )
    prior = m.RequestError("bad shape")
    out = m.decode_requests(tok, [ok1, prior, ok2], "replace")
    assert out[0].tolist() == [[b"hello world"]]
    assert out[1] is prior
    assert out[2].tolist() == [[b"a"], [b"b!"]]


def test_cut_character(tok):
    ids = tok.encode("é")  # one id per byte? either way a cut inside the character is invalid UTF-8
    cut = [i for i in range(256) if tok.decode_bytes([i]) == "é".encode()[:1]]
    req = m.request_rows(np.array([[cut]], np.int32), np.array([[1]], np.int32), 50257, 100)
    assert ids
    assert m.decode_requests(tok, [req], "replace")[0].tolist() == [["\ufffd".encode()]]
    assert isinstance(m.decode_requests(tok, [req], "strict")[0], ValueError)
