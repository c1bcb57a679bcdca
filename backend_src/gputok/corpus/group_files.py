"""Small plain text and JSONL shards of a joined call read together (group.py's _parts):
about a call's worth of small files read, and split into documents, by one native call that
gives the GIL up once, where a file at a time took a Python open, read and separator search
(text) or a call of Arrow's JSON reader (JSONL), each giving the GIL up and waiting to take
it back while the run's other shards' threads held it.

- Text (csrc/corpus/read_files.cpp): the documents are read_text's, byte for byte (tested).
- JSONL (csrc/corpus/read_jsonl.cpp): the documents are read_jsonl's (json.loads's) for the
  records it takes; a file it does not decide goes to read_jsonl, which decides it (tested
  against json.loads, fuzzed).

A file the call cannot read or decide goes to its own reader, which names any error, and the
files after it are read together again.

Measured (the native files' notes): 1 GB of text in 1 MB shards 2.50 -> 2.16 s on the H100
host, whole commands.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .batch import Batch, native_read_bound
from .discovery import _split_ext
from .shard import _source
from .spec import ShardSpec


def _together(spec: ShardSpec) -> bool:
    """Whether ``spec``'s file may be read with others: uncompressed text (whole, or split on
    a separator that is not empty), or uncompressed JSONL with a field UTF-8 can spell."""
    if _split_ext(spec.path)[1]:
        return False
    if spec.format == "text":
        return spec.text_separator != ""
    if spec.format != "jsonl":
        return False
    try:
        spec.field.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def files_run(specs: Sequence[ShardSpec], sizes: Sequence[int], k: int, target: int) -> list:
    """The shards from ``specs[k]`` that one native call reads together (_together, all of
    ``specs[k]``'s format) on whose input ``sizes`` add up to about ``target`` bytes: [] when
    ``specs[k]`` is not one."""
    run, total = [], 0
    for spec, size in zip(specs[k:], sizes[k:], strict=True):
        if not _together(spec) or spec.format != specs[k].format:
            break
        run.append(spec)
        total += size
        if total >= target:
            break
    return run


def read_files_run(run: Sequence[ShardSpec], sizes: Sequence[int]) -> list[tuple[dict, Batch]]:
    """(source stat, Batch of its documents) of each file of ``run`` read, in order, up to the
    first that could not be read or decided (the rest are not read)."""
    bound = native_read_bound(int(sum(sizes)))
    if run and run[0].format == "jsonl":
        return _read_jsonl_run(run, bound)
    return _read_text_run(run, bound)


def _read_text_run(run: Sequence[ShardSpec], bound: dict) -> list[tuple[dict, Batch]]:
    from gputok import _corpus_native

    sep = run[0].text_separator
    data, ends, mtimes, spans, docs, _failed, _errno = _corpus_native.read_text_files(
        [s.path for s in run], None if sep is None else sep.encode("utf-8"), **bound
    )
    sizes = np.diff(ends, prepend=0).tolist()
    return _batches(run, data, spans, docs.tolist(), sizes, mtimes.tolist(), "document")


def _read_jsonl_run(run: Sequence[ShardSpec], bound: dict) -> list[tuple[dict, Batch]]:
    from gputok import _corpus_native

    data, spans, docs, sizes, mtimes, *_why = _corpus_native.read_jsonl_files(
        [s.path for s in run], run[0].field.encode("utf-8"), **bound
    )
    return _batches(run, data, spans, docs.tolist(), sizes.tolist(), mtimes.tolist(), "record")


def _batches(run, data, spans, docs, sizes, mtimes, unit: str) -> list[tuple[dict, Batch]]:
    """Each file read's (source stat, Batch): its ``docs`` spans of ``data``. zip stops at
    the files read: the call stops at the first it cannot read or decide."""
    out, d = [], 0
    for spec, n, size, mtime in zip(run, docs, sizes, mtimes, strict=False):
        path = spec.path
        batch = Batch(None, lambda i, p=path: f"{p}: {unit} {i}", 0, data, spans[d : d + n])
        out.append((_source(size, mtime), batch))
        d += n
    return out
