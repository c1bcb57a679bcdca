"""Plain text shards of a joined call read together (group.py's _parts): about a call's worth
of small text files read and split into documents by one native call
(csrc/corpus/read_files.cpp), which gives the GIL up once, where a file at a time took a
Python open, read and separator search, each giving it up and waiting to take it back while
the run's other shards' threads held it. The documents are read_text's, byte for byte
(tested); a file the call cannot read (gone, not a regular file, grown past the bound) goes
to its own reader, which names the error, and the files after it are read together again.

Measured (csrc/corpus/read_files.h): 1 GB of text in 1 MB shards 2.50 -> 2.16 s on the H100
host, whole commands.
"""

from __future__ import annotations

from collections.abc import Sequence

from .batch import Batch
from .discovery import _split_ext
from .shard import _source
from .spec import ShardSpec


def text_run(specs: Sequence[ShardSpec], sizes: Sequence[int], k: int, target: int) -> list:
    """The plain (uncompressed) text shards from ``specs[k]`` on whose input ``sizes`` add up
    to about ``target`` bytes: [] when ``specs[k]`` is not one."""
    run, total = [], 0
    for spec, size in zip(specs[k:], sizes[k:], strict=True):
        if spec.format != "text" or spec.text_separator == "" or _split_ext(spec.path)[1]:
            break
        run.append(spec)
        total += size
        if total >= target:
            break
    return run


def read_text_run(run: Sequence[ShardSpec], sizes: Sequence[int]) -> list[tuple[dict, Batch]]:
    """(source stat, Batch of its documents) of each file of ``run`` read, in order, up to the
    first that could not be (the rest are not read)."""
    from gputok import _corpus_native

    sep = run[0].text_separator
    want = int(sum(sizes))
    data, ends, mtimes, spans, docs, _failed, _errno = _corpus_native.read_text_files(
        [s.path for s in run],
        None if sep is None else sep.encode("utf-8"),
        max_bytes=want + (want >> 2) + (1 << 20),  # room for files that grew a little since
        reserve=want,
    )
    out, start, d = [], 0, 0
    # zip stops at the files read: the call stops at the first it cannot read
    for spec, end, mtime, n in zip(
        run, ends.tolist(), mtimes.tolist(), docs.tolist(), strict=False
    ):
        path = spec.path
        batch = Batch(None, lambda i, p=path: f"{p}: document {i}", 0, data, spans[d : d + n])
        out.append((_source(end - start, mtime), batch))
        start, d = end, d + n
    return out
