"""Unit tests of model_repository/tokenizer/1/model.py's pure functions, without a server."""

from __future__ import annotations

import numpy as np
import pytest
from model_loader import config_parameters, load_model_module

m = load_model_module("tokenizer")


def rows(*texts):
    return np.array([[t] for t in texts], dtype=np.object_)


def test_shipped_config_parses():
    params = config_parameters("tokenizer")
    assert {
        "vocab_file",
        "algorithm",
        "max_bytes_per_request",
        "utf8_errors",
        "allowed_special",
    } <= set(params)
    s = m.parse_settings(params)
    assert s == m.TokenizerSettings()  # the shipped config states the defaults


@pytest.mark.parametrize(
    "key, value",
    [
        ("utf8_errors", "ignore"),
        ("device", "tpu"),
        ("max_bytes_per_request", "0"),
        ("outputs_on_gpu", "maybe"),
        ("pool_limit_bytes", "-1"),
    ],
)
def test_bad_settings_raise(key, value):
    with pytest.raises(ValueError):
        m.parse_settings({key: {"string_value": value}})


def test_special_kwargs():
    s = m.TokenizerSettings()
    assert m.special_kwargs(s) == {"allowed_special": frozenset(), "disallowed_special": "all"}
    s = m.TokenizerSettings(allowed_special="all", disallowed_special="")
    assert m.special_kwargs(s) == {"allowed_special": "all", "disallowed_special": frozenset()}
    s = m.TokenizerSettings(allowed_special=" <|endoftext|> ,")
    assert m.special_kwargs(s)["allowed_special"] == frozenset({"<|endoftext|>"})


def test_resolve_device():
    assert m.resolve_device("auto", "GPU") == "cuda"
    assert m.resolve_device("auto", "CPU") == "cpu"
    assert m.resolve_device("cpu", "GPU") == "cpu"


def test_request_rows_ok():
    assert m.request_rows(rows(b"a", b"", "é"), 10, 100) == [b"a", b"", "é".encode()]


@pytest.mark.parametrize(
    "query, message",
    [
        (None, "missing input QUERY"),
        (np.array([[1], [2]], dtype=np.int32), "BYTES"),
        (np.array([b"a", b"b"], dtype=np.object_), "shape"),
        (np.array([[b"a", b"b"]], dtype=np.object_), "shape"),
        (rows(*[b"x"] * 11), "11 rows"),
        (rows(b"x" * 60, b"y" * 60), "100 bytes"),
        (np.array([[1]], dtype=np.object_), "not bytes"),
    ],
)
def test_request_rows_errors(query, message):
    with pytest.raises(m.RequestError, match=message):
        m.request_rows(query, 10, 100)


def test_pad_rows():
    ids = np.array([9, 9, 1, 2, 3, 4, 5, 9], dtype=np.int32)
    offsets = np.array([2, 4, 4, 7], dtype=np.int64)  # a slice of a bigger flat batch
    padded, lengths = m.pad_rows(ids, offsets, 50256)
    assert padded.dtype == np.int32 and lengths.dtype == np.int32
    assert padded.tolist() == [[1, 2, 50256], [50256, 50256, 50256], [3, 4, 5]]
    assert lengths.tolist() == [[2], [0], [3]]


def test_pad_rows_empty():
    padded, lengths = m.pad_rows(np.zeros(0, np.int32), np.zeros(3, np.int64), 7)
    assert padded.shape == (2, 0) and lengths.tolist() == [[0], [0]]
    padded, lengths = m.pad_rows(np.zeros(0, np.int32), np.zeros(1, np.int64), 7)
    assert padded.shape == (0, 0) and lengths.shape == (0, 1)


class CountingTok:
    def __init__(self, tok):
        self.tok, self.calls = tok, 0
        self.eot_token = tok.eot_token

    def encode_batch_flat(self, texts, **kw):
        self.calls += 1
        return self.tok.encode_batch_flat(texts, **kw)


def test_encode_requests_one_call_and_exact(tok, ref):
    s = m.TokenizerSettings()
    ct = CountingTok(tok)
    texts = [[b"hello world", b"a   b"], [b"DON'T"], [b""], ["日本語".encode()]]
    out = m.encode_requests(ct, texts, s)
    assert ct.calls == 1, "all rows of all requests must go to gputok in one call"
    for req, (padded, lengths) in zip(texts, out, strict=True):
        for row, p, n in zip(req, padded, lengths[:, 0], strict=True):
            want = ref.encode_ordinary(row.decode())
            assert p[:n].tolist() == want
            assert (p[n:] == 50256).all()


def test_bad_request_is_isolated(tok, ref):
    s = m.TokenizerSettings()
    ct = CountingTok(tok)
    prior = m.RequestError("shape is wrong")
    batches = [[b"good one"], [b"bad \xff"], prior, [b"a<|endoftext|>"], [b"good two", b"x"]]
    out = m.encode_requests(ct, batches, s)
    assert out[0][0][0].tolist() == ref.encode_ordinary("good one")
    assert isinstance(out[1], ValueError)
    assert out[2] is prior
    assert isinstance(out[3], ValueError) and "special" in str(out[3])
    assert [r[:n].tolist() for r, n in zip(out[4][0], out[4][1][:, 0], strict=True)] == [
        ref.encode_ordinary("good two"),
        ref.encode_ordinary("x"),
    ]
    assert m.error_code_for(out[1]) == "INVALID_ARG"
    assert m.error_code_for(RuntimeError("boom")) == "INTERNAL"


