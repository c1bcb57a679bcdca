"""`gputok-client generate --stream` without a server: each chunk reaches the terminal (written
and flushed) before the next one is asked for, so text shows as the server makes it.

The e2e test (tests/e2e/test_streaming.py::test_cli_generate_stream) checks the whole output
against the one-shot text; a CLI that gathered every chunk and printed them at the end would
pass it, so this one checks the order of writes, flushes and chunks.
"""

from __future__ import annotations

import io

import pytest

from gputok_client import cli, stream
from gputok_client.errors import INPUT

CHUNKS = ["Once", " upon", " 日本", "語", ""]


class Terminal(io.StringIO):
    """stdout that records what had been flushed when."""

    def __init__(self):
        super().__init__()
        self.flushed = ""

    def flush(self):
        super().flush()
        self.flushed = self.getvalue()


@pytest.fixture
def fake_stream(monkeypatch):
    """generate_stream that, before yielding chunk k+1, records what the terminal showed."""
    seen: list[str] = []
    term = Terminal()

    def generate_stream(url, prompt, max_tokens=16, **kw):
        for chunk in CHUNKS:
            yield chunk
            seen.append(term.flushed)

    monkeypatch.setattr(stream, "generate_stream", generate_stream)
    return term, seen


def test_each_chunk_is_shown_before_the_next_is_made(fake_stream, monkeypatch):
    term, seen = fake_stream
    monkeypatch.setattr("sys.stdout", term)  # here: pytest's capture resets it after set-up
    rc = cli.main(["--url", "grpc://127.0.0.1:1", "generate", "--stream", "Hi:"])
    assert rc == 0
    shown = ["Hi:" + "".join(CHUNKS[: k + 1]) for k in range(len(CHUNKS))]
    assert seen == shown
    assert term.getvalue() == "Hi:" + "".join(CHUNKS) + "\n"


def test_stream_over_http_is_refused_with_the_flag_to_use(fake_stream, capsys):
    rc = cli.main(["--url", "http://127.0.0.1:1", "generate", "--stream", "Hi"])
    assert rc == INPUT
    assert "--url grpc://" in capsys.readouterr().err
