"""Batch (the documents of one tokenizer call) and what the readers share: Arrow buffers,
batch sizing, and a reader thread that parses ahead of the tokenizer."""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Callable, Iterator

import numpy as np

from ._common import MIN_BATCH_BYTES, PIPELINE_BATCHES


@dataclasses.dataclass
class Batch:
    """The documents of one tokenizer call: ``docs`` (str or bytes), or, with ``docs`` None,
    slices of ``data`` (a bytes-like buffer) given by ``bounds``: int32/int64, shape (n + 1,)
    boundaries or (n, 2) [start, end) spans, as ``Tokenizer.encode_buffer_flat`` takes them.
    ``locate(i)`` names where document ``i`` came from (for messages, built only when
    needed). ``arrow``: the Arrow array the buffer came from, if any (to list it quickly)."""

    docs: list | None
    locate: Callable[[int], str]
    skipped_invalid_utf8: int = 0
    data: object = None
    bounds: np.ndarray | None = None
    arrow: object = None

    def __len__(self) -> int:
        if self.docs is not None:
            return len(self.docs)
        return len(self.bounds) - (self.bounds.ndim == 1)

    def spans(self) -> np.ndarray:
        """(n, 2) int64 [start, end) of every document in ``data``."""
        b = self.bounds.astype(np.int64, copy=False)
        return b if b.ndim == 2 else np.stack([b[:-1], b[1:]], axis=1)

    def lengths(self) -> np.ndarray:
        """Byte length of every document (str: of its UTF-8)."""
        if self.docs is not None:
            return np.fromiter(map(_utf8_len, self.docs), dtype=np.int64, count=len(self.docs))
        b = self.bounds.astype(np.int64, copy=False)
        return np.diff(b) if b.ndim == 1 else b[:, 1] - b[:, 0]

    def doc_list(self) -> list:
        """The documents as a list (bytes where they are slices of a buffer), for tokenizers
        that take only sequences."""
        if self.docs is not None:
            return self.docs
        if self.arrow is not None:
            import pyarrow as pa

            return self.arrow.cast(pa.large_binary()).to_pylist()
        mv = memoryview(self.data).cast("B")
        return [mv[a:b].tobytes() for a, b in self.spans().tolist()]

    def select(self, keep: np.ndarray) -> Batch:
        """The documents at positions ``keep`` (ascending), with ``locate`` still naming
        their original places."""
        keep = np.asarray(keep, dtype=np.int64)
        where = keep.tolist()
        locate = self.locate

        def sub_locate(i: int) -> str:
            return locate(where[i])

        if self.docs is not None:
            return Batch([self.docs[i] for i in where], sub_locate, self.skipped_invalid_utf8)
        return Batch(None, sub_locate, self.skipped_invalid_utf8, self.data, self.spans()[keep])


def _utf8_len(d) -> int:
    return len(d) if isinstance(d, (bytes, bytearray)) else len(d.encode("utf-8", "surrogatepass"))


def _arrow_parts(arr) -> tuple[object, np.ndarray, object]:
    """(data buffer, offsets int32/int64 of len(arr) + 1, the array the buffers belong to)
    of an Arrow string/binary array without copying (view types are cast first)."""
    import pyarrow as pa

    t = arr.type
    large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
    if not (large or pa.types.is_string(t) or pa.types.is_binary(t)):
        arr, large = arr.cast(pa.large_binary()), True
    dtype = np.int64 if large else np.int32
    _validity, offs, data = arr.buffers()[:3]
    if len(arr) == 0 or offs is None:
        return b"", np.zeros(1, dtype=dtype), arr
    offsets = np.frombuffer(offs, dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
    return (data if data is not None else b""), offsets, arr


def _arrow_batch(arr, locate: Callable[[int], str]) -> Batch:
    data, offsets, arr = _arrow_parts(arr)
    return Batch(None, locate, 0, data, offsets, arr)


def native_read_bound(want: int) -> dict:
    """The native file readers' bounds for files of ``want`` bytes in all (their sizes a
    moment ago): room for files that grew a little since, and the buffer's first size."""
    return {"max_bytes": want + (want >> 2) + (1 << 20), "reserve": want}


def _batch_target(
    batch_bytes: int, total_bytes: int, min_batch_bytes: int = MIN_BATCH_BYTES
) -> int:
    """Text bytes per batch for a shard of ``total_bytes``: ``batch_bytes``, or less so that
    the shard makes PIPELINE_BATCHES batches (but not below ``min_batch_bytes``; never above
    ``batch_bytes``)."""
    return max(1, min(batch_bytes, max(min_batch_bytes, total_bytes // PIPELINE_BATCHES)))


def _at(fmt: str, values: list[int]) -> Callable[[int], str]:
    return lambda i: fmt.format(values[i])


class _Prefetch:
    """Runs ``it`` on a thread of its own, ``depth`` items ahead: parsing overlaps
    tokenization (which releases the GIL). The thread starts at once, not at the first
    ``next``: a task reads its first batches while the tokenizer it waits for is still being
    built (tokenize_corpus in process). Exceptions re-raise in the consumer; ``close()`` (use
    ``contextlib.closing``) stops the thread, iterated or not."""

    _DONE = object()

    def __init__(self, it: Iterator, depth: int = 2):
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(
            target=self._run, args=(it,), name="gputok-corpus-reader", daemon=True
        )
        self._thread.start()

    def _put(self, msg) -> bool:
        """Hand ``msg`` over unless the consumer has gone (then never block: exit)."""
        while not self._stop.is_set():
            try:
                self._q.put(msg, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, it: Iterator) -> None:
        try:
            for item in it:
                if not self._put(("ok", item)):
                    return
            self._put(("ok", self._DONE))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self._put(("err", e))

    def __iter__(self) -> _Prefetch:
        return self

    def __next__(self):
        if self._ended:
            raise StopIteration
        kind, item = self._q.get()
        if kind == "err" or item is self._DONE:
            self.close()
        if kind == "err":
            raise item
        if item is self._DONE:
            raise StopIteration
        return item

    def close(self) -> None:
        self._ended = True
        self._stop.set()


def _prefetch(it: Iterator, depth: int = 2) -> _Prefetch:
    """``it`` read ahead on a thread started now (_Prefetch)."""
    return _Prefetch(it, depth)
