"""Which Parquet page decoder a corpus worker uses: the run's ``parquet_decoder`` setting and the
worker's tokenizer (its public ``device`` and ``device_id`` only) -> read_parquet's ``decoder``,
and the GPU page decoders of this process (gputok._corpus_native.GpuPageDecoder)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

PARQUET_DECODERS = ("auto", "gputok", "gputok-gpu", "gputok-nvcomp", "arrow")

# "auto" in a run of fewer bytes of input files than this decodes snappy pages on the CPU (the
# "gputok" page reader), on a GPU worker too. In process on the H100 host (16 cores, 8 shards
# at once, 2026-11-27, bench/bench_corpus_ab.py, whole commands, medians of 3), 1 GB of
# Parquet took with the pages on the CPU / on the GPU: 1 MB shards 2.42 / 2.67 s, 4 MB 1.84 /
# 1.97, 20 MB 1.99 / 2.38, 100 MB 2.10 / 2.10; 10 GB in 100 MB shards 5.93 / 5.50. A short
# run pays the GPU decoder's set-up (py-spy: 0.19 s) and a round trip per row-group call on
# the path to its first batches; a long one gains the host CPU that the GPU saves (0.4 CPU s
# per GB of text against 1.7-2.2). Between 1 and 10 GB nothing was measured: the threshold
# sits between them. Again on 2026-11-28, with the tokenizer built while the first shards are
# read and the GPU decoder made beforehand on that thread too, 1 GB: 1 MB shards 1.91 / 2.10 s,
# 4 MB 1.42 / 1.40, 20 MB 1.57 / 1.73, 100 MB 1.39 / 1.73 (made beforehand or not: the same).
PARQUET_GPU_MIN_RUN_BYTES = 4 << 30


def parquet_decoder_for_run(mode: str, run_bytes: int) -> str:
    """The run's decoder setting: ``mode``, with "auto" made "gputok" (the page reader on the
    CPU) for a run of fewer than PARQUET_GPU_MIN_RUN_BYTES of input files."""
    return "gputok" if mode == "auto" and run_bytes < PARQUET_GPU_MIN_RUN_BYTES else mode


def _parquet_decoder(mode: str, tok) -> Callable | None:
    """read_parquet's ``decoder`` for the run's ``parquet_decoder`` setting and this worker's
    tokenizer: None for "arrow"; gputok's page reader on the CPU for "gputok"; for
    "gputok-gpu", and for "auto" (the default), the page reader with snappy on the GPU of a
    GPU tokenizer (its ``device`` and ``device_id``; a GpuPageDecoder of this process's, see
    gpu_page_decoder), else on the CPU; "gputok-nvcomp" the same with nvCOMP's snappy
    (nvcomp_library), for measurement only: 4.3x slower here and unsafe on malformed streams.
    A run under PARQUET_GPU_MIN_RUN_BYTES never asks for "auto" here: tokenize_corpus makes it
    "gputok" first (parquet_decoder_for_run). See docs/corpus.md, "Parquet decoding", for what
    each costs."""
    if mode == "arrow":
        return None
    if mode in ("auto", "gputok-gpu", "gputok-nvcomp") and getattr(tok, "device", None) == "cuda":
        engine = "nvcomp" if mode == "gputok-nvcomp" else "kernels"
        return gpu_page_decoder(int(getattr(tok, "device_id", 0)), engine).parquet_decode
    from gputok import _corpus_native

    return _corpus_native.parquet_decode


_GPU_DECODERS: dict[tuple[int, str], object] = {}
_GPU_DECODERS_LOCK = threading.Lock()


def gpu_page_decoder(device_id: int, engine: str = "kernels"):
    """This process's GpuPageDecoder for ``device_id`` and snappy ``engine`` ("kernels":
    gputok's; "nvcomp": NVIDIA nvCOMP's, from nvcomp_library()), made once and shared by its
    threads (it runs up to 4 decodes at once, each on a stream and buffers of its own). Its
    calls sleep while the device works (blocking_sync), as the corpus workers' GPU tokenizers
    do: the host's cores go to Parquet reading and hashing."""
    key = (device_id, engine)
    with _GPU_DECODERS_LOCK:
        dec = _GPU_DECODERS.get(key)
        if dec is None:
            from gputok import _corpus_native

            lib = nvcomp_library() if engine == "nvcomp" else ""
            dec = _corpus_native.GpuPageDecoder(device_id, blocking_sync=True, nvcomp_library=lib)
            _GPU_DECODERS[key] = dec
        return dec


def nvcomp_library() -> str:
    """nvCOMP's library for the "nvcomp" engine: lib64/libnvcomp.so.6 of the
    nvidia-libnvcomp-cu12 wheel where it is installed, else its soname, which the dynamic
    loader looks up (LD_LIBRARY_PATH, then the system's). GpuPageDecoder raises CudaError
    where neither loads."""
    try:
        import nvidia.libnvcomp as lib
    except ImportError:
        return "libnvcomp.so.6"
    path = os.path.join(os.path.dirname(lib.__file__ or ""), "lib64", "libnvcomp.so.6")
    return path if os.path.isfile(path) else "libnvcomp.so.6"
