"""Triton Python-backend model `tokenizer`: TensorRT-LLM's `preprocessing` contract, text part.

QUERY (strings) -> INPUT_ID (padded int32), REQUEST_INPUT_LEN, and the rest of the inputs and
outputs of TensorRT-LLM's `preprocessing` model (triton_backend/all_models/inflight_batcher_llm/
preprocessing in NVIDIA/TensorRT-LLM), with their semantics (trtllm.py): REQUEST_OUTPUT_LEN is
echoed, END_ID/PAD_ID pass through (default: the vocabulary's <|endoftext|>), stop and bad words
become ids in their [batch, 2, n] layout, embedding-bias words become a [batch, n_vocab] bias,
DECODER_QUERY is tokenized like QUERY. The multimodal inputs (IMAGE_BYTES, IMAGE_URL,
VIDEO_BYTES) are declared as theirs are, optional, and a request that carries a non-empty one
gets INVALID_ARG of its own (GPT-2 has no vision).

Design (why it is shaped like this):
- All rows of all requests in one `execute` go to gputok in a single `encode_batch_flat` call:
  the Python tokenizer model is the known bottleneck of Triton LLM pipelines (server #5317,
  #5865, #7650), and one native call amortises the Python overhead and lets gputok spread the
  rows over all cores (or the GPU). One row in all (every request served isolated, gputok-serve's
  default) takes gputok's one-text `encode_to_numpy` instead.
- An isolated request pays Triton per output tensor, so a request that carries QUERY alone gets
  its seven other TensorRT-LLM outputs from Tensors built once per batch size
  (bench/results/2026-11-27-serve-cpu.md).
- Cheap checks (shape, row count, byte limit) run per request before the batch call. If the
  batch call still raises (invalid UTF-8 under errors=strict, a disallowed special token), the
  requests are re-encoded one by one so that only the request at fault gets the error and its
  batch-mates succeed. The happy path pays for one call; a bad batch pays for two.
- `model.py` is a thin class over the pure functions above it, unit-tested without a server
  (tests/serving/test_model_tokenizer.py). No assert/print: errors become TritonError, logs go to
  pb_utils.Logger.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

import numpy as np

from gputok import trtllm
from gputok.triton_model import (
    RequestError,
    TensorsByBatch,
    check_choice,
    error_code,
    error_response,
    input_arrays,
    max_batch_size,
    settings_from_params,
)

try:  # present only inside the Triton Python-backend stub
    import triton_python_backend_utils as pb_utils
except ImportError:  # unit tests import the pure functions without a server
    pb_utils = None

__all__ = ["RequestError", "error_code"]


@dataclass(frozen=True)
class TokenizerSettings:
    vocab_file: str = ""  # "" = gputok's bundled GPT-2 (r50k_base) vocabulary
    algorithm: str = "auto"
    device: str = "auto"  # auto: cuda on a KIND_GPU instance, cpu otherwise
    max_bytes_per_request: int = 4 << 20
    max_rows_per_request: int = 256  # the lower of this and max_batch_size holds
    utf8_errors: str = "strict"  # "strict": invalid UTF-8 is INVALID_ARG; "replace": U+FFFD
    allowed_special: str = ""  # "" none | "all" | comma-separated token strings
    disallowed_special: str = (
        "all"  # "all": special text in input is INVALID_ARG | "" ordinary text
    )
    pad_id: int = -1  # INPUT_ID's right padding; -1: the vocabulary's <|endoftext|>
    num_threads: int = 0  # 0 = all cores
    # "true"/"auto" (auto: on a GPU instance) hand INPUT_ID to Triton as a GPU tensor (DLPack).
    # Default "false": the ids are in host memory already, and a GPU output costs a copy up,
    # CUDA IPC from the stub, and a copy back down for every client response.
    outputs_on_gpu: str = "false"
    # On a GPU instance, an execute() with fewer bytes of text than this runs on the CPU path
    # (same ids): small batches are faster there than through a launch and a sync. None (unset):
    # gputok's measured rule, gputok.default_crossover(); 0: always the GPU.
    cpu_below_bytes: int | None = None
    # cap on gputok's device memory pool (bytes; 0 = none; cuda only). Over it a call raises
    # DeviceMemoryError (a MemoryError -> INTERNAL); docs/reliability.md
    pool_limit_bytes: int = 0
    # TensorRT-LLM's parameter name: a Hugging Face tokenizer folder (tokenizer.json, or
    # vocab.json + merges.txt). Used when vocab_file is empty; "${tokenizer_dir}" (their
    # unfilled template) counts as empty.
    tokenizer_dir: str = ""


def parse_settings(params: dict) -> TokenizerSettings:
    """Settings from config.pbtxt `parameters` ({key: {"string_value": ...}}); raises ValueError."""
    s = settings_from_params(
        TokenizerSettings, params, lower=("device", "utf8_errors", "outputs_on_gpu")
    )
    s = dataclasses.replace(s, algorithm=s.algorithm or "auto", device=s.device or "auto")
    check_choice("utf8_errors", s.utf8_errors, ("strict", "replace"))
    check_choice("device", s.device, ("auto", "cpu", "cuda"))
    check_choice("outputs_on_gpu", s.outputs_on_gpu, ("auto", "true", "false"))
    if s.max_bytes_per_request <= 0 or s.max_rows_per_request <= 0:
        raise ValueError("max_bytes_per_request and max_rows_per_request must be positive")
    if s.pool_limit_bytes < 0:
        raise ValueError("pool_limit_bytes must be >= 0 (0 = no cap)")
    if s.cpu_below_bytes is not None and s.cpu_below_bytes < 0:
        raise ValueError("cpu_below_bytes must be >= 0 (0 = always the GPU on a GPU instance)")
    if s.tokenizer_dir.startswith("${"):
        s = dataclasses.replace(s, tokenizer_dir="")
    return s


def special_kwargs(s: TokenizerSettings) -> dict:
    """tiktoken-style allowed_special / disallowed_special keywords from the settings."""

    def tokens(v: str):
        if v == "all":
            return "all"
        return frozenset(t.strip() for t in v.split(",") if t.strip())

    return {
        "allowed_special": tokens(s.allowed_special),
        "disallowed_special": tokens(s.disallowed_special),
    }


def resolve_device(setting: str, instance_kind: str) -> str:
    if setting != "auto":
        return setting
    return "cuda" if instance_kind.upper() == "GPU" else "cpu"


def load_tokenizer(gputok, s: TokenizerSettings, model_dir: str, device: str, device_id: int = 0):
    """Build the gputok tokenizer. Paths come only from config.pbtxt, never from a request."""
    kw = {"device": device}
    if device == "cuda":
        kw["device_id"] = device_id
        if s.pool_limit_bytes:
            kw["pool_limit_bytes"] = s.pool_limit_bytes
    if s.algorithm != "auto":
        kw["algorithm"] = s.algorithm  # gputok raises ValueError naming its ALGORITHMS otherwise
    if not s.vocab_file and s.tokenizer_dir:
        tok = _load_hf_dir(gputok, s.tokenizer_dir, model_dir, kw)
    elif not s.vocab_file:
        tok = gputok.gpt2(**kw)
    else:
        files = [f.strip() for f in s.vocab_file.split(",")]
        files = [f if os.path.isabs(f) else os.path.join(model_dir, f) for f in files]
        if len(files) == 2:
            tok = gputok.load_hf_files(files[0], files[1], **kw)
        elif files[0].endswith(".json"):
            tok = gputok.load_tokenizer_json(files[0], **kw)
        else:
            tok = gputok.load_tiktoken_file(files[0], **kw)
    if device == "cuda" and s.cpu_below_bytes is None:
        # The rule by size alone: the library's stream rule counts one process's calls, and
        # Triton runs each instance in a process of its own, every one of them with a CPU pool
        # on all the host's cores (docs/api.md).
        below, per_row, _stream = gputok.default_crossover()
        tok.set_cpu_below_bytes(below, per_row)
    elif device == "cuda" and s.cpu_below_bytes:
        tok.set_cpu_below_bytes(s.cpu_below_bytes)
    return tok


def _load_hf_dir(gputok, folder: str, model_dir: str, kw: dict):
    """TensorRT-LLM's tokenizer_dir: tokenizer.json if present, else vocab.json + merges.txt."""
    folder = folder if os.path.isabs(folder) else os.path.join(model_dir, folder)
    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        return gputok.load_tokenizer_json(os.path.join(folder, "tokenizer.json"), **kw)
    vocab, merges = os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
    if os.path.isfile(vocab) and os.path.isfile(merges):
        return gputok.load_hf_files(vocab, merges, **kw)
    raise FileNotFoundError(
        f"tokenizer_dir {folder} has neither tokenizer.json nor vocab.json + merges.txt"
    )


