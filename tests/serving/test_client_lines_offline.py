"""`gputok-client tokenize --lines` without a server: requests as full as the server's batch,
several in flight at once, a progress bar on stderr, and the offsets file named in the help.

--lines sent 4 rows per request, one request at a time, with no progress bar (46.5 s for a
file that takes 1.35 s at 256 rows). tests/e2e/test_client_cli.py::test_lines_fill_the_server_batch
counts the requests a real server sees; a client sending full requests one after another would
pass it, so this test watches how many are in flight.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gputok_client import GputokClient
from gputok_client.cli import build_parser, main
from gputok_client.plan import Limits

N_LINES = 3000
ROWS = 256


@pytest.fixture
def fake_server(monkeypatch, ref):
    """GputokClient.tokenize answered here (tiktoken's ids, 20 ms a request), watched."""
    seen = {"rows": [], "in_flight": 0, "peak": 0}
    lock = threading.Lock()

    def tokenize(self, texts):
        with lock:
            seen["rows"].append(len(texts))
            seen["in_flight"] += 1
            seen["peak"] = max(seen["peak"], seen["in_flight"])
        time.sleep(0.02)
        out = [np.array(ref.encode_ordinary(bytes(t).decode()), np.int32) for t in texts]
        with lock:
            seen["in_flight"] -= 1
        return out

    monkeypatch.setattr(GputokClient, "limits", lambda self: Limits(rows=ROWS, bytes=4 << 20))
    monkeypatch.setattr(GputokClient, "tokenize", tokenize)
    return seen


def test_lines_are_sent_concurrently_at_the_server_batch_with_a_bar(
    tmp_path, capsys, ref, fake_server
):
    lines = [f"line {i}: " + "some words " * (i % 40) for i in range(N_LINES)]
    src = tmp_path / "lines.txt"
    src.write_text("\n".join(lines), encoding="utf-8")
    assert src.stat().st_size > 256 << 10  # above --chunk-bytes: the bar is shown
    out = tmp_path / "ids.npy"
    rc = main(["--url", "127.0.0.1:1", "tokenize", "--lines", "-f", str(src), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    rows = fake_server["rows"]
    assert sum(rows) == N_LINES and max(rows) == ROWS
    assert len(rows) <= -(-N_LINES // ROWS) + 1, rows
    assert fake_server["peak"] >= 2, "requests were sent one at a time"
    assert "tokenize:" in err and "100%" in err, err  # tqdm's bar
    ids, offsets = np.load(out), np.load(tmp_path / "ids.offsets.npy")
    for i in range(0, N_LINES, 97):
        assert ids[offsets[i] : offsets[i + 1]].tolist() == ref.encode_ordinary(lines[i])


def test_no_progress_hides_the_bar(tmp_path, capsys, fake_server):
    src = tmp_path / "lines.txt"
    src.write_text("\n".join(["x " * 100] * 2000), encoding="utf-8")
    args = ["--url", "127.0.0.1:1", "tokenize", "--lines", "-f", str(src)]
    assert main([*args, "-o", str(tmp_path / "a.npy"), "--no-progress"]) == 0
    assert "100%" not in capsys.readouterr().err


def test_the_offsets_file_is_named_in_the_help():
    """--lines -o wrote an .offsets.npy that nothing mentioned."""
    tokenize = build_parser()._subparsers._group_actions[0].choices["tokenize"]
    text = tokenize.format_help()
    assert "OUTPUT.offsets.npy" in text and "offsets[i+1]" in text
