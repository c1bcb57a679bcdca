"""Small shards through the tokenizer together: tokenize_group's fast path.

A shard of 1 MB alone is one reader, one tokenizer call, one writer thread and one
read-tokenize-write chain too short to overlap. Here the small shards of a task are read whole
one after another (one reader thread for the task), their documents joined into calls of about
the task's batch target, and each call's ids split back per shard on one writer thread: each
shard still gets its own files and manifest entry, byte-equal to its own run (tested).

Anything unusual sends a shard down tokenize_shard, alone, so that it succeeds or fails
exactly as it would have: a reader error (that shard), the line-by-line JSONL path (a file
Arrow does not take cleanly: that shard), a test fault hook (that shard), and any error of a
joined call (every shard of that call: invalid UTF-8 under strict or skip, an id outside
uint16).

Cost (2-core dev VM shared with other jobs, CPU tokenizer, 2026-11-25,
bench/bench_corpus_small_shards.py): the CPU a run spends per shard beyond its text went from
1.1-1.4 ms to 0.5-0.7 ms (312 shards of 20 KB against 8 of 1 MB); 199 shards of 1 MB cost the
same CPU joined as shard by shard there (~4.1 s for 210 MB, 90% of it tokenizing). The calls
it saves matter on a GPU (~1.8 ms fixed per call on an H200), not measured yet.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._common import STAGES
from .batch import _batch_target, _prefetch
from .files import _json_bytes, file_record, write_shards
from .group_files import files_run, read_files_run
from .manifest import _settings, settings_digest
from .shard import (
    _min_batch_bytes,
    _source_stat,
    _timed,
    _tokenizer,
    _where,
    shard_batches,
    shard_entry,
)
from .spec import ShardSpec

# Input files up to this size join calls with others; a larger one runs its own pipeline
# (its batches already fill calls and overlap). A joined shard is held whole in memory.
SMALL_SHARD_BYTES = 16 << 20

# ... unless its documents come to more than this many bytes of text, or of spans (16 bytes a
# document): a small Parquet file can hold 2^28 repeated or empty values, which its own
# pipeline reads a batch at a time, so such a shard goes alone, dropped as soon as it passes.
JOIN_MAX_TEXT_BYTES = 64 << 20


@dataclasses.dataclass
class _Part:
    """One small shard read whole: its documents as pieces of bytes (views into the reader's
    buffers) and spans into their concatenation."""

    spec: ShardSpec
    source: dict
    pieces: list
    spans: np.ndarray  # (n, 2) int64 into the concatenated pieces
    nbytes: int  # bytes of the pieces
    text_bytes: int
    skipped_invalid_utf8: int
    skipped_empty: int
    origins: list = dataclasses.field(default_factory=list)  # per piece: (buffer, start in it)


@dataclasses.dataclass
class _Call:
    """The parts of one joined tokenizer call and its buffer and spans."""

    parts: list
    data: np.ndarray
    spans: np.ndarray


def _read_part(spec: ShardSpec, where) -> _Part | None:
    """``spec``'s documents as a _Part, or None when the shard must go alone (the
    line-by-line JSONL path, which yields str documents; more than JOIN_MAX_TEXT_BYTES of
    text or spans). ``where``: the tokenizer's _Where. Reader errors propagate."""
    return _part_of(spec, _source_stat(spec.path), shard_batches(spec, where, spec.batch_bytes))


def _part_of(spec: ShardSpec, source: dict, batches) -> _Part | None:
    """The _Part of ``spec``'s Batches (None as _read_part says)."""
    pieces, origins, spans, at, skipped_bad, skipped_empty, text, rows = [], [], [], 0, 0, 0, 0, 0
    for b in batches:
        if b.docs is not None:
            return None
        skipped_bad += b.skipped_invalid_utf8
        s = b.spans()
        if spec.skip_empty:
            keep = s[:, 1] > s[:, 0]
            skipped_empty += int(len(s) - keep.sum())
            s = s[keep]
        if not len(s):
            continue
        text += int((s[:, 1] - s[:, 0]).sum())
        rows += len(s)
        if max(text, 16 * rows) > JOIN_MAX_TEXT_BYTES:
            return None
        lo, hi = int(s[:, 0].min()), int(s[:, 1].max())
        pieces.append(np.frombuffer(b.data, dtype=np.uint8)[lo:hi])
        origins.append((b.data, lo))
        spans.append(s - (lo - at))
        at += hi - lo
    sp = np.concatenate(spans) if spans else np.zeros((0, 2), np.int64)
    return _Part(spec, source, pieces, sp, at, text, skipped_bad, skipped_empty, origins)


