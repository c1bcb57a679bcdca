"""The tokenizer model against TensorRT-LLM's `preprocessing` contract, without a server.

The contract below is copied from NVIDIA/TensorRT-LLM,
triton_backend/all_models/inflight_batcher_llm/preprocessing/config.pbtxt (text part) and
postprocessing/config.pbtxt; `trtllm_word_list` re-expresses their `_to_word_list_format` with
tiktoken as the tokenizer, so our tensors are compared with theirs, not with our own code.
"""

from __future__ import annotations

import fake_pb_utils as fake
import numpy as np
import pytest
from model_loader import REPO, config_parameters, load_model_module

from gputok import trtllm

m = load_model_module("tokenizer")
detok = load_model_module("detokenizer")

# name: (data_type, dims, optional)
PREPROCESSING_INPUTS = {
    "QUERY": ("TYPE_STRING", [1], False),
    "DECODER_QUERY": ("TYPE_STRING", [1], True),
    "REQUEST_OUTPUT_LEN": ("TYPE_INT32", [1], None),  # required there, optional here
    "BAD_WORDS_DICT": ("TYPE_STRING", [-1], True),
    "STOP_WORDS_DICT": ("TYPE_STRING", [-1], True),
    "EMBEDDING_BIAS_WORDS": ("TYPE_STRING", [-1], True),
    "EMBEDDING_BIAS_WEIGHTS": ("TYPE_FP32", [-1], True),
    "END_ID": ("TYPE_INT32", [1], True),
    "PAD_ID": ("TYPE_INT32", [1], True),
    "PROMPT_TABLE_EXTRA_ID": ("TYPE_UINT64", [1], True),
    # the multimodal inputs, as triton-inference-server/tensorrtllm_backend v0.19.0 (2025-05-21)
    # declares them in all_models/inflight_batcher_llm/preprocessing/config.pbtxt
    "IMAGE_BYTES": ("TYPE_UINT8", [-1, -1, -1, -1], True),
    "IMAGE_URL": ("TYPE_STRING", [1], True),
    "VIDEO_BYTES": ("TYPE_UINT8", [-1, -1, -1, -1], True),
}
PREPROCESSING_OUTPUTS = {
    "INPUT_ID": ("TYPE_INT32", [-1]),
    "REQUEST_INPUT_LEN": ("TYPE_INT32", [1]),
    "DECODER_INPUT_ID": ("TYPE_INT32", [-1]),
    "REQUEST_DECODER_INPUT_LEN": ("TYPE_INT32", [1]),
    "BAD_WORDS_IDS": ("TYPE_INT32", [2, -1]),
    "STOP_WORDS_IDS": ("TYPE_INT32", [2, -1]),
    "EMBEDDING_BIAS": ("TYPE_FP32", [-1]),
    "REQUEST_OUTPUT_LEN": ("TYPE_INT32", [-1]),
    "OUT_END_ID": ("TYPE_INT32", [1]),
    "OUT_PAD_ID": ("TYPE_INT32", [1]),
    "OUT_PROMPT_TABLE_EXTRA_IDS": ("TYPE_UINT64", [-1]),
}
POSTPROCESSING_INPUTS = {
    "TOKENS_BATCH": ("TYPE_INT32", [-1, -1], False),
    "SEQUENCE_LENGTH": ("TYPE_INT32", [-1], False),
}


def model_config(name: str) -> dict:
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    text = (REPO / "model_repository" / name / "config.pbtxt").read_text()
    msg = text_format.Parse(text, model_config_pb2.ModelConfig())
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def io_table(entries: list) -> dict:
    return {
        e["name"]: (e["data_type"], [int(d) for d in e["dims"]], bool(e.get("optional", False)))
        for e in entries
    }


