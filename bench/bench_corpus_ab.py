#!/usr/bin/env python3
"""`gputok corpus` whole commands, this tree's package against another's, alternated on one
machine: what a change to the corpus tool does to a user's wall time.

Not a test. Inputs are bench_corpus_e2e.py's (the diverse bench corpus, repeated). Each
configuration is written once; then, for each round, every variant runs ``python -m gputok
corpus`` on it as a fresh process (start-up included, ``--no-fsync``, outputs removed between
runs), in an order that alternates by round. A variant is NAME=PYTHONPATH[:EXTRA ARGS], where
EXTRA ARGS are more ``gputok corpus`` arguments separated by spaces. A configuration is
[CORPUS:]FORMAT:GB:SHARD_MB, CORPUS being bench_corpus_e2e.py's (diverse, the default, or code).

    python3 bench/bench_corpus_ab.py --variant after=backend_src \\
        --variant before=.before/backend_src --configs parquet:1:1,jsonl:1:20 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_corpus_e2e as e2e  # noqa: E402


def _variant(spec: str) -> tuple[str, str, list[str]]:
    name, _, rest = spec.partition("=")
    path, _, extra = rest.partition(":")
    return name, os.path.abspath(path), extra.split()


def _run(in_dir: Path, out: Path, fmt: str, path: str, extra: list[str]) -> dict:
    env_before = os.environ.get("PYTHONPATH", "")
    site = [p for p in env_before.split(":") if p and "backend_src" not in p]
    os.environ["PYTHONPATH"] = ":".join([*site, path])
    try:
        shutil.rmtree(out, ignore_errors=True)
        return e2e.run_gputok(in_dir, out, fmt, extra)
    finally:
        os.environ["PYTHONPATH"] = env_before
        shutil.rmtree(out, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", action="append", required=True, help="NAME=PYTHONPATH[:ARGS]")
    ap.add_argument("--configs", default="parquet:1:1,jsonl:1:20,text:1:100",
                    help="[corpus:]format:GB:shard MB, comma separated; corpus: diverse "
                         "(the default) or code")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work-dir", default="/dev/shm/gputok-ab")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    variants = [_variant(v) for v in args.variant]
    docs_of: dict[str, list[str]] = {}
    work = Path(args.work_dir)
    rows = []
    for cfg in filter(None, args.configs.split(",")):
        *corpus, fmt, gb, mb = cfg.split(":")
        corpus_name = corpus[0] if corpus else "diverse"
        if corpus_name not in docs_of:
            docs_of[corpus_name] = e2e.load_docs(corpus_name)
        docs = docs_of[corpus_name]
        in_dir = work / "in"
        paths, _, text = e2e.write_inputs(in_dir, fmt, docs, int(float(gb) * 1e9),
                                          int(float(mb) * e2e.MB))  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
        for r in range(args.rounds):
            order = variants if r % 2 == 0 else variants[::-1]
            for name, path, extra in order:
                got = _run(in_dir, work / "out", fmt, path, extra)
                times[name].append(got["wall_s"])
                summary = got["summary"][got["summary"].find("text in") :].split("; manifest")[0]
                e2e.log(f"{cfg} round {r + 1} {name}: {got['wall_s']:.2f} s ({summary})")
        row = {"config": cfg, "shards": len(paths), "text_bytes": text, "seconds": times}
        rows.append(row)
        meds = {k: statistics.median(v) for k, v in times.items()}
        e2e.log(
            f"{cfg} x{len(paths)} medians: " + ", ".join(f"{k} {v:.2f} s" for k, v in meds.items())
        )
        shutil.rmtree(in_dir, ignore_errors=True)
    print("| config | shards | " + " | ".join(n for n, _, _ in variants) + " |")
    print("|---|---:|" + "---:|" * len(variants))
    for row in rows:
        cells = [", ".join(f"{t:.2f}" for t in row["seconds"][n]) for n, _, _ in variants]
        print(f"| {row['config']} | {row['shards']} | " + " | ".join(cells) + " |")
    if args.json:
        meta = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": e2e._device()}
        Path(args.json).write_text(json.dumps({**meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
