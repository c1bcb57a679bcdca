"""device="auto" learns, near its rule's threshold, which path is faster on this host
(backend_src/csrc/route_learner.h). tests/core/native/route_learner_test.cpp drives the learner
alone (no GPU needed): a fresh bucket answers with the rule but every 8th call; once both paths
are timed, the faster one, the slower taken one call in 32 (in 128 once it has 16); one outlier
does not flip a bucket, a lasting change does; a path's first call is not averaged; weights
outside the band keep the rule; one-text and batch calls apart; many threads at once, plain and
under ThreadSanitizer. Planted bugs each fail it (2026-11-29): no clipping of a sample, the
slower path taken as the faster, no exploration, counts stuck at 2, the first call averaged.
The tokenizer's use of it is tested on a GPU (tests/core/test_dispatch.py)."""

from __future__ import annotations

import shutil

import pytest
from native_build import CSRC, REPO, build, run_ok, run_tsan_ok

SOURCES = [
    REPO / "tests" / "core" / "native" / "route_learner_test.cpp",
    CSRC / "route_learner.cpp",
]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_the_learner_takes_the_faster_path_and_keeps_timing_the_other(tmp_path):
    flags = ["-O2", "-Wall", "-Wextra", "-Werror"]
    run_ok(build(tmp_path, "route_learner_test", SOURCES, flags), "8")


def test_the_learner_has_no_data_race(tmp_path):
    run_tsan_ok(tmp_path, "route_learner_tsan", SOURCES, "4")
