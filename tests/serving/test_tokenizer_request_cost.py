"""What one isolated request costs the tokenizer model, and that the cheap path answers alike.

Served isolated (gputok-serve's default), every request is one execute() of one row, and the
Python work in it was most of what set ours apart from the gigatoken baseline
(bench/results/2026-11-27-serve-cpu.md): fourteen input lookups, a one-row batch call and nine
output Tensors built afresh. These tests pin the cheap path and check it against the general
one, output by output.
"""

from __future__ import annotations

import fake_pb_utils as fake
import numpy as np
import pytest
from model_loader import config_outputs, config_parameters, load_model_module

m = load_model_module("tokenizer")

ALL = config_outputs("tokenizer")  # every output TensorRT-LLM's contract declares


class Counts:
    tensors = 0
    lookups = 0
    passes = 0


@pytest.fixture
def counted():
    """The tokenizer model over a fake pb_utils that counts Tensors built and input reads."""
    pb = fake.install(m)

    class CountedTensor(fake.Tensor):
        def __init__(self, name, array):
            Counts.tensors += 1
            super().__init__(name, array)

    def lookup(request, name):
        Counts.lookups += 1
        return fake.get_input_tensor_by_name(request, name)

    pb.Tensor, pb.get_input_tensor_by_name = CountedTensor, lookup
    model = m.TritonPythonModel()
    model.initialize(
        fake.model_args({"max_batch_size": 256, "parameters": config_parameters("tokenizer")})
    )
    Counts.tensors = Counts.lookups = Counts.passes = 0
    return model


class CountedRequest(fake.InferenceRequest):
    def inputs(self):
        Counts.passes += 1
        return super().inputs()


def query(*texts):
    return np.array([[t.encode()] for t in texts], dtype=np.object_)


def test_query_only_outputs_are_built_once_per_batch_size(counted, ref):
    """After the first request of a batch size, a QUERY-only request builds two Tensors
    (INPUT_ID, REQUEST_INPUT_LEN); the other seven are its batch size's, built once. Each
    output equals the general path's, which a request carrying an empty IMAGE_URL takes."""
    out = [counted.execute([fake.InferenceRequest({"QUERY": query(t)})])[0] for t in "abc"]
    assert Counts.tensors == 9 + 2 + 2
    general = fake.InferenceRequest(
        {"QUERY": query("c"), "IMAGE_URL": np.array([[b""]], dtype=np.object_)}
    )
    (want,) = counted.execute([general])
    assert Counts.tensors == 13 + 9
    for r in out:
        assert not r.has_error() and set(r.tensors) == set(want.tensors)
    for name, value in want.tensors.items():
        got = out[-1].tensors[name]
        assert got.dtype == value.dtype and got.shape == value.shape, name
        assert got.tolist() == value.tolist(), name
    assert out[0].tensors["INPUT_ID"].tolist() == [ref.encode("a")]
    (two,) = counted.execute([fake.InferenceRequest({"QUERY": query("x", "yz")})])
    assert Counts.tensors == 22 + 9  # another batch size: its own seven
    assert two.tensors["OUT_END_ID"].tolist() == [[50256], [50256]]
    assert two.tensors["BAD_WORDS_IDS"].shape == (2, 2, 0)
    (end,) = counted.execute(
        [fake.InferenceRequest({"QUERY": query("q"), "END_ID": np.array([[13]], np.int32)})]
    )
    assert end.tensors["OUT_END_ID"].tolist() == [[13]]  # an input present: not the default
    (some,) = counted.execute(
        [fake.InferenceRequest({"QUERY": query("q")}, requested=["INPUT_ID", "OUT_PAD_ID"])]
    )
    assert set(some.tensors) == {"INPUT_ID", "REQUEST_INPUT_LEN", "OUT_PAD_ID"}


def test_inputs_are_read_in_one_pass(counted):
    """One `request.inputs()` a request, no lookup by name (fourteen before)."""
    reqs = [CountedRequest({"QUERY": query("hi")}, requested=ALL) for _ in range(3)]
    reqs.append(CountedRequest({"QUERY": query("a"), "PAD_ID": np.array([[7]], np.int32)}))
    responses = counted.execute(reqs)
    assert (Counts.passes, Counts.lookups) == (4, 0)
    assert responses[-1].tensors["OUT_PAD_ID"].tolist() == [[7]]
    assert responses[-1].tensors["DECODER_INPUT_ID"].tolist() == [[7]]


class CountingTok:
    def __init__(self, tok):
        self.tok, self.eot_token, self.calls = tok, tok.eot_token, []

    def encode_batch_flat(self, texts, **kw):
        self.calls.append("batch")
        return self.tok.encode_batch_flat(texts, **kw)

    def encode_to_numpy(self, text, **kw):
        self.calls.append("one")
        return self.tok.encode_to_numpy(text, **kw)


TEXTS = [b"", b"hello world", "日本語 🎉".encode(), b"bad \xff", b"a<|endoftext|>", b"x" * 5000]
POLICIES = [
    m.TokenizerSettings(),
    m.TokenizerSettings(utf8_errors="replace", allowed_special="all"),
    m.TokenizerSettings(disallowed_special=""),
]


@pytest.mark.parametrize("s", POLICIES, ids=["default", "replace-all", "ordinary"])
@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_one_row_takes_the_one_text_call(tok, s, text):
    """A one-row execute calls gputok's one-text encode, not the batch: same ids, dtype and
    shape as the batch path; a row that fails gets the batch path's error, message and all,
    from that one call (it is not encoded again through the batch path)."""
    ct = CountingTok(tok)
    (got,) = m.encode_requests(ct, [[text]], s)
    kw = {"errors": s.utf8_errors, "num_threads": s.num_threads, **m.special_kwargs(s)}
    try:
        ids, offsets = tok.encode_batch_flat([text], **kw)
    except ValueError as e:
        assert isinstance(got, ValueError) and type(got) is type(e) and str(got) == str(e)
        assert ct.calls == ["one"]
        return
    assert ct.calls == ["one"]
    padded, lengths = got
    assert padded.dtype == np.int32 and lengths.dtype == np.int32
    assert padded.flags["C_CONTIGUOUS"]
    assert padded.tolist() == [ids[offsets[0] : offsets[1]].tolist()]
    assert lengths.tolist() == [[len(ids)]]


def test_rows_of_several_requests_still_take_one_batch_call(tok):
    ct = CountingTok(tok)
    m.encode_requests(ct, [[b"a"], [b"b"]], m.TokenizerSettings())
    m.encode_requests(ct, [[b"a", b"b"]], m.TokenizerSettings())
    assert ct.calls == ["batch", "batch"]
