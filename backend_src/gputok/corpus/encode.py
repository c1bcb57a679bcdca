"""One batch tokenized (Encoded) and written: gputok's packed uint16 path, other tokenizers'
ids packed on the writer thread, UTF-8 errors named or skipped."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from ._common import MAX_ID, CorpusError, CorpusInputError
from .batch import Batch
from .files import _HashedFile

if TYPE_CHECKING:
    from .spec import ShardSpec


def _invalid_utf8(batch: Batch) -> list[tuple[int, int]]:
    """[(document, byte offset)] of the documents (bytes) that are not valid UTF-8."""
    out = []
    if batch.docs is not None:
        docs = enumerate(batch.docs)
    else:
        mv = memoryview(batch.data).cast("B")
        docs = ((i, mv[a:b]) for i, (a, b) in enumerate(batch.spans().tolist()))
    for i, d in docs:
        if not isinstance(d, str):
            try:
                str(d, "utf-8")
            except UnicodeDecodeError as e:
                out.append((i, e.start))
    return out


@dataclasses.dataclass
class Encoded:
    """One batch tokenized. ``packed``: ``ids`` is already the shard's uint16 (with EOT when
    asked) and ``offsets`` each document's end in it (gputok's ``encode_*_uint16``);
    otherwise ``ids`` are int32/int64 and ``offsets`` the n + 1 document bounds in them,
    packed on the writer thread (``_pack``; other tokenizers)."""

    ids: np.ndarray
    offsets: np.ndarray
    packed: bool
    documents: int
    text_bytes: int
    skipped_invalid_utf8: int
    skipped_empty: int

    def tokens(self, eot: int | None) -> int:
        """Tokens this batch adds to the shard."""
        return int(self.ids.size) + (0 if self.packed or eot is None else self.documents)


def _encode_batch(tok, batch: Batch, spec: ShardSpec, eot: int | None = None) -> Encoded:
    """Tokenize one batch. A buffer batch goes to ``encode_buffer_uint16`` (or
    ``encode_buffer_flat``: no Python object per document) where the tokenizer has it, else
    its documents are listed. gputok packs uint16 + ``eot`` itself; other tokenizers' ids
    are packed later (``_emit``). UTF-8 is checked by gputok itself; only when it refuses a
    batch are the documents scanned here, to name the place (strict) or drop the bad ones
    (skip)."""
    errors = spec.errors
    skipped_bad, skipped_empty = batch.skipped_invalid_utf8, 0
    lengths = batch.lengths()
    if spec.skip_empty:
        keep = np.flatnonzero(lengths)
        if len(keep) < len(lengths):
            skipped_empty = len(lengths) - len(keep)
            batch, lengths = batch.select(keep), lengths[keep]
    kw = {
        "num_threads": spec.num_threads,
        "disallowed_special": (),
        "errors": "replace" if errors == "replace" else "strict",
    }
    buffer = batch.docs is None
    packed = hasattr(tok, "encode_buffer_uint16" if buffer else "encode_batch_uint16")
    if packed:
        kw["separator"] = eot
    for _attempt in range(2):
        try:
            if buffer and packed:
                ids, offsets = tok.encode_buffer_uint16(batch.data, batch.bounds, **kw)
            elif buffer and hasattr(tok, "encode_buffer_flat"):
                ids, offsets = tok.encode_buffer_flat(batch.data, batch.bounds, **kw)
            elif packed:
                ids, offsets = tok.encode_batch_uint16(batch.doc_list(), **kw)
            else:
                ids, offsets = tok.encode_batch_flat(batch.doc_list(), **kw)
            return Encoded(
                ids,
                offsets,
                packed,
                len(lengths),
                int(lengths.sum()),
                skipped_bad,
                skipped_empty,
            )
        except OverflowError as e:  # an id outside uint16 (gputok's packed output)
            raise CorpusError(f"{spec.path or '?'}: {e}") from None
        except ValueError:
            bad = _invalid_utf8(batch)
            if not bad or errors not in ("strict", "skip"):
                raise
            if errors == "strict":
                i, off = bad[0]
                raise CorpusInputError(
                    f"{batch.locate(i)}: invalid UTF-8 at byte {off} of the document; "
                    "rerun with --utf8-errors replace|skip and --overwrite"
                ) from None
            keep = np.setdiff1d(np.arange(len(lengths)), [i for i, _ in bad])
            skipped_bad += len(lengths) - len(keep)
            batch, lengths = batch.select(keep), lengths[keep]
    raise AssertionError("unreachable: the second attempt has only valid UTF-8")


def _pack(
    ids: np.ndarray, offsets: np.ndarray, eot: int | None
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(uint16 tokens with ``eot`` after every document, each document's end in them, the
    first id outside uint16 or None). Documents are ``ids[offsets[i] - offsets[0] :
    offsets[i + 1] - offsets[0]]``. Packed by the native packer (csrc/corpus/pack.cpp) with the
    GIL released: the numpy way (a range check, then a boolean-mask scatter) held it, so the
    writer threads of a worker running several shards took turns."""
    from gputok import _corpus_native

    if ids.dtype != np.int32:  # check before narrowing, which would wrap
        outside = (ids < 0) | (ids > MAX_ID)
        if ids.size and outside.any():
            return np.empty(0, "<u2"), np.empty(0, np.int64), int(ids[np.argmax(outside)])
    ids32 = np.ascontiguousarray(ids, dtype=np.int32)
    offs = np.ascontiguousarray(offsets, dtype=np.int64)
    out, ends, bad = _corpus_native.pack_uint16(ids32, offs, -1 if eot is None else int(eot))
    return out, ends, (None if bad < 0 else int(ids32[bad]))


def _emit(enc: Encoded, eot, base: int, bin_f: _HashedFile, idx_f: _HashedFile, path: str):
    """Write one batch as uint16 (+ <|endoftext|> after each document; packed here unless
    the tokenizer did it), with its document ends shifted by ``base``, the shard's tokens so
    far. Runs on the writer thread."""
    out, ends = enc.ids, enc.offsets
    if not enc.packed:
        out, ends, bad = _pack(enc.ids, enc.offsets, eot)
        if bad is not None:
            raise CorpusError(f"{path}: token id {bad} does not fit uint16")
    bin_f.write(out)
    idx_f.write((ends + base).astype("<i8", copy=False))
