"""The GPU tests' comparisons (GPU == CPU == tiktoken, naming the first token that differs) and a
per_word GPU tokenizer built with chosen GpuTuning fields. tests/gpu is on sys.path (pytest's
rootdir import mode), so the test modules import it by name."""

from __future__ import annotations

ALGORITHMS = ("per_word", "blockbpe", "blockbpe_optimized")


def _first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def assert_same(texts, got, want, label):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g != w:
            k = _first_diff(g, w)
            raise AssertionError(
                f"{label}: text {i} ({len(texts[i])} chars, {texts[i][:60]!r}...) differs at "
                f"token {k}: got {g[max(0, k - 3) : k + 3]} want {w[max(0, k - 3) : k + 3]}"
            )


def check_all(texts, gpus, cpu, tt, algorithms=ALGORITHMS, label=""):
    want = tt.encode_ordinary_batch(texts, num_threads=8)
    assert any(want) or not any(texts), "tiktoken returned nothing: reference misbuilt"
    assert_same(texts, cpu.encode_ordinary_batch(texts), want, f"cpu {label}")
    for a in algorithms:
        assert_same(texts, gpus[a].encode_ordinary_batch(texts), want, f"{a} {label}")


def gpu_with(**fields):
    """A per_word GPU tokenizer built with these GpuTuning fields (read at construction)."""
    import gputok  # here, so that a machine without gputok skips the test modules, not fails

    tuning = gputok.GpuTuning()
    for name, value in fields.items():
        setattr(tuning, name, value)
    return gputok.gpt2(device="cuda", gpu_tuning=tuning)