def test_policies(tok, ref):
    replace = m.TokenizerSettings(utf8_errors="replace", allowed_special="all")
    out = m.encode_requests(tok, [[b"bad \xff", b"a<|endoftext|>"]], replace)
    (padded, lengths) = out[0]
    assert padded[0, : lengths[0, 0]].tolist() == ref.encode_ordinary(
        b"bad \xff".decode("utf-8", "replace")
    )
    assert padded[1, : lengths[1, 0]].tolist() == [64, 50256]
    ordinary = m.TokenizerSettings(disallowed_special="")
    ((padded, lengths),) = m.encode_requests(tok, [[b"<|endoftext|>"]], ordinary)
    assert padded[0].tolist() == [27, 91, 437, 1659, 5239, 91, 29]


def test_load_tokenizer_from_file(tmp_path):
    from pathlib import Path

    import gputok

    s = m.TokenizerSettings(vocab_file="gpt2.tiktoken")
    data = Path(gputok.__file__).parent / "data" / "gpt2.tiktoken"
    (tmp_path / "gpt2.tiktoken").write_bytes(data.read_bytes())
    t = m.load_tokenizer(gputok, s, str(tmp_path), "cpu")
    assert t.encode("hello world") == [31373, 995]


def test_pool_limit_reaches_gputok_on_cuda_only():
    """pool_limit_bytes (a configured cap on device memory) is passed to gputok when
    the tokenizer runs on the GPU; on the CPU there is no pool."""
    calls = []

    class FakeTok:
        def set_cpu_below_bytes(self, n, per_row=0):
            calls.append({"cpu_below_bytes": (n, per_row)})

    class FakeGputok:
        @staticmethod
        def gpt2(**kw):
            calls.append(kw)
            return FakeTok()

        @staticmethod
        def default_crossover():
            return (8192, 32, 65536)

    s = m.parse_settings({"pool_limit_bytes": {"string_value": "65536"}})
    m.load_tokenizer(FakeGputok, s, "", "cuda", device_id=1)
    m.load_tokenizer(FakeGputok, s, "", "cpu")
    m.load_tokenizer(FakeGputok, m.TokenizerSettings(), "", "cuda")
    assert calls == [
        {"device": "cuda", "device_id": 1, "pool_limit_bytes": 65536},
        {"cpu_below_bytes": (8192, 32)},
        {"device": "cpu"},
        {"device": "cuda", "device_id": 0},
        {"cpu_below_bytes": (8192, 32)},
    ]


def test_cpu_below_bytes_setting():
    """cpu_below_bytes (small batches on the CPU path of a GPU instance): parsed, validated,
    0 turns it off; unset, the library's measured rule applies."""
    assert m.parse_settings({}).cpu_below_bytes is None
    assert m.parse_settings({"cpu_below_bytes": {"string_value": "4096"}}).cpu_below_bytes == 4096
    assert m.parse_settings({"cpu_below_bytes": {"string_value": "0"}}).cpu_below_bytes == 0
    with pytest.raises(ValueError, match="cpu_below_bytes"):
        m.parse_settings({"cpu_below_bytes": {"string_value": "-1"}})
    calls = []

    class FakeTok:
        def set_cpu_below_bytes(self, n, per_row=0):
            calls.append((n, per_row))

    class FakeGputok:
        @staticmethod
        def gpt2(**kw):
            return FakeTok()

        @staticmethod
        def default_crossover():
            return (8192, 32, 65536)

    off = m.parse_settings({"cpu_below_bytes": {"string_value": "0"}})
    m.load_tokenizer(FakeGputok, off, "", "cuda")
    assert calls == []
    m.load_tokenizer(FakeGputok, m.parse_settings({}), "", "cuda")
    m.load_tokenizer(FakeGputok, m.parse_settings({}), "", "cpu")
    assert calls == [(8192, 32)]


def test_device_memory_error_is_internal():
    """gputok.DeviceMemoryError is a MemoryError: the request is valid, the server lacks memory."""
    import gputok

    assert issubclass(gputok.DeviceMemoryError, MemoryError)
    assert m.error_code_for(gputok.DeviceMemoryError("pool cap")) == "INTERNAL"
    assert m.error_code_for(ValueError("bad")) == "INVALID_ARG"


@pytest.mark.parametrize("start,end", [(0, 0), (0, 1), (3, 10), (7, 7)])
def test_pad_rows_single_row_fast_path_equals_general(start, end):
    ids = np.arange(20, dtype=np.int32) + 100
    out, lens = m.pad_rows(ids, np.array([start, end]), 50256)
    # the general path, through a two-row call whose first row is empty
    out2, lens2 = m.pad_rows(ids, np.array([start, start, end]), 50256)
    assert out.dtype == np.int32 and lens.dtype == np.int32
    assert out.tolist() == out2[1:, : end - start].tolist()
    assert lens.tolist() == [[end - start]] == lens2[1:].tolist()
