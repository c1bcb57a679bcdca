"""ensemble_stream served: exact text chunks, several tokens per step, cancellation, the CLI."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.e2e

PROMPTS = ["Once upon a time", "", "日本語のテキスト", "👩‍👩‍👧‍👦 emoji"]


def stream(triton, prompt: str, max_tokens: int, model="ensemble_stream") -> list[str]:
    from gputok_client.stream import generate_stream

    return list(generate_stream(triton.grpc_url, prompt, max_tokens, model=model, timeout_s=60))


def one_shot(client, prompt: str, max_tokens: int) -> str:
    return client.generate([prompt], max_tokens=max_tokens)[0]


@pytest.fixture
def grpc_client(triton):
    from gputok_client import GputokClient

    return GputokClient(triton.grpc_url, protocol="grpc", retries=0)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_chunks_concatenate_to_the_one_shot_text(triton, grpc_client, prompt):
    chunks = stream(triton, prompt, 12)
    assert len(chunks) >= 2  # text arrived in steps, not at the end
    assert "".join(chunks) == one_shot(grpc_client, prompt, 12)
    assert "".join(chunks)


def test_several_tokens_per_step(triton, grpc_client):
    one = stream(triton, "Once upon a time", 12)
    three = stream(triton, "Once upon a time", 12, model="ensemble_stream3")
    assert "".join(three) == "".join(one) == one_shot(grpc_client, "Once upon a time", 12)
    assert len(three) < len(one)


def detok_step(ids, ctx, final):
    import tritonclient.grpc as g

    row = np.array([[ids]], np.int32)
    ins = []
    for name, arr, dt in (
        ("TOKENS_BATCH", row, "INT32"),
        ("SEQUENCE_LENGTH", np.array([[len(ids)]], np.int32), "INT32"),
        ("STREAM_CONTEXT_LENGTH", np.array([[ctx]], np.int32), "INT32"),
        ("STREAM_FINAL", np.array([[final]], np.bool_), "BOOL"),
    ):
        x = g.InferInput(name, list(arr.shape), dt)
        x.set_data_from_numpy(arr)
        ins.append(x)
    return ins


@pytest.mark.parametrize("text", ["日本語のテキスト、漢字", "👩‍👩‍👧‍👦 and 👍🏽", "a real \ufffd"])
def test_served_detokenizer_steps_of_split_characters(triton, tok, text):
    """CJK and emoji whose characters span tokens, streamed one token per step through the
    served detokenizer: no step shows a broken character, and the steps add up."""
    import tritonclient.grpc as g

    c = g.InferenceServerClient(triton.grpc_url)
    ids = tok.encode(text)
    if "\ufffd" not in text:  # characters do span tokens here: one token alone is broken
        assert any("\ufffd" in tok.decode([t]) for t in ids)
    out, ctx = [], []
    for i, t in enumerate(ids):
        r = c.infer("detokenizer", detok_step(ctx + [t], len(ctx), i == len(ids) - 1))
        out.append(r.as_numpy("OUTPUT")[0, 0].decode())
        ctx = (ctx + [t])[-3:]
    assert "".join(out) == text
    assert sum(ch.count("\ufffd") for ch in out) == text.count("\ufffd")


def gpt2_inputs(g, tok, prompt: str, n: int) -> list:
    ids = tok.encode(prompt)
    ins = []
    for name, arr in (
        ("input_ids", np.array([ids], np.int32)),
        ("input_lengths", np.array([[len(ids)]], np.int32)),
        ("request_output_len", np.array([[n]], np.int32)),
    ):
        x = g.InferInput(name, list(arr.shape), "INT32")
        x.set_data_from_numpy(arr)
        ins.append(x)
    return ins


def cancel_after(triton, model: str, inputs: list, n: int) -> None:
    """Start a stream, take `n` responses, cancel it."""
    import tritonclient.grpc as g

    events: queue.Queue = queue.Queue()
    c = g.InferenceServerClient(triton.grpc_url)
    c.start_stream(callback=lambda result, error: events.put(error or result))
    c.async_stream_infer(model, inputs)
    for _ in range(n):
        assert not isinstance(events.get(timeout=60), Exception)
    c.stop_stream(cancel_requests=True)
    c.close()


def test_cancelling_a_stream_frees_the_request(triton, tok):
    """gpt2_stream sees the cancellation at its next step, stops generating that row, and the
    request ends (Triton sends the final flag once is_cancelled() is seen)."""
    import tritonclient.grpc as g

    log = triton.log_path
    pattern = r"gpt2: request cancelled after (\d+) tokens"
    before = len(re.findall(pattern, log.read_text(errors="replace")))
    cancel_after(triton, "gpt2_stream", gpt2_inputs(g, tok, "Once upon a time", 256), 2)
    deadline = time.time() + 30
    while time.time() < deadline:
        lines = re.findall(pattern, log.read_text(errors="replace"))
        if len(lines) > before:
            break
        time.sleep(0.2)
    else:
        pytest.fail("gpt2_stream never saw the cancellation")
    assert 2 <= int(lines[-1]) < 256
    # the instance is free: a new stream on it completes
    c = g.InferenceServerClient(triton.grpc_url)
    events: queue.Queue = queue.Queue()
    c.start_stream(callback=lambda result, error: events.put(error or result))
    c.async_stream_infer("gpt2_stream", gpt2_inputs(g, tok, "Once upon a time", 3))
    got = [events.get(timeout=60) for _ in range(3)]
    c.stop_stream()
    assert not any(isinstance(x, Exception) for x in got)


def test_cancelling_an_ensemble_stream(triton, grpc_client):
    """Cancelling ensemble_stream ends the client's stream and cancels its later steps; the
    server serves the next stream exactly. (Triton 2.51 does not pass the cancellation to the
    gpt2_stream step already running: it generates on to max_tokens; docs/serving.md.)"""
    import tritonclient.grpc as g

    from gputok_client.stream import _inputs

    cancel_after(triton, "ensemble_stream", _inputs(g, "Once upon a time", 64), 2)
    want = one_shot(grpc_client, "Once upon a time", 4)
    assert "".join(stream(triton, "Once upon a time", 4)) == want


def test_cli_generate_stream(triton, grpc_client):
    want = "Once upon a time" + one_shot(grpc_client, "Once upon a time", 8)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputok_client",
            "--protocol",
            "grpc",
            "--url",
            triton.grpc_url,
            "generate",
            "--stream",
            "--max-tokens",
            "8",
            "Once upon a time",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == want + "\n"


def test_cli_stream_needs_grpc(triton):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputok_client",
            "--url",
            triton.http_url,
            "generate",
            "--stream",
            "x",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "grpc" in out.stderr.lower()
