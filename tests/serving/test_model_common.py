"""gputok.triton_model (what the three models share) and each model's execute() with pb_utils faked."""

from __future__ import annotations

from dataclasses import dataclass

import fake_pb_utils as fake
import numpy as np
import pytest
from model_loader import config_parameters, load_model_module

from gputok import triton_model as tm

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

tok_m = load_model_module("tokenizer")
detok_m = load_model_module("detokenizer")
gpt2_m = load_model_module("gpt2")


@dataclass(frozen=True)
class Demo:
    name: str = "x"
    count: int = 3
    flag: bool = False
    device: str = "auto"


def test_tensors_by_batch_makes_each_batch_size_once_and_keeps_the_wanted():
    """The tokenizer model's and the gigatoken baseline's outputs that depend on the batch size
    alone: one Tensor per name and batch size, handed out again to every later request."""
    made = []

    def make(batch):
        made.append(batch)
        return {"A": np.zeros((batch, 1), np.int32), "B": np.ones((batch, 1), np.int32)}

    by_batch = tm.TensorsByBatch(make)
    first = by_batch.get(fake, 2, None)
    assert [t.name() for t in first] == ["A", "B"] and first[1].as_numpy().shape == (2, 1)
    again = by_batch.get(fake, 2, {"B"})
    assert len(again) == 1 and again[0] is first[1]
    assert [t.as_numpy().shape for t in by_batch.get(fake, 3, None)] == [(3, 1), (3, 1)]
    assert made == [2, 3]


def test_settings_from_params():
    assert tm.settings_from_params(Demo, {}) == Demo()
    got = tm.settings_from_params(
        Demo,
        {
            "name": {"string_value": " y "},
            "count": {"string_value": "7"},
            "flag": {"string_value": "Yes"},
            "device": {"string_value": "CUDA"},
        },
        lower=("device",),
    )
    assert got == Demo(name="y", count=7, flag=True, device="cuda")
    assert tm.settings_from_params(Demo, {"count": {"string_value": ""}}) == Demo()
    # an empty string is a value for a string field (disallowed_special: "" = none)
    assert tm.settings_from_params(Demo, {"name": {"string_value": ""}}) == Demo(name="")
    assert (
        tok_m.parse_settings({"disallowed_special": {"string_value": ""}}).disallowed_special == ""
    )
    with pytest.raises(ValueError, match="count must be an integer"):
        tm.settings_from_params(Demo, {"count": {"string_value": "seven"}})
    with pytest.raises(ValueError, match="flag must be true or false"):
        tm.settings_from_params(Demo, {"flag": {"string_value": "maybe"}})


