"""A real `gputok-serve` process for end-to-end tests, and the requests that harm Triton 2.51.

Imported by the supervisor, isolation and fault-harness tests (tests/e2e is on sys.path)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SHAPE_OVERFLOW = json.dumps(
    {
        "inputs": [
            {"name": "TOKENS_BATCH", "shape": [1, 2**31, 2**31], "datatype": "INT32", "data": [1]},
            {"name": "SEQUENCE_LENGTH", "shape": [1, 1], "datatype": "INT32", "data": [1]},
        ]
    }
).encode()
DEEP_NESTING = (
    b'{"inputs":[{"name":"QUERY","shape":[1,1],"datatype":"BYTES","data":'
    + b"[" * 50000
    + b'"a"'
    + b"]" * 50000
    + b"}]}"
)
# 200,000 nested `[` in a member Triton ignores: rapidjson's recursive parser runs out of stack
# (Triton 2.51; Triton parses iteratively since triton-inference-server/common pull request 156)
DEEP_NESTING_OUTSIDE_DATA = (
    b'{"x":' + b"[" * 200000 + b"1" + b"]" * 200000 + b',"inputs":[{"name":"QUERY",'
    b'"shape":[1,1],"datatype":"BYTES","data":["a"]}]}'
)


class Served:
    """A gputok-serve process and its log."""

    def __init__(self, tmp: Path, *extra: str):
        from gputok._triton_env import copy_models, free_ports

        self.repo = copy_models(
            REPO / "model_repository", tmp / "repo", ["tokenizer", "detokenizer"]
        )
        self.http, self.grpc, self.metrics = free_ports(3)
        self.log = tmp / "gputok-serve.log"
        cmd = [sys.executable, "-m", "gputok.serve", "--model-repository", str(self.repo)]
        cmd += ["--http-port", str(self.http), "--grpc-port", str(self.grpc)]
        cmd += ["--metrics-port", str(self.metrics), *extra]
        self.sink = open(self.log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(cmd, stdout=self.sink, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self) -> bool:
        return http_ready(self.http)

    def wait_ready(self, timeout: float, interval: float = 0.1) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            assert self.proc.poll() is None, self.text()[-3000:]
            if self.ready():
                return time.monotonic() - t0
            time.sleep(interval)
        raise AssertionError(f"not ready after {timeout} s:\n{self.text()[-3000:]}")

    def server_pid(self) -> int:
        from gputok._triton_env import _processes

        for entry, ppid, _ in _processes():
            if ppid == self.proc.pid and (entry / "comm").read_text().strip() == "tritonserver":
                return int(entry.name)
        raise AssertionError("no tritonserver under gputok-serve")

    def regions(self) -> set[str]:
        from gputok._triton_env import process_group
        from gputok.serve.shm import regions_of

        pid = self.server_pid()
        return regions_of([pid, *process_group(pid)])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.sink.close()


def http_ready(port: int) -> bool:
    """Whether the server on 127.0.0.1:`port` answers /v2/health/ready with 200."""
    try:
        url = f"http://127.0.0.1:{port}/v2/health/ready"
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def post(port: int, model: str, body: bytes) -> object:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer", data=body)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError) as e:
        return repr(e)


def grpc_stub_killer(port: int) -> str:
    """TOKENS_BATCH of shape [1, 1, 2**62] with no raw bytes: kills the detokenizer's stub."""
    import grpc
    import numpy as np
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        req = service_pb2.ModelInferRequest(model_name="detokenizer")
        t = req.inputs.add(name="TOKENS_BATCH", datatype="INT32")
        t.shape.extend([1, 1, 2**62])
        s = req.inputs.add(name="SEQUENCE_LENGTH", datatype="INT32")
        s.shape.extend([1, 1])
        req.raw_input_contents.extend([b"", np.array([[1]], np.int32).tobytes()])
        try:
            service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelInfer(req, timeout=30)
        except grpc.RpcError as e:
            return f"{e.code()}: {e.details()}"
    return "answered"


def http_raw(
    port: int, model: str, header: dict, payload: bytes, header_length: object = None
) -> tuple[int, str]:
    """An HTTP infer request with the binary-tensor extension: JSON header, then raw bytes
    exactly as given (tritonclient would refuse to build the malformed ones). `header_length`
    replaces the true Inference-Header-Content-Length."""
    import http.client

    head = json.dumps(header).encode()
    if header_length is None:
        headers = {
            "Inference-Header-Content-Length": str(len(head)),
            "Content-Type": "application/octet-stream",
        }
    else:
        headers = {"Inference-Header-Content-Length": str(header_length)}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", f"/v2/models/{model}/infer", head + payload, headers)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")[:300]
    except OSError as e:
        return 0, repr(e)
    finally:
        c.close()


