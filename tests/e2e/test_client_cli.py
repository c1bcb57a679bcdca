"""gputok-client against the session server: a large file, split and sent concurrently, gives
exactly the ids of the whole text, in order."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gputok_client.cli import main

pytestmark = pytest.mark.e2e


def test_tokenize_large_file(triton, protocol, ref, corpus, tmp_path, capsys):
    text = "".join(corpus[:60])
    path = tmp_path / "big.txt"
    path.write_text(text, encoding="utf-8")
    want = ref.encode_ordinary(text)
    assert want, "reference returned empty ids"
    out = tmp_path / "ids.npy"
    url = triton.http_url if protocol == "http" else triton.grpc_url
    rc = main(
        [
            "--url",
            url,
            "--protocol",
            protocol,
            "tokenize",
            "--file",
            str(path),
            "-o",
            str(out),
            "--chunk-bytes",
            "16384",
            "--rows-per-request",
            "2",
            "--concurrency",
            "4",
        ]
    )
    assert rc == 0
    got = np.load(out)
    assert got.dtype == np.int32
    assert got.tolist() == want
    assert not list(tmp_path.glob("*.partial")), "temporary output left behind"


def test_tokenize_prints_ids(triton, capsys):
    assert main(["--url", triton.http_url, "tokenize", "hello world"]) == 0
    assert capsys.readouterr().out.strip() == "31373 995"


def test_detokenize_and_generate(triton, capsys):
    assert main(["--url", triton.grpc_url, "--protocol", "grpc", "detokenize", "31373", "995"]) == 0
    assert capsys.readouterr().out.strip() == "hello world"
    assert main(["--url", triton.http_url, "generate", "Hello", "--max-tokens", "4", "--json"]) == 0
    assert '"text_output"' in capsys.readouterr().out


def test_bad_input_exit_code(triton, capsys):
    assert main(["--url", triton.http_url, "--retries", "0", "tokenize", "x<|endoftext|>"]) == 2
    assert "disallowed special token" in capsys.readouterr().err


def test_health_subprocess(triton):
    out = subprocess.run(
        [sys.executable, "-m", "gputok_client", "--url", triton.http_url, "health"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out
    assert '"ready": true' in out.stdout
