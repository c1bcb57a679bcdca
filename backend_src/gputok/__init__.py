"""gputok: an exact GPT-2 byte-level BPE tokenizer with a native C++ path and CUDA kernels.

    >>> import gputok
    >>> tok = gputok.gpt2()
    >>> tok.encode("hello world")
    [31373, 995]

The ids equal tiktoken's r50k_base ("gpt2") on every input. See docs/api.md.
"""

from __future__ import annotations

try:
    from . import _core
except ImportError as e:  # pragma: no cover - only without a build
    raise ImportError(
        f"gputok's native extension is not built ({e}): run `make build` in the repository"
    ) from e
from . import _recipe
from ._encoding_api import (
    UnknownTokenError,
    encoding_for_model,
    encoding_name_for_model,
    get_encoding,
    list_encoding_names,
)
from ._tokenizer import (
    ALGORITHMS,
    CudaUnavailableError,
    Tokenizer,
    cuda_available,
    default_crossover,
)
from ._vocab import (
    GPT2_RANKS,
    GPT2_RANKS_SHA256,
    GPT2_SPECIALS,
    VocabError,
    bytes_to_unicode,
    gpt2_vocab,
    vocab_from_hf_files,
    vocab_from_tiktoken_file,
    vocab_from_tokenizer_json,
)

__version__ = "0.1.0"

DeviceMemoryError = _core.DeviceMemoryError
CudaError = _core.CudaError
Utf8Error = _core.Utf8Error  # a ValueError: invalid UTF-8 under errors="strict"
DisallowedSpecialError = _core.DisallowedSpecialError  # a ValueError, as tiktoken raises
IdRangeError = _core.IdRangeError  # an OverflowError: an id that does not fit uint16
GpuTuning = _core.GpuTuning  # the GPU path's tuning switches: Tokenizer(gpu_tuning=...)

__all__ = [
    "ALGORITHMS",
    "CudaError",
    "CudaUnavailableError",
    "DeviceMemoryError",
    "DisallowedSpecialError",
    "IdRangeError",
    "GpuTuning",
    "GPT2_RANKS",
    "GPT2_RANKS_SHA256",
    "Tokenizer",
    "UnknownTokenError",
    "Utf8Error",
    "VocabError",
    "bytes_to_unicode",
    "cuda_available",
    "default_crossover",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "gpt2",
    "list_encoding_names",
    "load_hf_files",
    "load_tiktoken_file",
    "load_tokenizer_json",
]


def _start_device(device, options: dict) -> None:
    """Where the tokenizer may use a GPU, its context is made on a native thread while the
    vocabulary parses (the build waits for it): ``gpt2()`` ready 0.45-0.53 -> 0.36-0.37 s
    after a fresh process's first line on the H100 host (2026-11-28, bench/bench_startup.py)."""
    device_id = options.get("device_id", 0)
    if device != "cpu" and isinstance(device_id, int) and not isinstance(device_id, bool):
        _core.start_device(device_id)


def gpt2(device: str = "auto", algorithm: str = "per_word", **options) -> Tokenizer:
    """GPT-2's tokenizer (r50k_base) from the packaged, sha256-pinned ranks.

    device: "auto" (the GPU when usable, each call on the faster path for its size and for a
    stream of calls: see default_crossover), "cpu" or "cuda" (every call on the GPU; raises
    CudaUnavailableError where no GPU can be used). algorithm: the GPU merge method, one of
    ALGORITHMS. options: device_id, pool_limit_bytes, gpu_pretokenize, blocking_sync (GPU calls
    wait asleep instead of spinning: frees a core per waiting caller for a few microseconds
    of latency; the corpus workers use it), copy_threads (host threads that copy a large GPU
    batch in and out of pinned memory; 0: up to 8; 1: the calling thread alone),
    piece_cache_bytes (the CPU path's pretoken cache, shared by calls and threads: 64 MiB by
    default, 0: off), gpu_cache_bytes (the GPU's learned cache of merged pieces: 64 MiB by
    default, 0: off), cpu_spin_us (how long idle CPU pool threads watch for the next call
    before sleeping: 50 by default, 0: never spin), cpu_below_bytes, bytes_per_row and
    stream_below_bytes (the CPU/GPU crossover; Tokenizer says how).
    """
    _start_device(device, options)
    tok = Tokenizer(
        gpt2_vocab(), GPT2_SPECIALS, name="gpt2", device=device, algorithm=algorithm, **options
    )
    return _recipe.record(tok, "gpt2", (), {"device": device, "algorithm": algorithm, **options})


def load_tiktoken_file(path, special_tokens=None, *, name=None, **options) -> Tokenizer:
    """A Tokenizer from a tiktoken-format file (``base64 rank`` lines; rank == id)."""
    specials = GPT2_SPECIALS if special_tokens is None else special_tokens
    _start_device(options.get("device", "auto"), options)
    vocab, specials = vocab_from_tiktoken_file(path, specials)
    tok = Tokenizer(vocab, specials, name=name or str(path), **options)
    kwargs = {"name": name, **options}
    return _recipe.record(tok, "load_tiktoken_file", (path, special_tokens), kwargs)


def load_hf_files(
    vocab_json, merges_txt, special_tokens=None, *, name=None, **options
) -> Tokenizer:
    """A Tokenizer from GPT-2-style HF files: vocab.json (byte-mapped) and merges.txt."""
    _start_device(options.get("device", "auto"), options)
    vocab, specials = vocab_from_hf_files(vocab_json, merges_txt, special_tokens)
    tok = Tokenizer(vocab, specials, name=name or str(vocab_json), **options)
    args = (vocab_json, merges_txt, special_tokens)
    return _recipe.record(tok, "load_hf_files", args, {"name": name, **options})


def load_tokenizer_json(path, *, name=None, **options) -> Tokenizer:
    """A Tokenizer from an HF tokenizer.json holding a byte-level BPE with GPT-2's pattern."""
    _start_device(options.get("device", "auto"), options)
    vocab, specials = vocab_from_tokenizer_json(path)
    tok = Tokenizer(vocab, specials, name=name or str(path), **options)
    return _recipe.record(tok, "load_tokenizer_json", (path,), {"name": name, **options})
