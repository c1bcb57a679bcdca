"""Corpus tokenization on dask.distributed, resumed: a rerun after damage, an injected failure
or a killed worker process gives the same manifest (the hash of every file) as a clean run;
shards written with either hash still verify; a worker runs 2 shards at once on its one
tokenizer. Every shard must equal tiktoken's ``encode_ordinary`` of each document (+
<|endoftext|>); the killed-worker test needs real worker processes, the others use a
LocalCluster of 2 workers (threads of this process).
"""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

distributed = pytest.importorskip("distributed")

from corpus_runs import (  # noqa: E402,F401  (docs_fixture, ref_fixture: the docs and ref fixtures)
    N_SHARDS,
    check_output,
    docs_fixture,
    ref_fixture,
    run,
    write_inputs,
)

from gputok.corpus import (  # noqa: E402
    STAGES,
    CorpusError,
    tokenize_corpus,
    verify_corpus,
)


def test_resume_redoes_damaged_and_partial(client, tmp_path, docs, ref):
    inputs = write_inputs(tmp_path, "jsonl", docs)
    out = tmp_path / "out"
    first = run(client, inputs, out).manifest
    bins = {p.name: p.read_bytes() for p in out.glob("*.bin")}
    # a flipped byte (same size: only the hash can tell), a lost entry, partial temp files
    b1 = bytearray((out / "shard_00001.bin").read_bytes())
    b1[10] ^= 1
    (out / "shard_00001.bin").write_bytes(bytes(b1))
    (out / "shard_00002.json").unlink()
    (out / "shard_00002.bin").write_bytes(b"\x01\x02\x03")
    (out / "shard_00000.bin.tmp-999-deadbeef").write_bytes(b"\x00" * 7)
    (out / "shard_00002.idx.tmp-999-deadbeef").write_bytes(b"\x00" * 9)
    r = run(client, inputs, out)
    assert r.verified == ["shard_00000"]
    assert r.written == ["shard_00001", "shard_00002"]
    assert r.manifest == first
    assert {p.name: p.read_bytes() for p in out.glob("*.bin")} == bins
    check_output(out, ref, docs)
    # Stage times: the written shards' stages, and their whole tasks, which contain them.
    st = r.stage_seconds
    assert set(st) == {*STAGES, "task"} and st["encode"] > 0
    assert st["task"] >= sum(st[k] for k in STAGES) > 0
    # Nothing left to do: everything verifies (and no stage time is counted).
    r = run(client, inputs, out)
    assert r.verified == [f"shard_{k:05d}" for k in range(N_SHARDS)]
    assert r.stage_seconds == dict.fromkeys([*STAGES, "task"], 0.0)


def test_hashes_default_xxh3_sha256_on_request_and_old_shards_still_verify(
    client, tmp_path, docs, ref
):
    """--hash: xxh3_128 by default (xxhash's digest of the file), sha256 on request. A resume
    with the other choice keeps and checks each shard by the hash it was written with, and a
    flipped byte fails that check whichever hash it is."""
    import hashlib

    import xxhash

    inputs = write_inputs(tmp_path, "jsonl", docs)
    out = tmp_path / "out"
    r = run(client, inputs, out, hash="sha256")
    assert r.written == [f"shard_{k:05d}" for k in range(N_SHARDS)]
    for e in r.manifest["shards"]:
        for part in ("bin", "idx"):
            data = (out / e[part]["file"]).read_bytes()
            assert e[part]["sha256"] == hashlib.sha256(data).hexdigest()
            assert "xxh3_128" not in e[part]
    r2 = run(client, inputs, out)  # the default, xxh3_128: the sha256 shards still verify
    assert r2.verified == [f"shard_{k:05d}" for k in range(N_SHARDS)] and r2.written == []
    assert r2.manifest["shards"] == r.manifest["shards"]
    b = bytearray((out / "shard_00001.bin").read_bytes())
    b[3] ^= 1
    (out / "shard_00001.bin").write_bytes(bytes(b))
    assert verify_corpus(out) == ["shard_00001: shard_00001.bin: sha256 differs from the manifest"]
    r3 = run(client, inputs, out)  # redone, now with the default hash
    assert r3.written == ["shard_00001"]
    e = next(e for e in r3.manifest["shards"] if e["name"] == "shard_00001")
    for part in ("bin", "idx"):
        data = (out / e[part]["file"]).read_bytes()
        assert e[part]["xxh3_128"] == xxhash.xxh3_128(data).hexdigest() and "sha256" not in e[part]
    check_output(out, ref, docs)
    b = bytearray((out / "shard_00001.idx").read_bytes())
    b[9] ^= 1
    (out / "shard_00001.idx").write_bytes(bytes(b))
    assert verify_corpus(out) == [
        "shard_00001: shard_00001.idx: xxh3_128 differs from the manifest"
    ]


def test_hash_choices_are_checked(client, tmp_path, docs, monkeypatch):
    """An unknown hash, or xxh3_128 without the xxhash package, fails before any work."""
    inputs = write_inputs(tmp_path, "jsonl", docs)
    with pytest.raises(ValueError, match="hash must be one of"):
        run(client, inputs, tmp_path / "a", hash="md5")
    monkeypatch.setitem(sys.modules, "xxhash", None)  # import xxhash raises ImportError
    with pytest.raises(CorpusError, match="needs the xxhash package"):
        run(client, inputs, tmp_path / "b")
    assert not (tmp_path / "b").exists() or not list((tmp_path / "b").iterdir())


