"""Triton Python-backend model `tokenizer`: QUERY (strings) -> INPUT_ID (padded int32), REQUEST_INPUT_LEN.

I/O names follow TensorRT-LLM's `preprocessing` model, so this model drops into its ensembles.

Design (why it is shaped like this):
- All rows of all requests in one `execute` go to gputok in a single `encode_batch_flat` call:
  the Python tokenizer model is the known bottleneck of Triton LLM pipelines (server #5317,
  #5865, #7650), and one native call amortises the Python overhead and lets gputok spread the
  rows over all cores (or the GPU).
- Cheap checks (shape, row count, byte limit) run per request before the batch call. If the
  batch call still raises (invalid UTF-8 under errors=strict, a disallowed special token), the
  requests are re-encoded one by one so that only the request at fault gets the error and its
  batch-mates succeed. The happy path pays for one call; a bad batch pays for two.
- `model.py` is a thin class over the pure functions above it, unit-tested without a server
  (tests/test_model_tokenizer.py). No assert/print: errors become TritonError, logs go to
  pb_utils.Logger.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

try:  # present only inside the Triton Python-backend stub
    import triton_python_backend_utils as pb_utils
except ImportError:  # unit tests import the pure functions without a server
    pb_utils = None

EOT = 50256


class RequestError(ValueError):
    """The request at fault gets INVALID_ARG with this message; its batch-mates are unaffected."""


@dataclass(frozen=True)
class TokenizerSettings:
    vocab_file: str = ""  # "" = gputok's bundled GPT-2 (r50k_base) vocabulary
    algorithm: str = "auto"
    device: str = "auto"  # auto: cuda on a KIND_GPU instance, cpu otherwise
    max_bytes_per_request: int = 4 << 20
    max_rows_per_request: int = 4096
    utf8_errors: str = "strict"  # "strict": invalid UTF-8 is INVALID_ARG; "replace": U+FFFD
    allowed_special: str = ""  # "" none | "all" | comma-separated token strings
    disallowed_special: str = (
        "all"  # "all": special text in input is INVALID_ARG | "" ordinary text
    )
    pad_id: int = EOT
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


def _param(params: dict, key: str, default: str) -> str:
    v = params.get(key)
    if v is None:
        return default
    if isinstance(v, dict):
        v = v.get("string_value", default)
    return str(v)


def parse_settings(params: dict) -> TokenizerSettings:
    """Settings from config.pbtxt `parameters` ({key: {"string_value": ...}}); raises ValueError."""
    d = TokenizerSettings()
    s = TokenizerSettings(
        vocab_file=_param(params, "vocab_file", d.vocab_file).strip(),
        algorithm=_param(params, "algorithm", d.algorithm).strip() or d.algorithm,
        device=_param(params, "device", d.device).strip().lower() or d.device,
        max_bytes_per_request=int(
            _param(params, "max_bytes_per_request", str(d.max_bytes_per_request))
        ),
        max_rows_per_request=int(
            _param(params, "max_rows_per_request", str(d.max_rows_per_request))
        ),
        utf8_errors=_param(params, "utf8_errors", d.utf8_errors).strip().lower(),
        allowed_special=_param(params, "allowed_special", d.allowed_special).strip(),
        disallowed_special=_param(params, "disallowed_special", d.disallowed_special).strip(),
        pad_id=int(_param(params, "pad_id", str(d.pad_id))),
        num_threads=int(_param(params, "num_threads", str(d.num_threads))),
        outputs_on_gpu=_param(params, "outputs_on_gpu", d.outputs_on_gpu).strip().lower(),
        pool_limit_bytes=int(_param(params, "pool_limit_bytes", str(d.pool_limit_bytes))),
        cpu_below_bytes=int(v) if (v := _param(params, "cpu_below_bytes", "").strip()) else None,
    )
    if s.utf8_errors not in ("strict", "replace"):
        raise ValueError(f"utf8_errors must be 'strict' or 'replace', not {s.utf8_errors!r}")
    if s.device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {s.device!r}")
    if s.outputs_on_gpu not in ("auto", "true", "false"):
        raise ValueError(f"outputs_on_gpu must be auto, true or false, not {s.outputs_on_gpu!r}")
    if s.max_bytes_per_request <= 0 or s.max_rows_per_request <= 0:
        raise ValueError("max_bytes_per_request and max_rows_per_request must be positive")
    if s.pool_limit_bytes < 0:
        raise ValueError("pool_limit_bytes must be >= 0 (0 = no cap)")
    if s.cpu_below_bytes is not None and s.cpu_below_bytes < 0:
        raise ValueError("cpu_below_bytes must be >= 0 (0 = always the GPU on a GPU instance)")
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
    if not s.vocab_file:
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
        tok.set_cpu_below_bytes(*gputok.default_crossover())
    elif device == "cuda" and s.cpu_below_bytes:
        tok.set_cpu_below_bytes(s.cpu_below_bytes)
    return tok


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
                results[i] = pad_rows(np.asarray(one_ids, np.int32), one_off, s.pad_id)
            except Exception as e:  # noqa: BLE001
                results[i] = e
        return results
    ids = np.asarray(ids, dtype=np.int32)
    offsets = np.asarray(offsets, dtype=np.int64)
    start = 0
    for i in good:
        n = len(batches[i])
        results[i] = pad_rows(ids, offsets[start : start + n + 1], s.pad_id)
        start += n
    return results


def error_code_for(e: Exception) -> str:
    """INVALID_ARG where the input is at fault (ValueError includes UnicodeError, gputok's
    VocabError and RequestError); INTERNAL for anything else."""
    return "INVALID_ARG" if isinstance(e, (ValueError, TypeError, OverflowError)) else "INTERNAL"


class TritonPythonModel:
    def initialize(self, args):
        self.logger = pb_utils.Logger
        self.config = json.loads(args["model_config"])
        self.s = parse_settings(self.config.get("parameters", {}))
        kind = args.get("model_instance_kind", "CPU")
        self.device = resolve_device(self.s.device, kind)
        wants_gpu = self.s.outputs_on_gpu == "true" or (
            self.s.outputs_on_gpu == "auto" and kind.upper() == "GPU"
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
            gputok, self.s, args.get("model_repository", ""), self.device, device_id
        )
        # unknown special tokens in the config fail the load, not the first request
        self.tok.encode("", **special_kwargs(self.s))
        self.logger.log_info(
            f"tokenizer: numpy {np.__version__}, gputok device {getattr(self.tok, 'device', self.device)}, "
            f"instance {kind}:{args.get('model_instance_device_id')}, settings {self.s}, "
            f"INPUT_ID on GPU: {self.gpu_outputs}"
        )

    def execute(self, requests):
        batches = []
        for request in requests:
            try:
                q = pb_utils.get_input_tensor_by_name(request, "QUERY")
                batches.append(
                    request_rows(
                        None if q is None else q.as_numpy(),
                        self.s.max_rows_per_request,
                        self.s.max_bytes_per_request,
                    )
                )
            except Exception as e:  # noqa: BLE001 - becomes this request's error
                batches.append(e)
        results = encode_requests(self.tok, batches, self.s)
        responses = []
        for r in results:
            if isinstance(r, Exception):
                code = getattr(pb_utils.TritonError, error_code_for(r))
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(r), code))
                )
                continue
            padded, lengths = r
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        self._input_id_tensor(padded),
                        pb_utils.Tensor("REQUEST_INPUT_LEN", lengths),
                    ]
                )
            )
        return responses

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
