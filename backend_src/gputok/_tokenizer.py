"""The Tokenizer: tiktoken's interface over the native core (CPU or CUDA)."""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

import numpy as np

from . import _core, _recipe
from ._encoding_api import EncodingAPI, UnknownTokenError
from ._fast_methods import bind_fast_methods
from ._inputs import byte_buffer, token_array, token_id

ALGORITHMS = ("per_word", "blockbpe", "blockbpe_optimized")

Text = str | bytes


# device="cuda" asked for where no usable GPU (or no CUDA build) exists: a RuntimeError.
CudaUnavailableError = _core.CudaUnavailableError


def cuda_available() -> tuple[bool, str]:
    """(True, "") when this build has CUDA and a device is visible, else (False, reason)."""
    ok, why = _core.cuda_available()
    return bool(ok), str(why)


def default_crossover() -> tuple[int, int, int]:
    """(cpu_below_bytes, bytes_per_row, stream_below_bytes) of device="auto" (Tokenizer says
    how they apply), measured by bench/bench_crossover.py on 16-core hosts (docs/api.md); the
    stream term is scaled down on fewer hardware threads."""
    below, per_row, stream = _core.default_crossover()
    return int(below), int(per_row), int(stream)


class Tokenizer(EncodingAPI):
    """An exact byte-level BPE tokenizer with tiktoken's semantics.

    Build one with ``gputok.gpt2()`` or a loader; the vocabulary is shared and immutable, so
    one Tokenizer may be used from many threads (calls release the GIL, but for one text under
    1 KiB on the CPU path, which holds it for its few microseconds; up to 4 GPU calls on
    one Tokenizer run at once, each on a stream of its own).

    On a GPU tokenizer each call picks its path: the CPU while its bytes are below
    ``cpu_below_bytes - rows * bytes_per_row``, the GPU from there (same ids either way); in a
    stream (a call starting within the CPU pool's spin window of the last one's end, none other
    running: its pool is awake) the CPU up to ``stream_below_bytes`` instead. Unset, the rule
    is ``default_crossover()`` for device="auto", which near it learns the faster path on this
    host (docs/api.md), and "always the GPU" for device="cuda"; ``set_cpu_below_bytes`` sets it.

    ``gpu_cache_bytes``: device memory for the GPU's learned cache, the pieces that calls of up
    to 528 KiB (on an H100 or H200; less on a GPU with fewer SMs) had to merge, kept with their
    ids for later calls (64 MiB by default; 0: none; a full cache keeps what it has). Results
    never depend on it, only speed does.
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
        gpu_cache_bytes: int | None = None,
        cpu_spin_us: int | None = None,
        cpu_below_bytes: int | None = None,
        bytes_per_row: int | None = None,
        stream_below_bytes: int | None = None,
        gpu_tuning: _core.GpuTuning | None = None,
    ):
        self.name = name
        self.algorithm = algorithm
        self._recipe = None  # how gputok built it, for pickle (_recipe.py); None: cannot
        self._changed: dict = {}  # set_* calls since, by name: their arguments
        self._vocab = vocab
        self._special_tokens = dict(special_tokens)
        gpu_cache = _gpu_cache_bytes(gpu_cache_bytes)
        self._core = _core.Core(
            vocab,
            device,
            algorithm,
            device_id,
            pool_limit_bytes,
            gpu_pretokenize,
            blocking_sync,
            int(copy_threads),
            cpu_below_bytes,
            bytes_per_row,
            stream_below_bytes,
            tuning=gpu_tuning if gpu_tuning is not None else _core.GpuTuning(),
            **gpu_cache,
        )
        self.device_id = int(device_id)  # the GPU it runs on when device is "cuda"
        if piece_cache_bytes is not None:
            self.set_piece_cache_bytes(piece_cache_bytes)
        if cpu_spin_us is not None:
            self.set_cpu_spin_us(cpu_spin_us)
        self._default_policy = self._policy(frozenset(), "all")
        # encode() / encode_ordinary() / encode_to_numpy() with their default arguments call
        # these: the policy converted once, a call takes the text alone (no pybind11 dispatch).
        self._encode_default = self._core.encoder(*self._default_policy, "strict")
        self._encode_ordinary = self._core.encoder([], [], "strict")
        self._encode_numpy = self._core.encoder(*self._default_policy, "strict", numpy=True)
        bind_fast_methods(self, Tokenizer)  # the three as builtins on this object

    @property
    def device(self) -> str:
        """ "cuda" when calls past the crossover run on the GPU, else "cpu". A device="auto"
        tokenizer says "cpu" in a process forked from the one that built it: CUDA does not
        survive fork(), so its calls run on the CPU path there."""
        return self._core.device

    # -- pretoken cache ---------------------------------------------------------------
    def set_piece_cache_bytes(self, nbytes: int) -> None:
        """Replace the CPU path's shared pretoken cache (piece bytes -> ids, kept across
        calls and threads) by an empty one of at most ``nbytes`` (64 KiB at least, 8 GiB at
        most: ValueError above); 0 turns it off. The default is 64 MiB. Results never depend
        on it, only speed does."""
        if int(nbytes) < 0:
            raise ValueError(f"piece_cache_bytes must be >= 0 (0: no cache), got {nbytes!r}")
        self._core.set_piece_cache_bytes(int(nbytes))
        self._changed["piece_cache_bytes"] = (int(nbytes),)

    # -- CPU thread pool ----------------------------------------------------------------
    def set_cpu_spin_us(self, us: int) -> None:
        """How long, in microseconds, the CPU path's idle pool threads watch for the next
        call before they sleep (0-10000; default 50). A call that comes within that window
        starts without waking sleeping threads; 0 never spins, for a machine where idle
        spinning is unwelcome. Results never depend on it."""
        if isinstance(us, bool) or not isinstance(us, int) or not 0 <= us <= 10000:
            raise ValueError(f"cpu_spin_us must be an int in [0, 10000], got {us!r}")
        self._core.set_cpu_spin_us(us)
        self._changed["cpu_spin_us"] = (us,)

    @property
    def cpu_spin_us(self) -> int:
        """The CPU pool's spin window in microseconds (set_cpu_spin_us)."""
        return int(self._core.cpu_spin_us())

    def piece_cache_stats(self) -> dict[str, int]:
        """The pretoken cache's capacity_bytes, entries, max_entries, arena_used and
        arena_bytes (all 0 when it is off)."""
        return dict(self._core.piece_cache_stats())

    # -- properties ---------------------------------------------------------------------
    @property
    def n_vocab(self) -> int:
        """Number of ids, ordinary and special (50257 for GPT-2), as tiktoken's ``n_vocab``."""
        return int(self._vocab.n_vocab)

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>`` (50256 for GPT-2), as tiktoken's ``eot_token``."""
        return self._special_tokens["<|endoftext|>"]

    @property
    def special_tokens_set(self) -> set[str]:
        """The special tokens' texts (``{"<|endoftext|>"}`` for GPT-2), a new set each call."""
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

    def _resolve(self, allowed_special, disallowed_special):
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
        """The ids of ``text`` (str, or bytes read as UTF-8), tiktoken's ``encode``.

        Special tokens: text that matches one in ``disallowed_special`` (by default every one
        not in ``allowed_special``) raises DisallowedSpecialError (a ValueError); one in
        ``allowed_special`` ("all" or a set of names) becomes its id; with
        ``disallowed_special=()`` it is encoded as ordinary text. ``errors`` for bytes that are
        not UTF-8: "strict" raises Utf8Error (a ValueError) naming the byte offset, "replace"
        substitutes U+FFFD as ``bytes.decode`` does. A str with lone surrogates is repaired as
        tiktoken repairs it.

            >>> tok.encode("hello <|endoftext|>", allowed_special="all")
            [31373, 220, 50256]
        """
        if not allowed_special and disallowed_special == "all" and errors == "strict":
            return self._encode_default(text)
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        return self._core.encode_list(text, allowed, disallowed, errors)

    def encode_to_numpy(
        self,
        text: Text,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> np.ndarray:
        """tiktoken's ``encode_to_numpy``: ``encode(text)``'s ids as a 1-D uint32 array (the
        dtype tiktoken returns), with no Python int per token. Up to 1,024 ids are copied into
        a fresh array; a longer result's array owns the encoder's output buffer (no copy)."""
        if not allowed_special and disallowed_special == "all" and errors == "strict":
            return self._encode_numpy(text)
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        return self._core.encode_numpy(text, allowed, disallowed, errors)

    def encode_ordinary(self, text: Text, *, errors: str = "strict") -> list[int]:
        """``encode`` with every special token read as ordinary text (never raises for one)."""
        if errors == "strict":
            return self._encode_ordinary(text)
        return self._core.encode_list(text, [], [], errors)

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
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        ids, out_offsets, _ = self._core.encode_flat_buffer(
            byte_buffer(data), bounds, allowed, disallowed, errors, int(num_threads)
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
        bounds = _as_bounds(offsets)
        return self._packed(self._core.encode_packed_buffer, byte_buffer(data), bounds, *policy)

    def _packed(self, call, *args):
        """(ids, ends) of the core's packed ``call`` on ``args`` (the documents), followed by
        (allowed_special, disallowed_special, errors, num_threads, separator)."""
        *docs, allowed_special, disallowed_special, errors, num_threads, separator = args
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        ids, ends, _ = call(*docs, allowed, disallowed, errors, int(num_threads), separator)
        return ids, ends

    def _encode_flat(self, texts, num_threads, allowed_special, disallowed_special, errors):
        texts = _as_text_sequence(texts)
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        return self._core.encode_flat(texts, allowed, disallowed, errors, int(num_threads))

    def encode_batch(
        self,
        texts: Sequence[Text],
        *,
        num_threads: int = 0,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
        errors: str = "strict",
    ) -> list[list[int]]:
        """``encode`` of each text, as a list of lists, in one native call.

        ``num_threads``: CPU threads for the batch (0: automatic; above 1024 ValueError).
        Special tokens and ``errors`` as in ``encode``; the first text that fails names its
        index in the error. ``encode_batch_flat`` returns the same ids without a Python list
        per text.
        """
        allowed, disallowed = self._resolve(allowed_special, disallowed_special)
        return self._core.encode_lists(
            _as_text_sequence(texts), allowed, disallowed, errors, int(num_threads)
        )

    def encode_ordinary_batch(
        self, texts: Sequence[Text], *, num_threads: int = 0, errors: str = "strict"
    ) -> list[list[int]]:
        """``encode_ordinary`` of each text (``encode_batch`` with ``disallowed_special=()``)."""
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
        """The bytes of ``tokens`` (a sequence or an integer array of ids), concatenated.

        An id not in the vocabulary raises UnknownTokenError (a KeyError, as in tiktoken, and
        a ValueError); ids that are not integers (floats, bools, str) raise TypeError.
        """
        arr = token_array(tokens)
        try:
            return self._core.decode_bytes(arr)
        except ValueError as e:
            raise UnknownTokenError(str(e)) from None

    def decode(self, tokens: Iterable[int], errors: str = "replace") -> str:
        """The text of ``tokens``: ``decode_bytes(tokens).decode("utf-8", errors)``.

        The default, "replace", is lossy where the ids end inside a character (U+FFFD), as in
        tiktoken; "strict" raises UnicodeDecodeError there instead.

            >>> tok.decode([31373, 995])
            'hello world'
        """
        return self.decode_bytes(tokens).decode("utf-8", errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one id, special tokens included (``<|endoftext|>``'s text for 50256).
        UnknownTokenError (KeyError, ValueError) when it is not in the vocabulary."""
        try:
            return self._vocab.token_bytes(token_id(token))
        except ValueError as e:
            raise UnknownTokenError(str(e)) from None

    def decode_batch(
        self, batch: Iterable[Iterable[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """``decode`` of each list of ids. ``num_threads`` is accepted for tiktoken's
        signature; decoding is a copy of the tokens' bytes, cheaper than handing it to threads."""
        del num_threads
        return [self.decode(tokens, errors) for tokens in batch]

    # -- GPU controls ---------------------------------------------------------------------
    def gpu_counters(self) -> dict:
        """Pool and launch counters of the GPU encoder (empty on the CPU)."""
        return dict(self._core.gpu_counters())

    def set_pool_limit(self, nbytes: int) -> None:
        """Caps the GPU memory pool; a request that needs more raises DeviceMemoryError."""
        self._core.set_pool_limit(int(nbytes))
        self._changed["pool_limit"] = (int(nbytes),)

    def set_cpu_below_bytes(self, nbytes: int, per_row: int = 0, stream_below: int = 0) -> None:
        """On a GPU tokenizer, calls whose bytes of text plus ``rows * per_row`` are fewer than
        ``nbytes`` (``stream_below`` in a stream) take the CPU path (same ids); ``(0)``: always
        the GPU; ``(*gputok.default_crossover())``: device="auto"'s rule, as it is (nothing
        learned). A CPU tokenizer raises ValueError (there is no GPU path to choose)."""
        self._core.set_crossover(int(nbytes), int(per_row), int(stream_below))
        self._changed["cpu_below_bytes"] = (int(nbytes), int(per_row), int(stream_below))

    @property
    def crossover(self) -> tuple[int, int, int]:
        """(cpu_below_bytes, bytes_per_row, stream_below_bytes): the rule in force."""
        below, per_row, stream = self._core.crossover
        return int(below), int(per_row), int(stream)

    def path_for(self, nbytes: int, rows: int = 1) -> str:
        """ "cuda" or "cpu": the rule's path for ``nbytes`` bytes over ``rows`` texts, alone."""
        return "cuda" if self._core.routes_to_gpu(int(nbytes), int(rows)) else "cpu"

    def set_gpu_pretokenize(self, on: bool) -> None:
        """True: pieces are found on the device (default); False: on the CPU."""
        self._core.set_gpu_pretokenize(bool(on))
        self._changed["gpu_pretokenize"] = (bool(on),)

    def __reduce__(self):
        """Pickles as the gputok call that built it and the set_* calls since (_recipe.py)."""
        return _recipe.reduce(self)


def _gpu_cache_bytes(nbytes) -> dict:
    """Core's gpu_cache_bytes argument: {} for the default (64 MiB), else 0 (none) or 64 KiB
    to 16 GiB of device memory."""
    if nbytes is None:
        return {}
    ok = isinstance(nbytes, int) and not isinstance(nbytes, bool)
    if not ok or not (nbytes == 0 or 1 << 16 <= nbytes <= 1 << 34):
        raise ValueError(
            f"gpu_cache_bytes must be 0 (no cache) or an int from 65536 to 2**34, got {nbytes!r}"
        )
    return {"gpu_cache_bytes": nbytes}


def _as_text_sequence(texts) -> Sequence:
    if isinstance(texts, (str, bytes)):
        raise TypeError("expected a sequence of str or bytes, got a single text")
    return texts if isinstance(texts, Sequence) else list(texts)


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
    return np.ascontiguousarray(arr)  # the core checks its shape and values


def _split_rows(ids: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    flat = ids.tolist()
    bounds = offsets.tolist()
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
