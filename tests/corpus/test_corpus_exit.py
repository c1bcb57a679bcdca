"""cli.hand_off_driver_teardown: a helper holds the GPU driver's descriptors, and only those,
until the process that started it has exited (no GPU here: a file stands in for them)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

# Run in a fresh process: the helper lives until that process exits.
CHILD = r"""
import os, sys
from gputok import cli
stand_in = sys.argv[1]
cli._DRIVER_FILES = stand_in
fd = os.open(stand_in, os.O_RDONLY)
other = os.open(os.devnull, os.O_RDONLY)
pid = cli.hand_off_driver_teardown()
held = sorted(os.readlink(f"/proc/{pid}/fd/{f}") for f in os.listdir(f"/proc/{pid}/fd"))
print(pid, repr(held), flush=True)
cli.exit_now(0)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_helper_holds_the_driver_files_until_the_process_exits(tmp_path):
    stand_in = tmp_path / "nvidia-stand-in"
    stand_in.write_bytes(b"x")
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(stand_in)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stderr
    pid_text, held = p.stdout.split(" ", 1)
    pid = int(pid_text)
    held_files = eval(held)  # noqa: S307 - the list the child printed
    assert str(stand_in) in held_files  # the stand-in's descriptor went to the helper
    # ... and nothing else of ours: stdin is the pipe, stdout and stderr /dev/null
    assert [f for f in held_files if f.startswith(str(tmp_path))] == [str(stand_in)]
    assert held_files.count(os.devnull) == 2
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:  # the child's exit closed the pipe
        time.sleep(0.01)
    assert not _alive(pid)


def test_nothing_is_started_without_driver_files(monkeypatch, tmp_path):
    from gputok import cli

    # (on a GPU machine this process may hold the real driver files: none match this prefix)
    monkeypatch.setattr(cli, "_DRIVER_FILES", str(tmp_path / "no-such-device"))
    assert cli.hand_off_driver_teardown() is None
