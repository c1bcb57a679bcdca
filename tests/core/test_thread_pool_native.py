"""The CPU encoder's thread pool hands a job to its workers without a lock while they spin
(thread_pool.cpp). tests/core/native/pool_stress.cpp runs many small jobs back to back with
every spin window and pool size and checks that each item runs exactly once, before its call
returns, and never after; built plain and, where g++ has it, under ThreadSanitizer, which also
reports any data race in the hand-off. Planted bugs each fail it (2026-11-29): a worker that
skips the re-check of the job's generation, a caller that rewrites the job while a late worker
reads it, and a caller that returns before its workers finish."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "backend_src" / "csrc"
SOURCES = [REPO / "tests" / "core" / "native" / "pool_stress.cpp", CSRC / "thread_pool.cpp"]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _build(work: Path, name: str, flags: list[str]) -> Path | None:
    binary = work / name
    cmd = ["g++", "-std=c++17", *flags, f"-I{CSRC}", *map(str, SOURCES), "-lpthread"]
    done = subprocess.run([*cmd, "-o", str(binary)], capture_output=True, text=True)
    if done.returncode != 0:
        if "-fsanitize=thread" in flags:
            return None  # this g++ has no ThreadSanitizer runtime
        raise AssertionError(done.stderr)
    return binary


def test_every_item_runs_once_before_its_call_returns(tmp_path):
    binary = _build(tmp_path, "pool_stress", ["-O2"])
    done = subprocess.run([str(binary), "20000"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_the_hand_off_has_no_data_race(tmp_path):
    binary = _build(tmp_path, "pool_stress_tsan", ["-O1", "-g", "-fsanitize=thread"])
    if binary is None:
        pytest.skip("g++ has no ThreadSanitizer runtime here")
    done = subprocess.run(
        [str(binary), "3000"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TSAN_OPTIONS": "halt_on_error=1 exitcode=66", "PATH": "/usr/bin:/bin"},
    )
    if "unexpected memory mapping" in done.stderr or "FATAL: ThreadSanitizer" in done.stderr:
        pytest.skip("ThreadSanitizer cannot run in this address-space layout")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr[-3000:]
