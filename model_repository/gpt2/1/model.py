"""Triton Python-backend model `gpt2`: greedy generation with transformers' GPT2LMHeadModel.

Inputs (with the batch dimension): input_ids [batch, tokens] (right-padded; ragged across
requests), input_lengths [batch, 1], request_output_len [batch, 1].
Outputs: output_ids [batch, 1, new_tokens] (generated tokens only, padded with 50256) and
sequence_length [batch, 1].

All rows of all requests in one `execute` run as one left-padded batch with a KV cache, so a
dynamic batch of N requests costs about max(request_output_len) forward steps, not N times that.
Rows stop at their own request_output_len or at <|endoftext|> (stop_at_eot). An empty prompt
starts from <|endoftext|>, as GPT-2's unconditional samples do.

Weights: `weights_dir` names a local Hugging Face folder (config.json + model.safetensors);
without one the model is built from `model_config` with seeded random weights and says so in
the log. `model_config: tiny` (2 layers, 64 wide) keeps the end-to-end tests fast on 2 cores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

try:  # present only inside the Triton Python-backend stub
    import triton_python_backend_utils as pb_utils
except ImportError:  # unit tests import the pure functions without a server
    pb_utils = None

EOT = 50256

CONFIGS = {
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768},  # GPT-2 small, 124M
    "tiny": {"n_layer": 2, "n_head": 2, "n_embd": 64},
}


class RequestError(ValueError):
    """The request at fault gets INVALID_ARG with this message."""


@dataclass(frozen=True)
class GPT2Settings:
    model_config: str = "gpt2"
    weights_dir: str = ""
    seed: int = 0
    device: str = "auto"  # auto: cuda on a KIND_GPU instance, cpu otherwise
    dtype: str = "float32"
    max_output_len: int = 256
    stop_at_eot: bool = True
    torch_threads: int = 0  # 0 = torch's default


def _param(params: dict, key: str, default: str) -> str:
    v = params.get(key)
    if v is None:
        return default
    if isinstance(v, dict):
        v = v.get("string_value", default)
    return str(v)


def parse_settings(params: dict) -> GPT2Settings:
    d = GPT2Settings()
    s = GPT2Settings(
        model_config=_param(params, "model_config", d.model_config).strip(),
        weights_dir=_param(params, "weights_dir", d.weights_dir).strip(),
        seed=int(_param(params, "seed", str(d.seed))),
        device=_param(params, "device", d.device).strip().lower() or d.device,
        dtype=_param(params, "dtype", d.dtype).strip(),
        max_output_len=int(_param(params, "max_output_len", str(d.max_output_len))),
        stop_at_eot=_param(params, "stop_at_eot", "true").strip().lower() in ("1", "true", "yes"),
        torch_threads=int(_param(params, "torch_threads", str(d.torch_threads))),
    )
    if s.model_config not in CONFIGS:
        raise ValueError(f"model_config must be one of {sorted(CONFIGS)}, not {s.model_config!r}")
    if s.dtype not in ("float32", "float16", "bfloat16"):
        raise ValueError(f"dtype must be float32, float16 or bfloat16, not {s.dtype!r}")
    if s.max_output_len <= 0:
        raise ValueError("max_output_len must be positive")
    return s


def build_model(s: GPT2Settings, device: str):
    """(model, note): local weights when weights_dir is set, else seeded random weights."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    dtype = getattr(torch, s.dtype)
    if s.weights_dir:
        # no dtype keyword: transformers 4.x (the Docker image's Python 3.10) calls it torch_dtype
        model = GPT2LMHeadModel.from_pretrained(s.weights_dir, local_files_only=True).to(dtype)
        note = f"weights from {s.weights_dir}"
    else:
        torch.manual_seed(s.seed)
        model = GPT2LMHeadModel(
            GPT2Config(vocab_size=50257, n_positions=1024, **CONFIGS[s.model_config])
        )
        model = model.to(dtype)
        note = f"RANDOM weights (config {s.model_config}, seed {s.seed}); set weights_dir for real GPT-2"
    return model.to(device).eval(), note


def request_rows(
    input_ids, input_lengths, output_len, vocab: int, n_positions: int, max_output_len: int
):
    """Validate one request; return [(prompt int64 array, n_new)] per row."""
    for name, v in (
        ("input_ids", input_ids),
        ("input_lengths", input_lengths),
        ("request_output_len", output_len),
    ):
        if v is None:
            raise RequestError(f"missing input {name}")
    ids = np.asarray(input_ids)
    lens = np.asarray(input_lengths).reshape(-1)
    outs = np.asarray(output_len).reshape(-1)
    if ids.dtype.kind not in "iu" or lens.dtype.kind not in "iu" or outs.dtype.kind not in "iu":
        raise RequestError("input_ids, input_lengths and request_output_len must be integers")
    if ids.ndim == 1:
        ids = ids[None, :]
    if ids.ndim != 2 or lens.shape[0] != ids.shape[0] or outs.shape[0] != ids.shape[0]:
        raise RequestError(
            f"input_ids {list(np.shape(input_ids))}, input_lengths {list(np.shape(input_lengths))} and "
            f"request_output_len {list(np.shape(output_len))} must agree on the batch size"
        )
    rows = []
    for b in range(ids.shape[0]):
        n, k = int(lens[b]), int(outs[b])
        if n < 0 or n > ids.shape[1]:
            raise RequestError(f"input_lengths[{b}] = {n} is outside [0, {ids.shape[1]}]")
        if k <= 0 or k > max_output_len:
            raise RequestError(f"request_output_len[{b}] = {k} must be in [1, {max_output_len}]")
        prompt = ids[b, :n].astype(np.int64)
        if prompt.size and (prompt.min() < 0 or prompt.max() >= vocab):
            raise RequestError(f"input_ids row {b} has ids outside [0, {vocab})")
        if prompt.size == 0:
            prompt = np.array([EOT], dtype=np.int64)
        if prompt.size + k > n_positions:
            raise RequestError(
                f"row {b}: {prompt.size} prompt + {k} new tokens exceed the context of {n_positions}"
            )
        rows.append((prompt, k))
    return rows


