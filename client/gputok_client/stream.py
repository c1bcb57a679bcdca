"""Streaming generation over gRPC: text chunks from `ensemble_stream` as the server makes them.

    for chunk in generate_stream("127.0.0.1:8001", "Once upon a time", max_tokens=32):
        print(chunk, end="", flush=True)

Each chunk is the text its tokens complete (the server holds an incomplete UTF-8 character
back), so the chunks concatenate to the one-shot completion. Decoupled models answer only over
gRPC streaming; HTTP cannot carry it. Leaving the loop early (break, an exception, Ctrl-C)
cancels the request on the server, which stops generating for it at the next step.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator

import numpy as np

from .client import API_KEY_HEADER, GRPC_HEADER_PREFIX
from .errors import UNREACHABLE, ClientError, classify

_END = object()


def _inputs(grpc, prompt: str, max_tokens: int) -> list:
    text = grpc.InferInput("text_input", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[prompt.encode("utf-8")]], dtype=np.object_))
    n = grpc.InferInput("max_tokens", [1, 1], "INT32")
    n.set_data_from_numpy(np.array([[max_tokens]], dtype=np.int32))
    return [text, n]


def generate_stream(
    url: str,
    prompt: str,
    max_tokens: int = 16,
    model: str = "ensemble_stream",
    api_key: str | None = None,
    timeout_s: float = 120.0,
) -> Iterator[str]:
    """Yield the completion of `prompt` chunk by chunk; raises ClientError on a server error."""
    import tritonclient.grpc as grpc

    headers = {GRPC_HEADER_PREFIX + API_KEY_HEADER: api_key} if api_key else None
    events: queue.Queue = queue.Queue()

    def on_response(result, error):
        events.put(error if error is not None else result)

    client = grpc.InferenceServerClient(url)
    try:
        client.start_stream(callback=on_response, headers=headers)
        client.async_stream_infer(
            model,
            _inputs(grpc, prompt, max_tokens),
            outputs=[grpc.InferRequestedOutput("text_output")],
            enable_empty_final_response=True,
        )
        yield from _chunks(events, timeout_s, url)
    finally:
        # cancels the request if the caller stopped early; a no-op after the final response
        client.stop_stream(cancel_requests=True)
        client.close()


def _chunks(events: queue.Queue, timeout_s: float, url: str) -> Iterator[str]:
    while True:
        try:
            ev = events.get(timeout=timeout_s)
        except queue.Empty:
            raise ClientError(f"no response from {url} in {timeout_s:g} s", UNREACHABLE) from None
        if isinstance(ev, Exception):
            code, msg = classify(ev, "grpc", url)
            raise ClientError(f"generate --stream: {msg}", code)
        out = ev.as_numpy("text_output")
        if out is not None and out.size:
            yield out.reshape(-1)[0].decode("utf-8")
        final = ev.get_response().parameters.get("triton_final_response")
        if final is not None and final.bool_param:
            return
