"""Shared fixtures. tests/ is on sys.path (rootdir conftest), so helpers import directly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

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
