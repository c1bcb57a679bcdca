"""gputok's models inside TensorRT-LLM's ensemble (tests/e2e/trtllm_repo.py builds it), served.

The tiny gpt2 (seeded random weights) stands in for the engine, so completions are nonsense
but deterministic: each test first generates without constraints, then checks that a stop
word, a bad word or an end id sent as text through `preprocessing` changes exactly what it
should.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

PROMPT = "Once upon a time"  # the tiny model answers " time Rapp Rapp ..."


def infer(triton, protocol, model, inputs: dict, outputs=None):
    import tritonclient.grpc as g
    import tritonclient.http as h

    m = h if protocol == "http" else g
    c = m.InferenceServerClient(triton.http_url if protocol == "http" else triton.grpc_url)
    req = []
    for name, arr in inputs.items():
        arr = np.asarray(arr)
        dt = {"O": "BYTES", "i": "INT32", "f": "FP32", "u": "UINT64", "b": "BOOL"}[arr.dtype.kind]
        x = m.InferInput(name, list(arr.shape), dt)
        x.set_data_from_numpy(arr)
        req.append(x)
    outs = [m.InferRequestedOutput(o) for o in outputs] if outputs else None
    try:
        return c.infer(model, req, outputs=outs)
    finally:
        # Closed here, on the thread that made it: an HTTP client left to the garbage collector
        # closed itself on whichever thread collected it, where gevent had no hub
        # (PytestUnraisableExceptionWarning in a CI run, 2026-11-27).
        c.close()


def words(*w) -> np.ndarray:
    return np.array([[x.encode() for x in w]], dtype=np.object_)


def generate(triton, protocol, max_tokens=12, **extra) -> str:
    inputs = {
        "text_input": np.array([[PROMPT.encode()]], dtype=np.object_),
        "max_tokens": np.array([[max_tokens]], np.int32),
        **extra,
    }
    r = infer(triton, protocol, "trtllm_ensemble", inputs, ["text_output"])
    out = r.as_numpy("text_output")
    assert out.shape == (1, 1)
    return out[0, 0].decode("utf-8", "replace")


@pytest.fixture(scope="module")
def free_run(triton, tok):
    """The unconstrained completion: its ids and its text (through our own ensemble's models)."""
    ids = tok.encode(PROMPT)
    r = infer(
        triton,
        "grpc",
        "gpt2",
        {
            "input_ids": np.array([ids], np.int32),
            "input_lengths": np.array([[len(ids)]], np.int32),
            "request_output_len": np.array([[12]], np.int32),
        },
    )
    gen = r.as_numpy("output_ids")[0, 0, : r.as_numpy("sequence_length")[0, 0]].tolist()
    assert len(gen) >= 6, "the tiny model should not stop this early"
    return gen


def test_runs_and_equals_our_ensemble(triton, protocol, tok, free_run):
    text = generate(triton, protocol)
    assert text and text == tok.decode(free_run)
    assert text == generate(triton, protocol, end_id=np.array([[50256]], np.int32))


def single_token_word(tok, gen, start: int) -> tuple[int, str]:
    """A generated id at or after `start` whose text tokenizes back to that one id."""
    for i in range(start, len(gen)):
        w = tok.decode([gen[i]])
        if tok.encode(w) == [gen[i]] and gen.index(gen[i]) == i:
            return i, w
    pytest.skip("no round-tripping token in the completion")


def test_stop_words_stop_generation(triton, protocol, tok, free_run):
    i, w = single_token_word(tok, free_run, 1)
    text = generate(triton, protocol, stop_words=words(w, ""))
    assert text == tok.decode(free_run[: i + 1])  # the stop word stays in, as in TensorRT-LLM


def test_bad_words_are_not_generated(triton, protocol, tok, free_run):
    i, w = single_token_word(tok, free_run, 0)
    text = generate(triton, protocol, bad_words=words(w))
    assert tok.decode(free_run[:i]) == text[: len(tok.decode(free_run[:i]))]
    assert tok.encode(text)[: i + 1] != free_run[: i + 1]


def test_end_id_passes_through(triton, protocol, tok, free_run):
    i, _ = single_token_word(tok, free_run, 1)
    text = generate(triton, protocol, end_id=np.array([[free_run[i]]], np.int32))
    assert text == tok.decode(free_run[:i])  # the end id ends the text and is left out


def test_embedding_bias_steers(triton, protocol, tok, free_run):
    text = generate(
        triton,
        protocol,
        embedding_bias_words=words(" house"),
        embedding_bias_weights=np.array([[1e4]], np.float32),
    )
    assert tok.encode(" house") == [2156] and " house" not in tok.decode(free_run)
    assert text == " house" * 12


def test_max_tokens_reaches_the_engine(triton, protocol, tok, free_run):
    assert generate(triton, protocol, max_tokens=3) == tok.decode(free_run[:3])


def test_preprocessing_outputs_have_their_shapes(triton, protocol, ref):
    """A direct call with every text input: the output shapes are TensorRT-LLM's."""
    q = np.array([[b"Hello world"], [b"a"]], dtype=np.object_)
    r = infer(
        triton,
        protocol,
        "preprocessing",
        {
            "QUERY": q,
            "REQUEST_OUTPUT_LEN": np.array([[5], [6]], np.int32),
            "STOP_WORDS_DICT": np.array([[b" the", b"."], [b"\n", b""]], dtype=np.object_),
            "BAD_WORDS_DICT": np.array([[b" x"], [b" y"]], dtype=np.object_),
            "END_ID": np.array([[1], [2]], np.int32),
            "PAD_ID": np.array([[3], [4]], np.int32),
        },
    )
    assert r.as_numpy("INPUT_ID")[0].tolist() == ref.encode("Hello world")
    assert r.as_numpy("REQUEST_OUTPUT_LEN").tolist() == [[5], [6]]
    assert r.as_numpy("OUT_END_ID").tolist() == [[1], [2]]
    assert r.as_numpy("OUT_PAD_ID").tolist() == [[3], [4]]
    stop = r.as_numpy("STOP_WORDS_IDS")
    assert stop.shape == (2, 2, 2) and stop[0].tolist() == [
        [ref.encode(" the")[0], ref.encode(".")[0]],
        [1, 2],
    ]
    assert r.as_numpy("BAD_WORDS_IDS").shape == (2, 2, 1)
    assert r.as_numpy("EMBEDDING_BIAS").shape == (2, 0)
    assert r.as_numpy("DECODER_INPUT_ID").tolist() == [[3], [4]]  # PAD_ID, as theirs


def test_query_shape_one_is_refused_and_batch_one_works(triton, protocol):
    """The README's old table said QUERY [1]: Triton refuses that for a batching model."""
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException):
        infer(triton, protocol, "tokenizer", {"QUERY": np.array([b"hi"], dtype=np.object_)})
    r = infer(triton, protocol, "tokenizer", {"QUERY": np.array([[b"hi"]], dtype=np.object_)})
    assert r.as_numpy("INPUT_ID").shape == (1, 1)