def _read_or_none(spec: ShardSpec, where) -> _Part | None:
    try:
        return _read_part(spec, where)
    except Exception:  # noqa: BLE001 - tokenize_shard reads it again and names the error
        return None


def _parts(
    specs: Sequence[ShardSpec], sizes: Sequence[int], where, target: int
) -> Iterator[tuple[ShardSpec, object]]:
    """(spec, its _Part or None) for every spec, in order: plain text and JSONL files read
    together, about ``target`` bytes a native call (group_files.py); each other shard, and a
    file that call could not read or decide, by its own reader."""
    k = 0
    while k < len(specs):
        run = files_run(specs, sizes, k, target)
        try:
            got = read_files_run(run, sizes[k : k + len(run)]) if run else []
        except Exception:  # noqa: BLE001 - anything unforeseen: this file by its own reader
            got = []
        for spec, (source, batch) in zip(run, got, strict=False):
            yield spec, _part_of(spec, source, [batch])
        k += len(got)
        if len(got) < max(1, len(run)):  # not read together: its own reader
            yield specs[k], _read_or_none(specs[k], where)
            k += 1


def _calls(
    specs: Sequence[ShardSpec], sizes: Sequence[int], where, target: int, alone: list
) -> Iterator[_Call]:
    """The shards' parts joined into calls of about ``target`` bytes (on the reader thread).
    Shards that must go alone are appended to ``alone``."""
    parts: list[_Part] = []
    size = 0
    for spec, part in _parts(specs, sizes, where, target):
        if part is None:
            alone.append(spec)
            continue
        parts.append(part)
        size += part.nbytes
        if size >= target:
            yield _join(parts)
            parts, size = [], 0
    if parts:
        yield _join(parts)


def _join(parts: list[_Part]) -> _Call:
    shared = _shared_view(parts)
    if shared is not None:
        return shared
    data = np.concatenate([p for part in parts for p in part.pieces] or [np.zeros(0, np.uint8)])
    spans, at = [], 0
    for part in parts:
        spans.append(part.spans + at)
        at += part.nbytes
    return _Call(parts, data, np.concatenate(spans))


# Text and JSONL files read together (group_files.py) come as one buffer, each file's
# documents a piece of it: a call over such files takes a view of that buffer instead of a
# copy, where the pieces leave at most a ninth of the view unused. The copy held the GIL (numpy
# does not release it) for all the text of a run, one reader thread's memcpy at a time:
# measured in bench/results/2026-11-29-corpus-writer-h200.md.
def _shared_view(parts: list[_Part]) -> _Call | None:
    """The call over ``parts`` as a view of the one buffer all their pieces lie in, or None."""
    held = [p for p in parts if p.origins]  # a part with no documents has no piece
    if not held or any(
        len(p.origins) != 1 or p.origins[0][0] is not held[0].origins[0][0] for p in held
    ):
        return None
    lo = min(p.origins[0][1] for p in held)
    hi = max(p.origins[0][1] + p.nbytes for p in held)
    if 8 * (hi - lo) > 9 * sum(p.nbytes for p in held):
        return None
    spans = np.concatenate([p.spans + (p.origins[0][1] - lo) for p in held])
    return _Call(parts, np.frombuffer(held[0].origins[0][0], dtype=np.uint8)[lo:hi], spans)


def _write_call(call: _Call, ids: np.ndarray, ends: np.ndarray, sha: str) -> list:
    """Each part's slice of the call's packed ids into its own shard files and entry (the
    writer thread): [(spec, entry or exception)]. The files are hashed here and written by one
    native call for the whole call (files.write_shards: the GIL given up once, not at each of
    a shard's dozen system calls)."""
    out, shards, doc, tok_at = [], [], 0, 0
    for part in call.parts:
        n = len(part.spans)
        stop = int(ends[doc + n - 1]) if n else tok_at
        try:
            shards.append(
                (
                    part.spec,
                    *_shard_files(part, ids[tok_at:stop], ends[doc : doc + n] - tok_at, sha),
                )
            )
        except Exception as e:  # noqa: BLE001 - that shard goes alone
            out.append((part.spec, e))
        doc, tok_at = doc + n, stop
    if shards:
        errors = write_shards([files for _, _, files in shards], fsync=shards[0][0].fsync)
        out += [(spec, err or entry) for (spec, entry, _), err in zip(shards, errors, strict=True)]
    return out


