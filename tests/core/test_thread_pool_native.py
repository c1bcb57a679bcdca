"""The CPU encoder's thread pool hands a job to its workers without a lock while they spin
(thread_pool.cpp). tests/core/native/pool_stress.cpp runs many small jobs back to back with
every spin window and pool size and checks that each item runs exactly once, before its call
returns, and never after; built plain and, where g++ has it, under ThreadSanitizer, which also
reports any data race in the hand-off. Planted bugs each fail it (2026-11-29): a worker that
skips the re-check of the job's generation, a caller that rewrites the job while a late worker
reads it, and a caller that returns before its workers finish."""

from __future__ import annotations

import shutil

import pytest
from native_build import CSRC, REPO, build, run_ok, run_tsan_ok

SOURCES = [REPO / "tests" / "core" / "native" / "pool_stress.cpp", CSRC / "thread_pool.cpp"]

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_every_item_runs_once_before_its_call_returns(tmp_path):
    run_ok(build(tmp_path, "pool_stress", SOURCES, ["-O2"]), "20000")


def test_the_hand_off_has_no_data_race(tmp_path):
    run_tsan_ok(tmp_path, "pool_stress_tsan", SOURCES, "3000")
