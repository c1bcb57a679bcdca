"""End-to-end: a real tritonserver (session fixture), through HTTP and gRPC.

The tokenizer's ids must equal tiktoken's (HF tokenizers where tiktoken overflows) on corpus
rows and pathological strings; the ensemble must return text; concurrent requests must be
batched; a bad request must fail alone; the server must stay ready (autouse fixture).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from test_pathological import CASES, HF_ONLY

from gputok_client.errors import INPUT

EOT = "<|endoftext|>"

pytestmark = pytest.mark.e2e


def corpus_rows(corpus: list[str], n: int = 3000) -> list[str]:
    """About n rows: lines of the corpus documents (mixed languages, code, blank lines), plus a
    few whole documents. Deterministic: every k-th line."""
    lines = [line for doc in corpus for line in doc.splitlines(keepends=True)]
    step = max(1, len(lines) // n)
    rows = [line for line in lines[::step] if EOT not in line][:n]
    rows += [doc for doc in corpus[:20] if EOT not in doc]
    return rows


def _tokenizer_stats(triton) -> tuple[int, int]:
    import tritonclient.http as h

    c = h.InferenceServerClient(triton.http_url)
    s = c.get_inference_statistics("tokenizer")["model_stats"][0]
    return int(s["inference_count"]), int(s["execution_count"])


def test_health(client):
    h = client.health()
    assert h["live"] and h["ready"], h
    assert all(h["models"].values()), h


def test_literals(client):
    ids = client.tokenize(["hello world", "", "a   b", "DON'T", EOT.replace("|", "")])
    assert [r.tolist() for r in ids] == [
        [31373, 995],
        [],
        [64, 220, 220, 275],
        [41173, 6, 51],
        [27, 437, 1659, 5239, 29],
    ]


def test_padding_and_lengths(triton, protocol):
    """Raw outputs: INPUT_ID right-padded with 50256 to the longest row, REQUEST_INPUT_LEN per row."""
    import tritonclient.grpc as g
    import tritonclient.http as h

    m = h if protocol == "http" else g
    c = m.InferenceServerClient(triton.http_url if protocol == "http" else triton.grpc_url)
    arr = np.array([[b"hello world"], [b"a"], [b""]], dtype=np.object_)
    q = m.InferInput("QUERY", list(arr.shape), "BYTES")
    q.set_data_from_numpy(arr)
    r = c.infer("tokenizer", [q])
    assert r.as_numpy("INPUT_ID").tolist() == [[31373, 995], [64, 50256], [50256, 50256]]
    assert r.as_numpy("INPUT_ID").dtype == np.int32
    assert r.as_numpy("REQUEST_INPUT_LEN").tolist() == [[2], [1], [0]]


def test_corpus_equals_tiktoken(client, ref, corpus):
    rows = corpus_rows(corpus)
    assert len(rows) > 2000
    want = ref.encode_ordinary_batch(rows, num_threads=2)
    assert sum(map(len, want)) > 0, "reference returned empty ids"
    batches = [rows[i : i + 32] for i in range(0, len(rows), 32)]
    with ThreadPoolExecutor(4) as pool:
        got = [r.tolist() for batch in pool.map(client.tokenize, batches) for r in batch]
    bad = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    assert len(got) == len(want)
    assert not bad, f"{len(bad)} rows differ, first: {rows[bad[0]]!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_pathological_vs_tiktoken(client, ref, name):
    want = ref.encode_ordinary(CASES[name])
    assert want, "reference returned empty ids"
    (got,) = client.tokenize([CASES[name]])
    assert got.tolist() == want


@pytest.mark.parametrize("name", sorted(HF_ONLY))
def test_pathological_vs_hf(client, hf, name):
    want = hf.encode(HF_ONLY[name]).ids
    assert want, "reference returned empty ids"
    (got,) = client.tokenize([HF_ONLY[name]])
    assert got.tolist() == want


def _concurrently(fns):
    """Run the callables at the same moment; return (results or exceptions) in order."""
    barrier = threading.Barrier(len(fns))

    def run(fn):
        barrier.wait()
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - returned for the test to inspect
            return e

    with ThreadPoolExecutor(len(fns)) as pool:
        return list(pool.map(run, fns))


@pytest.mark.parametrize(
    "bad, message",
    [
        (b"ok \xff\xfe bytes", "utf-8"),
        (("a" + EOT).encode(), "special token"),
        (b"x" * (4 * 1024 * 1024 + 1), "max_bytes_per_request"),
    ],
    ids=["invalid-utf8", "special-token", "too-many-bytes"],
)
def test_bad_request_fails_alone(client, ref, bad, message):
    good = [f"request {i}: the quick brown fox" for i in range(15)]
    fns = [lambda t=t: client.tokenize([t]) for t in good[:8]]
    fns.append(lambda: client.tokenize([bad]))
    fns += [lambda t=t: client.tokenize([t, t[::-1]]) for t in good[8:]]
    out = _concurrently(fns)
    err = out[8]
    assert isinstance(err, Exception), f"bad request succeeded: {err!r}"
    assert message.lower() in str(err).lower(), str(err)
    # The client turns the server's answer into a hint; the input-rejected exit code and the
    # server's own status (kept as the cause) both say it was refused as bad input.
    assert getattr(err, "code", None) == INPUT, f"not classified as rejected input: {err!r}"
    cause = str(err.__cause__)
    assert "400" in cause or "INVALID_ARG" in cause, cause
    for t, r in zip(good[:8], out[:8], strict=True):
        assert not isinstance(r, Exception), r
        assert r[0].tolist() == ref.encode_ordinary(t)
    for t, r in zip(good[8:], out[9:], strict=True):
        assert not isinstance(r, Exception), r
        assert [x.tolist() for x in r] == [ref.encode_ordinary(t), ref.encode_ordinary(t[::-1])]


def test_concurrent_requests_are_batched(triton, client, ref):
    inf0, exe0 = _tokenizer_stats(triton)
    texts = [f"concurrent request number {i} " * (1 + i % 7) for i in range(64)]
    out = _concurrently([lambda t=t: client.tokenize([t]) for t in texts])
    for t, r in zip(texts, out, strict=True):
        assert not isinstance(r, Exception), r
        assert r[0].tolist() == ref.encode_ordinary(t)
    inf1, exe1 = _tokenizer_stats(triton)
    inferences, executions = inf1 - inf0, exe1 - exe0
    assert inferences == 64
    assert executions < inferences, (
        f"{executions} executions for {inferences} requests: no batching"
    )


def test_detokenize_roundtrip(client, corpus):
    rows = corpus_rows(corpus, 200)
    ids = client.tokenize(rows)
    assert client.detokenize([r.tolist() for r in ids]) == rows


def test_detokenize_out_of_range_fails_alone(client):
    out = _concurrently(
        [lambda: client.detokenize([[31373, 995]]), lambda: client.detokenize([[31373, 50257]])]
    )
    assert out[0] == ["hello world"]
    assert isinstance(out[1], Exception) and "out of range" in str(out[1]), out[1]


def test_ensemble_generates_text(triton, client, protocol):
    prompts = ["Hello, my name is", "The capital of France is", "", "日本語のテキスト"]
    out = client.generate(prompts, max_tokens=8)
    assert len(out) == len(prompts)
    assert all(isinstance(o, str) for o in out)
    assert any(o for o in out), "every completion is empty"
    # Same as running the three models by hand.
    ids = client.tokenize(prompts)
    import tritonclient.grpc as g
    import tritonclient.http as h

    m = h if protocol == "http" else g
    c = m.InferenceServerClient(triton.http_url if protocol == "http" else triton.grpc_url)
    width = max(len(r) for r in ids)
    x = np.full((len(ids), width), 50256, np.int32)
    for i, r in enumerate(ids):
        x[i, : len(r)] = r
    inputs = []
    for name, arr in (
        ("input_ids", x),
        ("input_lengths", np.array([[len(r)] for r in ids], np.int32)),
        ("request_output_len", np.full((len(ids), 1), 8, np.int32)),
    ):
        inp = m.InferInput(name, list(arr.shape), "INT32")
        inp.set_data_from_numpy(arr)
        inputs.append(inp)
    r = c.infer("gpt2", inputs)
    gen, lens = r.as_numpy("output_ids"), r.as_numpy("sequence_length")
    assert gen.shape[:2] == (len(prompts), 1) and lens.shape == (len(prompts), 1)
    assert (lens <= 8).all()
    assert client.detokenize([gen[i, 0, : lens[i, 0]].tolist() for i in range(len(prompts))]) == out


def test_ensemble_bad_max_tokens_fails_alone(client):
    out = _concurrently(
        [
            lambda: client.generate(["Hello"], max_tokens=4),
            lambda: client.generate(["Hello"], max_tokens=0),
        ]
    )
    assert isinstance(out[0], list) and len(out[0]) == 1
    assert isinstance(out[1], Exception) and "request_output_len" in str(out[1]), out[1]
