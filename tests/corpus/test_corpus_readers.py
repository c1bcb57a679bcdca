"""gputok.corpus's buffer pipeline, in process (no Dask): readers hand Arrow / file buffers
plus document bounds to the tokenizer (no Python object per document); the documents, the
packing and the shards must be exactly those of the per-document path."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from gputok import corpus as C

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

EOT = 50256


def docs_of(batches) -> list[bytes]:
    return [
        bytes(d) if not isinstance(d, str) else d.encode() for b in batches for d in b.doc_list()
    ]


def buffer_docs(batches) -> list[bytes]:
    """The documents as the buffer path sees them (spans into data)."""
    out = []
    for b in batches:
        assert b.docs is None, "expected a buffer batch"
        mv = memoryview(b.data).cast("B")
        out += [mv[x:y].tobytes() for x, y in b.spans().tolist()]
        assert len(b) == len(b.spans()) and b.lengths().tolist() == [
            y - x for x, y in b.spans().tolist()
        ]
    return out


@pytest.mark.parametrize("batch_bytes", [1, 7, 1 << 20])
def test_text_documents_are_bytes_split(tmp_path, batch_bytes):
    rng = random.Random(7)
    cases = [(b"", b"\n"), (b"\n", b"\n"), (b"a\n\nb\n", b"\n"), (b"x\x1e\ny\x1e\n", b"\x1e\n")]
    for _ in range(300):
        sep = bytes(rng.choice(b"ab\n") for _ in range(rng.randint(1, 3)))
        cases.append((bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 60))), sep))
    for data, sep in cases:
        pieces = data.split(sep)
        if len(pieces) > 1 and pieces[-1] == b"":
            pieces.pop()
        p = tmp_path / "a.txt"
        p.write_bytes(data)
        batches = list(C.read_text(str(p), sep.decode(), batch_bytes))
        assert buffer_docs(batches) == pieces, (data, sep)
        assert docs_of(batches) == pieces
        starts = [int(x) for b in batches for x, _ in b.spans().tolist()]
        where = [b.locate(i) for b in batches for i in range(len(b))]
        assert where == [f"{p}: byte {s}" for s in starts]


def test_text_batches_follow_batch_bytes(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"".join(b"x" * 100 + b"\n" for _ in range(50)))
    sizes = [len(b) for b in C.read_text(str(p), "\n", 250)]  # >= 250 bytes: 3 documents
    assert sizes == [3] * 16 + [2]


@pytest.mark.parametrize(
    "typ", [pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.string_view()]
)
def test_parquet_batches_are_the_column(tmp_path, typ):
    values = ["", "héllo", "日本語 🙂", "", "a <|endoftext|> b", "x" * 3000] * 40
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": pa.array(values, typ)}), p, row_group_size=37)
    batches = list(C.read_parquet(str(p), "text", 2000))
    assert len(batches) > 3  # several batches, several row groups: offsets do not start at 0
    want = [v.encode() for v in values]
    assert buffer_docs(batches) == want and docs_of(batches) == want
    assert [b.locate(i) for b in batches for i in range(len(b))] == [
        f"{p}: row {r}" for r in range(len(values))
    ]


def test_jsonl_arrow_batches_are_the_field(tmp_path):
    values = ["", "héllo", "日本語 🙂\n", "tab\there"] * 50
    p = tmp_path / "a.jsonl"
    p.write_text("".join(json.dumps({"text": v, "n": i}) + "\n" for i, v in enumerate(values)))
    batches = list(C.read_jsonl(str(p), "text", "strict", 64))
    assert len(batches) > 3
    assert buffer_docs(batches) == [v.encode() for v in values]


def test_arrow_slices_keep_their_offset():
    arr = pa.array(["abc", "", "défg", "h"] * 3).slice(5, 6)
    data, offsets, _ = C._arrow_parts(arr)
    mv = memoryview(data).cast("B")
    got = [mv[a:b].tobytes().decode() for a, b in zip(offsets[:-1], offsets[1:], strict=True)]
    assert got == arr.to_pylist() and offsets[0] != 0


def _plain_pack(ids, offsets, eot):
    """The shard format by a plain loop: each document's ids, then eot; and the ends."""
    out, ends = [], []
    for a, b in zip(offsets[:-1], offsets[1:], strict=True):
        out += [int(t) for t in ids[a - offsets[0] : b - offsets[0]]]
        if eot is not None:
            out.append(eot)
        ends.append(len(out))
    return out, ends


