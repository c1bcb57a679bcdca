"""Test-only models for the e2e server: TensorRT-LLM's ensemble with gputok's models in it, and
a streaming ensemble that sends several tokens per step.

TensorRT-LLM's `ensemble` (NVIDIA/TensorRT-LLM, triton_backend/all_models/inflight_batcher_llm/
ensemble/config.pbtxt) wires `preprocessing` -> `tensorrt_llm` -> `postprocessing`. Here it is
written out in the same form (its inputs, and every input_map / output_map of its three steps)
from the interface names alone, with our `tokenizer` copied in as `preprocessing`, our
`detokenizer` as `postprocessing` and our `gpt2` (tiny) as `tensorrt_llm`. The stand-in engine
declares every input their ensemble maps to it (optional; it reads those it implements) but
only the outputs gpt2 makes (output_ids, sequence_length), so the engine's own extra outputs
(log probs, logits, KV-cache and timing metrics) are left out of this ensemble's outputs: they
are the engine's contract, not the tokenizer's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

# ensemble input: (type, dims, step model, step input) -- their ensemble's inputs and maps
ENSEMBLE_INPUTS = {
    "text_input": ("TYPE_STRING", [1], "preprocessing", "QUERY"),
    "decoder_text_input": ("TYPE_STRING", [1], "preprocessing", "DECODER_QUERY"),
    "max_tokens": ("TYPE_INT32", [1], "preprocessing", "REQUEST_OUTPUT_LEN"),
    "bad_words": ("TYPE_STRING", [-1], "preprocessing", "BAD_WORDS_DICT"),
    "stop_words": ("TYPE_STRING", [-1], "preprocessing", "STOP_WORDS_DICT"),
    "embedding_bias_words": ("TYPE_STRING", [-1], "preprocessing", "EMBEDDING_BIAS_WORDS"),
    "embedding_bias_weights": ("TYPE_FP32", [-1], "preprocessing", "EMBEDDING_BIAS_WEIGHTS"),
    "end_id": ("TYPE_INT32", [1], "preprocessing", "END_ID"),
    "pad_id": ("TYPE_INT32", [1], "preprocessing", "PAD_ID"),
    "prompt_table_extra_id": ("TYPE_UINT64", [1], "preprocessing", "PROMPT_TABLE_EXTRA_ID"),
    "exclude_input_in_output": ("TYPE_BOOL", [1], "tensorrt_llm", "exclude_input_in_output"),
    "num_return_sequences": ("TYPE_INT32", [1], "tensorrt_llm", "num_return_sequences"),
    "top_k": ("TYPE_INT32", [1], "tensorrt_llm", "runtime_top_k"),
    "top_p": ("TYPE_FP32", [1], "tensorrt_llm", "runtime_top_p"),
    "temperature": ("TYPE_FP32", [1], "tensorrt_llm", "temperature"),
    "length_penalty": ("TYPE_FP32", [1], "tensorrt_llm", "len_penalty"),
    "repetition_penalty": ("TYPE_FP32", [1], "tensorrt_llm", "repetition_penalty"),
    "min_tokens": ("TYPE_INT32", [1], "tensorrt_llm", "min_tokens"),
    "presence_penalty": ("TYPE_FP32", [1], "tensorrt_llm", "presence_penalty"),
    "frequency_penalty": ("TYPE_FP32", [1], "tensorrt_llm", "frequency_penalty"),
    "seed": ("TYPE_UINT64", [1], "tensorrt_llm", "seed"),
    "return_log_probs": ("TYPE_BOOL", [1], "tensorrt_llm", "return_log_probs"),
    "return_context_logits": ("TYPE_BOOL", [1], "tensorrt_llm", "return_context_logits"),
    "return_generation_logits": ("TYPE_BOOL", [1], "tensorrt_llm", "return_generation_logits"),
    "return_perf_metrics": ("TYPE_BOOL", [1], "tensorrt_llm", "return_perf_metrics"),
    "return_num_input_tokens": ("TYPE_BOOL", [1], "tensorrt_llm", "return_num_input_tokens"),
    "return_num_output_tokens": ("TYPE_BOOL", [1], "tensorrt_llm", "return_num_output_tokens"),
    "beam_width": ("TYPE_INT32", [1], "tensorrt_llm", "beam_width"),
    "stream": ("TYPE_BOOL", [1], "tensorrt_llm", "streaming"),
    "prompt_embedding_table": ("TYPE_FP16", [-1, -1], "tensorrt_llm", "prompt_embedding_table"),
    "prompt_vocab_size": ("TYPE_INT32", [1], "tensorrt_llm", "prompt_vocab_size"),
    "lora_task_id": ("TYPE_UINT64", [1], "tensorrt_llm", "lora_task_id"),
    "lora_weights": ("TYPE_FP16", [-1, -1], "tensorrt_llm", "lora_weights"),
    "lora_config": ("TYPE_INT32", [-1, 3], "tensorrt_llm", "lora_config"),
    "guided_decoding_guide_type": (
        "TYPE_STRING",
        [1],
        "tensorrt_llm",
        "guided_decoding_guide_type",
    ),
    "guided_decoding_guide": ("TYPE_STRING", [1], "tensorrt_llm", "guided_decoding_guide"),
}
# preprocessing output -> (internal tensor, tensorrt_llm input it feeds; None: none)
PRE_TO_ENGINE = {
    "INPUT_ID": ("_INPUT_ID", "input_ids"),
    "REQUEST_INPUT_LEN": ("_REQUEST_INPUT_LEN", "input_lengths"),
    "DECODER_INPUT_ID": ("_DECODER_INPUT_ID", "decoder_input_ids"),
    "REQUEST_DECODER_INPUT_LEN": ("_REQUEST_DECODER_INPUT_LEN", "decoder_input_lengths"),
    "REQUEST_OUTPUT_LEN": ("_REQUEST_OUTPUT_LEN", "request_output_len"),
    "STOP_WORDS_IDS": ("_STOP_WORDS_IDS", "stop_words_list"),
    "BAD_WORDS_IDS": ("_BAD_WORDS_IDS", "bad_words_list"),
    "EMBEDDING_BIAS": ("_EMBEDDING_BIAS", "embedding_bias"),
    "OUT_END_ID": ("_PREPROCESSOR_END_ID", "end_id"),
    "OUT_PAD_ID": ("_PREPROCESSOR_PAD_ID", "pad_id"),
    "OUT_PROMPT_TABLE_EXTRA_IDS": ("_OUT_PROMPT_TABLE_EXTRA_IDS", "prompt_table_extra_ids"),
}
# engine inputs the stand-in declares besides gpt2's own: (type, dims) as their tensorrt_llm has
ENGINE_EXTRA_INPUTS = {
    "decoder_input_ids": ("TYPE_INT32", [-1]),
    "decoder_input_lengths": ("TYPE_INT32", [1]),
    "prompt_table_extra_ids": ("TYPE_UINT64", [-1]),
}


def _rename(config: Path, old: str, new: str) -> None:
    text, n = re.subn(rf'^name: "{old}"', f'name: "{new}"', config.read_text(), flags=re.M)
    if n != 1:
        raise ValueError(f"{config}: no name line")
    config.write_text(text)


def _copy(repo: Path, base: str, name: str) -> Path:
    shutil.copytree(repo / base, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    _rename(repo / name / "config.pbtxt", base, name)
    return repo / name / "config.pbtxt"


def _engine_config(path: Path) -> None:
    """gpt2's config as `tensorrt_llm`, declaring the rest of what their ensemble maps to it."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    cfg = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
    have = {i.name for i in cfg.input}
    extra = dict(ENGINE_EXTRA_INPUTS)
    for typ, dims, step, key in ENSEMBLE_INPUTS.values():
        if step == "tensorrt_llm":
            extra[key] = (typ, dims)
    for name, (typ, dims) in extra.items():
        if name not in have:
            i = cfg.input.add(
                name=name, data_type=model_config_pb2.DataType.Value(typ), optional=True
            )
            i.dims.extend(dims)
            i.allow_ragged_batch = dims[0] == -1
    path.write_text(text_format.MessageToString(cfg))


