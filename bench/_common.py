"""Helpers shared by the benchmarks: core count, CPU model, and the writer of a run's dated
markdown note in bench/results/ (each benchmark owns the sections under its own headings).
docs/benchmarks.md holds only current figures (at most 200 lines): it is edited by hand from
these notes, never written by a benchmark."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_TODAY = time.strftime("%Y-%m-%d", time.gmtime())
DOCS = REPO / "bench" / "results" / f"{_TODAY}-bench-runs.md"
DOCS_HEADER = (
    f"# Benchmark runs of {_TODAY} (UTC)\n\nEvery figure carries date, machine and command.\n"
)


def ncores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_model(default: str = "unknown") -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or default


def replace_section(md: str, heading: str, path: Path = DOCS) -> None:
    """Puts `md` (which starts with `heading`, a "## " line) in place of the section under the
    same heading in `path`, up to the next "## " heading, or appends it."""
    text = path.read_text() if path.is_file() else DOCS_HEADER
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.rstrip("\n") == heading), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + md
    else:
        end = next(
            (j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")), len(lines)
        )
        new = (
            "".join(lines[:start]) + md + ("\n" if end < len(lines) else "") + "".join(lines[end:])
        )
    path.write_text(new)
