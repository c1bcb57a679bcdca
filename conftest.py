"""Shared fixtures and the Hypothesis profile of every test folder (tests/, bench/tests/,
scripts/tests/). tests/ is on sys.path, so its helpers (references, corpus_fixture) import directly."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The one Hypothesis profile of the suite: no example database (no .hypothesis/ folder in CI
# checkouts: a failure prints its shrunk input instead), no deadline (a 2-core CI machine
# shared by other jobs makes timings noisy), and the fixture/size health checks off (the
# session fixtures are read-only; fuzz inputs are large on purpose). GPUTOK_FUZZ_EXAMPLES
# raises the example count of every test that does not set its own, for a long run.
settings.register_profile(
    "gputok",
    deadline=None,
    database=None,
    max_examples=int(os.environ.get("GPUTOK_FUZZ_EXAMPLES", "100")),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
settings.load_profile("gputok")

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from corpus_fixture import corpus  # noqa: E402,F401  (session fixture)


@pytest.fixture(scope="session")
def tok():
    import gputok

    return gputok.gpt2(device="cpu")


@pytest.fixture(scope="session")
def ref():
    from references import tiktoken_gpt2

    return tiktoken_gpt2()


@pytest.fixture(scope="session")
def hf():
    from references import hf_gpt2

    return hf_gpt2()
