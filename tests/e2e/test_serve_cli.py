"""gputok-serve refuses to start, with a clear message, when a port is taken."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_refuses_taken_port(triton):
    # The session server holds its HTTP port; a second server on it must refuse before starting.
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputok.serve",
            "--http-port",
            str(triton.opts.http_port),
            "--grpc-port",
            "1",
            "--metrics-port",
            "2",
            "--model-repository",
            str(triton.opts.model_repository),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out
    assert "already in use" in out.stderr, out.stderr


def test_refuses_missing_repository(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputok.serve",
            "--model-repository",
            str(tmp_path / "nope"),
            "--http-port",
            "0",
            "--grpc-port",
            "0",
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out
    assert "does not exist" in out.stderr, out.stderr
