"""A short text's encode makes no heap allocation of its own (issue: "a 64-token call should
not reach the thread pool or allocate"). tests/core/native/no_alloc.cpp replaces the global
operator new with a counting one around warm Encoder::encode_one calls; this test builds it
against backend_src/csrc with g++ and checks the count, and that the ids equal the general
path's (encode_batch) for every text and policy."""

from __future__ import annotations

import base64
import shutil
import struct
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import gputok

REPO = Path(__file__).resolve().parents[2]
CSRC = REPO / "backend_src" / "csrc"
NATIVE = REPO / "bench" / "native"  # tokens_file.h
# The Encoder's sources; the facade (tokenizer.cpp) and the GPU pipeline are not needed.
SKIP = {"tokenizer.cpp", "chunk_pipeline.cpp"}

TEXTS = {
    "english sentences": "The quick brown fox jumps over the lazy dog, and then it runs back "
    "home to rest. Meanwhile, 42 birds sing songs it's never heard before; they're loud!",
    "mixed scripts": "Привет, мир! 東京は晴れです。 Γειά σου κόσμε — code: x = f(a, b) + 3.14 "
    "# comment\n\tindented line   with    spaces\n" * 4,
}


@pytest.fixture(scope="module")
def no_alloc(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    work = tmp_path_factory.mktemp("no_alloc")
    sources = [REPO / "tests" / "core" / "native" / "no_alloc.cpp"]
    sources += sorted(p for p in CSRC.glob("*.cpp") if p.name not in SKIP)

    def compile_one(src: Path) -> Path:
        obj = work / (src.stem + ".o")
        cmd = ["g++", "-O1", "-std=c++17", f"-I{CSRC}", f"-I{NATIVE}", "-c", str(src)]
        cmd += ["-o", str(obj)]
        subprocess.run(cmd, check=True, capture_output=True)
        return obj

    with ThreadPoolExecutor() as pool:
        objs = list(pool.map(compile_one, sources))
    binary = work / "no_alloc"
    subprocess.run(["g++", *map(str, objs), "-lpthread", "-o", str(binary)], check=True)
    ranks = Path(gputok.__file__).parent / "data" / "gpt2.tiktoken"
    pairs = [line.split() for line in ranks.read_text().splitlines() if line.strip()]
    ranked = sorted((int(r), base64.b64decode(t)) for t, r in pairs)
    tokens = work / "tokens.bin"
    tokens.write_bytes(b"".join(struct.pack("<H", len(t)) + t for _, t in ranked))
    return binary, tokens, work


def test_a_short_text_encodes_with_no_allocation(no_alloc):
    binary, tokens, work = no_alloc
    files = []
    for i, text in enumerate(TEXTS.values()):
        path = work / f"text{i}.txt"
        path.write_bytes(text.encode())
        files.append(str(path))
    out = subprocess.run(
        [str(binary), str(tokens), *files], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    rows = [line.split() for line in out if line.strip()]
    assert len(rows) == 2 * len(TEXTS)  # two policies a text
    for (policy, allocs, same), name in zip(
        rows, [n for n in TEXTS for _ in range(2)], strict=True
    ):
        assert same == "1", f"{name}, {policy}: ids differ from the general path"
        assert allocs == "0", f"{name}, {policy}: {allocs} allocations in 100 warm calls"
