"""The corpus tool's native module (gputok._corpus_native) apart from the tokenizer's (_core):
what each exports, and how the corpus picks its Parquet decoder through the tokenizer's public
attributes only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gputok
from gputok import _core
from gputok import _corpus_native as native
from gputok import corpus as C

CORPUS_PY = Path(C.__file__).parent


def test_the_tokenizer_module_has_no_corpus_code():
    corpus_names = ("parquet_decode", "parquet_footer", "ParquetPages", "pack_uint16")
    assert not [n for n in corpus_names + ("find_separators",) if hasattr(_core, n)]
    assert all(hasattr(native, n) for n in corpus_names + ("GpuPageDecoder", "ParquetNull"))
    assert not hasattr(_core.GpuTuning(), "snappy_decode")


def test_the_corpus_package_reaches_natives_through_its_own_module():
    """No gputok/corpus module imports _core or reads a tokenizer's ``_core``: it uses
    _corpus_native and the tokenizer's public API."""
    for path in sorted(CORPUS_PY.glob("*.py")):
        src = path.read_text()
        assert not re.search(r"\b_core\b", src), path.name


def test_decoder_modes(monkeypatch):
    """The run's parquet_decoder setting -> read_parquet's decoder: Arrow, the page reader on
    the CPU, or (auto, gputok-gpu) on a GpuPageDecoder for the GPU tokenizer's device, one per
    device and process. Only the tokenizer's public device and device_id are read."""

    class GpuDecoder:
        def __init__(self, device_id, **kw):
            self.device_id, self.kw = device_id, kw

        def parquet_decode(self, *a):  # pragma: no cover - identity only
            return a

    monkeypatch.setattr(native, "GpuPageDecoder", GpuDecoder)
    monkeypatch.setattr(C.decoders, "_GPU_DECODERS", {})

    class Tok:
        device, device_id = "cuda", 3

    tok = Tok()
    assert C._parquet_decoder("arrow", tok) is None
    assert C._parquet_decoder("gputok", tok) is native.parquet_decode
    gpu = C._parquet_decoder("gputok-gpu", tok)
    assert gpu.__self__.device_id == 3
    assert gpu.__self__.kw == {"blocking_sync": True, "nvcomp_library": ""}
    assert C._parquet_decoder("auto", tok).__self__ is gpu.__self__  # one per device
    nv = C._parquet_decoder("gputok-nvcomp", tok).__self__
    assert nv is not gpu.__self__ and nv.kw["nvcomp_library"].endswith("libnvcomp.so.6")
    assert C._parquet_decoder("gputok-gpu", object()) is native.parquet_decode
    assert C._parquet_decoder("auto", object()) is native.parquet_decode
    assert C._parquet_decoder("gputok-nvcomp", object()) is native.parquet_decode
    assert C.shard_spec({}, "a", "", "n", "o").parquet_decoder == "auto"
    with pytest.raises(ValueError, match="parquet_decoder must be one of"):
        C.tokenize_corpus([], "out", parquet_decoder="fast")


def test_gpu_decoder_errors_are_the_tokenizers_public_ones(tmp_path):
    """The decoder's CUDA errors come out as gputok.CudaError (a RuntimeError), whichever module
    raised them; a library that is not nvCOMP's, or no library at all, is refused by name."""
    ok, why = gputok.cuda_available()
    if "without CUDA" in why:
        pytest.skip(why)  # the CPU-only build's decoder refuses every construction
    missing = str(tmp_path / "libnvcomp.so.6")
    with pytest.raises(gputok.CudaError, match="cannot load nvCOMP from .*libnvcomp.so.6"):
        native.GpuPageDecoder(nvcomp_library=missing)
    libc = "libc.so.6"  # loads, and has no nvCOMP symbols
    with pytest.raises(gputok.CudaError, match="lacks nvCOMP 6's batched snappy"):
        native.GpuPageDecoder(nvcomp_library=libc)
    if not ok:
        with pytest.raises(gputok.CudaError, match="no CUDA device"):
            native.GpuPageDecoder()
