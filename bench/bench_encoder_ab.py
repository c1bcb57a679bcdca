#!/usr/bin/env python3
"""A/B of the CPU encoder alone: the same C++ driver built against two or more trees, run in
alternation, one thread, process CPU time (robust to a shared machine's load, unlike wall
time). Not a test.

Each TREE is a git revision (its backend_src/csrc, by `git archive`) or a folder holding the
csrc sources. bench/native/encoder_driver.cpp is built against each with g++ -O3 (the
flags of the package's build), every round runs each tree once, and the table gives the best
and the median of the rounds, cold (a fresh Encoder's first pass) and warm (the better of the
next two). Before anything is timed, every tree's ids for the corpus are checked against
tiktoken's (a rolling hash of every id): a mismatch stops the run.

    python bench/bench_encoder_ab.py HEAD~1 HEAD                       # bench corpus, 10 MB
    python bench/bench_encoder_ab.py HEAD~1 HEAD --corpus code --mb 10 --rounds 6
    python bench/bench_encoder_ab.py HEAD HEAD@-march=x86-64-v3        # TREE@FLAGS: extra g++ flags
    python bench/bench_encoder_ab.py HEAD~1 HEAD --wall 8192,32768,131072   # one text, wall time

--wall SIZES times one text of each size instead (the corpus's documents joined, cut there):
wall time of back-to-back calls, every core, encode_one (which splits a long text across the
cores) and, beside it, encode_batch on one thread, and encode_one called alone (1 ms after the
last call, when the pool sleeps); medians of the rounds, in microseconds.
Each tree's two results are checked equal first (its batch ids are checked against tiktoken's
as above, in a batch run before the rounds).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from _common import git_export  # noqa: E402

VOCAB = REPO / "backend_src" / "gputok" / "data" / "gpt2.tiktoken"
DRIVER = REPO / "bench" / "native" / "encoder_driver.cpp"
# The Encoder's sources; the facade (tokenizer.cpp) and the GPU pipeline are not needed.
SKIP = {"tokenizer.cpp", "chunk_pipeline.cpp"}


def tree_sources(tree: str, work: Path) -> Path:
    """The csrc folder of `tree` (a folder, or a git revision exported under `work`)."""
    if Path(tree).is_dir():
        return Path(tree)
    return git_export(tree, "backend_src/csrc", work / re.sub(r"[^A-Za-z0-9_.-]", "_", tree))


def build(csrc: Path, binary: Path, flags: str = "") -> None:
    sources = sorted(str(p) for p in csrc.glob("*.cpp") if p.name not in SKIP)
    cmd = ["g++", "-O3", *flags.split(), "-std=c++17", f"-I{csrc}", str(DRIVER), *sources]
    cmd.append("-lpthread")
    subprocess.run([*cmd, "-o", str(binary)], check=True)


def corpus_file(kind: str, mb: float, work: Path) -> tuple[Path, list[str]]:
    """Documents joined by 0x1E: the bench corpus's first `mb` MB, or stdlib .py files."""
    docs: list[str] = []
    total = 0
    if kind == "bench":
        import corpus  # noqa: PLC0415  (bench/corpus.py, only when asked for)

        lines = corpus.ensure("bench").read_text(encoding="utf-8").splitlines()
        source = (json.loads(line)["text"] for line in lines)
    else:
        files = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
        source = (f.read_text(encoding="utf-8", errors="replace") for f in files)
    for doc in source:
        if total >= mb * 1e6:
            break
        docs.append(doc)
        total += len(doc.encode())
    path = work / f"{kind}-{mb}.docs"
    path.write_bytes("\x1e".join(docs).encode())
    return path, docs


def tiktoken_hash(docs: list[str]) -> str:
    sys.path.insert(0, str(REPO / "tests"))
    from references import tiktoken_gpt2  # noqa: PLC0415  (tiktoken from the packaged ranks)

    enc = tiktoken_gpt2()
    h = 0
    for ids in enc.encode_ordinary_batch(docs, num_threads=2):
        for i in ids:
            h = (h * 1000003 + i) & 0xFFFFFFFFFFFFFFFF
    return f"{h:x}"


def tokens_file(work: Path) -> Path:
    """The vocabulary for the driver: each token's bytes in rank order, a uint16 length first."""
    pairs = [line.split() for line in VOCAB.read_text().splitlines() if line.strip()]
    ranked = sorted((int(r), base64.b64decode(t)) for t, r in pairs)
    if [r for r, _ in ranked] != list(range(len(ranked))):
        sys.exit(f"{VOCAB}: ranks are not 0..n-1")
    path = work / "tokens.bin"
    path.write_bytes(b"".join(struct.pack("<H", len(t)) + t for _, t in ranked))
    return path


