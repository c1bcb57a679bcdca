"""csrc/corpus/read_files.cpp (``_corpus_native.read_text_files``): a joined call's small text
shards read and split in one native call. Every file's documents must be readers.read_text's
(the reference, a file at a time), and a file the call cannot read must stop it there, naming
the file by its index and errno, with nothing of that file kept."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputok import _corpus_native
from gputok import corpus as C
from gputok.corpus import group_files

SEPS = [None, b"\x1e\n", b"\n", b"a", b"aa", b"\n\n", b"ab" * 6]  # the last takes memmem


def reference(path: Path, sep: bytes | None) -> list[bytes]:
    """read_text's documents of one file."""
    batches = C.read_text(str(path), None if sep is None else sep.decode(), 1 << 20)
    out = []
    for b in batches:
        mv = memoryview(b.data).cast("B")
        out += [mv[a:z].tobytes() for a, z in b.spans().tolist()]
    return out


def native(paths, sep, max_bytes=1 << 30):
    data, ends, mtimes, spans, docs, failed, err = _corpus_native.read_text_files(
        [str(p) for p in paths], sep, max_bytes
    )
    assert data.dtype == np.uint8 and spans.shape == (int(docs.sum()), 2)
    assert len(ends) == len(mtimes) == len(docs)
    mv = memoryview(data).cast("B")
    per_file, d = [], 0
    for n in docs.tolist():
        per_file.append([mv[a:z].tobytes() for a, z in spans[d : d + n].tolist()])
        d += n
    return per_file, ends.tolist(), failed, err


@settings(max_examples=150, deadline=None)
@given(
    files=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\x00", b"a")), max_size=5),
    sep=st.sampled_from(SEPS),
)
def test_every_file_reads_as_read_text_reads_it(tmp_path_factory, files, sep):
    d = tmp_path_factory.mktemp("t")
    paths = []
    for k, body in enumerate(files):
        paths.append(d / f"f{k}.txt")
        paths[-1].write_bytes(body)
    got, ends, failed, err = native(paths, sep)
    assert (failed, err) == (-1, 0)
    assert got == [reference(p, sep) for p in paths]
    assert ends == np.cumsum([len(b) for b in files]).tolist()


def test_literal_files(tmp_path):
    bodies = [b"one\x1e\ntwo\x1e\n", b"", b"\x1e\n", b"three\x1e\nfour", b"\x1e\n\x1e\nx"]
    paths = [tmp_path / f"{k}.txt" for k in range(len(bodies))]
    for p, b in zip(paths, bodies, strict=True):
        p.write_bytes(b)
    got, _ends, failed, _err = native(paths, b"\x1e\n")
    assert failed == -1
    # a trailing separator's empty piece is dropped unless it is the only piece
    assert got == [[b"one", b"two"], [b""], [b""], [b"three", b"four"], [b"", b"", b"x"]]
    got, *_ = native(paths, None)
    assert got == [[b] for b in bodies]


@pytest.mark.parametrize(
    "bad, code",
    [("gone.txt", errno.ENOENT), ("dir", errno.EINVAL), ("", errno.EINVAL), ("a\0b", errno.EINVAL)],
)
def test_a_file_it_cannot_read_stops_the_call_there(tmp_path, bad, code):
    (tmp_path / "dir").mkdir()
    good = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for p in good:
        p.write_bytes(b"x\ny\n")
    paths = [str(good[0]), str(tmp_path / bad) if bad else "", str(good[1])]
    got, ends, failed, err = native(paths, b"\n")
    assert (failed, err) == (1, code)
    assert got == [[b"x", b"y"]] and ends == [4]  # nothing of the failed file, nor after it


def test_the_bound_holds(tmp_path):
    """data never holds more than max_bytes: the file that would pass it fails with EFBIG."""
    for k, n in enumerate([10, 10, 10]):
        (tmp_path / f"{k}.txt").write_bytes(b"z" * n)
    paths = sorted(tmp_path.iterdir())
    got, ends, failed, err = native(paths, None, max_bytes=25)
    assert (failed, err) == (2, errno.EFBIG) and ends == [10, 20]
    got, ends, failed, err = native(paths, None, max_bytes=0)
    assert (failed, err, ends) == (0, errno.EFBIG, [])


def test_bad_arguments_are_errors_not_crashes(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"a")
    with pytest.raises(ValueError, match="separator must not be empty"):
        _corpus_native.read_text_files([str(tmp_path / "a.txt")], b"", 10)
    with pytest.raises(ValueError, match="max_bytes"):
        _corpus_native.read_text_files([str(tmp_path / "a.txt")], b"\n", -1)
    with pytest.raises(TypeError):
        _corpus_native.read_text_files([str(tmp_path / "a.txt")], "\n", 10)
    with pytest.raises(TypeError):
        _corpus_native.read_text_files([1, 2], b"\n", 10)
    assert native([], b"\n")[2:] == (-1, 0)


