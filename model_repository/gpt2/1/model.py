"""Triton Python-backend model `gpt2`: greedy generation with transformers' GPT2LMHeadModel.

Inputs: input_ids [batch, tokens] (right-padded), input_lengths [batch, 1], request_output_len
[batch, 1]. Outputs: output_ids [batch, 1, new_tokens] (new tokens only, padded with the end id)
and sequence_length [batch, 1]. All rows of one `execute` run as one left-padded batch with a KV
cache: N requests cost about max(request_output_len) forward steps, not N times that. Rows stop at
their request_output_len or at <|endoftext|>; an empty prompt starts from <|endoftext|>. The
optional inputs of TensorRT-LLM's engine model (end_id, stop_words_list, bad_words_list,
embedding_bias) apply per row, so this model stands in for theirs behind their preprocessing.

Streaming: the same file serves the decoupled `gpt2_stream`: a response every
`tokens_per_response` new tokens, then a final one. Each response's output_ids start with up to 3
ids sent before (stream_context_length), all the stateless detokenizer needs (gputok.stream). A
cancelled request stops at the next step; through an ensemble, Triton 2.51 passes a cancellation
only to steps scheduled after it, not to this step in flight (core PR #263).

Weights: `weights_dir` names a local Hugging Face folder (config.json + model.safetensors);
without one the model is built from `model_config` with seeded random weights (logged);
`model_config: tiny` (2 layers, 64 wide) keeps the end-to-end tests fast on 2 cores.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np

try:  # torch before gputok: `import gputok, torch` segfaulted on the H200 image (docs/serving.md)
    import torch
except ImportError:  # the unit tests of the pure functions skip without torch
    torch = None

from gputok.stream import CONTEXT_TOKENS
from gputok.triton_model import (
    RequestError,
    check_choice,
    error_response,
    settings_from_params,
)

try:  # present only inside the Triton Python-backend stub
    import triton_python_backend_utils as pb_utils
except ImportError:  # unit tests import the pure functions without a server
    pb_utils = None

__all__ = ["RequestError"]

CONFIGS = {
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768},  # GPT-2 small, 124M
    "tiny": {"n_layer": 2, "n_head": 2, "n_embd": 64},
}


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
    tokens_per_response: int = 1  # decoupled (streaming) config only: new ids per response


def parse_settings(params: dict) -> GPT2Settings:
    s = settings_from_params(GPT2Settings, params, lower=("device",))
    s = dataclasses.replace(s, device=s.device or "auto")
    check_choice("model_config", s.model_config, tuple(sorted(CONFIGS)))
    check_choice("dtype", s.dtype, ("float32", "float16", "bfloat16"))
    if s.max_output_len <= 0:
        raise ValueError("max_output_len must be positive")
    if s.tokens_per_response <= 0:
        raise ValueError("tokens_per_response must be positive")
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


def request_rows(input_ids, input_lengths, output_len, vocab, n_positions, max_output_len, bos):
    """Validate one request; return [(prompt int64 array, n_new)] per row. An empty prompt
    starts from `bos` (GPT-2's <|endoftext|>, from the model's config)."""
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
            prompt = np.array([bos], dtype=np.int64)
        if prompt.size + k > n_positions:
            raise RequestError(
                f"row {b}: {prompt.size} prompt + {k} new tokens exceed the context of {n_positions}"
            )
        rows.append((prompt, k))
    return rows


def word_lists(arr, name: str, batch: int) -> list[list[list[int]]]:
    """TensorRT-LLM's word-list layout ([batch, 2, n]: ids, then cumulative word ends padded
    with -1) -> per row, the words as id lists. None -> no words."""
    if arr is None:
        return [[] for _ in range(batch)]
    a = np.asarray(arr)
    if a.dtype.kind not in "iu" or a.ndim != 3 or a.shape[:2] != (batch, 2):
        raise RequestError(
            f"{name} must be integers shaped [batch={batch}, 2, n], got {list(a.shape)}"
        )
    out = []
    for ids, ends in a:
        words, start = [], 0
        for e in ends.tolist():
            if e < 0:
                break
            if e < start or e > ids.shape[0]:
                raise RequestError(f"{name}: word end {e} is out of order or past the ids")
            words.append(ids[start:e].tolist())
            start = e
        out.append([w for w in words if w])
    return out


@dataclass
class RowRules:
    """What TensorRT-LLM's engine takes beside the prompt, for one row: its end id, stop and
    bad words (id sequences) and an additive logit bias (None: none)."""

    end_id: int | None
    stop: list = dataclasses.field(default_factory=list)
    bad: list = dataclasses.field(default_factory=list)
    bias: np.ndarray | None = None


class Rules:
    """Per-step application of RowRules to a batch: bias and bad words before the argmax, the
    end id and stop words after it. Stop words stay in the output, as in TensorRT-LLM."""

    def __init__(self, rows: list, rules: list, device: str):
        import torch

        self.rules = rules
        self.history = [p.tolist() for p, _ in rows]
        self.end = torch.tensor(
            [-1 if r.end_id is None else r.end_id for r in rules], device=device
        )
        self.any_words = any(r.stop or r.bad or r.bias is not None for r in rules)

    def adjust(self, logits):
        if not self.any_words:
            return logits
        import torch

        for i, r in enumerate(self.rules):
            if r.bias is not None and r.bias.size:
                logits[i] += torch.from_numpy(r.bias[: logits.shape[1]]).to(logits)
            for w in r.bad:  # a bad word's last id is banned where its first ids were just made
                if len(w) == 1 or self.history[i][-(len(w) - 1) :] == w[:-1]:
                    logits[i, w[-1]] = float("-inf")
        return logits

    def after(self, nxt, live) -> np.ndarray:
        stop = np.zeros(len(self.rules), dtype=bool)
        if not self.any_words:
            return stop
        for i in np.flatnonzero(live):
            self.history[i].append(int(nxt[i]))
            stop[i] = any(self.history[i][-len(w) :] == w for w in self.rules[i].stop)
        return stop


def row_rules(n: int, eot, end_id, stop_words, bad_words, bias) -> list[RowRules]:
    """One request's RowRules from the optional inputs TensorRT-LLM's engine model takes:
    end_id [n] or [n, 1], stop_words_list / bad_words_list [n, 2, k], embedding_bias [n, vocab]
    (or [n, 0]: none)."""
    ends = [eot] * n
    if end_id is not None:
        e = np.asarray(end_id).reshape(-1)
        if e.dtype.kind not in "iu" or e.shape[0] != n:
            raise RequestError(f"end_id must be {n} integers, got {list(np.shape(end_id))}")
        ends = [int(x) for x in e]
    stops = word_lists(stop_words, "stop_words_list", n)
    bads = word_lists(bad_words, "bad_words_list", n)
    biases = [None] * n
    if bias is not None and np.asarray(bias).size:
        b = np.asarray(bias)
        if b.dtype.kind != "f" or b.ndim != 2 or b.shape[0] != n:
            raise RequestError(
                f"embedding_bias must be floats shaped [{n}, vocab], got {list(b.shape)}"
            )
        biases = list(b.astype(np.float32))
    return [RowRules(ends[i], stops[i], bads[i], biases[i]) for i in range(n)]


def greedy_generate(
    model, rows: list, eot: int | None, device: str = "cpu", on_step=None, rules=None
) -> list[np.ndarray]:
    """Greedy decoding of all rows in one left-padded batch with a KV cache.

    rows: [(prompt ids, n_new)]. Returns the generated ids per row (without a final EOT).
    Left padding keeps every row's last token in the last column, so one argmax per step
    serves all rows; position ids skip the padding so results equal unbatched generation.
    `on_step(tokens, live, done)` (streaming) sees each step's token per row, which rows took
    one and which are finished; it returns a bool array of rows to stop now (cancelled), or None.
    `rules` (one RowRules per row) overrides `eot` with each row's end id and adds its words.
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
    rules = Rules(rows, rules or [RowRules(eot)] * n, device)
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
            nxt = rules.adjust(r.logits[:, -1, :]).argmax(-1)
            done |= nxt == rules.end
            live = ~done
            out[live, t] = nxt[live]
            count += live.long()
            done |= count >= limit
            if rules.any_words:
                done |= torch.from_numpy(rules.after(nxt.cpu().numpy(), live.cpu().numpy())).to(
                    device
                )
            if on_step is not None:
                stop = on_step(nxt.cpu().numpy(), live.cpu().numpy(), done.cpu().numpy())
                if stop is not None and stop.any():
                    done |= torch.from_numpy(stop).to(device)
            if bool(done.all()):
                break
            ids = nxt[:, None]
            pos = pos[:, -1:] + 1
            mask = torch.cat([mask, torch.ones((n, 1), dtype=mask.dtype, device=device)], dim=1)
    out = out.cpu().numpy()
    count = count.cpu().numpy()
    return [out[i, : count[i]] for i in range(n)]