def test_tokenizer_config_takes_the_text_contract():
    cfg = model_config("tokenizer")
    ins, outs = io_table(cfg["input"]), io_table(cfg["output"])
    for name, (dt, dims, optional) in PREPROCESSING_INPUTS.items():
        assert name in ins, f"input {name} missing"
        assert ins[name][:2] == (dt, dims), name
        if optional is not None:
            assert ins[name][2] == optional, name
    assert ins["REQUEST_OUTPUT_LEN"][2] is True  # ours: a tokenize-only client may omit it
    for name, (dt, dims) in PREPROCESSING_OUTPUTS.items():
        assert outs.get(name, (None, None))[:2] == (dt, dims), name
    assert int(cfg["max_batch_size"]) >= int(
        config_parameters("tokenizer")["max_rows_per_request"]["string_value"]
    )


def test_detokenizer_config_takes_the_postprocessing_contract():
    cfg = model_config("detokenizer")
    ins, outs = io_table(cfg["input"]), io_table(cfg["output"])
    for name, want in POSTPROCESSING_INPUTS.items():
        assert ins[name] == want
    assert outs["OUTPUT"][:2] == ("TYPE_STRING", [-1])
    assert all(ins[n][2] for n in ins if n not in POSTPROCESSING_INPUTS)  # extras optional


def trtllm_word_list(ref, word_lists, batch):
    """TensorRT-LLM's _to_word_list_format, with tiktoken for their HF tokenizer."""
    if word_lists is None:
        return np.empty([batch, 2, 0], dtype="int32")
    flat_ids, offsets = [], []
    for word_list in word_lists:
        item_flat_ids, item_offsets = [], []
        for word in word_list:
            ids = ref.encode(word.decode(), allowed_special="all")
            if len(ids) == 0:
                continue
            item_flat_ids += ids
            item_offsets.append(len(ids))
        flat_ids.append(np.array(item_flat_ids))
        offsets.append(np.cumsum(np.array(item_offsets)))
    pad_to = max(1, max(len(ids) for ids in flat_ids))
    for i, (ids, offs) in enumerate(zip(flat_ids, offsets, strict=True)):
        flat_ids[i] = np.pad(ids, (0, pad_to - len(ids)), constant_values=0)
        offsets[i] = np.pad(offs, (0, pad_to - len(offs)), constant_values=-1)
    return np.array([flat_ids, offsets], dtype="int32").transpose((1, 0, 2))


WORD_LISTS = [
    None,
    np.array([[b" the", b""], [b"", b""]], dtype=np.object_),
    np.array([[b"Hello world", b"\n\n"], [" 日本".encode(), b"<|endoftext|>"]], dtype=np.object_),
    np.array([[b"a"], [b"supercalifragilistic"]], dtype=np.object_),
]


@pytest.mark.parametrize("words", WORD_LISTS)
def test_word_list_layout_equals_theirs(tok, ref, words):
    ours = trtllm.word_list_ids(tok, words, 2)
    theirs = trtllm_word_list(ref, words, 2)
    assert ours.dtype == np.int32 and ours.shape == theirs.shape
    assert ours.tolist() == theirs.tolist()


def test_word_list_errors(tok):
    with pytest.raises(ValueError, match="UTF-8"):
        trtllm.word_list_ids(tok, np.array([[b"\xff"]], dtype=np.object_), 1)
    with pytest.raises(ValueError, match="batch=2"):
        trtllm.word_list_ids(tok, np.array([[b"a"]], dtype=np.object_), 2)


def test_embedding_bias(tok, ref):
    words = np.array([[b" cat", b" cat", b"dog house"]], dtype=np.object_)
    weights = np.array([[1.5, 0.25, -2.0]], dtype=np.float32)
    bias = trtllm.embedding_bias(tok, words, weights, 1)
    assert bias.shape == (1, 50257) and bias.dtype == np.float32
    want = np.zeros(50257, np.float32)
    for w, x in zip(words[0], weights[0], strict=True):
        for i in ref.encode(w.decode()):
            want[i] += x
    assert np.count_nonzero(want) >= 2
    assert bias[0].tolist() == want.tolist()
    assert trtllm.embedding_bias(tok, None, weights, 3).shape == (3, 0)
    with pytest.raises(ValueError, match="same shape"):
        trtllm.embedding_bias(tok, words, weights[:, :2], 1)


# -- execute() with pb_utils faked -------------------------------------------------------------


