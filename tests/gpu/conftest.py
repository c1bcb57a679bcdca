"""Fixtures of the GPU tests (test_gpu, test_gpu_paths, test_gpu_resources): the CPU path, one
GPU tokenizer per merge algorithm and tiktoken, one of each per test module."""

from __future__ import annotations

import pytest
from gpu_compare import ALGORITHMS


@pytest.fixture(scope="module")
def cpu():
    import gputok

    return gputok.gpt2(device="cpu")


@pytest.fixture(scope="module")
def gpus():
    import gputok

    return {a: gputok.gpt2(device="cuda", algorithm=a) for a in ALGORITHMS}


@pytest.fixture(scope="module")
def tt():
    from references import tiktoken_gpt2

    return tiktoken_gpt2()
