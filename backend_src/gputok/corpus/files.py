"""Shard files: atomic writes, hashing (xxh3_128 or sha256) while writing, early writeback."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
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


# Why the shard files below are written through bare file descriptors, one write call a
# buffer, and their temporary names come from a counter: a run in process tokenizes 8 shards
# at once on threads that share the GIL, and each system call gives the GIL up and waits to
# get it back. With 1 MB shards (949 for 1 GB) those waits, more than the bytes, bounded the
# writer: Python's open() adds fstat and ioctl calls and a buffered writer to each file, and
# token_hex a getrandom. H100 host, 2026-11-27, whole `gputok corpus` commands on 1 GB of 1 MB
# shards, 3 alternated rounds, medians, with the one-line entries of _json_bytes: JSONL 2.32 ->
# 1.97 s, Parquet 2.25 -> 2.04, text 2.17 -> 2.12 (bench/results/2026-11-27-corpus-writer-h100.md).
_TMP_COUNTER = itertools.count()
_TMP_TOKEN: dict[int, str] = {}  # pid -> this process's random part (a forked child makes its own)

# Writes smaller than this are held and written with the next larger one (or at the end): a
# shard's .idx starts with one 8-byte offset, which need not be a system call of its own.
_SMALL_WRITE = 64 << 10


def _tmp_name(path: str) -> str:
    """A temporary name next to ``path``, unique on this host and across hosts sharing the
    directory: the pid, 8 random hex digits drawn once a process, and a counter."""
    pid = os.getpid()
    token = _TMP_TOKEN.get(pid)
    if token is None:
        token = _TMP_TOKEN[pid] = secrets.token_hex(4)
    return f"{path}.tmp-{pid}-{token}-{next(_TMP_COUNTER)}"


def _create(path: str) -> int:
    """A new file (never an existing one) for writing, as open(path, "xb") makes it."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)


def _write_all(fd: int, *buffers) -> None:
    """Every byte of ``buffers``, in order, in as few system calls as the kernel takes."""
    views = [v for v in (memoryview(b).cast("B") for b in buffers) if v.nbytes]
    while views:
        n = os.writev(fd, views)
        while views and n >= views[0].nbytes:
            n -= views.pop(0).nbytes
        if views and n:
            views[0] = views[0][n:]


def atomic_write_bytes(path: str, data: bytes, *, fsync: bool = True) -> None:
    """Write ``path`` via a temporary name, fsync, rename, fsync the directory."""
    tmp = _tmp_name(path)
    try:
        fd = _create(tmp)
        try:
            _write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        _fsync_dir(os.path.dirname(os.path.abspath(path)))


def _json_line(obj) -> str:
    """One line of JSON, keys sorted (json's C encoder: an indent sends it to the pure-Python
    one, 0.094 -> 0.052 ms a shard entry on the H100 host and 29 -> 9 ms for a 949-shard
    manifest, all of it holding the GIL)."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def _json_bytes(obj) -> bytes:
    return (_json_line(obj) + "\n").encode()


def manifest_bytes(manifest: dict) -> bytes:
    """manifest.json: indented for reading, with each shard's entry on one line of its own
    (the entries, nearly all of it, go through the C encoder: _json_line)."""
    head = {k: v for k, v in manifest.items() if k != "shards"}
    text = json.dumps(head, indent=1, sort_keys=True, ensure_ascii=False)
    rows = ",\n  ".join(map(_json_line, manifest.get("shards", [])))
    shards = f'"shards": [\n  {rows}\n ]' if rows else '"shards": []'
    if not head:
        return f"{{\n {shards}\n}}\n".encode()
    return f"{text[:-2]},\n {shards}\n}}\n".encode()  # text ends "\n}"


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
    ``writeback``, it starts the disk writes of every WRITEBACK_BYTES as they come. Written
    through its file descriptor (see _tmp_name's note); writes under _SMALL_WRITE wait for the
    next one."""

    def __init__(self, final: str, writeback: bool, algorithm: str):
        self.final = final
        self.algorithm = algorithm
        self.h = new_hasher(algorithm)  # first: an unknown algorithm leaves no temp file
        self.tmp = _tmp_name(final)
        self.fd = _create(self.tmp)
        self.size = 0
        self.held = bytearray()  # small writes not yet written
        self.writeback = writeback
        self.kicked = 0  # bytes whose writeback has been started

    def write(self, arr: np.ndarray) -> None:
        mv = memoryview(np.ascontiguousarray(arr)).cast("B")
        self.size += mv.nbytes
        if len(self.held) + mv.nbytes < _SMALL_WRITE:
            self.held += mv
            return
        self._out(self.held, mv)
        if self.writeback and self.size - self.kicked >= WRITEBACK_BYTES:
            with contextlib.suppress(OSError):  # advice only: a refusal changes nothing
                os.posix_fadvise(
                    self.fd, self.kicked, self.size - self.kicked, os.POSIX_FADV_DONTNEED
                )
            self.kicked = self.size

    def flush(self) -> None:
        """Write the small writes held back."""
        if self.held:
            self._out(self.held)

    def _out(self, *buffers) -> None:
        """Hash and write ``buffers`` (the held writes first among them), in one call."""
        for b in buffers:
            if len(b):
                self.h.update(b)
        _write_all(self.fd, *buffers)
        self.held = bytearray()

    def finish(self, fsync: bool = True) -> dict:
        self.flush()
        if fsync:
            os.fsync(self.fd)
        fd, self.fd = self.fd, -1
        os.close(fd)
        return _record(self.final, self.size, self.algorithm, self.h)

    def abort(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)


def _record(final: str, size: int, algorithm: str, hasher) -> dict:
    """A shard file's manifest record: its name, size and digest."""
    return {"file": os.path.basename(final), "bytes": size, algorithm: hasher.hexdigest()}


def file_record(final: str, buffers, algorithm: str) -> dict:
    """The manifest record of a file that will hold ``buffers`` (bytes-like), as
    _HashedFile.finish makes it for the file it wrote."""
    h, size = new_hasher(algorithm), 0
    for b in buffers:
        h.update(b)
        size += memoryview(b).nbytes
    return _record(final, size, algorithm, h)


def write_shards(shards: list, *, fsync: bool) -> list:
    """Each shard's files, [(final path, [bytes-like parts]), ...], written to temporary names
    and renamed into place in order (the last, its entry, after the others), all in one native
    call with the GIL released once (write_files.h): per shard None or the OSError that
    stopped it (naming the file), its temporary files removed."""
    from gputok import _corpus_native

    named = [
        [(os.fsencode(_tmp_name(final)), os.fsencode(final), parts) for final, parts in files]
        for files in shards
    ]
    out = []
    for files, (err, at) in zip(shards, _corpus_native.write_shards(named, fsync), strict=True):
        out.append(OSError(err, os.strerror(err), files[at][0]) if err else None)
    return out


def _load_json(path: str):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None