@pytest.fixture
def tokenizer_model():
    fake.install(m)
    model = m.TritonPythonModel()
    config = {"max_batch_size": 256, "parameters": config_parameters("tokenizer")}
    model.initialize(fake.model_args(config))
    return model


def query(*texts):
    return np.array([[t.encode()] for t in texts], dtype=np.object_)


def test_request_output_len_is_taken_and_echoed(tokenizer_model, ref):
    """Regression: a request carrying REQUEST_OUTPUT_LEN was refused ("expected 1 inputs but got
    2 inputs") because the config declared QUERY only; now it is echoed."""
    req = fake.InferenceRequest(
        {"QUERY": query("Hello world"), "REQUEST_OUTPUT_LEN": np.array([[17]], np.int32)}
    )
    (r,) = tokenizer_model.execute([req])
    assert not r.has_error()
    assert r.tensors["INPUT_ID"].tolist() == [ref.encode("Hello world")]
    assert r.tensors["REQUEST_OUTPUT_LEN"].tolist() == [[17]]
    assert r.tensors["OUT_END_ID"].tolist() == [[50256]]
    assert r.tensors["OUT_PAD_ID"].tolist() == [[50256]]
    assert r.tensors["BAD_WORDS_IDS"].shape == (1, 2, 0)
    assert r.tensors["EMBEDDING_BIAS"].shape == (1, 0)
    assert r.tensors["DECODER_INPUT_ID"].tolist() == [[50256]]
    assert r.tensors["REQUEST_DECODER_INPUT_LEN"].tolist() == [[1]]
    assert "OUT_PROMPT_TABLE_EXTRA_IDS" not in r.tensors


@pytest.mark.parametrize(
    "name, value",
    [
        ("IMAGE_BYTES", np.zeros((1, 1, 2, 2, 3), np.uint8)),
        ("VIDEO_BYTES", np.ones((1, 2, 1, 1, 3), np.uint8)),
        ("IMAGE_URL", np.array([[b"https://example.com/cat.png"]], dtype=np.object_)),
    ],
)
def test_multimodal_inputs_are_declared_and_refused_alone(tokenizer_model, ref, name, value):
    """GPT-2 has no vision: a non-empty multimodal input is that request's INVALID_ARG, its
    batch-mates are answered, and empty ones (a text client of their ensemble) pass."""
    empty = {
        "IMAGE_BYTES": np.zeros((1, 0, 0, 0, 0), np.uint8),
        "IMAGE_URL": np.array([[b""]], dtype=np.object_),
        "VIDEO_BYTES": np.zeros((1, 0, 0, 0, 0), np.uint8),
    }
    bad = fake.InferenceRequest({"QUERY": query("a picture of"), name: value})
    good = fake.InferenceRequest({"QUERY": query("Hello world"), **empty})
    r_bad, r_good = tokenizer_model.execute([bad, good])
    assert r_bad.has_error() and r_bad.error.code() == fake.TritonError.INVALID_ARG
    assert f"{name} {list(value.shape)} is not taken" in r_bad.error.message()
    assert "no vision" in r_bad.error.message()
    assert not r_good.has_error()
    assert r_good.tensors["INPUT_ID"].tolist() == [ref.encode("Hello world")]


