#!/usr/bin/env python3
"""The JSONL reader of this tree against a git ref's, in the same process (A/B alternating,
repeated): every batch of each file read, wall and CPU seconds (process time: all threads)
per file, and the documents checked equal. A per-GB profile of the read path's parts (file
read, line split, UTF-8 decode, json.loads, Arrow's parse, UTF-8 validation, tokenization)
comes first.

    python bench/bench_jsonl_reader.py FILE.jsonl [FILE ...] --before-ref main --reps 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def module_at(ref: str, rel: str, name: str, package: str) -> types.ModuleType:
    """``rel`` as it is at git ``ref``, loaded as ``package.name`` (its relative imports
    resolve against this tree's package)."""
    src = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{ref}:{rel}"], check=True, capture_output=True
    ).stdout
    mod = types.ModuleType(f"{package}.{name}")
    mod.__package__ = package
    exec(compile(src, f"{ref}:{rel}", "exec"), mod.__dict__)  # noqa: S102 - our own source
    return mod


def timed(fn) -> tuple[float, float, object]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def profile(path: str) -> None:
    """CPU ns per byte of each part of reading ``path`` (best of 3; json.loads once)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.json as pj

    import gputok
    from gputok import _corpus_native as native

    n = os.path.getsize(path)
    opts = pj.ParseOptions(
        explicit_schema=pa.schema([("text", pa.string())]), unexpected_field_behavior="ignore"
    )
    state: dict = {}

    def arrow(threads: bool):
        ro = pj.ReadOptions(block_size=16 << 20, use_threads=threads)
        return pj.read_json(path, read_options=ro, parse_options=opts).column("text")

    steps = [
        ("file read", lambda: state.setdefault("data", Path(path).read_bytes())),
        ("line split, bytes.split", lambda: state.setdefault("lines", state["data"].split(b"\n"))),
        ("line split, native", lambda: native.find_separators(state["data"], b"\n")),
        (
            "UTF-8 decode per line",
            lambda: state.setdefault("t", [x.decode() for x in state["lines"]]),
        ),
        ("json.loads per line", lambda: [json.loads(x) for x in state["t"] if x]),
        ("Arrow read_json, 16 MB blocks, threads", lambda: arrow(True)),
        ("Arrow read_json, 1 thread", lambda: arrow(False)),
        (
            "Arrow validate(full=True)",
            lambda: state["col"].validate(full=True),
        ),
    ]
    for label, fn in steps:
        if "validate" in label:
            state["col"] = arrow(True)
        cpu = min(timed(fn)[1] for _ in range(1 if "json.loads" in label else 3))
        print(f"  {label:42s} {cpu * 1e9 / n:6.2f} CPU ns/B", flush=True)
    tok = gputok.gpt2(device="cpu")
    col = state["col"].combine_chunks()
    offs = np.frombuffer(col.buffers()[1], np.int32)[: len(col) + 1]
    cpu = timed(lambda: tok.encode_buffer_uint16(col.buffers()[2], offs, separator=50256))[1]
    print(f"  {'tokenize (CPU, all threads)':42s} {cpu * 1e9 / n:6.2f} CPU ns/B", flush=True)


def docs_of(batches) -> list[bytes]:
    return [d if isinstance(d, bytes) else d.encode() for b in batches for d in b.doc_list()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--before-ref", default="main")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args(argv)
    from gputok.corpus import readers as after

    before = module_at(
        args.before_ref, "backend_src/gputok/corpus/readers.py", "_readers_before", "gputok.corpus"
    )
    if not args.no_profile:
        print(f"profile of {args.files[0]}:")
        profile(args.files[0])
    trees = {"before": before, "after": after}
    got: dict = {k: [] for k in trees}
    for _ in range(args.reps):
        for who, mod in trees.items():
            w = c = 0.0
            for f in args.files:
                dw, dc, _ = timed(
                    lambda f=f, mod=mod: [
                        b.bounds for b in mod.read_jsonl(f, "text", "strict", 32 << 20)
                    ]
                )
                w, c = w + dw, c + dc
            got[who].append((w, c))
    equal = all(
        docs_of(before.read_jsonl(f, "text", "strict", 32 << 20))
        == docs_of(after.read_jsonl(f, "text", "strict", 32 << 20))
        for f in args.files
    )
    mb = sum(os.path.getsize(f) for f in args.files) / 1e6
    for who, runs in got.items():
        w = statistics.median(r[0] for r in runs)
        c = statistics.median(r[1] for r in runs)
        print(
            f"{who:6s} {len(args.files)} file(s), {mb:.1f} MB: wall median {w * 1e3:7.1f} ms "
            f"(min {min(r[0] for r in runs) * 1e3:.1f}), CPU median {c * 1e3:7.1f} ms; "
            f"{mb / w:.0f} MB/s  equal={equal}"
        )
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
