"""gputok-client against the session server: a large file, split and sent concurrently, gives
exactly the ids of the whole text, in order; URLs as gputok-serve prints them; one exit-code
table; --lines at the server's batch size; a 6 MB line with no spaces."""

from __future__ import annotations

import os
import random
import stat
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


def test_regression_tokenize_large_closes_its_pool_connections(client, ref, corpus):
    """Each tokenize_large call's pool threads opened connections that stayed in the client
    until close(): 4 more per call here, and at garbage collection tritonclient's HTTP client
    printed gevent's "Exception ignored" off its thread. Now each call closes its own."""
    import gc

    text = "".join(corpus[:20]).encode()
    want = ref.encode_ordinary(text.decode())
    assert want, "reference returned empty ids"
    client.limits()  # the calling thread's own connection, kept until close()
    kept = len(client._all)
    for _ in range(3):
        got = client.tokenize_large(text, chunk_bytes=16384, rows_per_request=2, concurrency=4)
        assert got.tolist() == want
    assert len(client._all) == kept, f"{len(client._all) - kept} connections left behind"
    gc.collect()


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
    err = capsys.readouterr().err
    assert "special token '<|endoftext|>'" in err and "--allowed-special" in err
    assert "allowed_special={" not in err


def _url(triton, protocol: str) -> str:
    """The URL as gputok-serve prints it: with its scheme."""
    return f"{protocol}://" + (triton.http_url if protocol == "http" else triton.grpc_url)


def test_regression_url_with_scheme(triton, protocol, capsys):
    """Pasting gputok-serve's `http://127.0.0.1:PORT` failed: "url should not include the
    scheme", then an AttributeError traceback from tritonclient's __del__. The scheme now picks
    the protocol, with no --protocol."""
    assert main(["--url", _url(triton, protocol), "tokenize", "hello world"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "31373 995"
    assert "Traceback" not in out.err and "AttributeError" not in out.err


def test_regression_wrong_protocol_is_named(triton, protocol, capsys):
    """An HTTP URL on the gRPC port gave `('Expected HTTP/', 8)` and exit 2 ("input
    rejected"); a gRPC URL on the HTTP port was retried as if the server were down."""
    other = "grpc" if protocol == "http" else "http"
    port = triton.grpc_url if protocol == "http" else triton.http_url  # the other one's port
    rc = main(["--url", f"{protocol}://{port}", "--retries", "3", "tokenize", "hello"])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert f"--url {other}://{port}" in err, err


def test_health_exit_codes(triton, capsys):
    assert main(["--url", _url(triton, "http"), "health"]) == 0
    assert main(["--url", "grpc://" + triton.http_url, "health"]) == 4
    capsys.readouterr()


def _requests(triton) -> int:
    import tritonclient.http as h

    c = h.InferenceServerClient(triton.http_url)
    s = c.get_inference_statistics("tokenizer")["model_stats"][0]
    return int(s["inference_stats"]["success"]["count"])


def test_lines_fill_the_server_batch(triton, ref, corpus, tmp_path):
    """--lines sent 4 rows per request, one request at a time (46.5 s for a file that takes
    1.35 s at 256 rows). Now as many rows as max_batch_size (256), concurrently; line i's ids
    are ids[offsets[i]:offsets[i+1]] in OUTPUT and OUTPUT.offsets.npy (mode 0644)."""
    lines = [line for doc in corpus[:30] for line in doc.splitlines()][:1500]
    assert len(lines) == 1500
    src = tmp_path / "lines.txt"
    src.write_text("\n".join(lines), encoding="utf-8")
    out = tmp_path / "ids.npy"
    before = _requests(triton)
    old = os.umask(0o022)
    try:
        rc = main(
            ["--url", _url(triton, "grpc"), "tokenize", "--lines", "-f", str(src)]
            + ["-o", str(out), "--no-progress"]
        )
    finally:
        os.umask(old)
    assert rc == 0
    sent = _requests(triton) - before
    assert sent <= 1500 // 256 + 2, f"{sent} requests for 1500 lines"
    ids, offsets = np.load(out), np.load(tmp_path / "ids.offsets.npy")
    assert len(offsets) == len(lines) + 1
    for i in range(0, len(lines), 37):
        want = ref.encode_ordinary(lines[i])
        assert ids[offsets[i] : offsets[i + 1]].tolist() == want
    assert ids.size > 10_000
    for f in (out, tmp_path / "ids.offsets.npy"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o644


def test_regression_six_megabyte_line_without_spaces(triton, protocol, ref, tmp_path):
    """A 6 MB line had no way through: the chunker asked for a larger chunk, and the server
    (max_bytes_per_request 4 MiB) refused it. Now it is cut between pretokens (a letter run
    and punctuation, CJK and numbers), never above the server's byte limit."""
    rnd = random.Random(7)
    words = ["数据", "模型", "カタカナ", "한국어", "abc", "x1", "42", "。", "，", "!", "=", "été"]
    parts, n = [], 0
    while n < 6_000_000:
        w = rnd.choice(words)
        parts.append(w)
        n += len(w.encode())
    text = "".join(parts)
    src = tmp_path / "line.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "ids.npy"
    rc = main(
        ["--url", _url(triton, protocol), "tokenize", "--lines", "-f", str(src)]
        + ["-o", str(out), "--no-progress"]
    )
    assert rc == 0
    want = ref.encode_ordinary(text)
    assert len(want) > 1_000_000
    assert np.load(out).tolist() == want


def test_no_exact_cut_says_what_to_change(triton, tmp_path, capsys):
    """One pretoken longer than the server's byte limit cannot be cut exactly: exit 2, and the
    message names the server setting."""
    src = tmp_path / "run.txt"
    src.write_bytes(b"x" * (4 << 20) + b"xy")
    assert main(["--url", _url(triton, "http"), "tokenize", "-f", str(src), "--no-progress"]) == 2
    assert "max_bytes_per_request" in capsys.readouterr().err


def test_allowed_special_and_errors_flags(triton, protocol, ref, capsys):
    url = _url(triton, protocol)
    text = "a<|endoftext|>b <|endoftext|>"
    assert main(["--url", url, "tokenize", "--allowed-special", "all", text]) == 0
    assert capsys.readouterr().out.split() == [
        str(i) for i in ref.encode(text, allowed_special="all")
    ]
    bad = "caf\udce9 ok"  # surrogateescape of the byte 0xE9: invalid UTF-8 on the wire
    assert main(["--url", url, "--retries", "0", "tokenize", bad]) == 2
    err = capsys.readouterr().err
    assert "--errors replace" in err and "byte offset 3" in err
    assert main(["--url", url, "tokenize", "--errors", "replace", bad]) == 0
    assert capsys.readouterr().out.split() == [str(i) for i in ref.encode("caf\ufffd ok")]


def test_health_subprocess(triton):
    out = subprocess.run(
        [sys.executable, "-m", "gputok_client", "--url", triton.http_url, "health"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out
    assert '"ready": true' in out.stdout