@pytest.mark.parametrize("lengths", [[], [0], [0, 0, 3], [5, 0, 1, 700, 0], [600] * 5])
@pytest.mark.parametrize("eot", [EOT, None])
def test_pack_matches_a_plain_loop(lengths, eot):
    """The writer's packer (csrc/corpus/pack.cpp, GIL released) against a plain loop, with offsets
    that start at 0 and not (a batch's ids are relative to its first offset), for int32 ids
    and for wider ones (narrowed after the range check)."""
    rng = np.random.default_rng(1)
    for first in (0, 17):
        offsets = (first + np.concatenate([[0], np.cumsum(lengths)])).astype(np.int64)
        ids = rng.integers(0, 65536, int(offsets[-1] - offsets[0])).astype(np.int32)
        want_out, want_ends = _plain_pack(ids, offsets, eot)
        for dtype in (np.int32, np.int64):
            out, ends, bad = C._pack(ids.astype(dtype), offsets, eot)
            assert bad is None and out.dtype == np.dtype("<u2")
            assert out.tolist() == want_out and ends.tolist() == want_ends


class ListOnly:
    """gputok behind encode_batch_flat alone (as gigatoken's adapter): documents as a list."""

    def __init__(self, tok):
        self.tok, self.device, self.n_vocab = tok, "list-only", tok.n_vocab
        self.calls = 0

    def encode_batch_flat(self, docs, **kw):
        self.calls += 1
        assert all(isinstance(d, bytes) for d in docs)
        return self.tok.encode_batch_flat(docs, **kw)


class BufferSpy:
    device = "buffer-spy"

    def __init__(self, tok):
        self.tok, self.n_vocab, self.calls = tok, tok.n_vocab, 0

    def encode_buffer_flat(self, data, offsets, **kw):
        self.calls += 1
        return self.tok.encode_buffer_flat(data, offsets, **kw)

    def encode_batch_flat(self, docs, **kw):
        raise AssertionError("buffer batches must not be listed")


class PackedSpy:
    """gputok's packed output (uint16 + EOT made by the tokenizer), as the corpus workers use
    it; counts its calls."""

    device = "packed-spy"

    def __init__(self, tok):
        self.tok, self.n_vocab, self.calls = tok, tok.n_vocab, 0

    def encode_buffer_uint16(self, data, offsets, **kw):
        self.calls += 1
        return self.tok.encode_buffer_uint16(data, offsets, **kw)

    def encode_batch_uint16(self, docs, **kw):
        self.calls += 1
        return self.tok.encode_batch_uint16(docs, **kw)


@pytest.mark.parametrize("fmt", ["text", "parquet", "jsonl"])
@pytest.mark.parametrize("skip_empty", [False, True])
def test_buffer_and_list_paths_write_identical_shards(tmp_path, tok, corpus, fmt, skip_empty):
    # Over 64 rows (the Parquet reader's least batch), ~150 KB: several batches of 20 KB.
    docs = [d[:1000] for d in corpus[:60] if "\x1e" not in d] * 3 + ["", "x", ""]
    src = tmp_path / f"in.{'txt' if fmt == 'text' else fmt}"
    if fmt == "text":
        src.write_bytes("".join(d + "\x1e" for d in docs).encode())
    elif fmt == "parquet":
        pq.write_table(pa.table({"text": docs}), src, row_group_size=16)
    else:
        src.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    common = {
        "format": fmt,
        "field": "text",
        "text_separator": "\x1e" if fmt == "text" else None,
        "eot": True,
        "errors": "strict",
        "skip_empty": skip_empty,
    }
    hashes = {}
    for adapter in (ListOnly(tok), BufferSpy(tok), PackedSpy(tok)):
        C._TOKENIZERS[(adapter.device, 0)] = adapter
        out = tmp_path / adapter.device
        out.mkdir()
        spec = C.shard_spec(
            common,
            str(src),
            str(tmp_path),
            "shard_00000",
            str(out),
            device=adapter.device,
            batch_bytes=20_000,
        )
        entry = C.tokenize_shard(spec)["entry"]
        assert adapter.calls > 2  # several batches
        hashes[adapter.device] = (entry["bin"]["xxh3_128"], entry["idx"]["xxh3_128"], entry)
        tokens, offsets = C.load_shard(out, "shard_00000")
        kept = [d for d in docs if d or not skip_empty]
        assert len(offsets) == len(kept) + 1 and entry["skipped_empty"] == len(docs) - len(kept)
        assert entry["text_bytes"] == sum(len(d.encode()) for d in kept)
        first = tok.encode_ordinary(kept[0]) + [EOT]
        assert tokens[: len(first)].tolist() == first
    a = hashes["list-only"]
    for other in ("buffer-spy", "packed-spy"):
        b = hashes[other]
        assert a[:2] == b[:2], other
        assert {k: v for k, v in a[2].items() if k not in ("bin", "idx")} == {
            k: v for k, v in b[2].items() if k not in ("bin", "idx")
        }


