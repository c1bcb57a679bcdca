"""gputok-serve supervises tritonserver (docs/reliability.md, "Crash recovery"): each request
below kills Triton 2.51 or one of its Python-backend stubs; gputok-serve must log the cause,
free the shared-memory regions of the dead server, and be ready again within 30 s, serving
exact ids. A crash loop gives up with exit code 4. A SIGKILLed gputok-serve leaves no server,
no region and no folder behind. One real server per module, on 127.0.0.1 with free ports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
READY_AGAIN_S = 30.0

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
        try:
            url = f"http://127.0.0.1:{self.http}/v2/health/ready"
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            assert self.proc.poll() is None, self.text()[-3000:]
            if self.ready():
                return time.monotonic() - t0
            time.sleep(0.1)
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


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = Served(tmp_path_factory.mktemp("supervised"))
    try:
        s.wait_ready(300)
        yield s
    finally:
        s.close()


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


def assert_recovers(served: Served, send, cause: str, ref) -> None:
    before = served.regions()
    assert before, "no Python-backend region found for the running server"
    n_restarts = served.text().count("restarting tritonserver")
    t0 = time.monotonic()
    print(f"attack answered: {send()}")
    deadline = t0 + READY_AGAIN_S
    while served.text().count("ready again") <= n_restarts and time.monotonic() < deadline:
        assert served.proc.poll() is None, served.text()[-3000:]
        time.sleep(0.1)
    took = time.monotonic() - t0
    log = served.text()
    print(f"ready again {took:.1f} s after the attack; log: {log.splitlines()[-4:]}")
    assert log.count("ready again") > n_restarts, log[-3000:]
    assert took < READY_AGAIN_S
    assert cause in log
    assert served.ready()
    assert not [r for r in before if (Path("/dev/shm") / r).exists()], "regions leaked"
    from gputok_client import GputokClient

    text = "hello world, the server is back"
    for protocol, url in (
        ("http", f"127.0.0.1:{served.http}"),
        ("grpc", f"127.0.0.1:{served.grpc}"),
    ):
        with GputokClient(url, protocol=protocol, retries=0) as c:
            assert c.tokenize([text])[0].tolist() == ref.encode_ordinary(text)


def test_http_shape_overflow_crash_is_survived(served, ref):
    assert_recovers(
        served,
        lambda: post(served.http, "detokenizer", SHAPE_OVERFLOW),
        "killed by SIGSEGV",
        ref,
    )


def test_http_deep_nesting_crash_is_survived(served, ref):
    assert_recovers(
        served, lambda: post(served.http, "tokenizer", DEEP_NESTING), "killed by SIGSEGV", ref
    )


def test_grpc_stub_death_is_survived(served, ref):
    assert_recovers(
        served,
        lambda: grpc_stub_killer(served.grpc),
        "the Python-backend stub of model(s) detokenizer died",
        ref,
    )


def test_crash_loop_gives_up(tmp_path):
    s = Served(tmp_path, "--max-restarts", "1", "--restart-window", "600")
    try:
        s.wait_ready(300)
        post(s.http, "detokenizer", SHAPE_OVERFLOW)
        deadline = time.monotonic() + READY_AGAIN_S
        while "ready again" not in s.text() and time.monotonic() < deadline:
            time.sleep(0.1)
        regions = s.regions()
        post(s.http, "detokenizer", SHAPE_OVERFLOW)
        assert s.proc.wait(timeout=60) == 4
        assert "giving up: 2 crashes within 600 s (--max-restarts 1)" in s.text()
        assert not [r for r in regions if (Path("/dev/shm") / r).exists()], "regions leaked"
    finally:
        s.close()


def test_sigkill_of_gputok_serve_leaves_nothing(tmp_path):
    """The server gets SIGTERM when gputok-serve dies (PR_SET_PDEATHSIG) and unlinks its
    regions itself; there is no per-run folder in /tmp to leave (the backend folder is one,
    shared, in the user's cache)."""
    import tempfile

    tmp_root = Path(tempfile.gettempdir())
    folders = set(tmp_root.glob("gputok-triton-*"))
    s = Served(tmp_path)
    try:
        s.wait_ready(300)
        pid, regions = s.server_pid(), s.regions()
        os.kill(s.proc.pid, signal.SIGKILL)
        s.proc.wait(timeout=10)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            Path(f"/proc/{pid}").exists() or any((Path("/dev/shm") / r).exists() for r in regions)
        ):
            time.sleep(0.2)
        assert not Path(f"/proc/{pid}").exists(), "tritonserver outlived gputok-serve"
        assert not [r for r in regions if (Path("/dev/shm") / r).exists()], "regions leaked"
        assert set(tmp_root.glob("gputok-triton-*")) <= folders, "a /tmp folder was left"
    finally:
        s.close()
