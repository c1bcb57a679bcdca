"""Triton Python-backend model `detokenizer`: TOKENS_BATCH, SEQUENCE_LENGTH -> OUTPUT (strings).

I/O names and shapes follow TensorRT-LLM's `postprocessing` model: with the batch dimension,
TOKENS_BATCH is [batch, beams, tokens], SEQUENCE_LENGTH [batch, beams], OUTPUT [batch, beams].
Row (b, k) decodes TOKENS_BATCH[b, k, :SEQUENCE_LENGTH[b, k]].

All valid rows of all requests of one `execute` go to gputok in one `decode_batch` call. Ids out
of range, negative lengths or lengths past the row are INVALID_ARG for that request only.
Invalid UTF-8 in the decoded bytes (a multi-byte character cut by the length) becomes U+FFFD by
default (`utf8_errors`), as tiktoken's `decode` does.

Streaming (the `ensemble_stream` step after the decoupled `gpt2_stream`): a request that carries
STREAM_CONTEXT_LENGTH is one step of a stream. The first STREAM_CONTEXT_LENGTH ids of each row
were sent before and only say which bytes are still pending; the text returned is what the new
ids complete (gputok.stream.decode_step), and STREAM_FINAL flushes an incomplete tail at the end.
The chunks of a stream concatenate to the one-shot decode of its ids, and no state is kept
between requests, so any instance may serve any step and a cancelled stream leaves nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

import numpy as np

from gputok.stream import decode_step
from gputok.triton_model import (
    RequestError,
    check_choice,
    error_response,
    input_array,
    settings_from_params,
)

try:  # present only inside the Triton Python-backend stub
    import triton_python_backend_utils as pb_utils
except ImportError:  # unit tests import the pure functions without a server
    pb_utils = None

__all__ = ["RequestError"]


@dataclass(frozen=True)
class DetokenizerSettings:
    vocab_file: str = ""
    device: str = "cpu"  # decoding is a table lookup; the GPU buys nothing for short outputs
    utf8_errors: str = "replace"
    max_tokens_per_request: int = 1 << 22
    # TensorRT-LLM postprocessing's parameter: leave special tokens (<|endoftext|>) out of the
    # text. Off by default: the ids come back as text exactly.
    skip_special_tokens: bool = False


def parse_settings(params: dict) -> DetokenizerSettings:
    s = settings_from_params(DetokenizerSettings, params, lower=("device", "utf8_errors"))
    s = dataclasses.replace(s, device=s.device or "cpu")
    check_choice("utf8_errors", s.utf8_errors, ("strict", "replace"))
    if s.max_tokens_per_request <= 0:
        raise ValueError("max_tokens_per_request must be positive")
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


def stream_step(context, final, shape: tuple) -> tuple[np.ndarray, bool] | None:
    """A streaming step's STREAM_CONTEXT_LENGTH ([batch, beams]) and STREAM_FINAL, checked;
    None when the request is not a streaming step."""
    if context is None:
        if final is not None:
            raise RequestError("STREAM_FINAL needs STREAM_CONTEXT_LENGTH")
        return None
    c = np.asarray(context)
    if c.dtype.kind not in "iu":
        raise RequestError(f"STREAM_CONTEXT_LENGTH must be integers, got {c.dtype}")
    if c.ndim == 1:
        c = c[:, None]
    if c.shape != shape:
        raise RequestError(
            f"STREAM_CONTEXT_LENGTH {list(np.shape(context))} must be [batch, beams] = {list(shape)}"
        )
    f = np.asarray(final if final is not None else False).reshape(-1)
    return c.astype(np.int64), bool(f.any())


def decode_row(tok, row: np.ndarray, context: int, final: bool, errors: str) -> bytes:
    """One row's text: all of it, or (streaming, context >= 0) what the ids after `context`
    complete."""
    if context < 0:
        return tok.decode(row.tolist(), errors=errors).encode("utf-8")
    if context > row.size:
        raise RequestError(f"STREAM_CONTEXT_LENGTH {context} is past the row's {row.size} ids")
    prev = tok.decode_bytes(row[:context].tolist())
    return decode_step(prev, tok.decode_bytes(row[context:].tolist()), final, errors).encode()


def decode_requests(tok, batches: list, errors: str, streams: list | None = None) -> list:
    """Per request: an object array of bytes shaped [batch, beams], or the Exception to return.
    `streams[i]` is request i's stream_step (None: one-shot)."""
    streams = streams or [None] * len(batches)
    results: list = list(batches)
    for i, b in enumerate(batches):
        if isinstance(b, Exception):
            continue
        rows, shape = b
        step = streams[i]
        ctx = step[0].reshape(-1) if step is not None else None
        try:
            # under errors="strict" a cut multi-byte character raises UnicodeDecodeError (a
            # ValueError): this request's error only
            texts = [
                decode_row(
                    tok, r, int(ctx[j]) if ctx is not None else -1, bool(step and step[1]), errors
                )
                for j, r in enumerate(rows)
            ]
        except Exception as e:  # noqa: BLE001
            results[i] = e
            continue
        out = np.empty(len(texts), dtype=np.object_)
        out[:] = texts
        results[i] = out.reshape(shape)
    return results


def special_ids(tok) -> np.ndarray:
    return np.array(
        sorted(tok.encode(t, allowed_special="all")[0] for t in tok.special_tokens_set),
        dtype=np.int64,
    )


class TritonPythonModel:
    def initialize(self, args):
        self.logger = pb_utils.Logger
        config = json.loads(args["model_config"])
        self.s = parse_settings(config.get("parameters", {}))
        import gputok

        if self.s.vocab_file:
            path = self.s.vocab_file
            if not os.path.isabs(path):
                path = os.path.join(args.get("model_repository", ""), path)
            self.tok = gputok.load_tiktoken_file(path, device=self.s.device)
        else:
            self.tok = gputok.gpt2(device=self.s.device)
        self.n_vocab = int(self.tok.n_vocab)
        self.skip = special_ids(self.tok) if self.s.skip_special_tokens else None
        self.logger.log_info(
            f"detokenizer: numpy {np.__version__}, n_vocab {self.n_vocab}, settings {self.s}"
        )

    def _parse(self, request):
        rows, shape = request_rows(
            input_array(pb_utils, request, "TOKENS_BATCH"),
            input_array(pb_utils, request, "SEQUENCE_LENGTH"),
            self.n_vocab,
            self.s.max_tokens_per_request,
        )
        step = stream_step(
            input_array(pb_utils, request, "STREAM_CONTEXT_LENGTH"),
            input_array(pb_utils, request, "STREAM_FINAL"),
            shape,
        )
        if self.skip is not None:
            if step is not None:  # which context ids were skipped is not known here
                raise RequestError("skip_special_tokens does not apply to streaming steps")
            rows = [r[~np.isin(r, self.skip)] for r in rows]
        return (rows, shape), step

    def execute(self, requests):
        batches, streams = [], []
        for request in requests:
            try:
                b, step = self._parse(request)
            except Exception as e:  # noqa: BLE001 - this request's error
                b, step = e, None
            batches.append(b)
            streams.append(step)
        return [
            error_response(pb_utils, r)
            if isinstance(r, Exception)
            else pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT", r)])
            for r in decode_requests(self.tok, batches, self.s.utf8_errors, streams)
        ]

    def finalize(self):
        self.tok = None
