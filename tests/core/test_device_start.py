"""The GPU's context is started before a vocabulary is parsed (gputok/__init__.py
_start_device, csrc/cuda/device_start.cu): the build's two slowest steps overlap."""

from __future__ import annotations

import pytest

import gputok
from gputok import _core

GPT2_TIKTOKEN = gputok.GPT2_RANKS


@pytest.fixture
def calls(monkeypatch):
    """The order of start_device and vocabulary parses, recorded (nothing is started)."""
    seen: list = []
    monkeypatch.setattr(_core, "start_device", lambda device_id: seen.append(("start", device_id)))
    real_parse = gputok._vocab.parse_tiktoken_bytes

    def parse(*a, **k):
        seen.append(("parse",))
        return real_parse(*a, **k)

    monkeypatch.setattr(gputok._vocab, "parse_tiktoken_bytes", parse)
    gputok._vocab.gpt2_vocab.cache_clear()  # so that gpt2() parses its vocabulary again
    return seen


def test_gpt2_starts_the_device_before_the_vocabulary(calls):
    gputok.gpt2(device="auto", device_id=0)
    assert calls[:2] == [("start", 0), ("parse",)]


def test_loaders_start_the_device_first(calls):
    gputok.load_tiktoken_file(GPT2_TIKTOKEN, device="auto", device_id=0)
    assert calls[:2] == [("start", 0), ("parse",)]


def test_cpu_tokenizers_start_nothing(calls):
    gputok.gpt2(device="cpu")
    gputok.load_tiktoken_file(GPT2_TIKTOKEN, device="cpu")
    assert ("start", 0) not in calls


@pytest.mark.parametrize("device_id", [-1, 64, 2**31 - 1])
def test_start_device_ignores_ids_out_of_range(device_id):
    _core.start_device(device_id)  # returns at once; nothing to start, nothing raised


def test_start_device_rejects_a_non_int():
    with pytest.raises(TypeError):
        _core.start_device("0")