@pytest.mark.parametrize(
    "exc, code",
    [
        (ValueError("v"), "INVALID_ARG"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad"), "INVALID_ARG"),
        (TypeError("t"), "INVALID_ARG"),
        (OverflowError("o"), "INVALID_ARG"),
        (tm.RequestError("r"), "INVALID_ARG"),
        (RuntimeError("boom"), "INTERNAL"),
        (MemoryError("oom"), "INTERNAL"),
    ],
)
def test_one_error_mapping_for_every_model(exc, code):
    """The same exception gets the same code from every model (the detokenizer and gpt2 once
    mapped only ValueError to INVALID_ARG)."""
    assert tm.error_code(exc) == code
    pb = fake.install(tok_m)
    assert tm.error_response(pb, exc).error.code() == getattr(fake.TritonError, code)
    assert tok_m.error_code_for(exc) == code
    for mod in (tok_m, detok_m, gpt2_m):
        assert mod.RequestError is tm.RequestError


class Raises:
    """A stand-in tokenizer whose every call raises `exc`."""

    def __init__(self, exc, real):
        self.exc, self.n_vocab, self.eot_token = exc, real.n_vocab, real.eot_token

    def __getattr__(self, name):
        def fail(*a, **k):
            raise self.exc

        return fail


@pytest.mark.parametrize("exc", [TypeError("t"), OverflowError("o"), RuntimeError("r")])
def test_tokenizer_and_detokenizer_execute_map_alike(tok, exc):
    want = getattr(fake.TritonError, tm.error_code(exc))
    for mod, inputs in (
        (tok_m, {"QUERY": np.array([[b"hi"]], dtype=np.object_)}),
        (
            detok_m,
            {
                "TOKENS_BATCH": np.array([[[1, 2]]], np.int32),
                "SEQUENCE_LENGTH": np.array([[2]], np.int32),
            },
        ),
    ):
        fake.install(mod)
        model = mod.TritonPythonModel()
        model.initialize(
            fake.model_args(
                {
                    "max_batch_size": 8,
                    "parameters": config_parameters(mod.__name__.rsplit("_", 1)[1]),
                }
            )
        )
        model.tok = Raises(exc, tok)
        (r,) = model.execute([fake.InferenceRequest(inputs)])
        assert r.error is not None and r.error.code() == want, mod.__name__


def test_eot_comes_from_the_vocabulary(tok):
    """No model hard-codes 50256: the tokenizer pads with its vocabulary's <|endoftext|>."""
    import ast
    import inspect

    for mod in (tok_m, detok_m, gpt2_m):
        tree = ast.parse(inspect.getsource(mod))
        consts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
        assert 50256 not in consts, mod.__name__

    class OtherEot:
        eot_token = 7

        def encode_batch_flat(self, texts, **kw):
            return tok.encode_batch_flat(texts, **kw)

    ((padded, lengths),) = tok_m.encode_requests(
        OtherEot(), [[b"a", b"abc def"]], tok_m.TokenizerSettings()
    )
    assert padded[0, lengths[0, 0] :].tolist() == [7] * (padded.shape[1] - lengths[0, 0])


# -- detokenizer streaming steps ---------------------------------------------------------------


@pytest.fixture
def detok_model():
    fake.install(detok_m)
    model = detok_m.TritonPythonModel()
    model.initialize(
        fake.model_args({"max_batch_size": 256, "parameters": config_parameters("detokenizer")})
    )
    return model


def stream_requests(ids: list[int], k: int) -> list:
    """The requests gpt2_stream's responses make: k new ids each, led by <= 3 earlier ids."""
    reqs, ctx = [], []
    for i in range(0, len(ids), k):
        new = ids[i : i + k]
        row = ctx + new
        reqs.append(
            fake.InferenceRequest(
                {
                    "TOKENS_BATCH": np.array([[row]], np.int32),
                    "SEQUENCE_LENGTH": np.array([[len(row)]], np.int32),
                    "STREAM_CONTEXT_LENGTH": np.array([[len(ctx)]], np.int32),
                    "STREAM_FINAL": np.array([[i + k >= len(ids)]], np.bool_),
                }
            )
        )
        ctx = row[-3:]
    return reqs


@pytest.mark.parametrize("k", [1, 2, 5])
def test_detokenizer_stream_steps_concatenate_to_one_shot(detok_model, tok, k):
    text = "streamed 日本語 and 👩‍👩‍👧‍👦 emoji, and a real \ufffd"
    ids = tok.encode(text)
    reqs = stream_requests(ids, k)
    # one execute with all steps (a dynamic batch) and one execute per step give the same
    batched = [r.tensors["OUTPUT"][0, 0].decode() for r in detok_model.execute(reqs)]
    single = [detok_model.execute([r])[0].tensors["OUTPUT"][0, 0].decode() for r in reqs]
    assert batched == single
    assert "".join(batched) == text


def test_detokenizer_stream_final_flushes_a_cut_character(detok_model, tok):
    cut = [i for i in range(256) if tok.decode_single_token_bytes(i) == "é".encode()[:1]]
    reqs = stream_requests([*tok.encode("ab"), *cut], 1)
    assert (
        "".join(r.tensors["OUTPUT"][0, 0].decode() for r in detok_model.execute(reqs)) == "ab\ufffd"
    )
    reqs = stream_requests([*tok.encode("ab"), *cut], 1)
    reqs[-1]._inputs.pop("STREAM_FINAL")
    assert "".join(r.tensors["OUTPUT"][0, 0].decode() for r in detok_model.execute(reqs)) == "ab"


def test_detokenizer_stream_bad_context_fails_alone(detok_model):
    good, bad = stream_requests([31373, 995], 2) + stream_requests([31373], 1)
    bad._inputs["STREAM_CONTEXT_LENGTH"] = fake.Tensor(
        "STREAM_CONTEXT_LENGTH", np.array([[5]], np.int32)
    )
    r_good, r_bad = detok_model.execute([good, bad])
    assert r_good.tensors["OUTPUT"].tolist() == [[b"hello world"]]
    assert r_bad.error.code() == fake.TritonError.INVALID_ARG


def test_skip_special_tokens():
    fake.install(detok_m)
    model = detok_m.TritonPythonModel()
    params = dict(config_parameters("detokenizer"), skip_special_tokens={"string_value": "true"})
    model.initialize(fake.model_args({"max_batch_size": 8, "parameters": params}))
    req = fake.InferenceRequest(
        {
            "TOKENS_BATCH": np.array([[[31373, 50256, 995]]], np.int32),
            "SEQUENCE_LENGTH": np.array([[3]], np.int32),
        }
    )
    assert model.execute([req])[0].tensors["OUTPUT"].tolist() == [[b"hello world"]]


# -- gpt2, decoupled ---------------------------------------------------------------------------


def gpt2_model(decoupled: bool, k: int = 1):
    fake.install(gpt2_m)
    model = gpt2_m.TritonPythonModel()
    params = dict(
        config_parameters("gpt2"),
        model_config={"string_value": "tiny"},
        seed={"string_value": "1"},
        device={"string_value": "cpu"},
        tokens_per_response={"string_value": str(k)},
        stop_at_eot={"string_value": "false"},
    )
    config = {"max_batch_size": 8, "parameters": params}
    if decoupled:
        config["model_transaction_policy"] = {"decoupled": True}
    model.initialize(fake.model_args(config))
    return model


def gen_request(prompt: list[int], n: int, cancel_after=None):
    return fake.InferenceRequest(
        {
            "input_ids": np.array([prompt], np.int32),
            "input_lengths": np.array([[len(prompt)]], np.int32),
            "request_output_len": np.array([[n]], np.int32),
        },
        cancel_after=cancel_after,
    )


def streamed_ids(sender) -> list[int]:
    ids = []
    for resp, _ in sender.sent:
        if resp is None:
            continue
        row = resp.tensors["output_ids"][0, 0, : resp.tensors["sequence_length"][0, 0]]
        ids += row[resp.tensors["stream_context_length"][0, 0] :].tolist()
    return ids


@pytest.mark.parametrize("k", [1, 3])
def test_gpt2_stream_sends_the_same_tokens_as_one_shot(k):
    torch.set_num_threads(1)
    one = gpt2_model(False)
    (r,) = one.execute([gen_request([31373, 995], 7)])
    want = r.tensors["output_ids"][0, 0, : r.tensors["sequence_length"][0, 0]].tolist()
    model = gpt2_model(True, k)
    reqs = [gen_request([31373, 995], 7), gen_request([64], 2)]
    assert model.execute(reqs) is None
    s = reqs[0].sender
    assert streamed_ids(s) == want and len(want) == 7
    assert [f for _, f in s.sent] == [0] * (len(s.sent) - 1) + [
        fake.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    ]
    assert len(s.sent) == -(-7 // k) + (7 % k == 0)  # a step's worth per response, then the flush
    # the shorter request got its final flag when it finished, not at the end of the batch
    assert reqs[1].sender.sent[-1][1] == fake.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    assert len(streamed_ids(reqs[1].sender)) == 2


def test_gpt2_stream_cancel_frees_the_request():
    """A cancelled stream gets its final flag at the next step and nothing after it; the
    generation stops (the other request is not held to the cancelled one's length)."""
    model = gpt2_model(True)
    cancelled = gen_request([31373], 200, cancel_after=3)
    reqs = [cancelled]
    assert model.execute(reqs) is None
    sent = cancelled.sender.sent
    assert sent[-1] == (None, fake.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    assert len(streamed_ids(cancelled.sender)) == 3  # stopped, not 200 tokens


def test_gpt2_stream_refuses_a_batch_of_prompts():
    model = gpt2_model(True)
    req = fake.InferenceRequest(
        {
            "input_ids": np.array([[1, 2], [3, 4]], np.int32),
            "input_lengths": np.array([[2], [2]], np.int32),
            "request_output_len": np.array([[2], [2]], np.int32),
        }
    )
    model.execute([req])
    ((resp, flags),) = req.sender.sent
    assert resp.error.code() == fake.TritonError.INVALID_ARG and flags == 1
