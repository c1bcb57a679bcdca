"""gputok._triton_env without starting a server: the bundled tritonserver, the stub, the
numpy<2 stub environment, the command line and the port checks."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from gputok import _triton_env as te


def test_find_dist_and_stub(tmp_path):
    dist = te.find_dist()
    assert dist.binary.is_file() and dist.libs.is_dir()
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert dist.stub(version).is_file()
    report = te.env_report(Path(sys.executable))
    backends = te.prepare_backend_dir(dist, tmp_path, version, te.ld_library_path(dist, report))
    names = {p.name for p in (backends / "python").iterdir()}
    assert names == {
        "libtriton_python.so",
        "triton_python_backend_utils.py",
        "triton_python_backend_stub",
    }


def test_missing_stub_version(tmp_path):
    with pytest.raises(te.ServeError, match="no Python-backend stub for Python 2.7"):
        te.prepare_backend_dir(te.find_dist(), tmp_path, "2.7")


def test_server_command_binds_host_and_restricts():
    dist = te.find_dist()
    opts = te.ServerOptions(
        model_repository=Path("/m"),
        host="127.0.0.1",
        http_port=1,
        grpc_port=2,
        metrics_port=3,
        restricted_apis=("inference", "statistics"),
        restricted_value="k",
    )
    cmd = te.server_command(dist, Path("/b"), opts)
    for flag in (
        "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1",
        "--metrics-address=127.0.0.1",
        "--model-control-mode=none",
        "--http-port=1",
        "--grpc-port=2",
        "--metrics-port=3",
    ):
        assert flag in cmd
    assert "--http-restricted-api=inference,statistics:gputok-key=k" in cmd
    assert "--grpc-restricted-protocol=inference,statistics:gputok-key=k" in cmd


def test_server_env_puts_libpython_and_libs_first():
    dist = te.find_dist()
    report = {"libpython": "/opt/py/lib/libpython3.11.so.1.0"}
    env = te.server_env(
        dist,
        Path("/stub/bin"),
        report,
        base={"PATH": "/usr/bin", "PYTHONPATH": "/x", "LD_LIBRARY_PATH": "/old"},
    )
    assert env["PATH"] == "/stub/bin:/usr/bin"
    assert env["LD_LIBRARY_PATH"] == f"/opt/py/lib:{dist.libs}:/old"
    assert "PYTHONPATH" not in env  # the stub ignores it; so must our checks


def test_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert te.port_in_use("127.0.0.1", s.getsockname()[1])
    assert not te.port_in_use("127.0.0.1", te.free_port())


def test_filtered_site(tmp_path):
    src = tmp_path / "site"
    for name in (
        "numpy",
        "numpy.libs",
        "numpy-2.5.2.dist-info",
        "scipy",
        "scikit_learn-1.7.dist-info",
        "sklearn",
        "numpyro",
        "torch",
        "x.pth",
    ):
        (src / name).mkdir(parents=True)
    dst = te.filtered_site(src, tmp_path / "farm", te.STUB_EXCLUDE)
    assert sorted(p.name for p in dst.iterdir()) == ["numpyro", "torch", "x.pth"]
    assert (dst / "torch").resolve() == (src / "torch").resolve()


def test_prepare_stub_env_sees_this_environment(tmp_path):
    """A venv whose .pth adds this environment: numpy<2, gputok, torch all importable."""
    bin_dir = te.prepare_stub_env(tmp_path / "stub")
    report = te.check_stub_env(bin_dir, ("numpy", "gputok"))
    assert report["numpy"].startswith("1.")
    assert report["prefix"] == str(tmp_path / "stub")


def test_port_with_only_time_wait_connections_is_free():
    """Regression: a server that just stopped leaves its closed connections in
    TIME_WAIT on its port; restarting on that port must not be refused as "in use"."""
    with socket.socket() as lst:
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as tritonserver does
        lst.bind(("127.0.0.1", 0))
        lst.listen()
        port = lst.getsockname()[1]
        cli = socket.create_connection(("127.0.0.1", port))
        conn, _ = lst.accept()
        conn.close()  # the server side closes first: its end goes to TIME_WAIT
        cli.close()
    assert not te.port_in_use("127.0.0.1", port)


def test_free_ports_distinct_and_sorted():
    ports = te.free_ports(3)
    assert len(set(ports)) == 3 and ports == sorted(ports)
    assert not any(te.port_in_use("127.0.0.1", p) for p in ports)


def test_regression_stop_kills_what_outlives_the_server(tmp_path):
    """Two Python-backend stubs of tests/e2e/test_restart.py's servers were found still
    running half an hour after their tritonserver had exited (2026-11-23): orphans in the
    server's process group. Stand-in here: a "server" (its own session, as TritonServer
    starts it) that leaves a child behind and exits. stop() must not leave that child, and a
    second stop() must not signal the group again."""
    import os
    import subprocess
    import time

    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $! ; exit 0"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    child = int(leader.stdout.readline())
    leader.wait(timeout=10)
    assert child in te.process_group(leader.pid)

    server = object.__new__(te.TritonServer)  # only stop()'s state, no real server
    server.proc, server._pump = leader, None
    server._group_reaped, server.shm_regions = None, set()
    assert server.stop() == 0
    deadline = time.monotonic() + 10
    while te.process_group(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert te.process_group(leader.pid) == []
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
    assert server._group_reaped == leader.pid
    server.stop()  # again: nothing to signal, no error
