"""A joined call's writer and reader shortcuts: files.write_shards (write_files.cpp: every
shard file of a call written and renamed in one native call, a failed shard cleaned up
alone), group._join's zero-copy view of files read together, a resume that trusts the run's
start listing (ShardSpec.entry_absent) and the input size it recorded (ShardSpec.size).
Joined output byte-equal to shard by shard: test_corpus_joined.py."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

from gputok import _corpus_native
from gputok.corpus import files, group, tasks, tokenize_corpus, verify_corpus
from gputok.corpus.group_files import read_files_run
from gputok.corpus.run import shard_spec
from gputok.corpus.spec import ShardSpec

SEP = "\x1e\n"
KW = {"progress": False, "log": lambda m: None, "device": "cpu", "num_threads": 1}


def _native(d: Path, shards: list, fsync: bool = False) -> list:
    """write_shards on [[(name, parts)]] in ``d``, each tmp name ``name.tmp``."""
    b = lambda n: os.fsencode(d / n)  # noqa: E731
    return _corpus_native.write_shards(
        [[(b(n + ".tmp"), b(n), parts) for n, parts in s] for s in shards], fsync
    )


@pytest.mark.parametrize("fsync", [False, True])
def test_write_shards_exact_bytes_every_file_renamed(tmp_path, fsync):
    ids = np.arange(-3, 1000, dtype=np.int64)
    a = [
        (str(tmp_path / "a.bin"), [b"ab", b"", bytearray(b"cd"), ids]),
        (str(tmp_path / "a.json"), []),
    ]
    b = [(str(tmp_path / "b.idx"), [memoryview(b"xyz"), ids[::-1].copy(), b"!"])]
    assert files.write_shards([a, b, []], fsync=fsync) == [None, None, None]
    assert sorted(os.listdir(tmp_path)) == ["a.bin", "a.json", "b.idx"]  # no .tmp-* left
    assert (tmp_path / "a.bin").read_bytes() == b"abcd" + ids.tobytes()
    assert (tmp_path / "a.json").read_bytes() == b""
    assert (tmp_path / "b.idx").read_bytes() == b"xyz" + ids[::-1].tobytes() + b"!"
    rec = files.file_record(str(tmp_path / "a.bin"), [b"ab", b"", b"cd", ids], "sha256")
    assert rec == files.file_record("a.bin", [(tmp_path / "a.bin").read_bytes()], "sha256")
    assert rec["file"] == "a.bin" and rec["bytes"] == 4 + ids.nbytes


def test_a_failed_shard_removes_its_tmp_files_alone(tmp_path):
    """The second file's folder is missing: that shard's first tmp file goes, nothing of it
    is renamed; the other shard of the call is written."""
    bad = [("s0.bin", [b"1" * 100]), ("nope/s0.idx", [b"2"]), ("s0.json", [b"{}"])]
    good = [("s1.bin", [b"3"]), ("s1.json", [b"{}"])]
    assert _native(tmp_path, [bad, good]) == [(errno.ENOENT, 1), (0, -1)]
    assert sorted(os.listdir(tmp_path)) == ["s1.bin", "s1.json"]
    # The wrapper names the file; a rename that fails (onto a folder) removes the tmp files
    # not yet renamed, and the files renamed before it stay (never an entry without them).
    (tmp_path / "dir.idx").mkdir()
    (tmp_path / "dir.idx" / "x").write_bytes(b"")
    shard = [(str(tmp_path / n), [b"z"]) for n in ("nope/a.bin", "b.bin", "dir.idx", "c.json")]
    got = files.write_shards([shard[:1], shard[1:]], fsync=False)
    assert isinstance(got[0], OSError) and got[0].errno == errno.ENOENT
    assert got[0].filename == str(tmp_path / "nope/a.bin")
    assert isinstance(got[1], OSError) and got[1].filename == str(tmp_path / "dir.idx")
    assert sorted(os.listdir(tmp_path)) == ["b.bin", "dir.idx", "s1.bin", "s1.json"]


def test_an_existing_tmp_name_is_never_taken(tmp_path):
    (tmp_path / "a.bin.tmp").write_bytes(b"someone else's")
    assert _native(tmp_path, [[("a.bin", [b"mine"])]]) == [(errno.EEXIST, 0)]
    assert sorted(os.listdir(tmp_path)) == ["a.bin.tmp"]
    assert (tmp_path / "a.bin.tmp").read_bytes() == b"someone else's"


@pytest.mark.parametrize(
    "shards, exc",
    [
        ([[(b"t", b"f")]], ValueError),
        ([[(b"t", b"f", [], b"x")]], ValueError),
        ([[(b"t", b"f", ["text"])]], TypeError),
        ([[(b"t", b"f", [7])]], TypeError),
        ([[(b"t", b"f", [None])]], TypeError),
        ([[(b"t", b"f", [np.arange(10)[::2]])]], ValueError),
        ([[(b"t", b"f", 5)]], TypeError),
        ([[(1, b"f", [])]], TypeError),
        ([5], TypeError),
        ((), TypeError),
        ("abc", TypeError),
    ],
)
def test_bad_arguments_raise_before_anything_is_written(tmp_path, monkeypatch, shards, exc):
    """The whole call is refused before any file is written (a good shard first)."""
    monkeypatch.chdir(tmp_path)
    ok = [(b"ok.tmp", b"ok", [b"1"])]
    with pytest.raises(exc):
        _corpus_native.write_shards([ok, *shards] if isinstance(shards, list) else shards, False)
    assert os.listdir(tmp_path) == []


def test_a_nul_byte_in_a_path_is_einval(tmp_path):
    b = lambda n: os.fsencode(tmp_path / n)  # noqa: E731
    got = _corpus_native.write_shards(
        [
            [(b("a.tmp"), b("a"), [b"1"]), (b("b\0.tmp"), b("b"), [b"2"])],
            [(b("c.tmp"), b("c\0"), [])],
        ],
        True,
    )
    assert got == [(errno.EINVAL, 1), (errno.EINVAL, 0)]
    assert os.listdir(tmp_path) == []


# -- group._join: a view of the buffer that files read together share -------------------


def _inputs(tmp_path: Path, fmt: str, sizes: list[int]) -> list[ShardSpec]:
    (tmp_path / "in").mkdir()
    specs = []
    for k, n in enumerate(sizes):
        docs = [f"doc {k}.{i} \u00e9 " + "w" * (37 * i % 90) for i in range(n)]
        p = tmp_path / "in" / f"p{k}.{fmt}"
        if fmt == "jsonl":
            p.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
        else:
            p.write_text("".join(d + SEP for d in docs))
        common = ShardSpec(format="text" if fmt == "txt" else "jsonl", text_separator=SEP)
        specs.append(shard_spec(common, str(p), str(tmp_path / "in"), f"shard_{k:05d}", "o"))
    return specs


def _parts(specs: list[ShardSpec]) -> tuple[list, list]:
    got = read_files_run(specs, [os.path.getsize(s.path) for s in specs])
    assert len(got) == len(specs)
    return [group._part_of(s, src, [b]) for s, (src, b) in zip(specs, got, strict=True)], [
        b for _, b in got
    ]


def _check(parts: list, monkeypatch, buffer=None) -> None:
    """_join(parts) gives the documents a concatenation gives: a view of ``buffer`` when
    given, else a copy."""
    call = group._join(parts)
    with monkeypatch.context() as m:
        m.setattr(group, "_shared_view", lambda parts: None)
        copy = group._join(parts)
    docs = lambda c: [bytes(c.data[a:b]) for a, b in c.spans]  # noqa: E731
    assert docs(call) == docs(copy) and len(docs(call)) == sum(len(p.spans) for p in parts)
    assert call.parts == parts
    if buffer is None:
        assert not any(np.shares_memory(call.data, p) for part in parts for p in part.pieces)
    else:
        assert np.shares_memory(call.data, np.frombuffer(buffer, np.uint8))
        assert len(call.data) <= 9 * sum(p.nbytes for p in parts) / 8


@pytest.mark.parametrize("fmt", ["txt", "jsonl"])
def test_join_of_files_read_together_is_a_view(tmp_path, monkeypatch, fmt):
    specs = _inputs(tmp_path, fmt, [30, 0, 25, 40])  # a file with no documents
    parts, batches = _parts(specs)
    assert all(b.data is batches[0].data for b in batches)
    _check(parts, monkeypatch, batches[0].data)
    _check(parts[2:], monkeypatch, batches[0].data)


@pytest.mark.parametrize("fmt", ["txt", "jsonl"])
def test_join_copies_separate_buffers_and_large_gaps(tmp_path, monkeypatch, fmt):
    specs = _inputs(tmp_path, fmt, [20, 40, 20])
    first, _ = _parts(specs[:1])
    rest, _ = _parts(specs[1:])
    _check(first + rest, monkeypatch)  # two buffers
    together, _ = _parts(specs)
    _check([together[0], together[2]], monkeypatch)  # a gap of 40 documents in the view


# -- entry_absent and size: what the run saw at its start ------------------------------


def _text_inputs(tmp_path: Path, n: int = 5) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    for k in range(n):
        (d / f"p{k}.txt").write_text(
            "".join(f"shard {k} doc {i} " * (i + 1) + SEP for i in range(40))
        )
    return d


def test_a_lost_entry_file_resumes_from_the_manifest_and_nothing_stray_is_left(tmp_path):
    inputs, out = _text_inputs(tmp_path), tmp_path / "out"
    kw = {**KW, "text_separator": SEP, "in_process": True, "fsync": False}
    first = tokenize_corpus(inputs, out, batch_bytes=4096, **kw)  # every spec entry_absent
    names = [f"shard_{k:05d}" for k in range(5)]
    assert first.written == names
    listing = sorted(
        [f"{n}.{e}" for n in names for e in ("bin", "idx", "json")] + ["manifest.json"]
    )
    assert sorted(os.listdir(out)) == listing
    entry = (out / "shard_00002.json").read_bytes()
    (out / "shard_00002.json").unlink()
    again = tokenize_corpus(inputs, out, batch_bytes=4096, **kw)
    assert again.verified == names and again.written == []
    assert (out / "shard_00002.json").read_bytes() == entry  # restored
    assert again.manifest == first.manifest and verify_corpus(out) == []
    assert sorted(os.listdir(out)) == listing


def test_entry_absent_with_a_stale_entry_file_resumes_or_redoes_it(tmp_path):
    """An entry file that appeared after the run's listing (entry_absent) is neither read
    nor trusted: the manifest's entry is restored over it, or the shard is redone and its
    new entry replaces it."""
    inputs, out = _text_inputs(tmp_path, 4), tmp_path / "out"
    kw = {**KW, "text_separator": SEP, "in_process": True, "fsync": False}
    first = {e["name"]: e for e in tokenize_corpus(inputs, out, **kw).manifest["shards"]}
    entries = {n: (out / f"{n}.json").read_bytes() for n in first}
    for n in ("shard_00001", "shard_00002", "shard_00003"):
        (out / f"{n}.json").write_bytes(b'{"stale": true}')
    common = ShardSpec(format="text", text_separator=SEP)
    specs = [
        shard_spec(common, str(inputs / f"p{k}.txt"), str(inputs), n, str(out), device="cpu",
                   num_threads=1, fsync=False, batch_bytes=4096, entry_absent=k > 0,
                   manifest_entry=first[n] if k < 2 else None)
        for k, n in enumerate(sorted(first))
    ]  # fmt: skip
    got = {r["name"]: r for r in tasks.tokenize_group(specs)}
    assert [got[n]["status"] for n in sorted(got)] == ["verified"] * 2 + ["written"] * 2
    assert {n: r["entry"] for n, r in got.items()} == first
    assert {n: (out / f"{n}.json").read_bytes() for n in first} == entries
    assert sorted(os.listdir(out)) == sorted(
        [f"{n}.{e}" for n in first for e in ("bin", "idx", "json")] + ["manifest.json"]
    )


def test_joinable_size_takes_the_runs_size_without_a_stat(tmp_path, monkeypatch):
    real = tmp_path / "x.txt"
    real.write_bytes(b"12345")
    spec = lambda **kw: ShardSpec(path=str(kw.pop("path", real)), **kw)  # noqa: E731
    assert tasks._joinable_size(spec()) == 5  # no size: stat
    assert tasks._joinable_size(spec(path=tmp_path / "gone", size=77)) == 77
    assert tasks._joinable_size(spec(size=group.SMALL_SHARD_BYTES + 1)) is None
    assert tasks._joinable_size(spec(size=group.SMALL_SHARD_BYTES)) == group.SMALL_SHARD_BYTES
    assert tasks._joinable_size(spec(size=5, fault={"shard": "x"})) is None
    monkeypatch.setattr(tasks.os, "stat", lambda *a, **k: pytest.fail("stat"))
    assert tasks._joinable_size(spec(size=3)) == 3
