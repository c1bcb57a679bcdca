"""Fault (docs/reliability.md): the server restarts while `gputok-client tokenize --file`
sends a big file. The CLI must either finish with exactly tiktoken's ids of the whole file, or
exit non-zero with a clear message, and never leave a file at the output path (nor a
`.partial` temporary) that could pass for a complete result.

Runs its own `gputok-serve` (tokenizer only) on free ports, so the session server is never
disturbed. The client is throttled (2 KiB pieces, one per request, one thread: about 2,000
sequential requests, 5 s or more on 2 cores) and the stop is sent as soon as the server's
statistics show 20 inferences, so the restart lands mid-run however loaded the machine is.

Triton drains on SIGTERM: it keeps serving an open HTTP keep-alive connection until the
client closes it or `--exit-timeout-secs` (30 s by default) runs out, so with the default a
client that is already connected simply finishes (measured 2026-11-22: 4.2 MB went through
while the server was "stopping"). To cut the client off mid-run in a short test we pass
`--exit-timeout-secs=1` to tritonserver (gputok-serve forwards arguments after `--`).

Four runs, HTTP and gRPC each: with `--retries 10` the client waits out the restart (backoff
0.5, 1, 2, 4, 8 s...) and must produce tiktoken's ids, with the restarted server having answered
part of the file; with `--retries 0` it must exit 3 with "server ... unreachable after 0 retries
...; nothing written to ...". Over gRPC a stopping server first answers UNAVAILABLE ("Server is
stopping") or, once its models are unloaded, NOT_FOUND "... has no available versions"; the
client used to treat the latter as an input error (exit 2 even with retries):
`test_regression_model_unloading_during_restart_is_retried`. The first restart on the same ports also pinned a gputok-serve bug: its
port check refused ports that only had TIME_WAIT connections of the stopped server
(`tests/serving/test_triton_env.py::test_port_with_only_time_wait_connections_is_free`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def _start_serve(repo: Path, ports: tuple[int, int, int], log: Path) -> subprocess.Popen:
    http, grpc, metrics = ports
    cmd = [sys.executable, "-m", "gputok.serve", "--model-repository", str(repo)]
    cmd += ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    cmd += ["--", "--exit-timeout-secs=1"]
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)


def _wait_ready(proc: subprocess.Popen, http: int, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"gputok-serve exited {proc.returncode}:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{http}/v2/models/tokenizer/ready", timeout=2
            ):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"server not ready after {timeout} s:\n{log.read_text()}")


def _inferences(http: int) -> int:
    try:
        url = f"http://127.0.0.1:{http}/v2/models/tokenizer/stats"
        with urllib.request.urlopen(url, timeout=2) as r:
            stats = json.load(r)["model_stats"][0]["inference_stats"]
        return int(stats["success"]["count"])
    except (OSError, KeyError, IndexError, ValueError):
        return 0


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("retries", [10, 0], ids=["retries", "no-retries"])
def test_cli_survives_server_restart_or_fails_cleanly(tmp_path, ref, retries, protocol):
    from corpus_fixture import load_corpus
    from gputok._triton_env import copy_models, free_ports

    repo = copy_models(REPO / "model_repository", tmp_path / "repo", ["tokenizer"])
    http, grpc, metrics = free_ports(3)
    text = "".join(load_corpus("ci"))  # about 4.2 MB
    big = tmp_path / "big.txt"
    big.write_text(text, encoding="utf-8")
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "ids.npy"
    log = tmp_path / "serve.log"

    server = _start_serve(repo, (http, grpc, metrics), log)
    client = None
    try:
        _wait_ready(server, http, log)
        # Backoff 0.5, 1, 2, 4, 8, 8, ... s: 10 retries wait 55 s, longer than a restart
        # (about 15 s on the loaded 2-core machine).
        port = http if protocol == "http" else grpc
        cmd = [sys.executable, "-m", "gputok_client", "--protocol", protocol]
        cmd += ["--url", f"127.0.0.1:{port}"]
        cmd += ["--retries", str(retries), "--timeout", "30", "tokenize", "--file", str(big)]
        cmd += ["-o", str(out), "--chunk-bytes", "2048", "--rows-per-request", "1"]
        cmd += ["--concurrency", "1", "--no-progress"]
        client = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while _inferences(http) < 20:
            assert client.poll() is None, client.communicate()
            assert time.monotonic() < deadline, "the client sent nothing in 60 s"
            time.sleep(0.05)
        assert client.poll() is None, "the client finished before the restart; throttle it more"
        _stop(server)  # SIGTERM: Triton drains for 1 s, then cuts the client off
        after_restart = 0
        if retries:  # without retries the client has failed by now; no need to wait
            server = _start_serve(repo, (http, grpc, metrics), log)
            _wait_ready(server, http, log)
        stdout, stderr = client.communicate(timeout=120)
        if retries:
            after_restart = _inferences(http)  # what the restarted server answered
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
        _stop(server)

    leftovers = sorted(p.name for p in outdir.iterdir() if p != out)
    assert not leftovers, f"temporary files left behind: {leftovers}"
    if retries:  # the client must wait out the restart and finish with exact ids
        assert client.returncode == 0, stderr
        want = ref.encode_ordinary(text)
        assert len(want) > 0, "reference returned empty ids"
        got = np.load(out)
        assert got.dtype == np.int32
        assert got.tolist() == want
        assert after_restart > 0, "the client never reached the restarted server"
    else:
        # A clear message, exit code 3 (server unreachable, not an input error), and no
        # output that could pass for complete.
        assert not out.exists(), "a failed run left output at the output path"
        assert client.returncode == 3, (client.returncode, stderr)
        assert stderr.startswith("gputok-client: error: tokenizer: server 127.0.0.1:"), stderr
        assert "unreachable after 0 retries" in stderr, stderr
        assert f"nothing written to {out}" in stderr, stderr
    tail = stderr.strip()[-300:]
    print(
        f"{protocol} retries {retries}: rc {client.returncode}, "
        f"restarted server answered {after_restart}"
    )
    print(f"  stderr: {tail}")
