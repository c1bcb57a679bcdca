"""The Tokenizer: tiktoken's interface over the native core (CPU or CUDA)."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

import numpy as np

from . import _core

ALGORITHMS = ("per_word", "blockbpe", "blockbpe_optimized")
ERRORS = ("strict", "replace")

Text = str | bytes


class CudaUnavailableError(RuntimeError):
    """device="cuda" was asked for where no usable GPU (or no CUDA build) exists."""


def cuda_available() -> tuple[bool, str]:
    """(True, "") when this build has CUDA and a device is visible, else (False, reason)."""
    ok, why = _core.cuda_available()
    return bool(ok), str(why)


def _resolve_device(device: str) -> str:
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "cpu":
        return "cpu"
    ok, why = cuda_available()
    if device == "cuda" and not ok:
        raise CudaUnavailableError(f"device='cuda' is not available: {why}")
    return "cuda" if ok else "cpu"


class Tokenizer:
    """An exact byte-level BPE tokenizer with tiktoken's semantics.

    Build one with ``gputok.gpt2()`` or a loader; the vocabulary is shared and immutable, so
    one Tokenizer may be used from many threads (calls release the GIL; GPU calls on one
    Tokenizer run one at a time).
    """

    def __init__(
        self,
        vocab: _core.Vocab,
        special_tokens: dict[str, int],
        *,
        name: str = "gpt2",
        device: str = "auto",
        algorithm: str = "per_word",
        device_id: int = 0,
        pool_limit_bytes: int = 0,
        gpu_pretokenize: bool = True,
        blocking_sync: bool = False,
        copy_threads: int = 0,
        piece_cache_bytes: int | None = None,
    ):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        self.name = name
        self.device = _resolve_device(device)
        self.algorithm = algorithm
        self._vocab = vocab
        self._special_tokens = dict(special_tokens)
        if int(copy_threads) < 0:
            raise ValueError(f"copy_threads must be >= 0 (0: automatic), got {copy_threads!r}")
        self._core = _core.Core(
            vocab,
            self.device,
            device_id,
            pool_limit_bytes,
            gpu_pretokenize,
            blocking_sync,
            int(copy_threads),
        )
        if piece_cache_bytes is not None:
            self.set_piece_cache_bytes(piece_cache_bytes)
        self._default_policy = self._policy(frozenset(), "all")

    # -- pretoken cache ---------------------------------------------------------------
    def set_piece_cache_bytes(self, nbytes: int) -> None:
        """Replace the CPU path's shared pretoken cache (piece bytes -> ids, kept across
        calls and threads) by an empty one of at most ``nbytes`` (64 KiB at least); 0 turns
        it off. The default is 64 MiB. Results never depend on it, only speed does."""
        if int(nbytes) < 0:
            raise ValueError(f"piece_cache_bytes must be >= 0 (0: no cache), got {nbytes!r}")
        self._core.set_piece_cache_bytes(int(nbytes))

    def piece_cache_stats(self) -> dict[str, int]:
        """The pretoken cache's capacity_bytes, entries, max_entries, arena_used and
        arena_bytes (all 0 when it is off)."""
        return dict(self._core.piece_cache_stats())

    # -- properties ---------------------------------------------------------------------
    @property
    def n_vocab(self) -> int:
        return int(self._vocab.n_vocab)

    @property
    def eot_token(self) -> int:
        return self._special_tokens["<|endoftext|>"]

    @property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    def __repr__(self) -> str:
        return (
            f"<gputok.Tokenizer {self.name!r} device={self.device!r} algorithm={self.algorithm!r}>"
        )

    # -- policy -------------------------------------------------------------------------
    def _policy(self, allowed_special, disallowed_special) -> tuple[list[int], list[int]]:
        specials = self._special_tokens
        allowed = set(specials) if allowed_special == "all" else set(allowed_special)
        if disallowed_special == "all":
            disallowed = set(specials) - allowed
        else:
            disallowed = set(disallowed_special)
        unknown = (allowed | disallowed) - set(specials)
        if unknown:
            raise ValueError(
                f"unknown special token(s) {sorted(unknown)}; this vocabulary has {sorted(specials)}"
            )
        return sorted(specials[t] for t in allowed), sorted(specials[t] for t in disallowed)

    def _resolve(self, allowed_special, disallowed_special, errors):
        if errors not in ERRORS:
            raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
        if not allowed_special and disallowed_special == "all":
            return self._default_policy
        return self._policy(allowed_special, disallowed_special)

    # -- encoding -----------------------------------------------------------------------
    def encode(
        self,
        text: Text,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> list[int]:
        allowed, disallowed = self._resolve(allowed_special, disallowed_special, errors)
        return self._core.encode_list(text, allowed, disallowed, errors, self.algorithm)

    def encode_ordinary(self, text: Text, *, errors: str = "strict") -> list[int]:
        if errors not in ERRORS:
            raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
        return self._core.encode_list(text, [], [], errors, self.algorithm)

    def encode_batch_flat(
        self,
        texts: Sequence[Text],
        *,
        num_threads: int = 0,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> tuple[np.ndarray, np.ndarray]:
        """All rows' ids in one int32 array, and int64 offsets (len(texts) + 1).

        Row i is ``ids[offsets[i]:offsets[i + 1]]``. No per-row Python objects are made.
        """
        ids, offsets, _ = self._encode_flat(
            texts, num_threads, allowed_special, disallowed_special, errors
        )
        return ids, offsets

    def encode_buffer_flat(
        self,
        data,
        offsets,
        *,
        num_threads: int = 0,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch_flat`` of documents that are slices of one buffer, with no Python
        object per document (e.g. an Arrow string array's data and offsets buffers).

        ``data``: any C-contiguous bytes-like object (bytes, bytearray, memoryview, a numpy
        array, a ``pyarrow.Buffer``), read in place as UTF-8 bytes. ``offsets``: int32 or
        int64, either shape (n + 1,), non-decreasing, document i being
        ``data[offsets[i]:offsets[i + 1]]`` (``offsets[0]`` need not be 0), or shape (n, 2)
        of ``[start, end)`` spans (any order, gaps allowed, e.g. around separators). Other
        integer dtypes are converted; anything else raises TypeError, a range outside
        ``data`` ValueError. Returns what ``encode_batch_flat`` returns for
        ``[bytes(data[a:b]) for each document]``, with the same ``errors`` semantics
        (invalid UTF-8: "strict" raises ValueError naming the document and byte offset,
        "replace" substitutes U+FFFD as CPython does). The GIL is released while encoding;
        do not resize or write ``data`` from another thread meanwhile.
        """
        bounds = _as_bounds(offsets)
        allowed, disallowed = self._resolve(allowed_special, disallowed_special, errors)
        ids, out_offsets, _ = self._core.encode_flat_buffer(
            data, bounds, allowed, disallowed, errors, int(num_threads), self.algorithm
        )
        return ids, out_offsets

    def encode_batch_uint16(
        self,
        texts: Sequence[Text],
        *,
        separator: int | None = None,
        num_threads: int = 0,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch_flat`` packed the way token shards store it (nanoGPT's ``.bin``):
        every row's ids as uint16, followed by ``separator`` (e.g. ``eot_token``) when one is
        given. Returns (ids uint16, ends int64 of len(texts)): row i is
        ``ids[ends[i - 1]:ends[i]]`` (from 0 for the first), its separator included. An id
        that does not fit uint16 raises OverflowError naming the row. On the GPU the ids are
        narrowed while they are copied back, with no int32 array in between.
        """
        policy = (allowed_special, disallowed_special, errors, num_threads, separator)
        return self._packed(self._core.encode_packed, _as_text_sequence(texts), *policy)

    def encode_buffer_uint16(
        self,
        data,
        offsets,
        *,
        separator: int | None = None,
        num_threads: int = 0,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch_uint16`` of documents that are slices of one buffer, given as for
        ``encode_buffer_flat``."""
        policy = (allowed_special, disallowed_special, errors, num_threads, separator)
        return self._packed(self._core.encode_packed_buffer, data, _as_bounds(offsets), *policy)

    def _packed(self, call, *args):
        """(ids, ends) of the core's packed ``call`` on ``args`` (the documents), followed by
        (allowed_special, disallowed_special, errors, num_threads, separator)."""
        *docs, allowed_special, disallowed_special, errors, num_threads, separator = args
        allowed, disallowed = self._resolve(allowed_special, disallowed_special, errors)
        sep = _separator(separator)
        ids, ends, _ = call(
            *docs, allowed, disallowed, errors, int(num_threads), self.algorithm, sep
        )
        return ids, ends

    def _encode_flat(self, texts, num_threads, allowed_special, disallowed_special, errors):
        texts = _as_text_sequence(texts)
        allowed, disallowed = self._resolve(allowed_special, disallowed_special, errors)
        return self._core.encode_flat(
            texts, allowed, disallowed, errors, int(num_threads), self.algorithm
        )

    def encode_batch(
        self,
        texts: Sequence[Text],
        *,
        num_threads: int = 0,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> list[list[int]]:
        ids, offsets = self.encode_batch_flat(
            texts,
            num_threads=num_threads,
            allowed_special=allowed_special,
            disallowed_special=disallowed_special,
            errors=errors,
        )
        return _split_rows(ids, offsets)

    def encode_ordinary_batch(
        self, texts: Sequence[Text], *, num_threads: int = 0, errors: str = "strict"
    ) -> list[list[int]]:
        return self.encode_batch(
            texts, num_threads=num_threads, disallowed_special=(), errors=errors
        )

    def tokenize_batch(self, texts: Sequence[Text], *, num_threads: int = 0):
        """The GPUTOK paper's call: ``token_ids, kernel_time_ms = tok.tokenize_batch(texts)``.

        On the GPU the time is the kernels' device time from CUDA events; on the CPU it is the
        wall time of the native call (there is no kernel to time separately).
        """
        start = time.perf_counter()
        ids, offsets, kernel_ms = self._encode_flat(texts, num_threads, frozenset(), (), "strict")
        if self.device == "cpu":
            kernel_ms = (time.perf_counter() - start) * 1e3
        return _split_rows(ids, offsets), float(kernel_ms)

    # -- decoding -----------------------------------------------------------------------
    def decode_bytes(self, tokens: Iterable[int]) -> bytes:
        if not isinstance(tokens, np.ndarray):
            tokens = list(tokens)
        try:
            arr = np.asarray(tokens, dtype=np.int64)
        except OverflowError:
            raise ValueError("token id out of range (does not fit in 64 bits)") from None
        if arr.ndim != 1:
            raise ValueError(f"expected a 1-D sequence of token ids, got shape {arr.shape}")
        return self._core.decode_bytes(arr)

    def decode(self, tokens: Iterable[int], errors: str = "replace") -> str:
        return self.decode_bytes(tokens).decode("utf-8", errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        return self._vocab.token_bytes(int(token))

    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "replace") -> list[str]:
        return [self.decode(tokens, errors) for tokens in batch]

    # -- GPU controls ---------------------------------------------------------------------
    def gpu_counters(self) -> dict:
        """Pool and launch counters of the GPU encoder (empty on the CPU)."""
        return dict(self._core.gpu_counters())

    def set_pool_limit(self, nbytes: int) -> None:
        """Caps the GPU memory pool; a request that needs more raises DeviceMemoryError."""
        self._core.set_pool_limit(int(nbytes))

    def set_cpu_below_bytes(self, nbytes: int) -> None:
        """On a GPU tokenizer, calls with fewer than ``nbytes`` bytes of text in total take the
        CPU path (same ids): a few hundred tokens cost ~15 us there and ~55 us through a kernel
        launch, two copies and a sync (docs/benchmarks.md). 0 (the default): always the GPU."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        self._core.set_cpu_below_bytes(int(nbytes))

    def set_gpu_pretokenize(self, on: bool) -> None:
        """True: pieces are found on the device (default); False: on the CPU."""
        self._core.set_gpu_pretokenize(bool(on))


def _as_text_sequence(texts) -> Sequence:
    if isinstance(texts, (str, bytes)):
        raise TypeError("expected a sequence of str or bytes, got a single text")
    return texts if isinstance(texts, Sequence) else list(texts)


def _separator(separator) -> int:
    """The core's separator argument: -1 for none, else an id that fits uint16."""
    if separator is None:
        return -1
    if isinstance(separator, bool) or not isinstance(separator, (int, np.integer)):
        raise TypeError(f"separator must be an int or None, got {type(separator).__name__}")
    if not 0 <= int(separator) <= 0xFFFF:
        raise ValueError(f"separator must be in 0..65535 (a uint16 id), got {separator}")
    return int(separator)


def _as_bounds(offsets) -> np.ndarray:
    """``offsets`` as a C-contiguous int32/int64 array (no copy when it is one already)."""
    arr = np.asarray(offsets)
    if arr.dtype != np.int32 and arr.dtype != np.int64:
        kind = arr.dtype.kind
        if kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise ValueError("offsets out of range (do not fit in int64)")
        if kind not in "iu" and arr.size:  # an empty list reads as float64: let it pass
            raise TypeError(f"offsets must be an integer array, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
    if arr.ndim == 1 and arr.shape[0] < 1 or arr.ndim == 2 and arr.shape[1] != 2 or arr.ndim > 2:
        raise ValueError(f"offsets must have shape (n + 1,) or (n, 2), got {arr.shape}")
    if arr.ndim == 0:
        raise ValueError("offsets must have shape (n + 1,) or (n, 2), got a scalar")
    return np.ascontiguousarray(arr)


def _split_rows(ids: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    flat = ids.tolist()
    bounds = offsets.tolist()
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