def request_rows(query, max_rows: int, max_bytes: int) -> list[bytes]:
    """Validate one request's QUERY array ([batch, 1] of bytes) and return its rows as bytes."""
    if query is None:
        raise RequestError("missing input QUERY")
    arr = np.asarray(query)
    if arr.dtype != np.object_ and arr.dtype.kind not in ("S", "U"):
        raise RequestError(f"QUERY must be BYTES (TYPE_STRING), got numpy dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != 1:
        raise RequestError(f"QUERY must have shape [batch, 1], got {list(arr.shape)}")
    if arr.shape[0] > max_rows:
        raise RequestError(f"request has {arr.shape[0]} rows; the limit is {max_rows}")
    rows = []
    total = 0
    for i, v in enumerate(arr.reshape(-1)):
        if isinstance(v, str):
            v = v.encode("utf-8", "surrogatepass")
        elif not isinstance(v, bytes):
            raise RequestError(f"QUERY row {i} is {type(v).__name__}, not bytes")
        total += len(v)
        if total > max_bytes:
            raise RequestError(
                f"request has more than {max_bytes} bytes of text (limit max_bytes_per_request)"
            )
        rows.append(v)
    return rows


def pad_rows(ids: np.ndarray, offsets: np.ndarray, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat ids + offsets (len n+1) -> right-padded int32 [n, longest] and lengths int32 [n, 1].

    Vectorised (one scatter): a Python loop over rows costs ~1 us/row, which at 256-row batches
    is comparable to tokenizing the rows.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.shape[0] == 2:  # one row, the usual request: no padding, no scatter (~10 us less)
        row = np.array(ids[offsets[0] : offsets[1]], dtype=np.int32).reshape(1, -1)
        return row, np.array([[row.shape[1]]], dtype=np.int32)
    lengths = np.diff(offsets)
    n = lengths.shape[0]
    width = int(lengths.max()) if n else 0
    out = np.full((n, width), pad_id, dtype=np.int32)
    seg = ids[offsets[0] : offsets[-1]] if n else ids[:0]
    if seg.size:
        rows = np.repeat(np.arange(n), lengths)
        cols = np.arange(seg.size, dtype=np.int64) - np.repeat(offsets[:-1] - offsets[0], lengths)
        out[rows, cols] = seg
    return out, lengths.astype(np.int32).reshape(n, 1)


def encode_requests(tok, batches: list, s: TokenizerSettings) -> list:
    """Encode every request's rows; return, per request, (INPUT_ID, REQUEST_INPUT_LEN) or an Exception.

    `batches[i]` is a list of bytes rows, or an Exception raised while validating request i
    (kept as is). All valid rows go to gputok in one call; on failure, each request is
    re-encoded alone to find the one at fault.
    """
    kw = {"errors": s.utf8_errors, "num_threads": s.num_threads, **special_kwargs(s)}
    good = [i for i, b in enumerate(batches) if not isinstance(b, Exception)]
    results: list = list(batches)
    flat = [row for i in good for row in batches[i]]
    if len(good) == 1 and len(flat) == 1:  # one row in all: every request served isolated
        results[good[0]] = encode_one(tok, flat[0], kw)
        return results
    try:
        ids, offsets = (
            tok.encode_batch_flat(flat, **kw)
            if flat
            else (np.zeros(0, np.int32), np.zeros(1, np.int64))
        )
    except Exception:  # noqa: BLE001 - isolate the request at fault below
        for i in good:
            try:
                one_ids, one_off = tok.encode_batch_flat(batches[i], **kw)
                results[i] = pad_rows(np.asarray(one_ids, np.int32), one_off, pad_value(s, tok))
            except Exception as e:  # noqa: BLE001
                results[i] = e
        return results
    ids = np.asarray(ids, dtype=np.int32)
    offsets = np.asarray(offsets, dtype=np.int64)
    start = 0
    for i in good:
        n = len(batches[i])
        results[i] = pad_rows(ids, offsets[start : start + n + 1], pad_value(s, tok))
        start += n
    return results


def encode_one(tok, row: bytes, kw: dict):
    """One row's (INPUT_ID [1, n], REQUEST_INPUT_LEN [[n]]) through gputok's one-text call, or
    the Exception it raised (the request's error, as the batch path would give it).

    `encode_to_numpy` skips what a one-row `encode_batch_flat` pays for a batch (the offsets
    array, the flat call's set-up, the copy out of the flat ids): 1.4 against 2.7-4.0 us at
    128 tokens on the 2-core machine (2026-11-27). Same ids, same crossover rule on a GPU
    tokenizer; its errors are the same classes with the same messages ("... in text 0 ..."),
    so a bad row is encoded once, not three times (one text, the batch, the row alone)."""
    kw = {k: v for k, v in kw.items() if k != "num_threads"}
    try:
        ids = tok.encode_to_numpy(row, **kw)
    except Exception as e:  # noqa: BLE001 - this request's error, as the batch path's
        return e
    ids = ids.view(np.int32).reshape(1, -1)  # encode_to_numpy's uint32 is a view of int32
    return ids, np.array([[ids.shape[1]]], dtype=np.int32)


def error_code_for(e: Exception) -> str:
    """The Triton code for a request's exception: one mapping for all models (gputok.triton_model)."""
    return error_code(e)


def pad_value(s: TokenizerSettings, tok) -> int:
    """INPUT_ID's padding id: the setting, or the vocabulary's <|endoftext|> (pad_id -1)."""
    return s.pad_id if s.pad_id >= 0 else int(tok.eot_token)


def extra_outputs(tok, extras: dict, batch: int, input_id, s: TokenizerSettings, wanted) -> dict:
    """The outputs besides INPUT_ID / REQUEST_INPUT_LEN, as TensorRT-LLM's preprocessing gives
    them; only those in `wanted` (None: all) are computed. `extras`: the request's inputs by
    name (all of theirs beyond QUERY are optional here; their REQUEST_OUTPUT_LEN is required,
    ours may be left out by a client that only tokenizes). Raises ValueError on a bad input."""

    def want(name: str) -> bool:
        return wanted is None or name in wanted

    pad = trtllm.id_column(extras.get("PAD_ID"), "PAD_ID", batch, pad_value(s, tok))
    out = {
        "OUT_END_ID": lambda: trtllm.id_column(
            extras.get("END_ID"), "END_ID", batch, int(tok.eot_token)
        ),
        "OUT_PAD_ID": lambda: pad,
        "BAD_WORDS_IDS": lambda: trtllm.word_list_ids(tok, extras.get("BAD_WORDS_DICT"), batch),
        "STOP_WORDS_IDS": lambda: trtllm.word_list_ids(tok, extras.get("STOP_WORDS_DICT"), batch),
        "EMBEDDING_BIAS": lambda: trtllm.embedding_bias(
            tok, extras.get("EMBEDDING_BIAS_WORDS"), extras.get("EMBEDDING_BIAS_WEIGHTS"), batch
        ),
    }
    result = {name: fn() for name, fn in out.items() if want(name)}
    if extras.get("REQUEST_OUTPUT_LEN") is not None and want("REQUEST_OUTPUT_LEN"):
        result["REQUEST_OUTPUT_LEN"] = trtllm.id_column(
            extras["REQUEST_OUTPUT_LEN"], "REQUEST_OUTPUT_LEN", batch, 0
        )
    if want("DECODER_INPUT_ID") or want("REQUEST_DECODER_INPUT_LEN"):
        dq = extras.get("DECODER_QUERY")
        if dq is None:  # theirs: one pad id per row, length 1
            dec = (pad.copy(), np.ones((batch, 1), dtype=np.int32))
        else:
            rows = request_rows(dq, s.max_rows_per_request, s.max_bytes_per_request)
            dec = encode_requests(tok, [rows], s)[0]
            if isinstance(dec, Exception):
                raise dec
        result["DECODER_INPUT_ID"], result["REQUEST_DECODER_INPUT_LEN"] = dec
    if extras.get("PROMPT_TABLE_EXTRA_ID") is not None and want("OUT_PROMPT_TABLE_EXTRA_IDS"):
        result["OUT_PROMPT_TABLE_EXTRA_IDS"] = trtllm.prompt_table_extra_ids(
            extras["PROMPT_TABLE_EXTRA_ID"], input_id, int(tok.n_vocab)
        )
    return result


def requested_outputs(request) -> set | None:
    """The outputs the client (or the ensemble step) asked for; None (all) when it names none."""
    names = getattr(request, "requested_output_names", None)
    return (set(names()) or None) if names is not None else None


class TritonPythonModel:
    def initialize(self, args):
        self.logger = pb_utils.Logger
        self.config = json.loads(args["model_config"])
        s = parse_settings(self.config.get("parameters", {}))
        # Triton refuses a request of more rows than max_batch_size before it reaches us, so a
        # larger row limit would be a promise the server does not keep
        if max_batch_size(self.config):
            s = dataclasses.replace(
                s, max_rows_per_request=min(s.max_rows_per_request, max_batch_size(self.config))
            )
        kind = args.get("model_instance_kind", "CPU")
        self.device = resolve_device(s.device, kind)
        wants_gpu = s.outputs_on_gpu == "true" or (
            s.outputs_on_gpu == "auto" and kind.upper() == "GPU"
        )
        self.torch = None
        if wants_gpu:
            try:  # torch before gputok: `import gputok, torch` segfaulted on the H200 image
                import torch

                self.torch = torch
            except ImportError:
                self.torch = None
        self.gpu_outputs = bool(self.torch is not None and self.torch.cuda.is_available())
        import gputok  # imported here so that a missing build fails this model's load, loudly

        device_id = int(args.get("model_instance_device_id", 0) or 0)
        self.tok = load_tokenizer(
            gputok, s, args.get("model_repository", ""), self.device, device_id
        )
        self.s = dataclasses.replace(s, pad_id=pad_value(s, self.tok))
        # A QUERY-only request's other outputs (an isolated perf_analyzer or gputok-client
        # request): they depend on its batch size alone.
        self._defaults = TensorsByBatch(
            lambda batch: extra_outputs(self.tok, {}, batch, None, self.s, None)
        )
        # unknown special tokens in the config fail the load, not the first request
        self.tok.encode("", **special_kwargs(self.s))
        self.logger.log_info(
            f"tokenizer: numpy {np.__version__}, gputok device {getattr(self.tok, 'device', self.device)}, "
            f"instance {kind}:{args.get('model_instance_device_id')}, settings {self.s}, "
            f"INPUT_ID on GPU: {self.gpu_outputs}"
        )

    def execute(self, requests):
        batches, extras = [], []
        for request in requests:
            extras.append(input_arrays(request))
            try:
                trtllm.refuse_multimodal(extras[-1])
                batches.append(
                    request_rows(
                        extras[-1].get("QUERY"),
                        self.s.max_rows_per_request,
                        self.s.max_bytes_per_request,
                    )
                )
            except Exception as e:  # noqa: BLE001 - becomes this request's error
                batches.append(e)
        results = encode_requests(self.tok, batches, self.s)
        return [
            self._response(request, r, x)
            for request, r, x in zip(requests, results, extras, strict=True)
        ]

    def _response(self, request, r, extras: dict):
        if isinstance(r, Exception):
            return error_response(pb_utils, r)
        padded, lengths = r
        batch, wanted = padded.shape[0], requested_outputs(request)
        query_only = extras.keys() == {"QUERY"}  # no optional input: its batch size's outputs
        try:
            if query_only:
                more = self._defaults.get(pb_utils, batch, wanted)
            else:
                arrays = extra_outputs(self.tok, extras, batch, padded, self.s, wanted)
                more = [pb_utils.Tensor(name, value) for name, value in arrays.items()]
        except Exception as e:  # noqa: BLE001 - this request's error, its batch-mates go on
            return error_response(pb_utils, e)
        tensors = [self._input_id_tensor(padded), pb_utils.Tensor("REQUEST_INPUT_LEN", lengths)]
        return pb_utils.InferenceResponse(output_tensors=tensors + more)

    def _input_id_tensor(self, padded: np.ndarray):
        if self.gpu_outputs:
            try:
                t = self.torch.from_numpy(padded).cuda()
                return pb_utils.Tensor.from_dlpack("INPUT_ID", self.torch.utils.dlpack.to_dlpack(t))
            except Exception as e:  # noqa: BLE001 - fall back to host memory, say so once
                self.gpu_outputs = False
                self.logger.log_warn(f"tokenizer: GPU outputs disabled after error: {e}")
        return pb_utils.Tensor("INPUT_ID", padded)

    def finalize(self):
        self.tok = None