@pytest.mark.parametrize("stage", ["mid", "before_entry"])
def test_failure_mid_run_then_resume(client, tmp_path, docs, ref, stage):
    inputs = write_inputs(tmp_path, "parquet", docs)
    clean = run(client, inputs, tmp_path / "clean").manifest
    out = tmp_path / "out"
    fault = {
        "shard": "shard_00001",
        "mode": "raise",
        "stage": stage,
        "marker": str(tmp_path / "fault"),
    }
    with pytest.raises(CorpusError, match=r"(?s)1 of 3 shard\(s\) failed.*injected failure"):
        run(client, inputs, out, _fault=fault)
    man = json.loads((out / "manifest.json").read_text())
    assert not man["complete"] and [e["name"] for e in man["shards"]] == [
        "shard_00000",
        "shard_00002",
    ]
    assert not (out / "shard_00001.json").exists()  # nothing that looks complete
    assert not list(out.glob("*.tmp-*"))
    r = run(client, inputs, out, _fault=fault)  # marker exists: the fault fires only once
    assert r.written == ["shard_00001"] and r.verified == ["shard_00000", "shard_00002"]
    assert r.manifest == clean
    check_output(out, ref, docs)


@pytest.mark.parametrize("threads_per_worker", [1, 2])
def test_killed_worker_process_same_manifest(tmp_path, docs, ref, threads_per_worker):
    """A worker process is SIGKILLed halfway through a shard (temp file half written); the
    nanny restarts it, the scheduler reruns the task, and the manifest equals a clean run's.
    With 2 threads per worker the kill also takes down the other shard it was running."""
    inputs = write_inputs(tmp_path, "jsonl", docs)
    fault = {"shard": "shard_00001", "mode": "kill", "marker": str(tmp_path / "killed")}
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=threads_per_worker,
        processes=True,
        dashboard_address=":0",
        scheduler_kwargs={"dashboard": False},
    )
    with distributed.Client(cluster) as c:
        clean = run(c, inputs, tmp_path / "clean", num_threads=1).manifest
        r = run(c, inputs, tmp_path / "out", num_threads=1, batch_bytes=4096, _fault=fault)
    cluster.close()
    assert (tmp_path / "killed").exists(), "the fault did not fire"
    assert r.manifest == clean
    check_output(tmp_path / "out", ref, docs)


class _CountingTokenizer:
    """The CPU tokenizer, counting how many calls run at once (each held 0.3 s so that
    concurrent shards overlap) and the num_threads they get."""

    def __init__(self, tok):
        self.tok, self.device, self.name, self.n_vocab = tok, tok.device, tok.name, tok.n_vocab
        self.lock = threading.Lock()
        self.now = self.most = self.calls = 0
        self.num_threads: set[int] = set()

    def _call(self, fn, *args, **kw):
        with self.lock:
            self.now += 1
            self.calls += 1
            self.most = max(self.most, self.now)
            self.num_threads.add(kw["num_threads"])
        try:
            time.sleep(0.3)
            return fn(*args, **kw)
        finally:
            with self.lock:
                self.now -= 1

    def encode_buffer_flat(self, *args, **kw):
        return self._call(self.tok.encode_buffer_flat, *args, **kw)

    def encode_batch_flat(self, *args, **kw):
        return self._call(self.tok.encode_batch_flat, *args, **kw)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_two_shards_at_once_per_worker(client, tmp_path, docs, ref, monkeypatch, fmt):
    """One worker with 2 threads (threads_per_worker=2) runs 2 shards at once, both calling
    the worker's one tokenizer, with cores / 2 tokenizer threads each; the shards equal
    tiktoken's and a resume gives the same manifest, as does 2 workers x 1 thread."""
    import gputok
    from gputok import corpus as C

    counting = _CountingTokenizer(gputok.gpt2(device="cpu"))
    # In-process workers (processes=False) share this module, hence its tokenizer cache.
    monkeypatch.setitem(C._TOKENIZERS, ("cpu", 0), counting)
    inputs = write_inputs(tmp_path, fmt, docs)
    out = tmp_path / "out"
    kw = {"device": "cpu", "n_workers": 1, "processes": False, "dashboard": False}
    logs: list[str] = []
    r = tokenize_corpus(inputs, out, threads_per_worker=2, progress=False, log=logs.append, **kw)
    assert any("on 1 worker(s), 2 shard(s) at a time" in m for m in logs), logs
    assert r.written == [f"shard_{k:05d}" for k in range(N_SHARDS)] and r.devices == ["cpu"]
    assert counting.most == 2, "the worker did not run 2 shards at once"
    assert counting.calls >= N_SHARDS
    assert counting.num_threads == {max(1, C._cpu_count() // 2)}
    man = check_output(out, ref, docs)
    # Same bytes as 2 workers x 1 thread (the shared fixture cluster).
    assert run(client, inputs, tmp_path / "other").manifest == man
    # Resume: one shard damaged, one entry lost, a leftover temp file; 2 shards at once again.
    b1 = bytearray((out / "shard_00001.bin").read_bytes())
    b1[3] ^= 1
    (out / "shard_00001.bin").write_bytes(bytes(b1))
    (out / "shard_00002.json").unlink()
    (out / "shard_00000.bin.tmp-999-deadbeef").write_bytes(b"\x00" * 7)
    r = tokenize_corpus(inputs, out, threads_per_worker=2, progress=False, log=logs.append, **kw)
    assert r.verified == ["shard_00000", "shard_00002"] and r.written == ["shard_00001"]
    assert r.manifest == man
    check_output(out, ref, docs)
