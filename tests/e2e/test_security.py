"""Security defaults of the served models (issue 6; docs/security.md): the server listens on
127.0.0.1 only, and model control is off (load/unload requests are refused, over HTTP and
gRPC, and the models stay ready). The key-restricted APIs are in test_restricted_api.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


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
        # 0100007F is 127.0.0.1 in /proc's little-endian hex; 0.0.0.0 would be 00000000
        assert addrs == {"0100007F"}, f"port {port} listens on {addrs}"


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