def truncated_bytes(prefix: int, follow: bytes = b"abcd") -> bytes:
    """One BYTES element whose 4-byte length says `prefix` while only `follow` comes after."""
    import struct

    return struct.pack("<I", prefix) + follow


def http_truncated_query(port: int, prefix: int, model: str = "tokenizer") -> tuple[int, str]:
    payload = truncated_bytes(prefix)
    header = {
        "inputs": [
            {
                "name": "QUERY",
                "shape": [1, 1],
                "datatype": "BYTES",
                "parameters": {"binary_data_size": len(payload)},
            }
        ]
    }
    return http_raw(port, model, header, payload)


def grpc_raw(port: int, model: str, inputs: list[tuple[str, str, list[int], bytes]]) -> str:
    """A gRPC ModelInfer with raw_input_contents exactly as given; returns the status code name
    ("OK" when it was answered)."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        req = service_pb2.ModelInferRequest(model_name=model)
        for name, dtype, shape, raw in inputs:
            t = req.inputs.add(name=name, datatype=dtype)
            t.shape.extend(shape)
            req.raw_input_contents.append(raw)
        try:
            service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelInfer(req, timeout=30)
        except grpc.RpcError as e:
            return f"{e.code().name}: {e.details()}"
    return "OK"


def grpc_truncated_query(port: int, prefix: int) -> str:
    return grpc_raw(port, "tokenizer", [("QUERY", "BYTES", [1, 1], truncated_bytes(prefix))])


class ValidLoad:
    """`clients` threads (half HTTP, half gRPC) sending valid one-row tokenize requests until
    stopped; each answer is checked against tiktoken and recorded with its time."""

    def __init__(self, http_port: int, grpc_port: int, ref, clients: int = 8):
        import threading

        self.events: list[tuple[float, str, str]] = []  # (time, ok|wrong|error, detail)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._texts = [
            f"client {k}: the quick brown fox jumps over {k} lazy dogs" for k in range(clients)
        ]
        self._want = {t: ref.encode_ordinary(t) for t in self._texts}
        assert all(self._want.values())
        self._threads = [
            threading.Thread(
                target=self._run,
                args=(k, "http" if k % 2 else "grpc", http_port if k % 2 else grpc_port),
                daemon=True,
            )
            for k in range(clients)
        ]

    def _run(self, k: int, protocol: str, port: int) -> None:
        text = self._texts[k]
        while not self._stop.is_set():
            # A new client after each error. Over gRPC it gets its own subchannel: grpcio
            # shares them between channels by default, and one that saw the server go away
            # keeps failing fast ("failed to connect") for its reconnect backoff, seconds after
            # the server is back.
            tokenize, close = _tokenizer_call(protocol, port)
            try:
                while not self._stop.is_set():
                    try:
                        got = tokenize(text)
                        ev = ("ok", "") if got == self._want[text] else ("wrong", text)
                    except Exception as e:  # noqa: BLE001 - recorded and asserted on
                        ev = ("error", f"{protocol}: {e}"[:300])
                    with self._lock:
                        self.events.append((time.monotonic(), *ev))
                    if ev[0] == "error":
                        time.sleep(0.05)  # a server down for a restart: do not spin
                        break
            finally:
                close()

    def __enter__(self) -> ValidLoad:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def count(self, kind: str) -> int:
        return sum(1 for _, k, _ in self.events if k == kind)

    def errors(self) -> list[str]:
        return [d for _, k, d in self.events if k == "error"]


def _tokenizer_call(protocol: str, port: int):
    """(tokenize(text) -> ids, close) over a fresh connection."""
    if protocol == "http":
        from gputok_client import GputokClient

        c = GputokClient(f"127.0.0.1:{port}", protocol="http", retries=0)
        return (lambda text: c.tokenize([text])[0].tolist()), c.close
    import numpy as np
    import tritonclient.grpc as g

    c = g.InferenceServerClient(
        f"127.0.0.1:{port}", channel_args=[("grpc.use_local_subchannel_pool", 1)]
    )

    def tokenize(text: str) -> list[int]:
        q = g.InferInput("QUERY", [1, 1], "BYTES")
        q.set_data_from_numpy(np.array([[text.encode()]], dtype=object))
        r = c.infer("tokenizer", [q], client_timeout=30)
        n = int(r.as_numpy("REQUEST_INPUT_LEN")[0, 0])
        return r.as_numpy("INPUT_ID")[0, :n].tolist()

    return tokenize, c.close