def greedy_generate(model, rows: list, eot: int | None, device: str = "cpu") -> list[np.ndarray]:
    """Greedy decoding of all rows in one left-padded batch with a KV cache.

    rows: [(prompt ids, n_new)]. Returns the generated ids per row (without a final EOT).
    Left padding keeps every row's last token in the last column, so one argmax per step
    serves all rows; position ids skip the padding so results equal unbatched generation.
    """
    import torch

    if not rows:
        return []
    width = max(p.size for p, _ in rows)
    n = len(rows)
    ids = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, (p, _) in enumerate(rows):
        ids[i, width - p.size :] = torch.from_numpy(p)
        mask[i, width - p.size :] = 1
    ids, mask = ids.to(device), mask.to(device)
    limit = torch.tensor([k for _, k in rows], device=device)
    steps = int(limit.max())
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    out = torch.full((n, steps), eot if eot is not None else 0, dtype=torch.long, device=device)
    count = torch.zeros(n, dtype=torch.long, device=device)
    done = torch.zeros(n, dtype=torch.bool, device=device)
    past = None
    with torch.inference_mode():
        for t in range(steps):
            r = model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=pos,
                past_key_values=past,
                use_cache=True,
            )
            past = r.past_key_values
            nxt = r.logits[:, -1, :].argmax(-1)
            if eot is not None:
                done |= nxt == eot
            live = ~done
            out[live, t] = nxt[live]
            count += live.long()
            done |= count >= limit
            if bool(done.all()):
                break
            ids = nxt[:, None]
            pos = pos[:, -1:] + 1
            mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], dim=1)
    out = out.cpu().numpy()
    count = count.cpu().numpy()
    return [out[i, : count[i]] for i in range(n)]


def pack_outputs(gen: list[np.ndarray], pad: int = EOT) -> tuple[np.ndarray, np.ndarray]:
    """Generated rows -> output_ids int32 [batch, 1, longest] and sequence_length int32 [batch, 1]."""
    width = max((g.size for g in gen), default=0)
    out = np.full((len(gen), 1, width), pad, dtype=np.int32)
    for i, g in enumerate(gen):
        out[i, 0, : g.size] = g
    return out, np.array([[g.size] for g in gen], dtype=np.int32).reshape(len(gen), 1)


class TritonPythonModel:
    def initialize(self, args):
        import torch

        self.logger = pb_utils.Logger
        config = json.loads(args["model_config"])
        self.s = parse_settings(config.get("parameters", {}))
        kind = args.get("model_instance_kind", "CPU").upper()
        if self.s.device != "auto":
            self.device = self.s.device
        elif kind == "GPU" and torch.cuda.is_available():
            self.device = f"cuda:{args.get('model_instance_device_id', '0')}"
        else:
            self.device = "cpu"
        if self.s.torch_threads > 0:
            torch.set_num_threads(self.s.torch_threads)
        self.model, note = build_model(self.s, self.device)
        cfg = self.model.config
        self.vocab, self.n_positions = int(cfg.vocab_size), int(cfg.n_positions)
        self.eot = EOT if self.s.stop_at_eot else None
        log = self.logger.log_warn if "RANDOM" in note else self.logger.log_info
        log(
            f"gpt2: numpy {np.__version__}, torch {torch.__version__}, device {self.device}, {note}"
        )

    def _array(self, tensor):
        if tensor is None:
            return None
        if tensor.is_cpu():
            return tensor.as_numpy()
        import torch  # a GPU tensor from the tokenizer (DLPack); prompts are small, validate on host

        return torch.utils.dlpack.from_dlpack(tensor.to_dlpack()).cpu().numpy()

    def execute(self, requests):
        parsed = []
        for request in requests:
            try:
                parsed.append(
                    request_rows(
                        self._array(pb_utils.get_input_tensor_by_name(request, "input_ids")),
                        self._array(pb_utils.get_input_tensor_by_name(request, "input_lengths")),
                        self._array(
                            pb_utils.get_input_tensor_by_name(request, "request_output_len")
                        ),
                        self.vocab,
                        self.n_positions,
                        self.s.max_output_len,
                    )
                )
            except Exception as e:  # noqa: BLE001
                parsed.append(e)
        rows = [r for p in parsed if not isinstance(p, Exception) for r in p]
        try:
            gen = greedy_generate(self.model, rows, self.eot, self.device)
        except Exception as e:  # noqa: BLE001 - a model failure fails this execute's requests, loudly
            self.logger.log_error(f"gpt2: generation failed: {e}")
            gen = None
            err = e
        responses = []
        start = 0
        for p in parsed:
            if isinstance(p, Exception):
                code = (
                    pb_utils.TritonError.INVALID_ARG
                    if isinstance(p, ValueError)
                    else pb_utils.TritonError.INTERNAL
                )
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(p), code))
                )
                continue
            if gen is None:
                responses.append(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError(
                            f"generation failed: {err}", pb_utils.TritonError.INTERNAL
                        )
                    )
                )
                continue
            ids, lens = pack_outputs(gen[start : start + len(p)])
            start += len(p)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("output_ids", ids),
                        pb_utils.Tensor("sequence_length", lens),
                    ]
                )
            )
        return responses

    def finalize(self):
        self.model = None
