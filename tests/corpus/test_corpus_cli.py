"""Corpus tokenization on dask.distributed (gputok.corpus, `gputok corpus`), on the CPU.

A LocalCluster of 2 workers (threads of this process, except the killed-worker test, which
needs real worker processes) tokenizes small multi-shard corpora in text, JSONL and Parquet.
Every shard must equal tiktoken's ``encode_ordinary`` of each document (+ <|endoftext|>).
Resume: a rerun after damage, an injected failure or a killed worker process gives the same
manifest (the hash of every file) as a clean run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from gputok import cli  # noqa: E402
from gputok.corpus import (  # noqa: E402
    STAGES,
    CorpusError,
    CorpusInputError,
    load_shard,
    tokenize_corpus,
    verify_corpus,
)

REPO = Path(__file__).resolve().parents[2]
EOT = 50256
SEP = "\x1e\n"  # text-format document separator (record separator + newline)
N_SHARDS = 3


@pytest.fixture(scope="module")
def docs(corpus) -> list[str]:
    """~45 real documents (multilingual, code, prose) plus edge cases, cut to 4 KB each."""
    picked = [d[:4000] for d in corpus[:42] if SEP not in d]
    return picked + ["", "a <|endoftext|> b", "héllo wörld 日本語 🙂\n\n  x"]


@pytest.fixture(scope="module")
def ref(docs):
    from references import tiktoken_gpt2

    enc = tiktoken_gpt2()
    out = [enc.encode_ordinary(d) for d in docs]
    assert sum(map(len, out)) > 10_000 and all(out[i] for i, d in enumerate(docs) if d)
    return out


def shard_docs(docs: list[str]) -> list[list[int]]:
    """Document indices per input shard (round robin), for building inputs and expectations."""
    return [list(range(k, len(docs), N_SHARDS)) for k in range(N_SHARDS)]


def write_inputs(tmp: Path, fmt: str, docs: list[str]) -> Path:
    d = tmp / f"in-{fmt}"
    d.mkdir()
    for k, idx in enumerate(shard_docs(docs)):
        if fmt == "text":
            (d / f"part{k}.txt").write_bytes("".join(docs[i] + SEP for i in idx).encode())
        elif fmt == "jsonl":
            lines = [json.dumps({"id": i, "text": docs[i]}) for i in idx]
            (d / f"part{k}.jsonl").write_text("\n".join(lines) + "\n")
        else:
            table = pa.table({"id": idx, "text": [docs[i] for i in idx]})
            pq.write_table(table, d / f"part{k}.parquet", row_group_size=5)
    return d


def run(client, inputs, out, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("log", lambda msg: None)
    return tokenize_corpus(inputs, out, client=client, **kw)


def expected_shard(ref, idx, eot=True) -> tuple[np.ndarray, np.ndarray]:
    rows = [ref[i] + ([EOT] if eot else []) for i in idx]
    ids = np.array([t for r in rows for t in r], dtype=np.uint16)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return ids, offsets


def check_output(out: Path, ref, docs, eot=True) -> dict:
    assert verify_corpus(out) == []
    man = json.loads((out / "manifest.json").read_text())
    assert man["complete"] and man["totals"]["shards"] == N_SHARDS
    assert man["totals"]["documents"] == len(docs)
    for k, idx in enumerate(shard_docs(docs)):
        tokens, offsets = load_shard(out, f"shard_{k:05d}")
        want_ids, want_off = expected_shard(ref, idx, eot)
        assert want_ids.size > 0
        np.testing.assert_array_equal(np.asarray(tokens), want_ids)
        np.testing.assert_array_equal(np.asarray(offsets), want_off)
        # the nanoGPT loader path: a plain np.memmap of the files
        raw = np.memmap(out / f"shard_{k:05d}.bin", dtype=np.uint16, mode="r")
        np.testing.assert_array_equal(raw, want_ids)
    assert not list(out.glob("*.tmp-*"))
    return man


@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet", "parquet-pages"])
def test_formats_equal_tiktoken(client, tmp_path, docs, ref, fmt):
    """(parquet-pages: gputok's page reader instead of Arrow's.)"""
    dec = "gputok" if fmt == "parquet-pages" else "arrow"
    fmt = fmt.split("-")[0]
    inputs = write_inputs(tmp_path, fmt, docs)
    sep = SEP if fmt == "text" else None
    r = run(client, inputs, tmp_path / "out", text_separator=sep, parquet_decoder=dec)
    assert r.written == [f"shard_{k:05d}" for k in range(N_SHARDS)] and not r.verified
    man = check_output(tmp_path / "out", ref, docs)
    assert man["totals"]["tokens"] == sum(map(len, ref)) + len(docs)
    assert man["totals"]["text_bytes"] == sum(len(d.encode()) for d in docs)
    assert man["settings"]["input_format"] == fmt


def test_jsonl_fast_and_python_paths_agree(client, tmp_path, docs, ref, monkeypatch):
    """Arrow's JSON reader (fast path) and the line-by-line Python reader give the same
    shards; lone surrogate escapes, which Arrow refuses, go down the Python path."""
    from gputok import corpus as C

    inputs = write_inputs(tmp_path, "jsonl", docs)
    with open(inputs / "part0.jsonl", "a") as f:  # Python's json: "\ud800" -> U+FFFD ids
        f.write('{"text": "a\\ud800b"}\n\n   \n')
    fast = run(client, inputs, tmp_path / "fast").manifest
    monkeypatch.setattr(C.readers, "JSONL_FAST_MAX_BYTES", -1)
    slow = run(client, inputs, tmp_path / "slow").manifest
    assert fast == slow
    tokens, offsets = load_shard(tmp_path / "slow", "shard_00000")
    assert list(tokens[offsets[-2] :]) == [64, 4210, 65, EOT]


def test_compressed_inputs(client, tmp_path, docs, ref):
    """.jsonl.gz and .txt.xz read like their plain files (the Python JSONL path)."""
    import gzip
    import lzma

    for fmt, ext, opener in (("jsonl", ".jsonl", gzip.open), ("text", ".txt", lzma.open)):
        plain = write_inputs(tmp_path, fmt, docs)
        comp = tmp_path / f"{fmt}-compressed"
        comp.mkdir()
        for k in range(N_SHARDS):
            data = (plain / f"part{k}{ext}").read_bytes()
            suffix = ".gz" if opener is gzip.open else ".xz"
            with opener(comp / f"part{k}{ext}{suffix}", "wb") as f:
                f.write(data)
        sep = SEP if fmt == "text" else None
        run(client, comp, tmp_path / f"out-{fmt}", text_separator=sep)
        check_output(tmp_path / f"out-{fmt}", ref, docs)


def test_glob_and_no_eot(client, tmp_path, docs, ref):
    inputs = write_inputs(tmp_path, "jsonl", docs)
    run(client, str(inputs / "part*.jsonl"), tmp_path / "out", eot=False)
    check_output(tmp_path / "out", ref, docs, eot=False)


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


def test_bad_inputs_are_named(client, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    cases = {
        "missing.jsonl": (b'{"text": "ok"}\n{"body": "x"}\n', r"missing.jsonl:2: no field 'text'"),
        "notstr.jsonl": (b'{"text": 5}\n', r"notstr.jsonl:1: field 'text' is a number"),
        "badjson.jsonl": (b'{"text": "a"}\n{oops\n', r"badjson.jsonl:2: invalid JSON"),
        "utf8.jsonl": (b'{"text": "a\xffb"}\n', r"utf8.jsonl:1: invalid UTF-8 at byte 11"),
    }
    for name, (data, _) in cases.items():
        (d / name).write_bytes(data)
    os.symlink(tmp_path / "nowhere.jsonl", d / "dangling.jsonl")
    with pytest.raises(CorpusError) as ei:
        run(client, d, tmp_path / "out")
    msg = str(ei.value)
    assert "5 of 5 shard(s) failed" in msg
    for _, pattern in cases.values():
        assert re.search(pattern, msg), (pattern, msg)
    assert re.search(r"dangling.jsonl: cannot read", msg)
    # failed shards leave no reader or writer thread behind (the workers are in-process)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _corpus_threads():
        time.sleep(0.05)
    assert not _corpus_threads()


def _corpus_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("gputok-corpus")]


@pytest.mark.parametrize("decoder", ["arrow", "gputok"])
def test_parquet_errors(client, tmp_path, decoder):
    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(pa.table({"body": ["x"]}), d / "a.parquet")
    pq.write_table(pa.table({"text": [1, 2]}), d / "b.parquet")
    pq.write_table(pa.table({"text": ["x", None]}), d / "c.parquet")
    with pytest.raises(CorpusError) as ei:
        run(client, d, tmp_path / "out", parquet_decoder=decoder)
    msg = str(ei.value)
    assert "a.parquet: no column 'text' (columns: 'body')" in msg
    assert "b.parquet: column 'text' is int64, expected a string column" in msg
    assert "c.parquet: row 1: column 'text' is null" in msg


@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet", "parquet-pages"])
def test_invalid_utf8_policies(client, tmp_path, fmt):
    """(parquet-pages: gputok's page reader, whose batches are spans into the pages.)"""
    dec = {"parquet_decoder": "gputok" if fmt == "parquet-pages" else "arrow"}
    fmt = fmt.split("-")[0]
    from references import tiktoken_gpt2

    enc = tiktoken_gpt2()
    raw = [b"good one", b"bad \xff\xfe here", b"fine"]
    d = tmp_path / "in"
    d.mkdir()
    if fmt == "text":
        (d / "a.txt").write_bytes(b"\n".join(raw) + b"\n")
    elif fmt == "jsonl":
        (d / "a.jsonl").write_bytes(b"".join(b'{"text": "' + r + b'"}\n' for r in raw))
    else:
        pq.write_table(pa.table({"text": pa.array(raw, pa.binary())}), d / "a.parquet")
    sep = "\n" if fmt == "text" else None
    with pytest.raises(CorpusError, match=r"invalid UTF-8 at byte (4 of the doc|14 of the line)"):
        run(client, d, tmp_path / "strict", text_separator=sep, **dec)
    run(client, d, tmp_path / "replace", text_separator=sep, errors="replace", **dec)
    tokens, offsets = load_shard(tmp_path / "replace", "shard_00000")
    want = [t for r in raw for t in enc.encode_ordinary(r.decode("utf-8", "replace")) + [EOT]]
    assert want and list(tokens) == want and len(offsets) == 4
    r = run(client, d, tmp_path / "skip", text_separator=sep, errors="skip", **dec)
    tokens, offsets = load_shard(tmp_path / "skip", "shard_00000")
    want = [t for r in (raw[0], raw[2]) for t in enc.encode_ordinary(r.decode()) + [EOT]]
    assert want and list(tokens) == want and len(offsets) == 3
    assert r.manifest["totals"]["skipped_invalid_utf8"] == 1


def test_ids_beyond_uint16_are_refused(tmp_path):
    """Every id is checked before it is narrowed to uint16 (GPT-2's 50256 fits)."""
    from gputok import corpus as C

    files = [C._HashedFile(str(tmp_path / f"x.{e}"), False, C.DEFAULT_HASH) for e in ("bin", "idx")]
    try:
        for bad in ([1, 65536], [-1, 5]):
            ids = np.array(bad, dtype=np.int32)
            enc = C.Encoded(ids, np.array([0, 2]), False, 1, 2, 0, 0)
            with pytest.raises(CorpusError, match=f"token id {bad[0] if bad[0] < 0 else 65536}"):
                C._emit(enc, EOT, 0, *files, "x.jsonl")
        enc = C.Encoded(np.array([50256, 0], dtype=np.int32), np.array([0, 2]), False, 1, 2, 0, 0)
        C._emit(enc, EOT, 0, *files, "x")
    finally:
        for f in files:
            f.abort()


def test_output_inside_input_dir_and_json_metadata(client, tmp_path, docs, ref):
    """A rerun must not take its own outputs (or a directory's .json metadata) as input."""
    inputs = write_inputs(tmp_path, "jsonl", docs)
    (inputs / "dataset_info.json").write_text('{"description": "metadata, not JSON Lines"}')
    out = inputs / "tokens"
    run(client, inputs, out)
    r = run(client, inputs, out)
    assert len(r.verified) == N_SHARDS and not r.written
    check_output(out, ref, docs)


def test_refuses_other_settings_and_foreign_shards(client, tmp_path, docs):
    inputs = write_inputs(tmp_path, "jsonl", docs)
    out = tmp_path / "out"
    run(client, inputs, out)
    with pytest.raises(CorpusError, match="other settings"):
        run(client, inputs, out, eot=False)
    (out / "shard_00009.bin").write_bytes(b"")
    with pytest.raises(CorpusError, match="not part of this run"):
        run(client, inputs, out)
    r = run(client, inputs, out, eot=False, overwrite=True)
    assert len(r.written) == N_SHARDS and not (out / "shard_00009.bin").exists()
    with pytest.raises(CorpusInputError, match="no such file"):
        run(client, tmp_path / "nope", out)


def test_cli_run_and_errors(tmp_path, docs, ref, capsys):
    inputs = write_inputs(tmp_path, "jsonl", docs)
    out = tmp_path / "out"
    args = [
        "corpus",
        str(inputs),
        "-o",
        str(out),
        "--workers",
        "2",
        "--no-processes",
        "--no-dashboard",
        "--no-progress",
    ]
    assert cli.main(args) == 0
    assert "done: 3 shards (3 written" in capsys.readouterr().out
    check_output(out, ref, docs)
    assert cli.main(args) == 0
    assert "0 written, 3 verified" in capsys.readouterr().out
    # Several shards per worker, a minimum batch: same shards.
    more = ["--workers", "1", "--threads-per-worker", "2", "--min-batch-mb", "0.01"]
    args2 = [*args[:3], str(tmp_path / "out3"), *args[6:], *more]
    assert cli.main(args2) == 0
    assert "on 1 worker(s), 2 shard(s) at a time" in capsys.readouterr().out
    check_output(tmp_path / "out3", ref, docs)
    assert cli.main([*args2, "--threads-per-worker", "0", "--overwrite"]) == 1
    assert "threads_per_worker must be >= 1" in capsys.readouterr().err
    assert cli.main([*args2, "--workers-per-gpu", "0", "--overwrite"]) == 1
    assert "workers_per_gpu must be >= 1" in capsys.readouterr().err
    args[3] = str(tmp_path / "out2")
    assert cli.main([*args, "--field", "body"]) == 1
    assert "no field 'body'" in capsys.readouterr().err


def _help_text() -> str:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, "-m", "gputok", "corpus", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout


def test_help_matches_docs_and_gputok_does_not_import_dask():
    """docs/corpus.md carries `gputok corpus --help` verbatim (COLUMNS=100); regenerate it
    from the output below when options change."""
    help_text = _help_text()
    doc = (REPO / "docs" / "corpus.md").read_text()
    block = re.search(r"<!-- help:begin -->\n```text\n(.*?)```\n<!-- help:end -->", doc, re.S)
    assert block, "docs/corpus.md lacks the help block"
    assert block.group(1) == help_text
    code = "import sys, gputok; gputok.gpt2(device='cpu'); print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
