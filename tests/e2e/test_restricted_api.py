"""`gputok-serve --api-key`: Triton's restricted APIs refuse requests without the key header
(HTTP 403 / gRPC UNAVAILABLE naming the header) and serve those with it; health stays open."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

KEY = "test-key-123"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def restricted(tmp_path_factory):
    from gputok._triton_env import ServerOptions, TritonServer, copy_models, free_ports

    repo = copy_models(
        REPO / "model_repository", tmp_path_factory.mktemp("restricted") / "repo", ["tokenizer"]
    )
    http, grpc, metrics = free_ports(3)
    server = TritonServer(
        ServerOptions(
            model_repository=repo,
            http_port=http,
            grpc_port=grpc,
            metrics_port=metrics,
            restricted_apis=("inference", "metadata", "model-config", "statistics"),
            restricted_value=KEY,
        ),
        log_path=tmp_path_factory.mktemp("restricted-log") / "tritonserver.log",
    )
    server.start()
    try:
        server.wait_ready(timeout=120)
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_key_required(restricted, protocol):
    from gputok_client import ClientError, GputokClient

    url = restricted.http_url if protocol == "http" else restricted.grpc_url
    with GputokClient(url, protocol=protocol, retries=0) as anon:
        with pytest.raises(ClientError, match="restricted") as e:
            anon.tokenize(["hello world"])
        assert not e.value.retryable
        assert restricted.is_ready()  # health is not restricted
    with GputokClient(url, protocol=protocol, api_key=KEY, retries=0) as ok:
        assert ok.tokenize(["hello world"])[0].tolist() == [31373, 995]
    with (
        GputokClient(url, protocol=protocol, api_key="wrong", retries=0) as bad,
        pytest.raises(ClientError),
    ):
        bad.tokenize(["hello world"])


def test_key_is_not_in_tritonserver_command_line(restricted):
    """The key reaches tritonserver as an argument (2.51 takes it no other way); TritonServer
    blanks it in the child's argv as soon as the server has parsed it (its first line of
    output), so /proc/PID/cmdline, readable by every local user, no longer shows it."""
    cmdline = Path(f"/proc/{restricted.proc.pid}/cmdline").read_bytes()
    assert b"--http-restricted-api=" in cmdline
    assert KEY.encode() not in cmdline
    assert restricted.key_scrubbed is True
    print(f"key visible in tritonserver's argv for {restricted.key_visible_s * 1000:.0f} ms")


@pytest.mark.parametrize(
    "protocol, header, served",
    [
        ("http", "gputok-key", True),
        ("grpc", "gputok-key", False),
        ("grpc", "triton-grpc-protocol-gputok-key", True),
    ],
)
def test_header_names_as_documented(restricted, protocol, header, served):
    """docs/serving.md: over HTTP the header is `gputok-key`; over gRPC Triton 2.51 only
    matches `triton-grpc-protocol-gputok-key` (a bare `gputok-key` is refused)."""
    import numpy as np
    import tritonclient.grpc as g
    import tritonclient.http as h
    from tritonclient.utils import InferenceServerException

    m = h if protocol == "http" else g
    url = restricted.http_url if protocol == "http" else restricted.grpc_url
    c = m.InferenceServerClient(url)
    try:
        q = m.InferInput("QUERY", [1, 1], "BYTES")
        q.set_data_from_numpy(np.array([[b"hello world"]], dtype=object))
        if served:
            r = c.infer("tokenizer", [q], headers={header: KEY})
            assert r.as_numpy("INPUT_ID").tolist() == [[31373, 995]]
        else:
            with pytest.raises(InferenceServerException, match="restricted"):
                c.infer("tokenizer", [q], headers={header: KEY})
    finally:
        c.close()
