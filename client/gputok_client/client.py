"""A small library over tritonclient for gputok's models, HTTP or gRPC.

from gputok_client import GputokClient
c = GputokClient("127.0.0.1:8000", protocol="http")
c.tokenize(["hello world"])          # [array([31373, 995], dtype=int32)]
c.detokenize([[31373, 995]])         # ["hello world"]
c.generate(["Hello"], max_tokens=8)  # ["..."]
c.tokenize_large(open("big.txt", "rb").read(), concurrency=8)  # one int32 array, in order
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .chunking import split_text

DEFAULT_PORTS = {"http": 8000, "grpc": 8001}
API_KEY_HEADER = "gputok-key"
# Triton prefixes gRPC restricted-protocol headers (seen with server 2.51: "This protocol is
# restricted, expecting header 'triton-grpc-protocol-gputok-key'").
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"


class ClientError(RuntimeError):
    """A request failed; `retryable` says whether the server was unreachable (not the input at fault)."""

    def __init__(self, msg: str, retryable: bool = False):
        super().__init__(msg)
        self.retryable = retryable


def _module(protocol: str):
    if protocol == "http":
        import tritonclient.http as m
    elif protocol == "grpc":
        import tritonclient.grpc as m
    else:
        raise ValueError(f"protocol must be http or grpc, not {protocol!r}")
    return m


# A server that is stopping unloads its models before it closes its ports, so a request that
# arrives in between is answered "Request for unknown model: 'tokenizer' has no available
# versions" (seen over gRPC as NOT_FOUND, 2026-11-22). The model exists and comes back with the
# server: retry. A model that was never there is "... is not found" and is not retried.
_MODEL_UNLOADED = "has no available versions"


def _is_retryable(e: Exception) -> bool:
    """Connection-level failures (server down or restarting) are retryable; a 400/INVALID_ARG is not."""
    text = str(e).lower()
    status = str(getattr(e, "status", lambda: "")() or "").lower()
    if _MODEL_UNLOADED in text:
        return True
    if "invalid" in status or "400" in status or "invalid_arg" in text or "restricted" in text:
        return False
    # CANCELLED: a stopping server cancels the gRPC calls in flight ("[StatusCode.CANCELLED]
    # CANCELLED", 2026-11-23); this client never cancels its own, and tokenizing is idempotent.
    markers = (
        "cancelled",
        "unavailable",
        "connection",
        "refused",
        "reset",
        "broken pipe",
        "timed out",
        "deadline",
        "not ready",
    )
    return any(m in text or m in status for m in markers) or isinstance(
        e, (ConnectionError, OSError)
    )


class GputokClient:
    def __init__(
        self,
        url: str | None = None,
        protocol: str = "http",
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        tokenizer_model: str = "tokenizer",
        detokenizer_model: str = "detokenizer",
        ensemble_model: str = "ensemble",
    ) -> None:
        self.protocol = protocol
        self.m = _module(protocol)
        self.url = url or f"127.0.0.1:{DEFAULT_PORTS[protocol]}"
        prefix = GRPC_HEADER_PREFIX if protocol == "grpc" else ""
        self.headers = {prefix + API_KEY_HEADER: api_key} if api_key else None
        self.timeout_s = timeout_s
        self.retries = retries
        self.models = {
            "tokenizer": tokenizer_model,
            "detokenizer": detokenizer_model,
            "ensemble": ensemble_model,
        }
        self._local = threading.local()
        self._all: list = []
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close every connection this object opened (any thread's)."""
        with self._lock:
            clients, self._all = self._all, []
        for c in clients:
            with contextlib.suppress(Exception):  # closing is best effort
                c.close()

    def __enter__(self) -> GputokClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # one tritonclient client per thread: cheap, and avoids sharing a connection pool across threads
    def _client(self):
        c = getattr(self._local, "client", None)
        if c is None:
            if self.protocol == "http":
                c = self.m.InferenceServerClient(
                    self.url, connection_timeout=self.timeout_s, network_timeout=self.timeout_s
                )
            else:
                c = self.m.InferenceServerClient(self.url)
            self._local.client = c
            with self._lock:
                self._all.append(c)
        return c

    def _input(self, name: str, arr: np.ndarray, dtype: str):
        i = self.m.InferInput(name, list(arr.shape), dtype)
        i.set_data_from_numpy(arr)
        return i

    def _infer(self, model: str, inputs: list, outputs: Sequence[str]) -> dict[str, np.ndarray]:
        kw = {"headers": self.headers} if self.headers else {}
        if self.protocol == "grpc":
            kw["client_timeout"] = self.timeout_s
        req_out = [self.m.InferRequestedOutput(o) for o in outputs]
        delay, t0 = 0.5, time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                r = self._client().infer(model, inputs, outputs=req_out, **kw)
                return {o: r.as_numpy(o) for o in outputs}
            except Exception as e:  # noqa: BLE001 - tritonclient raises several types
                retry = _is_retryable(e)
                if not retry:
                    raise ClientError(f"{model}: {e}") from e
                if attempt == self.retries:
                    raise ClientError(
                        f"{model}: server {self.url} unreachable after {self.retries} "
                        f"retries ({time.monotonic() - t0:.1f} s): {e}",
                        retryable=True,
                    ) from e
                self._local.client = None  # reconnect
                time.sleep(delay)
                delay = min(delay * 2, 8.0)
        raise ClientError(f"{model}: unreachable")  # pragma: no cover

    # -- API -------------------------------------------------------------------------------
    def health(self) -> dict:
        c = self._client()
        kw = {"headers": self.headers} if self.headers else {}
        out = {"url": self.url, "protocol": self.protocol}
        try:
            out["live"] = bool(c.is_server_live(**kw))
            out["ready"] = bool(c.is_server_ready(**kw))
            out["models"] = {
                name: bool(c.is_model_ready(name, **kw)) for name in self.models.values()
            }
        except Exception as e:  # noqa: BLE001
            out.update(live=False, ready=False, error=str(e))
        return out

    def tokenize(self, texts: Sequence[str | bytes]) -> list[np.ndarray]:
        """One request with one row per text; returns int32 ids per text."""
        arr = np.empty((len(texts), 1), dtype=np.object_)
        arr[:, 0] = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
        r = self._infer(
            self.models["tokenizer"],
            [self._input("QUERY", arr, "BYTES")],
            ["INPUT_ID", "REQUEST_INPUT_LEN"],
        )
        ids, lens = r["INPUT_ID"], r["REQUEST_INPUT_LEN"].reshape(-1)
        return [ids[i, : lens[i]].astype(np.int32) for i in range(len(texts))]

    def detokenize(self, rows: Sequence[Sequence[int]]) -> list[str]:
        width = max((len(r) for r in rows), default=0)
        tokens = np.zeros((len(rows), 1, width), dtype=np.int32)
        lens = np.zeros((len(rows), 1), dtype=np.int32)
        for i, r in enumerate(rows):
            tokens[i, 0, : len(r)] = r
            lens[i, 0] = len(r)
        r = self._infer(
            self.models["detokenizer"],
            [
                self._input("TOKENS_BATCH", tokens, "INT32"),
                self._input("SEQUENCE_LENGTH", lens, "INT32"),
            ],
            ["OUTPUT"],
        )
        return [b.decode("utf-8", "replace") for b in r["OUTPUT"].reshape(len(rows), -1)[:, 0]]

    def generate(self, prompts: Sequence[str], max_tokens: int = 16) -> list[str]:
        text = np.empty((len(prompts), 1), dtype=np.object_)
        text[:, 0] = [p.encode("utf-8") for p in prompts]
        mt = np.full((len(prompts), 1), max_tokens, dtype=np.int32)
        r = self._infer(
            self.models["ensemble"],
            [self._input("text_input", text, "BYTES"), self._input("max_tokens", mt, "INT32")],
            ["text_output"],
        )
        return [
            b.decode("utf-8", "replace") for b in r["text_output"].reshape(len(prompts), -1)[:, 0]
        ]

    def tokenize_large(
        self,
        data: bytes,
        chunk_bytes: int = 256 << 10,
        rows_per_request: int = 4,
        concurrency: int = 8,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Tokenize a large text as concurrent requests; the ids equal those of the whole text.

        The text is cut at points where tokenization provably restarts (see chunking.py), pieces
        are grouped `rows_per_request` to a request, requests run on `concurrency` threads, and
        the ids are put back in order. `progress(nbytes)` is called as pieces complete. Any
        failed request raises ClientError; nothing partial is returned.
        """
        pieces = split_text(data, chunk_bytes)
        groups = [pieces[i : i + rows_per_request] for i in range(0, len(pieces), rows_per_request)]

        def run(group):
            ids = self.tokenize([data[a:b] for a, b in group])
            if progress is not None:
                progress(sum(b - a for a, b in group))
            return ids

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            results = list(pool.map(run, groups))  # map keeps the order of the pieces
        flat = [a for group in results for a in group]
        return np.concatenate(flat).astype(np.int32) if flat else np.zeros(0, np.int32)
