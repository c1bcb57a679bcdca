#!/usr/bin/env python3
"""The gigatoken contender of bench/bench_corpus_e2e.py, run as its own process:

    python3 bench/corpus_e2e_gigatoken.py '{"out": DIR, "format": "jsonl", "paths": [...],
        "docs": [documents per file], "call_bytes": N, "config": "tiktoken" | "hf"}'

gigatoken's own file path: ``Tokenizer.encode_files`` on ``JsonlFileSource`` /
``ParquetFileSource`` / ``TextFileSource`` over up to ``call_bytes`` of input files per call;
each call's ids are cut per input file and written as ``g<k>.bin`` (uint16, <|endoftext|> after
every document) and ``g<k>.idx`` (int64 document offsets), gputok corpus's shard layout, on a
the writer threads while the next call encodes. Prints one JSON line (load and encode seconds).
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RANKS = REPO / "backend_src" / "gputok" / "data" / "gpt2.tiktoken"
TEXT_SEP = "\x1e\n"
EOT = 50256


def _gigatoken_tokenizer(config: str):
    import gigatoken as gt

    if config == "hf":
        sys.path.insert(0, str(REPO / "tests"))
        from references import hf_gpt2

        return gt.Tokenizer(hf_gpt2())
    return gt.Tokenizer.from_tiktoken(str(RANKS), pretokenizer="gpt2")


def _write_uint16(out: Path, name: str, content, offs, d0: int, d1: int) -> None:
    """Documents [d0, d1) of one call's ids as ``name``.bin/.idx, <|endoftext|> after each,
    packed by gputok's native packer (GIL released, so the writer threads run at once). The
    first version (a numpy boolean-mask scatter on one writer thread) was slow: on the
    2026-11-25 H100 run, 10 GB, gigatoken's process took 18.5 s of which encode_files 9.7 s
    and start-up ~1.8 s; the rest, not timed apart, was mostly that writer."""
    import numpy as np

    from gputok.corpus.encode import _pack

    ids, ends, bad = _pack(content[offs[d0] : offs[d1]], offs[d0 : d1 + 1], EOT)
    if bad is not None:
        raise SystemExit(f"gigatoken id {bad} does not fit uint16")
    ids.tofile(out / f"{name}.bin")
    np.concatenate([[0], ends]).astype("<i8").tofile(out / f"{name}.idx")


def _file_source(gt, fmt: str, files: list[str]):
    """gigatoken's own reader of ``files`` (the documents gputok reads from them)."""
    if fmt == "jsonl":
        return gt.JsonlFileSource(files, field="text")
    if fmt == "parquet":
        return gt.ParquetFileSource(files, column="text")
    return gt.TextFileSource(files, separator=TEXT_SEP)


def gigatoken_job(job: dict) -> dict:
    """In the gigatoken process: encode_files per call of up to call_bytes of input files,
    each call's ids written per file on the writer threads while the next call encodes."""
    import awkward as ak
    import gigatoken as gt
    import numpy as np

    t0 = time.perf_counter()
    tok = _gigatoken_tokenizer(job["config"])
    t_load = time.perf_counter() - t0
    out, fmt, paths, ndocs = Path(job["out"]), job["format"], job["paths"], job["docs"]
    out.mkdir(parents=True, exist_ok=True)
    calls, cur, cur_b = [], [], 0
    for k, p in enumerate(paths):
        cur.append(k)
        cur_b += os.path.getsize(p)
        if cur_b >= job["call_bytes"]:
            calls.append(cur)
            cur, cur_b = [], 0
    calls += [cur] if cur else []
    enc_s, writes = 0.0, []
    with ThreadPoolExecutor(8) as writer:
        for ks in calls:
            files = [paths[k] for k in ks]
            src = _file_source(gt, fmt, files)
            t = time.perf_counter()
            lay = ak.to_layout(tok.encode_files(src))
            enc_s += time.perf_counter() - t
            offs = np.asarray(lay.offsets, dtype=np.int64)
            content = np.asarray(lay.content.data)
            if len(offs) - 1 != sum(ndocs[k] for k in ks):
                raise SystemExit(f"gigatoken gave {len(offs) - 1} documents for {files[:2]}...")
            d = 0
            for k in ks:
                writes.append(
                    writer.submit(_write_uint16, out, f"g{k:05d}", content, offs, d, d + ndocs[k])
                )
                d += ndocs[k]
        for w in writes:
            w.result()
    return {"load_s": t_load, "encode_s": enc_s, "calls": len(calls), "config": job["config"]}


if __name__ == "__main__":
    print(json.dumps(gigatoken_job(json.loads(sys.argv[1]))))