def test_buffer_path_skips_and_names_invalid_utf8(tmp_path, tok):
    raw = [b"good one", b"", b"bad \xff\xfe here", b"fine", b"\xc3"]
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": pa.array(raw, pa.binary())}), src, row_group_size=2)
    spy = BufferSpy(tok)
    batch = C.Batch(
        None, lambda i: f"doc {i}", 0, b"".join(raw), np.cumsum([0] + [len(r) for r in raw])
    )
    spec = C.ShardSpec(errors="skip", skip_empty=True, num_threads=1)
    enc = C._encode_batch(spy, batch, spec)
    got = (enc.documents, enc.skipped_invalid_utf8, enc.skipped_empty, enc.text_bytes)
    assert got == (2, 2, 1, len(b"good one") + len(b"fine"))
    assert not enc.packed
    assert enc.offsets.tolist() == [0, len(tok.encode("good one")), len(enc.ids)]
    # The same through gputok's packed output, EOT after each document.
    enc = C._encode_batch(PackedSpy(tok), batch, spec, EOT)
    assert enc.packed and enc.documents == 2 and enc.tokens(EOT) == len(enc.ids)
    want = tok.encode("good one") + [EOT] + tok.encode("fine") + [EOT]
    assert enc.ids.dtype == np.uint16 and enc.ids.tolist() == want
    assert enc.offsets.tolist() == [len(tok.encode("good one")) + 1, len(want)]
    spec = dataclasses.replace(spec, errors="strict")
    with pytest.raises(C.CorpusInputError, match=r"doc 2: invalid UTF-8 at byte 4 of the document"):
        C._encode_batch(spy, batch, spec)
    # Places survive skipping empty documents first: the 5th document is cut mid-character.
    batch = C.Batch(
        None, lambda i: f"doc {i}", 0, b"".join(raw), np.cumsum([0] + [len(r) for r in raw])
    )
    sel = batch.select(np.array([0, 1, 3, 4]))
    with pytest.raises(C.CorpusInputError, match=r"doc 4: invalid UTF-8 at byte 0"):
        C._encode_batch(spy, sel, spec)


def test_min_batch_bytes_sets_the_smallest_batch(tmp_path):
    """A shard is cut into at least 4 batches, but none below the minimum batch (1 MB on the
    CPU, 4 MB on the GPU by default), and none above batch_bytes."""
    p = tmp_path / "a.txt"
    p.write_bytes(b"".join(b"y" * 1023 + b"\n" for _ in range(6 * 1024)))  # 6 MB, 1 KB docs

    def sizes(**kw):
        return [int(b.lengths().sum()) for b in C.read_text(str(p), "\n", 32 << 20, **kw)]

    total = 6 * 1024 * 1023
    assert sum(sizes()) == total
    assert len(sizes()) == 4  # 6 MB / 4 = 1.5 MB batches: above the 1 MB minimum
    assert len(sizes(min_batch_bytes=4 << 20)) == 2  # 4 MB, then the rest
    assert len(sizes(min_batch_bytes=64 << 20)) == 1
    assert len(list(C.read_text(str(p), "\n", 1 << 20, min_batch_bytes=4 << 20))) == 6
    q = tmp_path / "a.parquet"
    rows = [f"{i:08d}" + "z" * 1015 for i in range(6 * 1024)]
    pq.write_table(pa.table({"text": rows}), q, row_group_size=1 << 20, use_dictionary=False)
    assert len(list(C.read_parquet(str(q), "text", 32 << 20))) == 4
    assert len(list(C.read_parquet(str(q), "text", 32 << 20, min_batch_bytes=4 << 20))) == 2

    class Dev:
        def __init__(self, device):
            self.device = device

    assert C._min_batch_bytes(C.ShardSpec(), Dev("cpu")) == C.MIN_BATCH_BYTES == 1 << 20
    assert C._min_batch_bytes(C.ShardSpec(), Dev("cuda")) == C.GPU_MIN_BATCH_BYTES == 4 << 20
    assert C._min_batch_bytes(C.ShardSpec(min_batch_bytes=12345), Dev("cuda")) == 12345


