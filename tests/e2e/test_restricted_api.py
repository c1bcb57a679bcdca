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
