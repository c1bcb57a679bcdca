"""Shard files: atomic writes, hashing (xxh3_128 or sha256) while writing, early writeback."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets

import numpy as np

from ._common import CorpusError


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _tmp_name(path: str) -> str:
    return f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"


def atomic_write_bytes(path: str, data: bytes, *, fsync: bool = True) -> None:
    """Write ``path`` via a temporary name, fsync, rename, fsync the directory."""
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        _fsync_dir(os.path.dirname(os.path.abspath(path)))


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


# How shard files are hashed (the manifest records each file's digest under the algorithm's
# name, and a resume checks it with the same one). xxh3_128 (the xxhash package, `xxhsum -H2`
# on the command line) is the default: an integrity check against torn or altered files, at
# ~9 GB/s a core against sha256's ~1 (2-core dev VM; 1.3 GB/s on the H100 host, where sha256
# was the largest host cost of a GPU worker after the tokenizer: 0.75 CPU s per GB of text,
# bench/results/2026-11-25-benchmarks-history.md 2026-11-24). sha256 stays for users who want a cryptographic digest.
HASHES = ("xxh3_128", "sha256")


DEFAULT_HASH = HASHES[0]


def new_hasher(algorithm: str):
    """A hashlib-style object (update, hexdigest) for one of HASHES."""
    if algorithm == "sha256":
        return hashlib.sha256()
    if algorithm == "xxh3_128":
        try:
            import xxhash
        except ImportError:
            raise CorpusError(
                "hashing shards with xxh3_128 needs the xxhash package: pip install -r "
                "requirements/corpus.txt (or choose --hash sha256)"
            ) from None
        return xxhash.xxh3_128()
    raise ValueError(f"hash must be one of {HASHES}, got {algorithm!r}")


def hash_file(path: str, algorithm: str, chunk: int = 8 << 20) -> str:
    h = new_hasher(algorithm)
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _digest_of(rec: dict) -> tuple[str, str] | None:
    """(algorithm, digest) that a manifest file record carries, or None."""
    for algorithm in HASHES:
        if isinstance(rec.get(algorithm), str):
            return algorithm, rec[algorithm]
    return None


# Early writeback: every WRITEBACK_BYTES written to a durable shard file, the kernel is asked
# to start writing them to disk (POSIX_FADV_DONTNEED starts writeback of dirty pages without
# waiting, and drops pages already clean), so the disk works while the shard is still being
# tokenized and the final fsync waits only for the tail, instead of the whole shard's data
# queueing behind every other shard's fsync at its end. GPUTOK_CORPUS_WRITEBACK=0 turns it
# off (ablation, bench_corpus.py).
WRITEBACK_BYTES = 8 << 20


def _early_writeback() -> bool:
    return hasattr(os, "posix_fadvise") and os.environ.get("GPUTOK_CORPUS_WRITEBACK", "1") != "0"


class _HashedFile:
    """A temporary output file that hashes what it writes (``algorithm``, one of HASHES); with
    ``writeback``, it starts the disk writes of every WRITEBACK_BYTES as they come."""

    def __init__(self, final: str, writeback: bool, algorithm: str):
        self.final = final
        self.algorithm = algorithm
        self.h = new_hasher(algorithm)  # first: an unknown algorithm leaves no temp file
        self.tmp = _tmp_name(final)
        self.f = open(self.tmp, "wb")  # noqa: SIM115 - closed in commit/abort
        self.size = 0
        self.writeback = writeback
        self.kicked = 0  # bytes whose writeback has been started

    def write(self, arr: np.ndarray) -> None:
        mv = memoryview(np.ascontiguousarray(arr)).cast("B")
        self.h.update(mv)
        self.f.write(mv)
        self.size += mv.nbytes
        if self.writeback and self.size - self.kicked >= WRITEBACK_BYTES:
            self.f.flush()
            with contextlib.suppress(OSError):  # advice only: a refusal changes nothing
                os.posix_fadvise(
                    self.f.fileno(), self.kicked, self.size - self.kicked, os.POSIX_FADV_DONTNEED
                )
            self.kicked = self.size

    def finish(self, fsync: bool = True) -> dict:
        self.f.flush()
        if fsync:
            os.fsync(self.f.fileno())
        self.f.close()
        return {
            "file": os.path.basename(self.final),
            "bytes": self.size,
            self.algorithm: self.h.hexdigest(),
        }

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.f.close()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


def _load_json(path: str):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None