def run(binary: Path, tokens: Path, docs: Path, mb: float) -> dict:
    out = subprocess.run(
        [str(binary), str(tokens), str(docs), str(mb), "batch"], capture_output=True, text=True
    ).stdout
    m = re.search(r"cold ([\d.]+) warm ([\d.]+) ([\d.]+) MB/s ids (\d+) hash (\w+)", out)
    if not m:
        sys.exit(f"driver {binary} printed {out!r}")
    return {"cold": float(m[1]), "warm": max(float(m[2]), float(m[3])), "hash": m[5]}


def run_wall(binary: Path, tokens: Path, docs: Path, mb: float, sizes: str) -> dict:
    """{bytes: (encode_one us in a stream, one thread us, encode_one us alone)}: wall mode."""
    out = subprocess.run(
        [str(binary), str(tokens), str(docs), str(mb), "wall", sizes],
        capture_output=True,
        text=True,
    ).stdout
    pattern = r"wall (\d+) bytes (\d+) ids: split ([\d.]+) one ([\d.]+) sporadic ([\d.]+) us"
    rows = re.findall(pattern, out)
    if len(rows) != len(sizes.split(",")):
        sys.exit(f"driver {binary} printed {out!r}")
    return {int(b): (float(s), float(o), float(x)) for b, _, s, o, x in rows}


def report_wall(walls: dict[str, list[dict]], rounds: int) -> None:
    sizes = sorted(next(iter(walls.values()))[0])
    print(f"One text, us, wall, medians of {rounds} rounds: encode_one in a stream / encode_batch")
    print("on one thread / encode_one alone, 1 ms after the last call.\n")
    print(f"| tree | {' | '.join(f'{b:,} B' for b in sizes)} |")
    print(f"|---|{'---:|' * len(sizes)}")
    for tree, rs in walls.items():
        cells = []
        for b in sizes:
            split, one, lone = (statistics.median(r[b][k] for r in rs) for k in range(3))
            cells.append(f"{split:.1f} / {one:.1f} / {lone:.1f}")
        print(f"| {tree} | {' | '.join(cells)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("trees", nargs="+", help="git revisions or csrc folders [@g++ flags]")
    ap.add_argument("--corpus", choices=("bench", "code"), default="bench")
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--wall", default=None, help="one text of these byte sizes (comma list)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputok-encoder-ab-") as tmp:
        work = Path(tmp)
        docs_path, docs = corpus_file(a.corpus, a.mb, work)
        tokens = tokens_file(work)
        want = tiktoken_hash(docs)
        binaries = {tree: work / f"driver{k}" for k, tree in enumerate(a.trees)}
        with ThreadPoolExecutor(max(1, min(len(a.trees), os.cpu_count() or 1))) as ex:
            builds = []
            for tree, binary in binaries.items():
                source, _, flags = tree.partition("@")
                builds.append(ex.submit(build, tree_sources(source, work), binary, flags))
            for b in builds:
                b.result()
        results: dict[str, list[dict]] = {t: [] for t in a.trees}
        if a.wall:
            walls: dict[str, list[dict]] = {t: [] for t in a.trees}
            for tree, binary in binaries.items():  # exact first: one batch run each
                if run(binary, tokens, docs_path, a.mb)["hash"] != want:
                    sys.exit(f"{tree}: ids differ from tiktoken's")
            for _ in range(a.rounds):
                for tree, binary in binaries.items():
                    walls[tree].append(run_wall(binary, tokens, docs_path, a.mb, a.wall))
            report_wall(walls, a.rounds)
            return
        for _ in range(a.rounds):
            for tree, binary in binaries.items():
                r = run(binary, tokens, docs_path, a.mb)
                if r["hash"] != want:
                    sys.exit(f"{tree}: ids differ from tiktoken's (hash {r['hash']} != {want})")
                results[tree].append(r)
    print(f"| tree | cold best | cold median | warm best | warm median |  ({a.corpus}, {a.mb} MB,")
    print(f"|---|---:|---:|---:|---:|  one thread, MB/s of CPU time, {a.rounds} rounds)")
    for tree, rs in results.items():
        c, w = [r["cold"] for r in rs], [r["warm"] for r in rs]
        print(
            f"| {tree} | {max(c):.1f} | {statistics.median(c):.1f} | {max(w):.1f} | "
            f"{statistics.median(w):.1f} |"
        )


if __name__ == "__main__":
    main()