def test_a_shard_removed_mid_run_fails_alone_and_the_rest_are_written(tmp_path, monkeypatch):
    """The joined call's native read stops at a file that is gone; that shard goes to its own
    reader, which names the file, and the files after it are read together again."""
    inp = tmp_path / "in"
    inp.mkdir()
    for k in range(6):
        (inp / f"p{k}.txt").write_bytes(f"doc {k}\x1e\nmore {k}\x1e\n".encode())
    real = _corpus_native.read_text_files
    calls = []

    def remove_p1_first(paths, *a, **kw):
        calls.append([os.path.basename(p) for p in paths])
        victim = inp / "p1.txt"
        if victim.exists() and str(victim) in paths:
            victim.unlink()
        return real(paths, *a, **kw)

    monkeypatch.setattr(_corpus_native, "read_text_files", remove_p1_first)
    kw = {"progress": False, "log": lambda m: None, "device": "cpu", "num_threads": 1}
    with pytest.raises(C.CorpusError, match=r"(?s)1 of 6 shard\(s\) failed.*p1\.txt"):
        C.tokenize_corpus(inp, tmp_path / "out", text_separator="\x1e\n", in_process=True, **kw)
    first = next(k for k, c in enumerate(calls) if "p1.txt" in c)
    rest = calls[first][calls[first].index("p1.txt") + 1 :]
    assert rest and calls[first + 1] == rest  # the files after it, read together again
    assert sum("p1.txt" in c for c in calls) == 1
    written = sorted(p.name for p in (tmp_path / "out").glob("shard_*.bin"))
    assert written == [f"shard_{k:05d}.bin" for k in (0, 2, 3, 4, 5)]


def test_a_failing_native_read_leaves_the_files_to_their_own_readers(tmp_path, monkeypatch):
    """Should the native call itself raise (out of memory, say), each file of its run is read
    by its own reader and still joins the task's tokenizer calls: every shard is written by
    the joined path, with the same files as a run that reads them together."""
    from gputok.corpus import tasks as tasks_mod

    inp = tmp_path / "in"
    inp.mkdir()
    for k in range(5):
        (inp / f"p{k}.txt").write_bytes(f"doc {k}\x1e\nmore {k}\x1e\n".encode())
    kw = {"progress": False, "log": lambda m: None, "device": "cpu", "num_threads": 1}
    joined: dict[str, list] = {"ok": [], "out": []}
    real = tasks_mod.tokenize_joined

    def spy(specs, sizes):
        results, alone = real(specs, sizes)
        joined[os.path.basename(specs[0].out_dir)] += [r["entry"]["name"] for r in results]
        return results, alone

    def broken(*a, **k):
        raise MemoryError("no room")

    monkeypatch.setattr(tasks_mod, "tokenize_joined", spy)
    C.tokenize_corpus(inp, tmp_path / "ok", text_separator="\x1e\n", in_process=True, **kw)
    monkeypatch.setattr(_corpus_native, "read_text_files", broken)
    C.tokenize_corpus(inp, tmp_path / "out", text_separator="\x1e\n", in_process=True, **kw)
    assert len(joined["ok"]) >= 2 and sorted(joined["out"]) == sorted(joined["ok"])
    for f in sorted((tmp_path / "ok").glob("shard_*")):
        assert (tmp_path / "out" / f.name).read_bytes() == f.read_bytes()


def test_text_runs_take_plain_text_up_to_the_target():
    def spec(path, fmt="text", sep="\n"):
        return C.ShardSpec(path=path, format=fmt, text_separator=sep)

    specs = [
        spec("a.txt"),
        spec("b.txt"),
        spec("c.txt.gz"),
        spec("d.txt"),
        spec("e.jsonl", "jsonl"),
    ]
    sizes = [10, 10, 10, 10, 10]
    assert [s.path for s in group_files.files_run(specs, sizes, 0, 15)] == ["a.txt", "b.txt"]
    assert [s.path for s in group_files.files_run(specs, sizes, 0, 100)] == ["a.txt", "b.txt"]
    assert group_files.files_run(specs, sizes, 2, 100) == []  # compressed: its own reader
    assert [s.path for s in group_files.files_run(specs, sizes, 3, 100)] == ["d.txt"]
    assert group_files.files_run([spec("x.txt", sep="")], [1], 0, 100) == []
    assert [s.path for s in group_files.files_run(specs, sizes, 4, 100)] == ["e.jsonl"]
    assert group_files.files_run([spec("x.jsonl.gz", "jsonl")], [1], 0, 100) == []
    assert group_files.files_run([spec("x.parquet", "parquet")], [1], 0, 100) == []
