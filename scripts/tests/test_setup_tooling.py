"""Set-up and report tooling: `make setup` (run by `make serve` and `make test`) is a quiet
no-op when nothing changed, and `make perf-report` never writes over tracked files."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "python").exists(), reason="no .venv")
def test_regression_setup_is_a_quiet_no_op_when_nothing_changed():
    """`make serve` re-ran a pip build on every start (13 of 26 s) and printed setuptools
    deprecation banners. The first run here builds (forced: a checkout already built would
    skip it, and the banners would go unseen); the second must do nothing."""
    run = [
        "bash",
        str(REPO / "scripts" / "setup.sh"),
    ]
    env = {k: v for k, v in os.environ.items() if k != "GPUTOK_FORCE_BUILD"}
    first = subprocess.run(
        run, capture_output=True, text=True, env={**env, "GPUTOK_FORCE_BUILD": "1"}, timeout=900
    )
    assert first.returncode == 0, first.stderr
    assert "building gputok" in first.stderr, first.stderr
    assert "!!" not in first.stderr and "Deprecat" not in first.stderr, first.stderr
    t0 = time.monotonic()
    second = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
    took = time.monotonic() - t0
    assert second.returncode == 0, second.stderr
    assert second.stdout + second.stderr == "", second.stdout + second.stderr
    assert took < 10, f"setup took {took:.1f} s with nothing to do"


def _csv(path: Path) -> None:
    cols = ["input", "tokens", "protocol", "model", "Concurrency", "Inferences/Second"]
    cols += ["p50 latency", "p99 latency"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        for model, rate in (("tokenizer", 900), ("preprocessing_gigatoken", 600)):
            for c in (1, 4):
                w.writerow(
                    dict(
                        zip(
                            cols,
                            ["tok_128", 128, "grpc", model, c, rate * c, 900, 1500],
                            strict=True,
                        )
                    )
                )


def test_regression_perf_report_writes_under_its_results_folder(tmp_path):
    """`make perf-report` overwrote the tracked plots in docs/perf_analyzer/ by default."""
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(REPO / "perf_analyzer_configs"))
    try:
        import report
    finally:
        sys.path.remove(str(REPO / "perf_analyzer_configs"))
    tracked = REPO / "docs" / "perf_analyzer"
    before = {p: p.stat().st_mtime_ns for p in tracked.rglob("*")}
    _csv(tmp_path / "concurrency.csv")
    assert report.main(["--results", str(tmp_path)]) == 0
    assert (tmp_path / "plots" / "concurrency.png").is_file()
    assert "gigatoken" in (tmp_path / "report.md").read_text()
    assert {p: p.stat().st_mtime_ns for p in tracked.rglob("*")} == before
