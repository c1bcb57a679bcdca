"""Helpers shared by the benchmarks: core count, CPU model, and the writer of a run's dated
markdown note in bench/results/ (each benchmark owns the sections under its own headings).
docs/benchmarks.md holds only current figures (at most 200 lines): it is edited by hand from
these notes, never written by a benchmark."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
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


def git_export(rev: str, path: str, dest: Path) -> Path:
    """The tree `path` of this repository at revision `rev`, extracted under `dest` (by `git
    archive`, so uncommitted files never leak in); returns dest / path."""
    dest.mkdir(parents=True, exist_ok=True)
    tar = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, path], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest / path


def nvidia_smi(fields: str = "name,memory.total") -> list[str]:
    """One line per GPU of `nvidia-smi --query-gpu=FIELDS` (CSV), or [] without a GPU."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [g.strip() for g in out.stdout.splitlines() if g.strip()]


def package_versions(names: tuple[str, ...]) -> dict[str, str | None]:
    """The installed version of each distribution, None where it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    vers: dict[str, str | None] = {}
    for name in names:
        try:
            vers[name] = version(name)
        except PackageNotFoundError:
            vers[name] = None
    return vers


def add_docs_options(ap) -> None:
    """--docs / --no-docs on an argparse parser: `args.docs` is None when neither is given
    (the benchmark's default: write the note unless --quick)."""
    ap.add_argument(
        "--docs",
        dest="docs",
        action="store_true",
        default=None,
        help="write the day's bench/results note (default unless --quick)",
    )
    ap.add_argument("--no-docs", dest="docs", action="store_false")


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


def write_results(path: str | Path, rows: list, **extra) -> None:
    """A bench's JSON: the date (UTC), the command line, any `extra` fields and its rows."""
    doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "argv": sys.argv}
    Path(path).write_text(json.dumps({**doc, **extra, "rows": rows}, indent=1))
