"""The corpus CLI tests' small corpus and its checks (test_corpus_cli.py, test_corpus_resume.py):
~45 documents written as 3 input shards in text, JSONL or Parquet, a run on the shared Dask
client, and the check that every output shard equals tiktoken's ``encode_ordinary`` of its
documents (+ <|endoftext|>). The fixtures are registered as ``docs`` and ``ref`` where a test
module imports them (tests/corpus is on sys.path)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from gputok.corpus import load_shard, tokenize_corpus, verify_corpus  # noqa: E402

EOT = 50256
SEP = "\x1e\n"  # text-format document separator (record separator + newline)
N_SHARDS = 3


@pytest.fixture(scope="module", name="docs")
def docs_fixture(corpus) -> list[str]:
    """~45 real documents (multilingual, code, prose) plus edge cases, cut to 4 KB each."""
    picked = [d[:4000] for d in corpus[:42] if SEP not in d]
    return picked + ["", "a <|endoftext|> b", "héllo wörld 日本語 🙂\n\n  x"]


@pytest.fixture(scope="module", name="ref")
def ref_fixture(docs):
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
