"""Shard files (gputok.corpus.files): every byte written once, in order, and hashed; as few
system calls as a file needs (each one gives the GIL up: with 1 MB shards in process those
waits bounded the writer); temporary names unique; a manifest that reads back as written."""

from __future__ import annotations

import hashlib
import json
import os
import threading

import numpy as np
import pytest

from gputok.corpus import files as F

xxhash = pytest.importorskip("xxhash")


def _digest(algorithm: str, data: bytes) -> str:
    h = hashlib.sha256() if algorithm == "sha256" else xxhash.xxh3_128()
    h.update(data)
    return h.hexdigest()


@pytest.mark.parametrize("algorithm", F.HASHES)
def test_a_shard_file_holds_every_write_in_order_and_its_hash(tmp_path, algorithm):
    """Small writes are held back and go out with the next large one or at the end; the file
    and its digest are those of every write, in order, whatever the mix."""
    rng = np.random.default_rng(5)
    sizes = [8, 3, 100_000, 1, 70_000, F._SMALL_WRITE - 1, F._SMALL_WRITE, 5, 2]
    chunks = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    f = F._HashedFile(str(tmp_path / "s.bin"), False, algorithm)
    for c in chunks:
        f.write(c)
    rec = f.finish(False)
    want = b"".join(c.tobytes() for c in chunks)
    assert want and (tmp_path / os.path.basename(f.tmp)).read_bytes() == want
    assert rec == {"file": "s.bin", "bytes": len(want), algorithm: _digest(algorithm, want)}


def test_an_index_file_is_one_system_call(tmp_path, monkeypatch):
    """A shard's .idx (its leading 8-byte offset, then the rest) and a small entry each take
    one write call. Before, every write was a call of its own through a buffered file (and
    open() added fstat and ioctl calls)."""
    calls = []
    real = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, bufs: (calls.append(len(bufs)), real(fd, bufs))[1])
    f = F._HashedFile(str(tmp_path / "s.idx"), False, F.DEFAULT_HASH)
    f.write(np.zeros(1, "<i8"))
    f.write(np.arange(1, 40_000, dtype="<i8"))  # 320 KB
    f.finish(False)
    assert calls == [2]
    calls.clear()
    F.atomic_write_bytes(str(tmp_path / "s.json"), b'{"a": 1}\n', fsync=False)
    assert calls == [1] and (tmp_path / "s.json").read_bytes() == b'{"a": 1}\n'


def test_short_writes_are_resumed(tmp_path, monkeypatch):
    """os.writev may write less than it is given (a signal, a full pipe or disk): the rest is
    written, from the right place, across buffer boundaries."""
    real = os.writev

    def short(fd, bufs):
        return real(fd, [bytes(memoryview(bufs[0])[:3])])

    monkeypatch.setattr(os, "writev", short)
    path = tmp_path / "x"
    fd = F._create(str(path))
    try:
        F._write_all(fd, b"abcdefgh", b"", bytearray(b"ij"), np.frombuffer(b"klmnop", np.uint8))
    finally:
        os.close(fd)
    assert path.read_bytes() == b"abcdefghijklmnop"


def test_create_never_takes_an_existing_file(tmp_path):
    (tmp_path / "t").write_bytes(b"keep")
    with pytest.raises(FileExistsError):
        F._create(str(tmp_path / "t"))
    assert (tmp_path / "t").read_bytes() == b"keep"


def test_aborted_file_leaves_nothing(tmp_path):
    f = F._HashedFile(str(tmp_path / "s.bin"), False, F.DEFAULT_HASH)
    f.write(np.arange(10, dtype="<u2"))
    f.abort()
    f.abort()  # twice is harmless
    assert list(tmp_path.iterdir()) == []


def test_temporary_names_are_unique_across_threads_and_processes(monkeypatch):
    """Names come from a counter (no getrandom call a file), with the pid and a random part
    drawn once a process: 8 threads' names never meet, and another pid (a forked child)
    draws its own random part."""
    names: list[str] = []

    def make():
        names.extend(F._tmp_name("/o/s.bin") for _ in range(500))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(names)) == 4000 and all(".tmp-" in n for n in names)
    here = names[0].split(".tmp-")[1].split("-")[:2]
    monkeypatch.setattr(os, "getpid", lambda: 999_999_999)
    child = F._tmp_name("/o/s.bin").split(".tmp-")[1].split("-")[:2]
    assert child[0] == "999999999" and child[1] != here[1] and len(child[1]) == 8


def test_manifest_reads_back_with_one_entry_a_line():
    entries = [{"name": f"shard_{k:05d}", "bin": {"bytes": k, "é": "ü"}} for k in range(3)]
    manifest = {"format": "gputok-corpus", "settings": {"eot": True}, "shards": entries}
    text = F.manifest_bytes(manifest).decode()
    assert json.loads(text) == manifest
    lines = text.splitlines()
    assert [json.loads(line.strip().rstrip(",")) for line in lines if "shard_" in line] == entries
    assert "ü" in text  # UTF-8, not \\u escapes, as before
    empty = {**manifest, "shards": []}
    assert json.loads(F.manifest_bytes(empty)) == empty
    for only in ({"shards": entries}, {"shards": []}):
        assert json.loads(F.manifest_bytes(only)) == only
    assert json.loads(F._json_bytes(entries[0])) == entries[0]
    assert F._json_bytes(entries[0]).count(b"\n") == 1