def test_all_inputs_pass_through(tokenizer_model, ref):
    stop = np.array([[b" the", b"."], [b"\n", b""]], dtype=np.object_)
    req = fake.InferenceRequest(
        {
            "QUERY": query("one", "two three"),
            "REQUEST_OUTPUT_LEN": np.array([[4], [9]], np.int32),
            "STOP_WORDS_DICT": stop,
            "BAD_WORDS_DICT": np.array([[b" bad"], [b" worse"]], dtype=np.object_),
            "END_ID": np.array([[13], [198]], np.int32),
            "PAD_ID": np.array([[0], [1]], np.int32),
            "DECODER_QUERY": query("dec", ""),
            "PROMPT_TABLE_EXTRA_ID": np.array([[5], [6]], np.uint64),
        }
    )
    (r,) = tokenizer_model.execute([req])
    assert not r.has_error(), r.error
    t = r.tensors
    assert t["OUT_END_ID"].tolist() == [[13], [198]] and t["OUT_PAD_ID"].tolist() == [[0], [1]]
    assert t["REQUEST_OUTPUT_LEN"].tolist() == [[4], [9]]
    assert t["STOP_WORDS_IDS"].tolist() == trtllm_word_list(ref, stop, 2).tolist()
    assert t["BAD_WORDS_IDS"][:, 0, 0].tolist() == [ref.encode(" bad")[0], ref.encode(" worse")[0]]
    assert t["DECODER_INPUT_ID"][0, : t["REQUEST_DECODER_INPUT_LEN"][0, 0]].tolist() == ref.encode(
        "dec"
    )
    assert t["REQUEST_DECODER_INPUT_LEN"][1, 0] == 0
    assert t["OUT_PROMPT_TABLE_EXTRA_IDS"].dtype == np.uint64
    assert t["OUT_PROMPT_TABLE_EXTRA_IDS"].shape == t["INPUT_ID"].shape
    assert not t["OUT_PROMPT_TABLE_EXTRA_IDS"].any()  # text ids are all < n_vocab


def test_only_requested_outputs_are_computed(tokenizer_model):
    req = fake.InferenceRequest({"QUERY": query("hi")}, requested=["INPUT_ID", "REQUEST_INPUT_LEN"])
    (r,) = tokenizer_model.execute([req])
    assert set(r.tensors) == {"INPUT_ID", "REQUEST_INPUT_LEN"}


def test_bad_extra_input_fails_its_request_alone(tokenizer_model, ref):
    good = fake.InferenceRequest({"QUERY": query("fine")})
    bad = fake.InferenceRequest(
        {"QUERY": query("x"), "STOP_WORDS_DICT": np.array([[b"\xff\xfe"]], dtype=np.object_)}
    )
    wrong = fake.InferenceRequest({"QUERY": query("y"), "END_ID": np.array([[1.5]], np.float32)})
    r_good, r_bad, r_wrong = tokenizer_model.execute([good, bad, wrong])
    assert r_good.tensors["INPUT_ID"].tolist() == [ref.encode("fine")]
    assert r_bad.error.code() == fake.TritonError.INVALID_ARG and "UTF-8" in r_bad.error.message()
    assert (
        r_wrong.error.code() == fake.TritonError.INVALID_ARG and "END_ID" in r_wrong.error.message()
    )


def test_row_limit_never_above_max_batch_size():
    """The README promised 4096 rows per request while Triton refuses more than max_batch_size
    (256): the model now holds the lower of the two."""
    fake.install(m)
    model = m.TritonPythonModel()
    params = dict(config_parameters("tokenizer"), max_rows_per_request={"string_value": "4096"})
    model.initialize(fake.model_args({"max_batch_size": 8, "parameters": params}))
    assert model.s.max_rows_per_request == 8
    (r,) = model.execute([fake.InferenceRequest({"QUERY": query(*["a"] * 9)})])
    assert r.error.code() == fake.TritonError.INVALID_ARG and "limit is 8" in r.error.message()


def test_tokenizer_dir_loads_hf_files(tmp_path, tok):
    """TensorRT-LLM's tokenizer_dir parameter: a folder of Hugging Face files."""
    from references import gpt2_files

    files = gpt2_files()
    vocab, merges = files["vocab.json"], files["merges.txt"]
    (tmp_path / "vocab.json").write_bytes(vocab.read_bytes())
    (tmp_path / "merges.txt").write_bytes(merges.read_bytes())
    import gputok

    s = m.parse_settings({"tokenizer_dir": {"string_value": str(tmp_path)}})
    t = m.load_tokenizer(gputok, s, "", "cpu")
    assert t.encode("hello world") == tok.encode("hello world") == [31373, 995]
    assert (
        m.parse_settings({"tokenizer_dir": {"string_value": "${tokenizer_dir}"}}).tokenizer_dir
        == ""
    )
    with pytest.raises(FileNotFoundError):
        m.load_tokenizer(
            gputok,
            m.parse_settings({"tokenizer_dir": {"string_value": str(tmp_path / "x")}}),
            "",
            "cpu",
        )
