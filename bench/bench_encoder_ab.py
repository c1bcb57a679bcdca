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
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import statistics
import struct
import subprocess
import sys
import sysconfig
import tempfile
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("trees", nargs="+", help="git revisions or csrc folders [@g++ flags]")
    ap.add_argument("--corpus", choices=("bench", "code"), default="bench")
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputok-encoder-ab-") as tmp:
        work = Path(tmp)
        docs_path, docs = corpus_file(a.corpus, a.mb, work)
        tokens = tokens_file(work)
        want = tiktoken_hash(docs)
        binaries = {}
        for k, tree in enumerate(a.trees):
            binaries[tree] = work / f"driver{k}"
            source, _, flags = tree.partition("@")
            build(tree_sources(source, work), binaries[tree], flags)
        results: dict[str, list[dict]] = {t: [] for t in a.trees}
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
