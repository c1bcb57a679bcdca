"""Baseline `preprocessing_tiktoken`: TensorRT-LLM's `preprocessing` model with tiktoken.

Same shape as preprocessing_hf (and as tensorrtllm_backend's preprocessing model.py): for each
request, a Python loop of one `encode` per row, then np.pad to the longest row. tiktoken's
`encode` (not `encode_ordinary`) keeps the semantics of gputok's `tokenizer` with its default
`disallowed_special: all`: text containing `<|endoftext|>` is an error (INVALID_ARG).

The GPT-2 ranks are gputok's bundled r50k_base file (sha256 306cd27f…, byte-identical to
tiktoken's), loaded offline; `ranks_file` in config.pbtxt names another copy.
"""

from __future__ import annotations

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

EOT = 50256
R50K_PATTERN = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)


def _find_up(start: str, rel: str) -> str:
    d = os.path.abspath(start)
    while True:
        cand = os.path.join(d, rel)
        if os.path.exists(cand):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            raise FileNotFoundError(f"{rel} not found above {start}")
        d = parent


class TritonPythonModel:
    def initialize(self, args):
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        model_dir = args["model_repository"]
        ranks = params.get("ranks_file") or _find_up(
            model_dir, "backend_src/gputok/data/gpt2.tiktoken"
        )
        if not os.path.isabs(ranks):
            ranks = os.path.join(model_dir, ranks)
        self.enc = tiktoken.Encoding(
            name="r50k_base",
            pat_str=R50K_PATTERN,
            mergeable_ranks=load_tiktoken_bpe(ranks),
            special_tokens={"<|endoftext|>": EOT},
            explicit_n_vocab=50257,
        )
        if self.enc.encode("hello world") != [31373, 995]:
            raise RuntimeError(f"tiktoken GPT-2 from {ranks} is misbuilt")
        self.pad_id = int(params.get("pad_id", EOT))
        pb_utils.Logger.log_info(
            f"preprocessing_tiktoken: tiktoken {tiktoken.__version__}, {ranks}"
        )

    def _create_request(self, query):
        start_ids = [np.array(self.enc.encode(s[0].decode())).astype(np.int32) for s in query]
        start_lengths = np.array([[len(ids)] for ids in start_ids]).astype(np.int32)
        max_len = max(seq.shape[0] for seq in start_ids)
        start_ids = np.stack(
            [
                np.pad(
                    seq, (0, max_len - seq.shape[0]), "constant", constant_values=(0, self.pad_id)
                )
                for seq in start_ids
            ]
        )
        return start_ids, start_lengths

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                query = pb_utils.get_input_tensor_by_name(request, "QUERY").as_numpy()
                input_id, request_input_len = self._create_request(query)
                responses.append(
                    pb_utils.InferenceResponse(
                        output_tensors=[
                            pb_utils.Tensor("INPUT_ID", input_id),
                            pb_utils.Tensor("REQUEST_INPUT_LEN", request_input_len),
                        ]
                    )
                )
            except Exception as e:  # noqa: BLE001 - this request's error only
                responses.append(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError(str(e), pb_utils.TritonError.INVALID_ARG)
                    )
                )
        return responses

    def finalize(self):
        self.enc = None
