"""Faults (docs/reliability.md): SIGKILL the tokenizer's Python-backend stub process
while clients send requests, and record what Triton does.

Runs its own tokenizer-only server (module scope), so the session server of the other e2e
tests is never disturbed. What we measured on server 2.51 (the 2-core CPU machine,
2026-11-22) is pinned here: Triton does NOT restart the stub. Every later request to the model
fails with INTERNAL "Stub process 'tokenizer_0_0' is not healthy." (about 1 s each, the stub
health-check timeout), never with wrong ids, while /v2/health/ready and the model's ready
endpoint keep answering 200. With two instances (the default) the healthy one keeps answering,
exactly, and only batches handed to the dead one fail the same way. The restart path is
restarting the server (docs/reliability.md); gputok-serve's watchdog does that loudly: it
stops the server and exits 3 (last test).
Rarely (once in CI, 2026-11-23) the kill instead aborts the whole server: the stub died
holding the backend's shared-memory lock and libtriton_python.so's boost::interprocess::
lock_exception went uncaught. check_server_aborted pins that outcome's evidence.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LOAD_S = 4.0
TEXTS = [
    f"request {i}: the quick brown fox jumps over the lazy dog " * (1 + i % 5) for i in range(32)
]


@pytest.fixture(scope="module", params=[1, 2], ids=["1-instance", "2-instances"])
def lone_tokenizer(request, tmp_path_factory):
    """A tokenizer-only server with 1 instance, and with 2 (config.pbtxt's default)."""
    from gputok._triton_env import ServerOptions, TritonServer, copy_models, free_ports

    repo = copy_models(
        REPO / "model_repository", tmp_path_factory.mktemp("faults") / "repo", ["tokenizer"]
    )
    from gputok.serve import pbtxt

    pbtxt.set_instance_count(repo / "tokenizer" / "config.pbtxt", request.param)
    http, grpc, metrics = free_ports(3)
    log = tmp_path_factory.mktemp("faults-log") / "tritonserver.log"
    server = TritonServer(
        ServerOptions(model_repository=repo, http_port=http, grpc_port=grpc, metrics_port=metrics),
        log_path=log,
    )
    server.start()
    try:
        server.wait_ready(timeout=180)
        yield server, log, request.param
    finally:
        server.stop()


def stub_pids(server_pid: int, model: str) -> list[int]:
    """Python-backend stub processes of `model` under the server (its children)."""
    from gputok._triton_env import stub_processes

    return [pid for pid, m in stub_processes(server_pid).items() if m == model]


def check_server_aborted(log: Path, errors: list[str]) -> None:
    """The other outcome of a stub killed under load (seen once in CI, 2026-11-23): the stub
    died holding the Python backend's shared-memory lock, and the next execute in
    libtriton_python.so threw boost::interprocess::lock_exception, which aborted the whole
    tritonserver (signal 6). Pinned: that is the cause in the log, and the clients then see
    the server unreachable (gRPC UNAVAILABLE), never wrong ids or another error."""
    text = log.read_text(errors="replace")
    assert "boost::interprocess::lock_exception" in text, "the server died another way"
    assert "Signal (6) received" in text
    assert all("unreachable" in d and "UNAVAILABLE" in d for d in errors), errors[:3]


def test_regression_server_abort_after_stub_kill_is_recognised(tmp_path):
    """The abort outcome above is checked on its own evidence, not merely tolerated: a log
    and errors from the 2026-11-23 CI run pass; the same errors without the abort in the log,
    or an error of another kind, fail."""
    log = tmp_path / "tritonserver.log"
    gone = (
        "tokenizer: server 127.0.0.1:43875 unreachable after 0 retries (1.3 s): "
        "[StatusCode.UNAVAILABLE] Stream removed (Socket closed)"
    )
    log.write_text(
        "terminate called after throwing an instance of 'boost::interprocess::lock_exception'\n"
        "  what():  boost::interprocess::lock_exception\nSignal (6) received.\n"
    )
    check_server_aborted(log, [gone])
    with pytest.raises(AssertionError):
        check_server_aborted(log, [gone, "tokenizer: INTERNAL: something else"])
    log.write_text("Signal (11) received.\n")
    with pytest.raises(AssertionError):
        check_server_aborted(log, [gone])


def test_kill_tokenizer_stub_under_load(lone_tokenizer, ref):
    from gputok_client import GputokClient

    server, log, count = lone_tokenizer
    if not Path("/proc").is_dir():
        pytest.skip("needs /proc")
    before = stub_pids(server.proc.pid, "tokenizer")
    assert len(before) == count, f"stub processes: {before}"
    want = {t: ref.encode_ordinary(t) for t in TEXTS}
    assert all(want.values()), "reference returned empty ids"

    events: list[tuple[float, str, str]] = []  # (time, "ok" | "wrong" | "error", detail)
    lock = threading.Lock()
    stop = threading.Event()

    def load(k: int) -> None:
        with GputokClient(server.grpc_url, protocol="grpc", retries=0) as c:
            i = k
            while not stop.is_set():
                t = TEXTS[i % len(TEXTS)]
                i += 1
                try:
                    got = c.tokenize([t])[0].tolist()
                    ev = ("ok", "") if got == want[t] else ("wrong", t)
                except Exception as e:  # noqa: BLE001 - recorded
                    ev = ("error", str(e)[:300])
                with lock:
                    events.append((time.monotonic(), *ev))

    threads = [threading.Thread(target=load, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    try:
        time.sleep(1.0)
        t_kill = time.monotonic()
        os.kill(before[0], signal.SIGKILL)
        time.sleep(LOAD_S)
        ready_during = server.is_ready()
    finally:
        stop.set()
        for th in threads:
            th.join(30)

    after = stub_pids(server.proc.pid, "tokenizer")
    ok_before = sum(1 for t, kind, _ in events if kind == "ok" and t < t_kill)
    late = [(t - t_kill, kind, d) for t, kind, d in events if t > t_kill + 0.5]
    print(
        f"\nstub {before} killed; stubs after {after}; {ok_before} ok before the kill; "
        f"after it: {sum(k == 'ok' for _, k, _ in late)} ok, "
        f"{sum(k == 'error' for _, k, _ in late)} errors, first {late[:2]}; "
        f"ready {ready_during}; log {log}"
    )
    assert ok_before > 0
    assert not [e for e in events if e[1] == "wrong"], "a request got wrong ids"
    assert late, "no request completed after the kill"
    errors = [d for _, kind, d in late if kind == "error"]
    assert errors, "no request failed after the kill (update the docs)"
    if server.proc.poll() is not None:
        check_server_aborted(log, errors)
        return
    assert all("is not healthy" in d and "INTERNAL" in d for d in errors), errors[:3]
    if count == 1:
        # the only instance is gone: every request fails, and the stub is not restarted
        assert all(kind == "error" for _, kind, _ in late), "the stub came back (update the docs)"
        assert all("Stub process 'tokenizer_0_0' is not healthy" in d for d in errors)
        assert after == []
    else:
        # the other instance keeps answering, exactly; the dead one is not restarted
        assert any(kind == "ok" for _, kind, _ in late), "the healthy instance served nothing"
        assert len(after) == count - 1, after
    # Known gap (docs/reliability.md): readiness does not notice the dead stub.
    assert ready_during, "readiness now notices the dead stub: update docs/reliability.md"

    # The restart path: stop the server (SIGTERM, SIGKILL after the timeout) and start again.
    t0 = time.monotonic()
    code = server.stop(timeout=5)
    print(f"server stopped with code {code} after {time.monotonic() - t0:.1f} s")
    assert server.proc.poll() is not None


def test_gputok_serve_stops_when_a_stub_dies(tmp_path):
    """Triton keeps reporting ready with a dead stub, so gputok-serve's watchdog stops the
    server; with `--max-restarts 0` it then exits 3 with a message naming the model, for an
    outer supervisor to restart it (by default it restarts the server itself:
    tests/e2e/test_supervisor.py)."""
    import subprocess
    import sys

    from gputok._triton_env import copy_models, free_ports, stub_processes

    repo = copy_models(REPO / "model_repository", tmp_path / "repo", ["tokenizer"])
    http, grpc, metrics = free_ports(3)
    cmd = [sys.executable, "-m", "gputok.serve", "--model-repository", str(repo)]
    cmd += ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    cmd += ["--max-restarts", "0"]  # supervision off: the stop itself is what is tested here
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        for line in proc.stdout:
            if "READY" in line or time.monotonic() > deadline:
                break
        assert proc.poll() is None, proc.stderr.read()
        servers = [p for p in stub_processes_parent(proc.pid)]
        assert servers, "tritonserver child not found"
        stubs = stub_processes(servers[0])
        assert "tokenizer" in stubs.values()
        time.sleep(1.0)  # let the watchdog take its snapshot
        os.kill(next(pid for pid, m in stubs.items() if m == "tokenizer"), signal.SIGKILL)
        code = proc.wait(timeout=90)
        err = proc.stderr.read()
        assert code == 3, err
        assert "stub of model(s) tokenizer died" in err
        assert "not restarting (--max-restarts 0)" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stub_processes_parent(pid: int) -> list[int]:
    """Child pids of `pid` (the tritonserver under gputok-serve)."""
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d.name))
    return kids