def test_one_tokenizer_per_process_shared_by_threads(monkeypatch):
    """Threads of one worker (threads_per_worker > 1) get the same tokenizer object."""
    import threading

    monkeypatch.setattr(C.shard, "_TOKENIZERS", {})
    got, barrier = [], threading.Barrier(4)

    def get():
        barrier.wait()
        got.append(C._tokenizer("cpu", 0))

    threads = [threading.Thread(target=get) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and len({id(t) for t in got}) == 1
    assert list(C.shard._TOKENIZERS) == [("cpu", 0)]


def test_gpu_cluster_shape_and_gpu_by_worker_name(monkeypatch):
    """On a GPU host a local cluster runs workers_per_gpu workers on each GPU (default
    min(4, cores / (4 x GPUs))), about one shard per core, and worker i tokenizes on GPU
    i mod GPUs. Simulated here (2 GPUs, 16 cores, workers as threads; nothing runs on them)."""
    import distributed

    monkeypatch.setattr(C.cluster, "local_gpus", lambda device="auto": 2)
    monkeypatch.setattr(C.cluster, "_cpu_count", lambda: 16)
    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # plain workers, chosen by name
    for kwargs, workers, threads, gpus in (
        ({}, 4, 4, 2),  # 2 per GPU by default on 16 cores, 4 shards each
        ({"workers_per_gpu": 4}, 8, 2, 2),
        ({"gpus": 1}, 4, 4, 1),  # the first GPU only: 4 per GPU
    ):
        client, cluster = C.local_cluster(
            processes=False, dashboard=False, log=lambda m: None, **kwargs
        )
        try:
            nthreads = client.nthreads()
            assert len(nthreads) == workers, kwargs
            assert set(nthreads.values()) == {threads}, kwargs
            assert client._gputok_gpu_info == (gpus, True)
        finally:
            C._close_quietly(client, cluster)

    spec = C.ShardSpec(device="cuda", gpus=2, gpu_by_worker_name=True)

    class FakeWorker:
        name = 0

    monkeypatch.setattr(distributed, "get_worker", lambda: FakeWorker)
    for name, gpu in ((0, 0), (1, 1), (2, 0), (5, 1), ("7", 1)):
        FakeWorker.name = name
        assert C._worker_device_id(spec) == gpu
    FakeWorker.name = "tcp://10.0.0.1:4000"  # a remote worker's default name: not a number
    assert C._worker_device_id(spec) == 0
    FakeWorker.name = 3
    assert C._worker_device_id(dataclasses.replace(spec, device="cpu")) == 0
    assert C._worker_device_id(dataclasses.replace(spec, gpus=1)) == 0
    assert C._worker_device_id(dataclasses.replace(spec, gpu_by_worker_name=False)) == 0


def test_local_workers_keep_freed_memory(monkeypatch):
    """Local workers start with glibc settings that keep freed memory for reuse (Dask's
    nanny would set MALLOC_TRIM_THRESHOLD_=65536): 240 -> 0 page faults per MB of text
    tokenized, and the GPU worker's host CPU per GB 5.9 -> 4.9 s (H200 host, 2026-11-23).
    GPUTOK_CORPUS_KEEP_MEMORY=0 keeps Dask's."""
    import os

    keys = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
    monkeypatch.delenv("GPUTOK_CORPUS_KEEP_MEMORY", raising=False)
    # What any earlier Dask cluster leaves in this process's environment (the nanny writes
    # its pre-spawn settings here, and this environment then overrides its config): found
    # in CI, 2026-11-23, where an earlier test's cluster made the workers keep Dask's 65536.
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    client, cluster = C.local_cluster(1, device="cpu", dashboard=False, log=lambda m: None)
    try:
        env = client.run(lambda: {k: os.environ.get(k) for k in keys})
    finally:
        C._close_quietly(client, cluster)
    (got,) = env.values()
    assert got == {k: C.WORKER_MALLOC_ENV[k] for k in keys}
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"  # this process's, put back
    monkeypatch.setenv("GPUTOK_CORPUS_KEEP_MEMORY", "0")
    assert C._worker_spawn_config() == {}


def test_regression_parquet_decoding_gets_the_workers_cores():
    """Dask's nanny starts workers with OMP_NUM_THREADS=1 and Arrow sizes its decoding pool
    from it: GPU workers waited on a one-thread Parquet reader (0.30 GB/s where the same
    pipeline in one process reached 0.76 on the H200 host). A reader gives Arrow its cores
    back when it first imports it."""
    pytest.importorskip("pyarrow")
    import subprocess

    code = (
        "import pyarrow as pa; from gputok import corpus as C; before = pa.cpu_count(); "
        "C._common.import_arrow(); print(before, pa.cpu_count(), C._cpu_count())"
    )
    env = dict(__import__("os").environ, OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    before, after, cores = map(int, out)
    assert before == 1
    assert after == cores


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pack_names_the_first_id_outside_uint16(dtype):
    offsets = np.array([0, 2, 4], dtype=np.int64)
    for ids, first_bad in (
        ([1, 2, 65536, -1], 65536),
        ([1, -3, 70000, 4], -3),
        ([0, 65535, 1, 2], None),
        ([1, 70000, -5, 2], 70000),  # both documents bad: the first in order
    ):
        _, _, bad = C._pack(np.array(ids, dtype=dtype), offsets, EOT)
        assert bad == first_bad


def test_native_pack_refuses_bad_arguments():
    from gputok import _corpus_native

    ids = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match="non-decreasing"):
        _corpus_native.pack_uint16(ids, np.array([0, 3, 2], dtype=np.int64), EOT)
    with pytest.raises(ValueError, match="past the end"):
        _corpus_native.pack_uint16(ids, np.array([0, 5], dtype=np.int64), EOT)
    with pytest.raises(ValueError, match="65536"):
        _corpus_native.pack_uint16(ids, np.array([0, 4], dtype=np.int64), 70000)


@pytest.mark.parametrize("env, kicks", [(None, True), ("0", False)])
def test_shard_files_start_their_writeback_early(tmp_path, monkeypatch, env, kicks):
    """A durable shard file asks the kernel to start writing every WRITEBACK_BYTES as they
    come (POSIX_FADV_DONTNEED), so its fsync at the end waits for the tail only; the file and
    its hash are the same either way, and GPUTOK_CORPUS_WRITEBACK=0 turns it off."""
    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise on this platform")
    if env is None:
        monkeypatch.delenv("GPUTOK_CORPUS_WRITEBACK", raising=False)
    else:
        monkeypatch.setenv("GPUTOK_CORPUS_WRITEBACK", env)
    calls = []
    real = os.posix_fadvise
    monkeypatch.setattr(os, "posix_fadvise", lambda *a: (calls.append(a[1:3]), real(*a))[1])
    chunk = np.arange(C.WRITEBACK_BYTES // 6 + 1, dtype="<u2")  # just over a third of it
    f = C._HashedFile(str(tmp_path / "s.bin"), C._early_writeback(), "sha256")
    for _ in range(10):
        f.write(chunk)
    rec = f.finish(True)
    data = Path(f.tmp).read_bytes()
    assert data == chunk.tobytes() * 10
    assert rec["sha256"] == hashlib.sha256(data).hexdigest() and rec["bytes"] == len(data)
    if kicks:  # every 3 chunks: [0, 3c), [3c, 6c), [6c, 9c), each right after it is written
        c = chunk.nbytes
        assert calls == [(0, 3 * c), (3 * c, 3 * c), (6 * c, 3 * c)]
    else:
        assert calls == []


@pytest.mark.parametrize("decoder", ["arrow", "page-reader"])
def test_regression_empty_parquet_file_reads_as_no_documents(tmp_path, decoder):
    """pyarrow writes an empty table as one row group of 0 rows whose column chunk claims data
    page offset 0: the footer check took that for a chunk outside the file and failed the
    shard. An empty row group is now skipped, alone or between full ones, on both decoders."""
    from gputok import _corpus_native as native

    dec = None if decoder == "arrow" else native.parquet_decode
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), empty)
    assert list(C.read_parquet(str(empty), "text", 2000, decoder=dec)) == []
    mixed = tmp_path / "mixed.parquet"
    schema = pa.schema([("text", pa.string())])
    with pq.ParquetWriter(mixed, schema) as w:
        w.write_table(pa.table({"text": ["a", "b"]}, schema=schema))
        w.write_table(pa.table({"text": pa.array([], pa.string())}, schema=schema))
        w.write_table(pa.table({"text": ["c"]}, schema=schema))
    assert pq.ParquetFile(mixed).metadata.num_row_groups == 3
    batches = list(C.read_parquet(str(mixed), "text", 2000, min_batch_bytes=1, decoder=dec))
    assert buffer_docs(batches) == [b"a", b"b", b"c"]
