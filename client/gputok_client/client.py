"""A small library over tritonclient for gputok's models, HTTP or gRPC.

from gputok_client import GputokClient
c = GputokClient("http://127.0.0.1:8000")   # or "grpc://127.0.0.1:8001"; the scheme decides
c.tokenize(["hello world"])          # [array([31373, 995], dtype=int32)]
c.detokenize([[31373, 995]])         # ["hello world"]
c.generate(["Hello"], max_tokens=8)  # ["..."]
c.tokenize_large(open("big.txt", "rb").read(), concurrency=8)  # one int32 array, in order
c.tokenize_rows(lines, concurrency=8)  # one int32 array per line, as many rows per request
                                       # as the server takes
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .errors import INPUT, SERVER, UNREACHABLE, ClientError, classify, parse_url
from .plan import Limits, Plan, make_plan

API_KEY_HEADER = "gputok-key"
# Triton prefixes gRPC restricted-protocol headers (seen with server 2.51: "This protocol is
# restricted, expecting header 'triton-grpc-protocol-gputok-key'").
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"
_TEXT_AT = re.compile(r"in text (\d+) at byte offset (\d+)|in text (\d+)")


def _module(protocol: str):
    if protocol == "http":
        import tritonclient.http as m
    else:
        import tritonclient.grpc as m
    return m


class GputokClient:
    def __init__(
        self,
        url: str | None = None,
        protocol: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        tokenizer_model: str = "tokenizer",
        detokenizer_model: str = "detokenizer",
        ensemble_model: str = "ensemble",
    ) -> None:
        """`url`: `http://host:port`, `grpc://host:port`, or `host:port` with `protocol`
        (default http). Raises ClientError for a malformed URL or a protocol that disagrees
        with the URL's scheme."""
        self.protocol, self.url = parse_url(url, protocol)
        self.m = _module(self.protocol)
        prefix = GRPC_HEADER_PREFIX if self.protocol == "grpc" else ""
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
        self._limits: Limits | None = None

    def close(self) -> None:
        """Close every connection this object opened (any thread's)."""
        with self._lock:
            clients, self._all = self._all, []
        _close(clients)

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
            # a tokenize_rows pool thread's connection is that call's, closed when it ends
            owner = getattr(self._local, "opened", None)
            with self._lock:
                (self._all if owner is None else owner).append(c)
        return c

    def _input(self, name: str, arr: np.ndarray, dtype: str):
        i = self.m.InferInput(name, list(arr.shape), dtype)
        i.set_data_from_numpy(arr)
        return i

    def _call(self, label: str, fn: Callable):
        """fn(tritonclient client), retried with backoff while the server is unreachable."""
        delay, t0 = 0.5, time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                return fn(self._client())
            except Exception as e:  # noqa: BLE001 - tritonclient raises several types
                code, msg = classify(e, self.protocol, self.url)
                if code != UNREACHABLE:
                    raise ClientError(f"{label}: {msg}", code) from e
                if attempt == self.retries:
                    raise ClientError(
                        f"{label}: server {self.url} unreachable after {self.retries} "
                        f"retries ({time.monotonic() - t0:.1f} s): {msg}",
                        UNREACHABLE,
                    ) from e
                self._local.client = None  # reconnect
                time.sleep(delay)
                delay = min(delay * 2, 8.0)
        raise ClientError(f"{label}: unreachable", UNREACHABLE)  # pragma: no cover

    def _infer(self, model: str, inputs: list, outputs: Sequence[str]) -> dict[str, np.ndarray]:
        kw = {"headers": self.headers} if self.headers else {}
        if self.protocol == "grpc":
            kw["client_timeout"] = self.timeout_s
        req_out = [self.m.InferRequestedOutput(o) for o in outputs]

        def run(c):
            r = c.infer(model, inputs, outputs=req_out, **kw)
            return {o: r.as_numpy(o) for o in outputs}

        return self._call(model, run)

    # -- API -------------------------------------------------------------------------------
    def health(self) -> dict:
        """Liveness and readiness of the server and of the three models (no retries).
        Raises ClientError (UNREACHABLE or WRONG_PROTOCOL) when the server does not answer."""
        kw = {"headers": self.headers} if self.headers else {}
        out = {"url": f"{self.protocol}://{self.url}", "protocol": self.protocol}
        try:
            c = self._client()
            out["live"] = bool(c.is_server_live(**kw))
            out["ready"] = bool(c.is_server_ready(**kw))
            out["models"] = {
                name: bool(c.is_model_ready(name, **kw)) for name in self.models.values()
            }
        except Exception as e:  # noqa: BLE001 - tritonclient raises several types
            code, msg = classify(e, self.protocol, self.url)
            raise ClientError(f"health: {msg}", code) from e
        return out

    def limits(self) -> Limits:
        """Rows and bytes one tokenizer request may hold, from the model's config (cached)."""
        if self._limits is None:
            name = self.models["tokenizer"]
            kw = {"headers": self.headers} if self.headers else {}
            if self.protocol == "grpc":
                kw["as_json"] = True

            def get(c):
                cfg = c.get_model_config(name, **kw)
                return cfg.get("config", cfg)

            cfg = self._call(name, get)
            params = {k: v.get("string_value") for k, v in cfg.get("parameters", {}).items()}
            d = Limits()
            batch = int(cfg.get("max_batch_size") or d.rows)
            rows = int(params.get("max_rows_per_request") or d.rows)
            self._limits = Limits(
                rows=max(1, min(batch, rows)),
                bytes=max(1, int(params.get("max_bytes_per_request") or d.bytes)),
            )
        return self._limits

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
        if ids.shape[0] != len(texts) or lens.shape[0] != len(texts):
            raise ClientError(f"tokenizer: {ids.shape[0]} rows back for {len(texts)} sent", SERVER)
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

    def tokenize_rows(
        self,
        rows: Sequence[bytes],
        chunk_bytes: int = 256 << 10,
        concurrency: int = 8,
        allowed_special: dict[bytes, int] | None = None,
        rows_per_request: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> list[np.ndarray]:
        """int32 ids of every row, each equal to the ids of that row sent whole.

        Rows longer than `chunk_bytes` are cut where tokenization provably restarts
        (chunking.py), never above the server's byte limit; `allowed_special` ({token: id})
        are cut out and their ids put in place. Requests hold as many rows and bytes as the
        server takes (`rows_per_request` caps the rows), run on `concurrency` threads, and
        come back in order. `progress(nbytes)` is called as requests complete. A failed request
        raises ClientError naming the line and byte offset at fault; nothing partial is returned.
        """
        lim = self.limits()
        if rows_per_request:
            lim = Limits(rows=min(lim.rows, rows_per_request), bytes=lim.bytes)
        try:
            plan = make_plan(list(rows), min(chunk_bytes, lim.bytes), lim.bytes, allowed_special)
        except ValueError as e:
            raise ClientError(
                f"{e}; the tokenizer takes {lim.bytes} bytes per request (its "
                "max_bytes_per_request in config.pbtxt)",
                INPUT,
            ) from None
        groups = plan.groups(lim, spread=2 * concurrency if len(plan.rows) == 1 else 1)

        def run(group: list[int]) -> list[np.ndarray]:
            try:
                ids = self.tokenize(
                    [plan.rows[r][a:b] for r, a, b in (plan.pieces[i] for i in group)]
                )
            except ClientError as e:
                raise _locate(e, plan, group) from e.__cause__
            if progress is not None:
                progress(sum(plan.pieces[i][2] - plan.pieces[i][1] for i in group))
            return ids

        # Each pool thread opens its own connection; they are closed once the pool's threads
        # are gone. Until 2026-11-29 they were kept until close(): every call left its
        # connections behind, and the garbage collector closing a tritonclient HTTP client off
        # its thread printed gevent's "Exception ignored" lines.
        opened: list = []

        def own() -> None:
            self._local.opened = opened

        try:
            with ThreadPoolExecutor(max(1, concurrency), initializer=own) as pool:
                results = list(pool.map(run, groups))  # map keeps the order of the pieces
        finally:
            _close(opened)
        return plan.assemble([a for group in results for a in group])

    def tokenize_large(self, data: bytes, **kw) -> np.ndarray:
        """One large text as concurrent requests; the ids equal those of the whole text.
        Keywords as tokenize_rows."""
        return self.tokenize_rows([data], **kw)[0]


def _close(clients: list) -> None:
    for c in clients:
        with contextlib.suppress(Exception):  # closing is best effort
            c.close()


def _locate(e: ClientError, plan: Plan, group: list[int]) -> ClientError:
    """Rewrite "in text i [at byte offset o]" (row i of one request) as a place in the input."""
    if e.code != INPUT:
        return e

    def where(m: re.Match) -> str:
        i = int(m.group(1) or m.group(3))
        if i >= len(group):
            return m.group(0)
        return plan.locate(group[i], int(m.group(2)) if m.group(2) else None)

    return ClientError(_TEXT_AT.sub(where, str(e), count=1), e.code)
