"""Security defaults of the served models (docs/security.md): the server listens on
127.0.0.1 only, and model control is off (load/unload requests are refused, over HTTP and
gRPC, and the models stay ready). The key-restricted APIs are in test_restricted_api.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of the sockets listening on `port`."""
    addrs = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        p = Path(table)
        if not p.exists():
            continue
        for line in p.read_text().splitlines()[1:]:
            f = line.split()
            local, state = f[1], f[3]
            addr, _, hexport = local.rpartition(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A = LISTEN
                addrs.add(addr)
    return addrs


def test_binds_loopback_only(triton):
    if not Path("/proc/net/tcp").exists():
        pytest.skip("needs Linux /proc/net/tcp")
    for port in (triton.opts.http_port, triton.opts.grpc_port, triton.opts.metrics_port):
        addrs = _listening(port)
        assert addrs, f"nothing listens on port {port}"
        # /proc's hex: 0100007F is 127.0.0.1; gRPC listens on an IPv6 socket bound to
        # ::ffff:127.0.0.1. Any address (00000000, ::) or a public one would fail here.
        assert addrs <= LOOPBACK, f"port {port} listens on {addrs}"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_model_control_is_off(triton, protocol):
    import tritonclient.grpc as g
    import tritonclient.http as h
    from tritonclient.utils import InferenceServerException

    m = h if protocol == "http" else g
    c = m.InferenceServerClient(triton.http_url if protocol == "http" else triton.grpc_url)
    try:
        for call in (c.unload_model, c.load_model):
            with pytest.raises(InferenceServerException, match="not allowed"):
                call("tokenizer")
        with pytest.raises(InferenceServerException):
            c.load_model("not_in_repository")
        assert c.is_model_ready("tokenizer")
        assert c.is_server_ready()
    finally:
        c.close()


@pytest.mark.parametrize(
    "endpoint, body_key",
    [("/v2/logging", "log_file"), ("/v2/trace/setting", "trace_file")],
    ids=["logging", "trace"],
)
def test_request_cannot_name_a_server_file(triton, tmp_path, endpoint, body_key):
    """Triton's logging and trace settings once took a file path from the request (NVIDIA's
    CVE-2024-0087 for log_file). Server 2.51 must refuse it: no file appears."""
    import json
    import urllib.error
    import urllib.request

    target = tmp_path / "written-by-request.txt"
    req = urllib.request.Request(
        f"http://{triton.http_url}{endpoint}",
        data=json.dumps({body_key: str(target)}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, body = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read().decode()
    print(f"{endpoint} {body_key}: {status} {body}")  # shown with -s; docs/security.md
    # 2.51 answers 501 "log file location can not be updated through network protocol"
    assert status == 501 and "can not be updated" in body, (status, body)
    assert not target.exists()