def test_query_only_outputs_repeat_exactly(triton, protocol, ref):
    """A QUERY-only request's outputs besides INPUT_ID / REQUEST_INPUT_LEN are built once per
    batch size in the model and the same Tensors go into every such response: many requests,
    concurrent (so one execute holds several), of two batch sizes, with requests that carry an
    input among them, each get every output right; the general path (an empty IMAGE_URL)
    gives the same tensors."""
    from concurrent.futures import ThreadPoolExecutor

    def ask(k: int):
        rows = [[f"text {k} {j}".encode()] for j in range(1 + k % 2)]
        inputs = {"QUERY": np.array(rows, dtype=np.object_)}
        if k % 5 == 4:
            inputs["PAD_ID"] = np.array([[k]] * len(rows), np.int32)
        r = infer(triton, protocol, "tokenizer", inputs)
        return k, rows, {n: r.as_numpy(n) for n in OUTPUT_NAMES if r.as_numpy(n) is not None}

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(64)))
    general = infer(
        triton,
        protocol,
        "tokenizer",
        {"QUERY": np.array([[b"x"]], dtype=np.object_), "IMAGE_URL": np.array([[b""]], np.object_)},
    )
    for k, rows, out in answers:
        b, pad = len(rows), k if k % 5 == 4 else 50256
        assert set(out) == set(OUTPUT_NAMES) - {"REQUEST_OUTPUT_LEN", "OUT_PROMPT_TABLE_EXTRA_IDS"}
        for j, (text,) in enumerate(rows):
            want = ref.encode(text.decode())
            assert out["INPUT_ID"][j, : out["REQUEST_INPUT_LEN"][j, 0]].tolist() == want
        assert out["OUT_END_ID"].tolist() == [[50256]] * b
        assert out["OUT_PAD_ID"].tolist() == out["DECODER_INPUT_ID"].tolist() == [[pad]] * b
        assert out["REQUEST_DECODER_INPUT_LEN"].tolist() == [[1]] * b
        assert out["BAD_WORDS_IDS"].shape == out["STOP_WORDS_IDS"].shape == (b, 2, 0)
        assert out["EMBEDDING_BIAS"].shape == (b, 0)  # HTTP's JSON reads an empty one as float64
        if b == 1 and pad == 50256:
            for name, value in out.items():
                g = general.as_numpy(name)
                assert (
                    name.endswith("INPUT_ID")
                    or name == "REQUEST_INPUT_LEN"
                    or (g.dtype == value.dtype and g.shape == value.shape and (g == value).all())
                ), name


OUTPUT_NAMES = (
    "INPUT_ID",
    "REQUEST_INPUT_LEN",
    "DECODER_INPUT_ID",
    "REQUEST_DECODER_INPUT_LEN",
    "BAD_WORDS_IDS",
    "STOP_WORDS_IDS",
    "EMBEDDING_BIAS",
    "REQUEST_OUTPUT_LEN",
    "OUT_END_ID",
    "OUT_PAD_ID",
    "OUT_PROMPT_TABLE_EXTRA_IDS",
)
