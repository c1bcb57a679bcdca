"""End-to-end fixtures: one real tritonserver per test session, on 127.0.0.1 with free ports.

The server runs a copy of model_repository/ in which only the gpt2 model is switched to the
`tiny` configuration (2 layers, seeded random weights) so the tests take seconds on 2 cores.
The fixture always stops the server (SIGTERM, then SIGKILL of its process group), and its log
is kept in the pytest temp folder and printed when start-up fails.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def model_repo(tmp_path_factory) -> Path:
    from gputok._triton_env import copy_models, set_config_parameter

    dst = copy_models(
        REPO / "model_repository", tmp_path_factory.mktemp("model_repository") / "repo"
    )
    from trtllm_repo import add_test_models

    for gpt2 in ("gpt2", "gpt2_stream"):
        set_config_parameter(dst / gpt2 / "config.pbtxt", "model_config", "tiny")
        set_config_parameter(dst / gpt2 / "config.pbtxt", "torch_threads", "1")
    for name, base, params in TEST_VARIANTS:
        add_variant(dst, name, base, params)
    add_test_models(dst)  # TensorRT-LLM's ensemble around our models; 3-token streaming
    return dst


# Test-only copies of the product models with other settings, for the bad-input matrix
# (tests/e2e/test_bad_input.py). They live only in the fixture's temporary repository.
TEST_VARIANTS = [
    # errors=replace, and small row/byte limits (the product's 4096-row limit sits above
    # max_batch_size 256, so Triton's own batch-size check fires first there)
    (
        "tokenizer_replace",
        "tokenizer",
        {"utf8_errors": "replace", "max_rows_per_request": "16", "max_bytes_per_request": "4096"},
    ),
    ("tokenizer_allow_all", "tokenizer", {"allowed_special": "all"}),
    ("tokenizer_ordinary", "tokenizer", {"disallowed_special": ""}),
    (
        "detokenizer_strict",
        "detokenizer",
        {"utf8_errors": "strict", "max_tokens_per_request": "64"},
    ),
]


def add_variant(repo: Path, name: str, base: str, params: dict[str, str]) -> None:
    """Copy model `base` to `name` in a test repository, renamed, with parameters changed."""
    from gputok.serve import pbtxt

    shutil.copytree(repo / base, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    config = repo / name / "config.pbtxt"
    pbtxt.rename(config, name)
    for key, value in params.items():
        pbtxt.set_parameter(config, key, value)


@pytest.fixture(scope="session", autouse=True)
def no_regions_left():
    """At the end of the session, no Python-backend shared-memory region that any server
    started in this process used may be left in /dev/shm (stops and crashes included)."""
    from gputok import _triton_env

    yield
    left = sorted(r for r in _triton_env.SEEN_REGIONS if (Path("/dev/shm") / r).exists())
    assert not left, f"{len(left)} shared-memory regions left: {left[:5]}"


@pytest.fixture(scope="session")
def triton(model_repo, tmp_path_factory):
    pytest.importorskip("tritonclient")
    from gputok._triton_env import ServeError, ServerOptions, TritonServer, find_dist, free_ports

    try:
        find_dist()
    except ServeError as e:
        pytest.fail(f"tritonserver is not installed: {e}")
    http, grpc, metrics = free_ports(3)
    log = tmp_path_factory.mktemp("triton") / "tritonserver.log"
    server = TritonServer(
        ServerOptions(
            model_repository=model_repo, http_port=http, grpc_port=grpc, metrics_port=metrics
        ),
        need=("numpy", "gputok", "torch", "transformers"),
        log_path=log,
    )
    server.start()
    try:
        server.wait_ready(timeout=300)
        yield server
    finally:
        code = server.stop()
        print(f"tritonserver stopped with code {code}; log: {log}")


@pytest.fixture(params=["http", "grpc"])
def protocol(request) -> str:
    return request.param


@pytest.fixture
def client(triton, protocol):
    """A client closed at the test's end, on this thread: left to the garbage collector, the
    HTTP connections a test's worker threads opened were once closed from another thread,
    where gevent has no loop (a PytestUnraisableExceptionWarning from tritonclient's
    `__del__`, CI 2026-11-29)."""
    from gputok_client import GputokClient

    url = triton.http_url if protocol == "http" else triton.grpc_url
    with GputokClient(url, protocol=protocol, retries=0) as c:
        yield c


@pytest.fixture(autouse=True)
def server_stays_ready(request):
    """After every e2e test the server must still be ready (a bad request must not take it down)."""
    yield
    if "triton" in request.fixturenames:
        server = request.getfixturevalue("triton")
        assert server.proc.poll() is None, "tritonserver exited"
        assert server.is_ready(), "tritonserver is no longer ready"
