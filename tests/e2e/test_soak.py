"""A short soak (docs/reliability.md "Soak"): perf_analyzer_configs/soak.py's code path
for about 12 s on the ensemble (gpt2 `tiny`) at concurrency 4, on its own server.

Asserts 0 failed requests (perf_analyzer and the server's statistics), that sampling worked
(RSS and descriptors of tritonserver and of the three stubs, every second) and that the
descriptor count did not grow. RSS growth is only bounded loosely here: 12 s on a shared
2-core machine is mostly warm-up (the gpt2 stub's RSS swings with batch size); the 5% bound
belongs to the 5-minute run (`make soak`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_short_soak(tmp_path):
    sys.path.insert(0, str(REPO / "perf_analyzer_configs"))
    from soak import run_soak

    s = run_soak(
        duration_s=12,
        concurrency=4,
        out=tmp_path,
        sample_s=1.0,
        warmup_frac=0.3,
        png=False,
    )
    assert s["perf_analyzer_rc"] == 0, s.get("pa_errors")
    assert s["failed_requests"] == 0, s["server_stats"]
    assert not s["pa_errors"], s["pa_errors"]
    assert s["server_stats"]["ensemble"]["success"] > 0, s["server_stats"]
    # one stub per instance: the tokenizer has 2 (config.pbtxt), named stub_tokenizer, _2;
    # gpt2_stream (the streaming ensemble's decoupled step) is served beside gpt2
    assert set(s["processes"]) == {
        "server",
        "stub_tokenizer",
        "stub_tokenizer_2",
        "stub_detokenizer",
        "stub_gpt2",
        "stub_gpt2_stream",
    }
    assert s["samples"] >= 8, s["samples"]
    for name, g in s["rss_kb"].items():
        assert g["first"] > 0 and g["last"] > 0, (name, g)
    assert s["rss_kb"]["total"]["growth_pct"] < 50, s["rss_kb"]
    for name, g in s["fds"].items():
        assert g["first"] > 0, (name, g)
    assert s["fds"]["total"]["growth"] <= 2, s["fds"]
    assert (tmp_path / "soak_samples.csv").is_file()
    assert (tmp_path / "soak_summary.json").is_file()
