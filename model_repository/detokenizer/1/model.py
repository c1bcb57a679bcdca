"""Triton Python-backend model `detokenizer`: TOKENS_BATCH, SEQUENCE_LENGTH -> OUTPUT (strings).

I/O names and shapes follow TensorRT-LLM's `postprocessing` model: with the batch dimension,
TOKENS_BATCH is [batch, beams, tokens], SEQUENCE_LENGTH [batch, beams], OUTPUT [batch, beams].
Row (b, k) decodes TOKENS_BATCH[b, k, :SEQUENCE_LENGTH[b, k]].

All valid rows of all requests of one `execute` go to gputok in one `decode_batch` call. Ids out
of range, negative lengths or lengths past the row are INVALID_ARG for that request only.
Invalid UTF-8 in the decoded bytes (a multi-byte character cut by the length) becomes U+FFFD by
default (`utf8_errors`), as tiktoken's `decode` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

try:  # present only inside the Triton Python-backend stub
    import triton_python_backend_utils as pb_utils
except ImportError:  # unit tests import the pure functions without a server
    pb_utils = None


class RequestError(ValueError):
    """The request at fault gets INVALID_ARG with this message."""


@dataclass(frozen=True)
class DetokenizerSettings:
    vocab_file: str = ""
    device: str = "cpu"  # decoding is a table lookup; the GPU buys nothing for short outputs
    utf8_errors: str = "replace"
    max_tokens_per_request: int = 1 << 22


def _param(params: dict, key: str, default: str) -> str:
    v = params.get(key)
    if v is None:
        return default
    if isinstance(v, dict):
        v = v.get("string_value", default)
    return str(v)


def parse_settings(params: dict) -> DetokenizerSettings:
    d = DetokenizerSettings()
    s = DetokenizerSettings(
        vocab_file=_param(params, "vocab_file", d.vocab_file).strip(),
        device=_param(params, "device", d.device).strip().lower() or d.device,
        utf8_errors=_param(params, "utf8_errors", d.utf8_errors).strip().lower(),
        max_tokens_per_request=int(
            _param(params, "max_tokens_per_request", str(d.max_tokens_per_request))
        ),
    )
    if s.utf8_errors not in ("strict", "replace"):
        raise ValueError(f"utf8_errors must be 'strict' or 'replace', not {s.utf8_errors!r}")
    return s


def request_rows(tokens, lengths, n_vocab: int, max_tokens: int) -> tuple[list[np.ndarray], tuple]:
    """Validate one request; return its rows (int32 id arrays) and the OUTPUT shape [batch, beams]."""
    if tokens is None:
        raise RequestError("missing input TOKENS_BATCH")
    if lengths is None:
        raise RequestError("missing input SEQUENCE_LENGTH")
    t = np.asarray(tokens)
    n = np.asarray(lengths)
    if t.dtype.kind not in "iu" or n.dtype.kind not in "iu":
        raise RequestError(
            f"TOKENS_BATCH and SEQUENCE_LENGTH must be integers, got {t.dtype} and {n.dtype}"
        )
    if t.ndim == 2:  # [batch, tokens]: one beam
        t = t[:, None, :]
    if n.ndim == 1:
        n = n[:, None]
    if t.ndim != 3 or n.ndim != 2 or t.shape[:2] != n.shape:
        raise RequestError(
            f"TOKENS_BATCH {list(np.shape(tokens))} and SEQUENCE_LENGTH {list(np.shape(lengths))} "
            "must be [batch, beams, tokens] and [batch, beams]"
        )
    if t.size > max_tokens:
        raise RequestError(f"request has {t.size} tokens; the limit is {max_tokens}")
    if n.size and (n.min() < 0 or n.max() > t.shape[2]):
        raise RequestError(
            f"SEQUENCE_LENGTH must be within [0, {t.shape[2]}], got [{n.min()}, {n.max()}]"
        )
    rows = []
    for b in range(t.shape[0]):
        for k in range(t.shape[1]):
            row = t[b, k, : int(n[b, k])]
            if row.size and (row.min() < 0 or row.max() >= n_vocab):
                bad = row[(row < 0) | (row >= n_vocab)][0]
                raise RequestError(
                    f"token id {int(bad)} at row {b} beam {k} is out of range [0, {n_vocab})"
                )
            rows.append(row.astype(np.int32, copy=False))
    return rows, n.shape


def decode_requests(tok, batches: list, errors: str) -> list:
    """Per request: an object array of bytes shaped [batch, beams], or the Exception to return."""
    good = [i for i, b in enumerate(batches) if not isinstance(b, Exception)]
    results: list = list(batches)

    def run(rows):
        # One gputok call for all rows; under errors="strict" a cut multi-byte character raises
        # UnicodeDecodeError (a ValueError), which the isolation pass pins on its request.
        return [
            t.encode("utf-8") for t in tok.decode_batch([r.tolist() for r in rows], errors=errors)
        ]

    def shape(texts, shp):
        out = np.empty(len(texts), dtype=np.object_)
        out[:] = texts
        return out.reshape(shp)

    flat = [r for i in good for r in batches[i][0]]
    try:
        texts = run(flat)
    except Exception:  # noqa: BLE001 - isolate the request at fault
        for i in good:
            try:
                results[i] = shape(run(batches[i][0]), batches[i][1])
            except Exception as e:  # noqa: BLE001
                results[i] = e
        return results
    start = 0
    for i in good:
        rows, shp = batches[i]
        results[i] = shape(texts[start : start + len(rows)], shp)
        start += len(rows)
    return results


class TritonPythonModel:
    def initialize(self, args):
        self.logger = pb_utils.Logger
        config = json.loads(args["model_config"])
        self.s = parse_settings(config.get("parameters", {}))
        import gputok

        if self.s.vocab_file:
            import os

            path = self.s.vocab_file
            if not os.path.isabs(path):
                path = os.path.join(args.get("model_repository", ""), path)
            self.tok = gputok.load_tiktoken_file(path, device=self.s.device)
        else:
            self.tok = gputok.gpt2(device=self.s.device)
        self.n_vocab = int(self.tok.n_vocab)
        self.logger.log_info(
            f"detokenizer: numpy {np.__version__}, n_vocab {self.n_vocab}, settings {self.s}"
        )

    def execute(self, requests):
        batches = []
        for request in requests:
            try:
                t = pb_utils.get_input_tensor_by_name(request, "TOKENS_BATCH")
                n = pb_utils.get_input_tensor_by_name(request, "SEQUENCE_LENGTH")
                batches.append(
                    request_rows(
                        None if t is None else t.as_numpy(),
                        None if n is None else n.as_numpy(),
                        self.n_vocab,
                        self.s.max_tokens_per_request,
                    )
                )
            except Exception as e:  # noqa: BLE001
                batches.append(e)
        responses = []
        for r in decode_requests(self.tok, batches, self.s.utf8_errors):
            if isinstance(r, Exception):
                code = (
                    pb_utils.TritonError.INVALID_ARG
                    if isinstance(r, ValueError)
                    else pb_utils.TritonError.INTERNAL
                )
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError(str(r), code))
                )
            else:
                responses.append(
                    pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", r)])
                )
        return responses

    def finalize(self):
        self.tok = None
