"""Build and run the small C++ programs under tests/core/native with g++: plain, or under
ThreadSanitizer where this g++ and address-space layout allow it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CSRC = REPO / "backend_src" / "csrc"


def build(work: Path, name: str, sources: list[Path], flags: list[str]) -> Path | None:
    """The binary, or None for a ThreadSanitizer build this g++ cannot make."""
    binary = work / name
    cmd = ["g++", "-std=c++17", *flags, f"-I{CSRC}", *map(str, sources), "-lpthread"]
    done = subprocess.run([*cmd, "-o", str(binary)], capture_output=True, text=True)
    if done.returncode != 0:
        if "-fsanitize=thread" in flags:
            return None  # this g++ has no ThreadSanitizer runtime
        raise AssertionError(done.stderr)
    return binary


def run_ok(binary: Path, arg: str, timeout: int = 120) -> None:
    """Runs it; it must print exactly "ok" and exit 0."""
    done = subprocess.run([str(binary), arg], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def run_tsan_ok(work: Path, name: str, sources: list[Path], arg: str) -> None:
    """Builds with -fsanitize=thread and runs it (halting on the first report); skips where
    ThreadSanitizer cannot build or run here."""
    binary = build(work, name, sources, ["-O1", "-g", "-fsanitize=thread"])
    if binary is None:
        pytest.skip("g++ has no ThreadSanitizer runtime here")
    done = subprocess.run(
        [str(binary), arg],
        capture_output=True,
        text=True,
        timeout=300,
        env={"TSAN_OPTIONS": "halt_on_error=1 exitcode=66", "PATH": "/usr/bin:/bin"},
    )
    if "unexpected memory mapping" in done.stderr or "FATAL: ThreadSanitizer" in done.stderr:
        pytest.skip("ThreadSanitizer cannot run in this address-space layout")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr[-3000:]
