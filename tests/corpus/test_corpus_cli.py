"""Corpus tokenization on dask.distributed (gputok.corpus, `gputok corpus`), on the CPU.

A LocalCluster of 2 workers (threads of this process) tokenizes small multi-shard corpora in
text, JSONL and Parquet. Every shard must equal tiktoken's ``encode_ordinary`` of each document
(+ <|endoftext|>); bad inputs, settings and ids are named; the CLI runs and its --help is the
one docs/corpus.md shows. Resume, failures and a killed worker: test_corpus_resume.py.
"""

from __future__ import annotations

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

from corpus_runs import (  # noqa: E402,F401  (docs_fixture, ref_fixture: the docs and ref fixtures)
    EOT,
    N_SHARDS,
    SEP,
    check_output,
    docs_fixture,
    ref_fixture,
    run,
    write_inputs,
)

from gputok import cli  # noqa: E402
from gputok.corpus import (  # noqa: E402
    CorpusError,
    CorpusInputError,
    load_shard,
)

REPO = Path(__file__).resolve().parents[2]


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
