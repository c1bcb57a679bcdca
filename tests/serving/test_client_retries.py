"""gputok-client's retries and failure reporting, without a server (a server restart in
the middle of `tokenize --file`; the end-to-end run is tests/e2e/test_restart.py).

A connection failure is retried with backoff and then reported as "unreachable after N
retries" (exit code 3); an input error is not retried (exit code 2); a failed run writes no
output file and says so.
"""

from __future__ import annotations

import numpy as np
import pytest

from gputok_client import client as client_mod
from gputok_client.cli import main
from gputok_client.client import ClientError, GputokClient


class _Result:
    def __init__(self, n: int) -> None:
        self.n = n

    def as_numpy(self, name: str) -> np.ndarray:
        if name == "INPUT_ID":
            return np.full((self.n, 2), 7, np.int32)
        return np.full((self.n, 1), 2, np.int32)


class _Flaky:
    """A tritonclient stand-in whose first `fails` calls raise `exc`."""

    def __init__(self, fails: int, exc: Exception) -> None:
        self.fails, self.exc, self.calls = fails, exc, 0

    def infer(self, model, inputs, outputs=None, **kw):
        self.calls += 1
        if self.calls <= self.fails:
            raise self.exc
        return _Result(1)  # the tests send one row

    def close(self) -> None:
        pass


@pytest.fixture
def no_sleep(monkeypatch):
    slept = []
    monkeypatch.setattr(client_mod.time, "sleep", slept.append)
    return slept


def _client(monkeypatch, fake: _Flaky, retries: int) -> GputokClient:
    c = GputokClient("127.0.0.1:1", retries=retries)
    monkeypatch.setattr(c, "_client", lambda: fake)
    return c


def test_connection_errors_are_retried_with_backoff(monkeypatch, no_sleep):
    fake = _Flaky(3, ConnectionRefusedError(111, "Connection refused"))
    ids = _client(monkeypatch, fake, retries=5).tokenize(["ab"])
    assert [a.tolist() for a in ids] == [[7, 7]]
    assert fake.calls == 4
    assert no_sleep == [0.5, 1.0, 2.0]


def test_gives_up_with_a_clear_message(monkeypatch, no_sleep):
    fake = _Flaky(99, ConnectionRefusedError(111, "Connection refused"))
    with pytest.raises(ClientError) as ei:
        _client(monkeypatch, fake, retries=2).tokenize(["ab"])
    assert ei.value.retryable
    msg = str(ei.value)
    assert "server 127.0.0.1:1 unreachable after 2 retries" in msg
    assert "Connection refused" in msg
    assert fake.calls == 3


def test_input_errors_are_not_retried(monkeypatch, no_sleep):
    fake = _Flaky(99, RuntimeError("[StatusCode.INVALID_ARGUMENT] invalid UTF-8 in text 0"))
    with pytest.raises(ClientError) as ei:
        _client(monkeypatch, fake, retries=5).tokenize(["ab"])
    assert not ei.value.retryable
    assert fake.calls == 1 and no_sleep == []


def test_cli_unreachable_server_writes_nothing(tmp_path, capsys):
    from gputok._triton_env import free_port

    src = tmp_path / "in.txt"
    src.write_text("hello world " * 1000)
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "ids.npy"
    port = free_port()  # nothing listens there
    rc = main(
        ["--url", f"127.0.0.1:{port}", "--retries", "1", "--timeout", "5"]
        + ["tokenize", "--file", str(src), "-o", str(out), "--chunk-bytes", "1024"]
        + ["--no-progress"]
    )
    err = capsys.readouterr().err
    assert rc == 3, err
    assert err.startswith("gputok-client: error: tokenizer: server 127.0.0.1:"), err
    assert "unreachable after 1 retries" in err
    assert f"nothing written to {out}" in err
    assert list(outdir.iterdir()) == []


@pytest.mark.parametrize(
    "status", ["StatusCode.NOT_FOUND", "400"], ids=["grpc-not-found", "http-400"]
)
def test_regression_model_unloading_during_restart_is_retried(monkeypatch, no_sleep, status):
    """Regression (found by the gRPC restart run, tests/e2e/test_restart.py, 2026-11-22): a
    stopping Triton unloads its models before it closes its ports, and a request in between got
    "[StatusCode.NOT_FOUND] Request for unknown model: 'tokenizer' has no available versions".
    The client classified that as an input error: exit 2 at once, even with --retries 10. It
    is a restart, so retry; a model that never existed ("... is not found") still fails at once."""
    pytest.importorskip("tritonclient")
    from tritonclient.utils import InferenceServerException

    unloading = InferenceServerException(
        "Request for unknown model: 'tokenizer' has no available versions", status=status
    )
    fake = _Flaky(2, unloading)
    c = GputokClient("127.0.0.1:1", protocol="grpc" if "Status" in status else "http", retries=3)
    monkeypatch.setattr(c, "_client", lambda: fake)
    assert [a.tolist() for a in c.tokenize(["ab"])] == [[7, 7]]
    assert fake.calls == 3 and no_sleep == [0.5, 1.0]

    missing = InferenceServerException(
        "Request for unknown model: 'tokenizr' is not found", status=status
    )
    fake = _Flaky(99, missing)
    no_sleep.clear()
    with pytest.raises(ClientError) as ei:
        c.tokenize(["ab"])
    assert not ei.value.retryable
    assert fake.calls == 1 and no_sleep == []


def test_regression_grpc_call_cancelled_by_a_stopping_server_is_retried(monkeypatch, no_sleep):
    """Regression (found by a fresh-clone CI run of tests/e2e/test_restart.py, gRPC with
    --retries 10, 2026-11-23): Triton stopping on SIGTERM cancels the gRPC calls in flight,
    and the client got "[StatusCode.CANCELLED] CANCELLED". It classified that as an input
    error: exit 2 at once, nothing written. This client never cancels its own calls, and a
    tokenize request is idempotent: retry it like a refused connection."""
    pytest.importorskip("tritonclient")
    from tritonclient.utils import InferenceServerException

    cancelled = InferenceServerException("CANCELLED", status="StatusCode.CANCELLED")
    fake = _Flaky(2, cancelled)
    c = GputokClient("127.0.0.1:1", protocol="grpc", retries=3)
    monkeypatch.setattr(c, "_client", lambda: fake)
    assert [a.tolist() for a in c.tokenize(["ab"])] == [[7, 7]]
    assert fake.calls == 3 and no_sleep == [0.5, 1.0]