def _shard_files(part: _Part, ids: np.ndarray, ends: np.ndarray, sha: str) -> tuple[dict, list]:
    """(entry, [(path, parts)] for write_shards) of one part: its ``ids`` and its documents'
    ``ends`` (counted from its first id)."""
    spec = part.spec
    idx = np.empty(len(ends) + 1, dtype="<i8")
    idx[0] = 0
    idx[1:] = ends
    counts = {
        "documents": len(ends),
        "tokens": len(ids),
        "text_bytes": part.text_bytes,
        "skipped_invalid_utf8": part.skipped_invalid_utf8,
        "skipped_empty": part.skipped_empty,
    }
    bin_path, idx_path, json_path = (
        os.path.join(spec.out_dir, f"{spec.name}.{ext}") for ext in ("bin", "idx", "json")
    )
    bin_rec = file_record(bin_path, [ids], spec.hash)
    idx_rec = file_record(idx_path, [idx], spec.hash)
    entry = shard_entry(spec, sha, part.source, counts, bin_rec, idx_rec)
    return entry, [(bin_path, [ids]), (idx_path, [idx]), (json_path, [_json_bytes(entry)])]


def tokenize_joined(specs: Sequence[ShardSpec], sizes: Sequence[int]) -> tuple[list, list]:
    """Tokenize the shards ``specs`` (small, not resumable: their entries are gone; ``sizes``:
    their input files' sizes) in joined calls: ([result of each shard written], [the specs
    that must go alone])."""
    group_bytes = int(sum(sizes))
    spec0 = specs[0]
    where = _where(spec0)
    sha = settings_digest(_settings(spec0))
    target = _batch_target(spec0.batch_bytes, group_bytes, _min_batch_bytes(spec0, where))
    eot = 50256 if spec0.eot else None
    kw = {
        "num_threads": spec0.num_threads,
        "disallowed_special": (),
        "errors": "replace" if spec0.errors == "replace" else "strict",
        "separator": eot,
    }
    alone: list = []
    written: list = []
    stages = dict.fromkeys(STAGES, 0.0)
    t0 = time.perf_counter()
    reader = _prefetch(_calls(specs, sizes, where, target, alone))
    with (
        contextlib.closing(reader),  # on errors too: stops the reader thread now
        ThreadPoolExecutor(1, thread_name_prefix="gputok-corpus-writer") as writer,
    ):
        tok = _tokenizer(spec0.device, where.device_id)  # it may be building: reading began
        pending: collections.deque = collections.deque()
        for call in _timed(reader, stages):
            t = time.perf_counter()
            try:
                ids, ends = tok.encode_buffer_uint16(call.data, call.spans, **kw)
            except Exception:  # noqa: BLE001 - each shard alone: its own error or result
                alone += [p.spec for p in call.parts]
                continue
            finally:
                stages["encode"] += time.perf_counter() - t
            pending.append(writer.submit(_write_call, call, ids, ends, sha))
            del call, ids, ends
            t = time.perf_counter()
            while len(pending) > 1:  # one call's ids waiting at most: memory stays bounded
                written += pending.popleft().result()
            stages["write_wait"] += time.perf_counter() - t
        t = time.perf_counter()
        while pending:
            written += pending.popleft().result()
        stages["write_wait"] += time.perf_counter() - t
    alone += [s for s, r in written if isinstance(r, BaseException)]
    done = [(s, r) for s, r in written if not isinstance(r, BaseException)]
    # The task's time and stages shared out by text bytes, so that sums over shards hold.
    took = time.perf_counter() - t0
    total = sum(r["text_bytes"] for _, r in done) or 1
    results = [
        {
            "entry": r,
            "status": "written",
            "seconds": took * r["text_bytes"] / total,
            "device": tok.device,
            "stages": {k: v * r["text_bytes"] / total for k, v in stages.items()},
        }
        for _, r in done
    ]
    return results, alone