def _ensemble_config(name: str, max_batch: int) -> str:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as pb

    cfg = pb.ModelConfig(name=name, platform="ensemble", max_batch_size=max_batch)
    for iname, (typ, dims, _, _) in ENSEMBLE_INPUTS.items():
        cfg.input.add(
            name=iname,
            data_type=pb.DataType.Value(typ),
            dims=dims,
            optional=iname not in ("text_input", "max_tokens"),
        )
    cfg.output.add(name="text_output", data_type=pb.DataType.Value("TYPE_STRING"), dims=[-1])
    pre, eng, post = (
        cfg.ensemble_scheduling.step.add(model_name=m, model_version=-1)
        for m in ("preprocessing", "tensorrt_llm", "postprocessing")
    )
    for iname, (_, _, step, key) in ENSEMBLE_INPUTS.items():
        (pre if step == "preprocessing" else eng).input_map[key] = iname
    for out, (tensor, engine_input) in PRE_TO_ENGINE.items():
        pre.output_map[out] = tensor
        eng.input_map[engine_input] = tensor
    eng.output_map["output_ids"] = "_TOKENS_BATCH"
    eng.output_map["sequence_length"] = "_SEQUENCE_LENGTH"
    post.input_map["TOKENS_BATCH"] = "_TOKENS_BATCH"
    post.input_map["SEQUENCE_LENGTH"] = "_SEQUENCE_LENGTH"
    post.output_map["OUTPUT"] = "text_output"
    return text_format.MessageToString(cfg)


def add_test_models(repo: Path) -> None:
    """Add the TensorRT-LLM-form ensemble and a 3-tokens-per-step streaming ensemble to `repo`
    (whose gpt2 and gpt2_stream are already tiny)."""
    from gputok.serve.triton import set_config_parameter

    _copy(repo, "tokenizer", "preprocessing")
    _copy(repo, "detokenizer", "postprocessing")
    _engine_config(_copy(repo, "gpt2", "tensorrt_llm"))
    (repo / "trtllm_ensemble" / "1").mkdir(parents=True)
    (repo / "trtllm_ensemble" / "config.pbtxt").write_text(_ensemble_config("trtllm_ensemble", 64))
    cfg = _copy(repo, "gpt2_stream", "gpt2_stream3")
    set_config_parameter(cfg, "tokens_per_response", "3")
    ens = _copy(repo, "ensemble_stream", "ensemble_stream3")
    ens.write_text(
        ens.read_text().replace('model_name: "gpt2_stream"', 'model_name: "gpt2_stream3"')
    )