def pack_outputs(gen: list[np.ndarray], pad: int) -> tuple[np.ndarray, np.ndarray]:
    """Generated rows -> output_ids int32 [batch, 1, longest] and sequence_length int32 [batch, 1]."""
    width = max((g.size for g in gen), default=0)
    out = np.full((len(gen), 1, width), pad, dtype=np.int32)
    for i, g in enumerate(gen):
        out[i, 0, : g.size] = g
    return out, np.array([[g.size] for g in gen], dtype=np.int32).reshape(len(gen), 1)


class RowStream:
    """One streaming request's responses: ids go out every `k` new tokens, each response led by
    up to CONTEXT_TOKENS ids sent before, so the detokenizer needs no state of its own."""

    def __init__(self, sender, k: int, pad: int):
        self.sender, self.k, self.pad = sender, k, pad
        self.context: list[int] = []
        self.buf: list[int] = []
        self.count = 0  # new tokens pushed
        self.closed = False

    def push(self, token: int) -> None:
        self.buf.append(int(token))
        self.count += 1
        if len(self.buf) >= self.k:
            self.flush(final=False)

    def flush(self, final: bool) -> None:
        if self.closed:
            return
        ids = self.context + self.buf
        tensors = [
            pb_utils.Tensor("output_ids", np.array(ids, dtype=np.int32).reshape(1, 1, -1)),
            pb_utils.Tensor("sequence_length", np.array([[len(ids)]], dtype=np.int32)),
            pb_utils.Tensor(
                "stream_context_length", np.array([[len(self.context)]], dtype=np.int32)
            ),
            pb_utils.Tensor("stream_final", np.array([[final]], dtype=np.bool_)),
        ]
        flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if final else 0
        self.sender.send(pb_utils.InferenceResponse(output_tensors=tensors), flags=flags)
        self.context, self.buf = ids[-CONTEXT_TOKENS:], []
        self.closed = final

    def cancel(self) -> None:
        """The client went away. Triton's Python backend sends the final flag itself once
        is_cancelled() has returned True (since 23.10), so nothing more is sent."""
        self.closed = True


