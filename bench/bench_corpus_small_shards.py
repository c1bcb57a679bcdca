#!/usr/bin/env python3
"""Small shards against large ones, this tree's `gputok corpus` against another git ref's, in
the same run (A/B alternating, repeated): the same corpus as 1 MB and 20 MB shards, JSONL and
Parquet, in process. Each run is a fresh process; reported: wall seconds, CPU seconds of the
process (user + sys: steadier than wall on a shared machine) and the run's own seconds (the
summary line's, without Python's start). The outputs of the two trees are compared byte for
byte (every .bin and .idx, and the manifests' shard entries).

    python bench/bench_corpus_small_shards.py --before-ref main --mb 200 --reps 3

The ref's Python package is taken with ``git archive`` and run on this tree's native module
(so the A/B is of the Python side only; the natives must be compatible).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

LAUNCHER = """import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()
                    and "editable" not in type(f).__module__.lower()]
sys.path.insert(0, {root!r})
sys.argv = ["gputok"] + sys.argv[1:]
runpy.run_module("gputok", run_name="__main__", alter_sys=True)
"""


def before_tree(ref: str, work: Path) -> list[str]:
    """A launcher running ``ref``'s gputok package with this tree's native module."""
    from _common import git_export

    import gputok._core as core

    root = work / "before"
    shutil.rmtree(root, ignore_errors=True)
    git_export(ref, "backend_src/gputok", root).rename(root / "gputok")
    for so in Path(core.__file__).parent.glob("*.so"):  # _core, _corpus_native
        os.symlink(so, root / "gputok" / so.name)
    (root / "launch.py").write_text(LAUNCHER.format(root=str(root)))
    return [sys.executable, str(root / "launch.py")]


def run_one(cmd: list[str], inp: Path, out: Path, args) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    argv = [*cmd, "corpus", str(inp), "-o", str(out), "--no-fsync", "--no-progress"]
    argv += ["--no-dashboard", "--overwrite", "--in-process", "--device", args.device]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"{argv} failed:\n{p.stderr[-3000:]}")
    m = re.search(r" in ([0-9.]+) s on ", p.stdout + p.stderr)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"wall": wall, "cpu": cpu, "run": float(m.group(1)) if m else None}


def same_outputs(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir() if p.suffix in (".bin", ".idx"))
    if not names or names != sorted(p.name for p in b.iterdir() if p.suffix in (".bin", ".idx")):
        return False
    if any((a / n).read_bytes() != (b / n).read_bytes() for n in names):
        return False
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    return ma["shards"] == mb["shards"] and ma["totals"] == mb["totals"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before-ref", default="main")
    ap.add_argument("--mb", type=float, default=200.0, help="MB of text per configuration")
    ap.add_argument("--shard-mb", default="1,20")
    ap.add_argument("--formats", default="parquet,jsonl")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--work-dir", default="/dev/shm/gputok-small-shards")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    import bench_corpus_e2e as e2e

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    trees = {
        "before": before_tree(args.before_ref, work),
        "after": [sys.executable, "-m", "gputok"],
    }
    docs = e2e.load_docs("diverse")
    rows = []
    for fmt in args.formats.split(","):
        for mb in map(float, args.shard_mb.split(",")):
            inp = work / f"{fmt}-{mb:g}"
            paths, _, text = e2e.write_inputs(inp, fmt, docs, int(args.mb * 1e6), int(mb * 1e6))
            got: dict = {k: [] for k in trees}
            for _ in range(args.reps):
                for who, cmd in trees.items():
                    got[who].append(run_one(cmd, inp, work / f"out-{who}", args))
            equal = same_outputs(work / "out-before", work / "out-after")
            for who, runs in got.items():
                med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu", "run")}
                rows.append(
                    {
                        "format": fmt,
                        "shard_mb": mb,
                        "shards": len(paths),
                        "text": text,
                        "tree": who,
                        "equal": equal,
                        "runs": runs,
                        **med,
                    }
                )
                print(
                    f"{fmt:8s} {mb:5g} MB x{len(paths):4d} {who:6s} wall {med['wall']:6.2f} "
                    f"cpu {med['cpu']:6.2f} run {med['run']:6.2f}  equal={equal}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                    "argv": sys.argv,
                    "rows": rows,
                },
                indent=1,
            )
        )
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
