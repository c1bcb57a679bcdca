"""device="auto" sends a small run in process to the CPU path, which starts no GPU: below ~64
MB of text on a 16-core H200 host the GPU's start-up costs more than it saves (tasks.
CPU_BELOW_BYTES_PER_CORE; 100 KB: 0.51 s with the GPU, 0.33 on the CPU)."""

from __future__ import annotations

import gzip

import pytest

import gputok
from gputok import corpus as C
from gputok.corpus import run as run_mod
from gputok.corpus import shard, tasks


def test_the_bound_scales_with_the_cores_up_to_64_mb():
    assert tasks.default_cpu_below(16) == 64 << 20
    assert tasks.default_cpu_below(8) == 32 << 20
    assert tasks.default_cpu_below(2) == 8 << 20
    assert tasks.default_cpu_below(128) == 64 << 20


def test_parquet_files_count_twice_their_size_compressed_ones_four_times():
    est = tasks.text_estimate
    assert est(["a.jsonl", "b.txt"], [10, 5], "jsonl") == 15
    assert est(["a.parquet", "b.pq"], [10, 5], "parquet") == 30
    assert est(["a.jsonl.gz", "b.jsonl", "c.txt.xz"], [10, 5, 1], "jsonl") == 40 + 5 + 4


@pytest.mark.parametrize(
    ("device", "here", "cpu_below", "text", "want"),
    [
        ("auto", True, 100, 99, "cpu"),
        ("auto", True, 100, 100, "auto"),  # at the bound: the GPU
        ("auto", True, 0, 0, "auto"),  # 0: never the CPU by size
        ("auto", False, 100, 1, "auto"),  # a cluster's workers choose for themselves
        ("cuda", True, 100, 1, "cuda"),  # told so
        ("cpu", True, 100, 10**9, "cpu"),
    ],
)
def test_which_runs_go_to_the_cpu(monkeypatch, device, here, cpu_below, text, want):
    monkeypatch.setattr(run_mod, "_gpu_files", lambda: True)
    lines: list[str] = []
    assert run_mod._small_run_device(device, here, cpu_below, text, lines.append) == want
    assert bool(lines) == (want == "cpu" and device == "auto")
    if lines:
        assert "on the CPU path" in lines[0] and "--device cuda" in lines[0]


def test_a_host_without_a_gpu_is_not_told_of_one(monkeypatch):
    monkeypatch.setattr(run_mod, "_gpu_files", lambda: False)
    lines: list[str] = []
    assert run_mod._small_run_device("auto", True, 100, 1, lines.append) == "cpu"
    assert lines == []


@pytest.fixture
def gpu_host(monkeypatch):
    """A machine that says it has a GPU; records what asks for it (cuda_available, and a
    tokenizer for a device other than "cpu", which is built on the CPU here)."""
    monkeypatch.setattr(shard, "_TOKENIZERS", {})
    asked: list[str] = []
    real = gputok.gpt2

    def cuda_available():
        asked.append("cuda_available")
        return True, ""

    def gpt2(device="auto", **kwargs):
        if device != "cpu":
            asked.append(f"gpt2({device})")
        return real(device="cpu")

    monkeypatch.setattr(gputok, "cuda_available", cuda_available)
    monkeypatch.setattr(gputok, "gpt2", gpt2)

    def start_device(device, options):
        if device != "cpu":
            asked.append(f"start({device})")

    monkeypatch.setattr(gputok, "_start_device", start_device)
    monkeypatch.setattr(run_mod, "_gpu_files", lambda: True)
    return asked


def _inputs(tmp_path) -> str:
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"text": "hello world"}\n' * 50)
    with gzip.open(d / "b.jsonl.gz", "wt") as f:
        f.write('{"text": "goodbye world"}\n' * 50)
    return str(d)


def test_a_small_run_starts_no_gpu(tmp_path, gpu_host):
    lines: list[str] = []
    run = C.tokenize_corpus(
        _inputs(tmp_path), tmp_path / "out", in_process=True, progress=False, log=lines.append
    )
    assert run.devices == ["cpu"] and len(run.written) == 2
    assert gpu_host == [], f"a GPU was asked for: {gpu_host}"
    assert any("on the CPU path" in line for line in lines)


def test_cpu_below_zero_keeps_the_gpu(tmp_path, gpu_host):
    run = C.tokenize_corpus(
        _inputs(tmp_path), tmp_path / "out", in_process=True, progress=False,
        log=lambda m: None, cpu_below=0,
    )  # fmt: skip
    assert len(run.written) == 2
    assert "gpt2(auto)" in gpu_host and "cuda_available" in gpu_host


@pytest.mark.parametrize("bad", [-1, 1.5, "64", True])
def test_a_bad_cpu_below_is_refused_before_any_work(tmp_path, bad):
    with pytest.raises(ValueError, match="cpu_below must be None or bytes >= 0"):
        C.tokenize_corpus(
            _inputs(tmp_path), tmp_path / "out", in_process=True, progress=False,
            log=lambda m: None, cpu_below=bad,
        )  # fmt: skip
    assert not list((tmp_path / "out").glob("*.bin"))