class TritonPythonModel:
    def initialize(self, args):
        self.logger = pb_utils.Logger
        config = json.loads(args["model_config"])
        self.s = parse_settings(config.get("parameters", {}))
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
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
        # <|endoftext|> from the model's own config (GPT-2: 50256): the stop id, the start of an
        # empty prompt and the padding of output_ids
        self.end_id = int(cfg.eos_token_id)
        self.eot = self.end_id if self.s.stop_at_eot else None
        log = self.logger.log_warn if "RANDOM" in note else self.logger.log_info
        log(
            f"gpt2: numpy {np.__version__}, torch {torch.__version__}, device {self.device}, "
            f"decoupled {self.decoupled}, {note}"
        )

    def _array(self, tensor):
        if tensor is None:
            return None
        if tensor.is_cpu():
            return tensor.as_numpy()
        # a GPU tensor from the tokenizer (DLPack); prompts are small, validate on host
        return torch.utils.dlpack.from_dlpack(tensor.to_dlpack()).cpu().numpy()

    def _parse(self, request):
        """(rows, RowRules per row) of one request; raises on a bad input."""

        def get(name):
            return self._array(pb_utils.get_input_tensor_by_name(request, name))

        rows = request_rows(
            get("input_ids"),
            get("input_lengths"),
            get("request_output_len"),
            self.vocab,
            self.n_positions,
            self.s.max_output_len,
            self.end_id,
        )
        return rows, row_rules(
            len(rows),
            self.eot,
            get("end_id"),
            get("stop_words_list"),
            get("bad_words_list"),
            get("embedding_bias"),
        )

    def execute(self, requests):
        parsed = []
        for request in requests:
            try:
                rows, rules = self._parse(request)
                if self.decoupled and len(rows) != 1:
                    raise RequestError("streaming takes one prompt per request")
                parsed.append((rows, rules))
            except Exception as e:  # noqa: BLE001 - becomes this request's error
                parsed.append(e)
        if self.decoupled:
            self._stream(requests, parsed)
            return None
        return self._respond(parsed)

    def _generate(self, parsed, on_step=None):
        ok = [p for p in parsed if not isinstance(p, Exception)]
        rows = [r for p in ok for r in p[0]]
        rules = [r for p in ok for r in p[1]]
        try:
            return greedy_generate(self.model, rows, self.eot, self.device, on_step, rules)
        except Exception as e:  # noqa: BLE001 - a model failure fails this execute's requests, loudly
            self.logger.log_error(f"gpt2: generation failed: {e}")
            return RuntimeError(f"generation failed: {e}")

    def _respond(self, parsed):
        gen = self._generate(parsed)
        responses, start = [], 0
        for p in parsed:
            if isinstance(p, Exception) or isinstance(gen, Exception):
                responses.append(error_response(pb_utils, p if isinstance(p, Exception) else gen))
                continue
            ids, lens = pack_outputs(gen[start : start + len(p[0])], self.end_id)
            start += len(p[0])
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("output_ids", ids),
                        pb_utils.Tensor("sequence_length", lens),
                    ]
                )
            )
        return responses

    def _stream(self, requests, parsed):
        """Decoupled: one RowStream per valid request; tokens leave as they are made."""
        streams, live_requests = [], []
        for request, p in zip(requests, parsed, strict=True):
            sender = request.get_response_sender()
            if isinstance(p, Exception):
                sender.send(
                    error_response(pb_utils, p), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
                continue
            streams.append(RowStream(sender, self.s.tokens_per_response, self.end_id))
            live_requests.append(request)

        def on_step(tokens, live, done):
            stop = np.zeros(len(streams), dtype=bool)
            for i, (st, req) in enumerate(zip(streams, live_requests, strict=True)):
                if st.closed:
                    continue
                if req.is_cancelled():
                    st.cancel()
                    stop[i] = True
                    self.logger.log_info(f"gpt2: request cancelled after {st.count} tokens")
                    continue
                if live[i]:
                    st.push(tokens[i])
                if done[i]:  # finished: its final response goes now, not at the batch's end
                    st.flush(final=True)
            return stop

        gen = self._generate([p for p in parsed if not isinstance(p, Exception)], on_step)
        for st in streams:
            if isinstance(gen, Exception) and not st.closed:
                st.sender.send(
                    error_response(pb_utils, gen),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                st.closed = True
            st.flush(final=True)

    def finalize(self):
        self.model = None
