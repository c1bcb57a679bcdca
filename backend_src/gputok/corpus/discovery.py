"""Input discovery: which files a run reads, in what format, and the shards' names."""

from __future__ import annotations

import bz2
import glob as _glob
import gzip
import lzma
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ._common import FORMATS, CorpusInputError

_EXTENSIONS = {
    ".txt": "text",
    ".text": "text",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


_COMPRESSION = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


_SHARD_RE = re.compile(r"^shard_\d+\.(bin|idx|json)$")


def _split_ext(path: str) -> tuple[str, str | None]:
    """(format extension, compression extension or None), e.g. ('.jsonl', '.gz')."""
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    comp = suffixes[-1] if suffixes and suffixes[-1] in _COMPRESSION else None
    rest = suffixes[:-1] if comp else suffixes
    return (rest[-1] if rest else ""), comp


def detect_format(path: str, fmt: str = "auto") -> str:
    """The input format of ``path``: ``fmt`` unless "auto", else from its extension."""
    if fmt != "auto":
        if fmt not in FORMATS:
            raise ValueError(f"format must be 'auto' or one of {FORMATS}, got {fmt!r}")
        return fmt
    ext, _ = _split_ext(path)
    if ext not in _EXTENSIONS:
        raise CorpusInputError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            f"known: {', '.join(sorted(_EXTENSIONS))} (optionally .gz/.bz2/.xz); "
            "pass --format text|jsonl|parquet (JSON Lines in .json files: --format jsonl)"
        )
    return _EXTENSIONS[ext]


def find_shards(
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    fmt: str = "auto",
    exclude: str | os.PathLike | None = None,
):
    """Sorted input files for ``inputs``: files, directories (searched recursively for files
    of the format, or any known format when "auto"; ``.json`` files only with format
    "jsonl", since a directory's ``.json`` is often metadata) and glob patterns (``**``
    allowed). Nothing under ``exclude`` (the output directory) is taken. Returns (base
    directory, [absolute paths]). Raises CorpusInputError when nothing matches."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    skip = os.path.abspath(os.fspath(exclude)) + os.sep if exclude is not None else None
    found: list[str] = []
    for item in inputs:
        item = os.fspath(item)
        if os.path.isdir(item):
            for root, _dirs, files in os.walk(item):
                for f in files:
                    ext, _ = _split_ext(f)
                    known = _EXTENSIONS.get(ext) or ("jsonl" if ext == ".json" else None)
                    if known and (fmt == known or (fmt == "auto" and ext != ".json")):
                        found.append(os.path.join(root, f))
        elif os.path.lexists(item):
            found.append(item)
        else:
            matches = [m for m in _glob.glob(item, recursive=True) if not os.path.isdir(m)]
            if not matches:
                raise CorpusInputError(f"{item}: no such file, directory or matching glob")
            found.extend(matches)
    paths = sorted({os.path.abspath(p) for p in found})
    if skip:
        paths = [p for p in paths if not p.startswith(skip)]
    if not paths:
        raise CorpusInputError(f"no input files of format {fmt!r} found in {list(inputs)}")
    base = os.path.commonpath([os.path.dirname(p) for p in paths])
    return base, paths


def unescape_separator(sep: str) -> str:
    r"""CLI separators: ``\n``, ``\r``, ``\t``, ``\0`` and ``\\`` escapes; anything else as is."""
    table = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), m.group(0)), sep)


def plan_shards(inputs, fmt: str = "auto", exclude=None) -> tuple[str, list[str], str, list[str]]:
    """(base directory, sorted input paths, their one format, output shard names)."""
    base, paths = find_shards(inputs, fmt, exclude)
    formats = {detect_format(p, fmt) for p in paths}
    if len(formats) > 1:
        raise CorpusInputError(
            f"inputs mix formats {sorted(formats)}; pass one format per run (--format)"
        )
    width = max(5, len(str(len(paths) - 1)))
    return base, paths, formats.pop(), [f"shard_{i:0{width}d}" for i in range(len(paths))]
