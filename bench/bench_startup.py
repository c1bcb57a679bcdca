#!/usr/bin/env python3
"""Where a fresh process's first tokenizer call waits: gputok's start-up, step by step.

Not a test. Every round starts fresh processes (the page cache warm, as for a second run of a
command) and reports, in ms from the child's first line of code (the interpreter's own start
is the ``interpreter`` row, timed from the parent):

The process wall (spawn to exit) includes the texts' reading (the same in every child) and
the exit.

* ``steps``: ``import numpy``, ``import gputok``, the vocabulary (``gpt2_vocab()``), a CPU
  tokenizer, ``cuda_available()`` (the driver's start), a GPU tokenizer, and its first calls
  of 1 MB and 32 MB (the pools' first allocations);
* ``gpt2``: ``import gputok`` then ``gpt2()`` (device "auto") and a first 1 MB call, as a
  user's script does; ``gpt2-cuda-sync``: the same with blocking_sync (as the corpus tool);
* ``first-calls``: a GPU tokenizer's first 32 MB call (of bytes, as the corpus tool's) and its
  second: what the pools' first allocations cost;
* ``gigatoken``: ``import gigatoken`` and ``Tokenizer.from_tiktoken(path, pretokenizer="gpt2")``
  and its first 1 MB call, the peer's start-up (where gigatoken is installed).

Medians over ``--rounds``; every round's figures in ``--json``. ``--variant NAME=DIR``
(repeatable) runs the gputok children once per package directory put first on PYTHONPATH
(a before/after pair), alternated by round.

    python3 bench/bench_startup.py --rounds 5 --json /tmp/startup.json
    python3 bench/bench_startup.py --variant after=backend_src --variant before=.before/backend_src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The children: each prints one JSON line of {step: ms since its first line}.
_PRELUDE = """
import json, sys, time
T0 = time.perf_counter()
marks = {}
def mark(name):
    marks[name] = (time.perf_counter() - T0) * 1e3
"""

# The texts are read before the child's clock starts (T0), so the calls time tokenizing only.
_TEXT = """
import sys
with open(sys.argv[1], encoding="utf-8") as f:
    T1 = f.read(1 << 20)
"""
_TEXT32 = (
    _TEXT
    + """
with open(sys.argv[1], encoding="utf-8") as f:
    T32 = f.read(32 << 20)
"""
)

CHILDREN = {
    "steps": _TEXT32
    + _PRELUDE
    + """
import numpy; mark("import numpy")
import gputok; mark("import gputok")
from gputok import _vocab
_vocab.gpt2_vocab(); mark("vocabulary")
cpu = gputok.gpt2(device="cpu"); mark("CPU tokenizer")
ok = gputok.cuda_available()[0]; mark("cuda_available")
if ok:
    gpu = gputok.gpt2(device="cuda"); mark("GPU tokenizer")
    gpu.encode_batch_flat([T1]); mark("first 1 MB call")
    gpu.encode_batch_flat([T32]); mark("first 32 MB call")
    gpu.encode_batch_flat([T32]); mark("second 32 MB call")
print(json.dumps(marks))
""",
    "gpt2": _TEXT
    + _PRELUDE
    + """
import gputok; mark("import gputok")
tok = gputok.gpt2(); mark("gpt2()")
tok.encode_batch_flat([T1]); mark("first 1 MB call")
print(json.dumps(marks))
""",
    "gpt2-cuda-sync": _TEXT
    + _PRELUDE
    + """
import gputok; mark("import gputok")
if gputok.cuda_available()[0]:
    tok = gputok.gpt2(device="cuda", blocking_sync=True); mark("gpt2(cuda, blocking_sync)")
    tok.encode_batch_flat([T1]); mark("first 1 MB call")
print(json.dumps(marks))
""",
    # A GPU tokenizer's first large call against its second (the pools' first allocations),
    # on bytes (no str to convert): the corpus tool's calls.
    "first-calls": _PRELUDE
    + """
import numpy as np
with open(sys.argv[1], "rb") as f:
    data = np.frombuffer(f.read(32 << 20), np.uint8)
import gputok
if gputok.cuda_available()[0]:
    tok = gputok.gpt2(device="cuda", blocking_sync=True)
    tok.encode_buffer_flat(data[: 1 << 20], np.array([0, 1 << 20], np.int64))
    whole = np.array([0, len(data)], np.int64)
    mark("ready")
    tok.encode_buffer_flat(data, whole); mark("first 32 MB call")
    tok.encode_buffer_flat(data, whole); mark("second 32 MB call")
print(json.dumps(marks))
""",
    "gigatoken": _TEXT
    + _PRELUDE
    + """
try:
    import gigatoken
except ImportError:
    print(json.dumps(marks)); raise SystemExit
mark("import gigatoken")
from gputok._vocab import GPT2_RANKS
tok = gigatoken.Tokenizer.from_tiktoken(str(GPT2_RANKS), pretokenizer="gpt2")
mark("from_tiktoken")
tok.encode(T1); mark("first 1 MB call")
print(json.dumps(marks))
""",
}


def run_child(code: str, text_path: str, path: str | None = None) -> dict:
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", code, text_path],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    wall = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"child failed: {p.stderr[-2000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process wall"] = wall
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--children", default="steps,gpt2,gpt2-cuda-sync,gigatoken")
    ap.add_argument("--text", default=str(REPO / ".cache" / "corpus" / "corpus-bench.jsonl"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=DIR")
    args = ap.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant) or {"": None}
    names = [n for n in args.children.split(",") if n]
    runs = [
        (f"{n} {v}".strip(), n, path)
        for n in names
        for v, path in (variants.items() if n != "gigatoken" else [("", None)])
    ]
    rounds: dict[str, list[dict]] = {k: [] for k in ["interpreter", *(r[0] for r in runs)]}
    for _ in range(args.rounds):
        rounds["interpreter"].append(run_child("print('{}')", args.text))
        for key, n, path in runs:  # alternated by round
            rounds[key].append(run_child(CHILDREN[n], args.text, path))
    report = {}
    for n, rs in rounds.items():
        keys = list(rs[0])
        med = {k: statistics.median(r[k] for r in rs if k in r) for k in keys}
        report[n] = med
        print(f"{n}: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"median_ms": report, "rounds": rounds}, indent=1))


if __name__ == "__main__":
    main()
