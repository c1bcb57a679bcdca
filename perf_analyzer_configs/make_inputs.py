#!/usr/bin/env python3
"""Build perf_analyzer input-data JSON files from the pinned benchmark corpus.

Tokenizer inputs (`tok_<size>.json`, sizes 128, 1k, 4k, 16k, 128k tokens):
`{"data": [{"QUERY": ["text"]}, ...]}`, `--count` distinct strings per size. Each string is a
slice of the corpus (documents joined with a newline, in the corpus' own hash order, so
English prose, code and six other languages all appear) that starts at a different document
and whose GPT-2 token count (gputok, == tiktoken) is within 2% of the target.

Ensemble inputs (`ens_<size>.json`, prompts of 128 and 512 tokens): `{"data": [{"text_input":
["..."], "max_tokens": [N]}, ...]}`.

`manifest.json` records, per file, the token and byte counts of every string. The files are
generated (about 10 MB with the 128k strings), so inputs/ is git-ignored: run
`python perf_analyzer_configs/make_inputs.py` (the scenario scripts do it when a file is missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = HERE / "inputs"
SIZES = {"128": 128, "1k": 1024, "4k": 4096, "16k": 16384, "128k": 131072}
ENSEMBLE_SIZES = {"128": 128, "512": 512}
DEFAULT_COUNT = {"128": 64, "1k": 32, "4k": 16, "16k": 8, "128k": 4}


def corpus_stream(profile: str) -> tuple[str, list[int]]:
    """The corpus documents joined by '\n', and the character offset where each one starts."""
    sys.path.insert(0, str(REPO / "tests"))
    from corpus_fixture import load_corpus

    docs = load_corpus(profile)
    starts, pos = [], 0
    for d in docs:
        starts.append(pos)
        pos += len(d) + 1
    return "\n".join(docs), starts


def slice_with_tokens(tok, text: str, start: int, target: int) -> tuple[str, int]:
    """text[start:end] whose token count is close to `target` (bisection on `end`).

    Token counts are monotone enough in the length for this: the count of a prefix never exceeds
    that of a longer prefix by more than one piece's re-merge, so bisection lands within a few
    tokens; we accept anything within 2%.
    """
    lo, hi = start + 1, min(len(text), start + target * 16)
    best = (text[start:hi], len(tok.encode_ordinary(text[start:hi])))
    while lo < hi:
        mid = (lo + hi) // 2
        s = text[start:mid]
        n = len(tok.encode_ordinary(s))
        if abs(n - target) < abs(best[1] - target):
            best = (s, n)
        if n == target:
            break
        if n < target:
            lo = mid + 1
        else:
            hi = mid
    return best


def build(profile: str, sizes: list[str], count_scale: float, out: Path) -> dict:
    import gputok

    tok = gputok.gpt2()
    text, starts = corpus_stream(profile)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"corpus": profile, "files": {}}
    step = max(1, len(starts) // 97)  # spread the start documents over the whole corpus

    def strings(target: int, n: int, offset: int) -> list[tuple[str, int]]:
        got = []
        for i in range(n):
            s, k = slice_with_tokens(tok, text, starts[(offset + i * step) % len(starts)], target)
            if abs(k - target) > 0.02 * target + 2:
                raise SystemExit(
                    f"could not cut a {target}-token string (got {k}); corpus too small?"
                )
            got.append((s, k))
        return got

    for name in sizes:
        n = max(1, round(DEFAULT_COUNT[name] * count_scale))
        rows = strings(SIZES[name], n, offset=list(SIZES).index(name))
        path = out / f"tok_{name}.json"
        path.write_text(json.dumps({"data": [{"QUERY": [s]} for s, _ in rows]}, ensure_ascii=False))
        manifest["files"][path.name] = {
            "tokens": [k for _, k in rows],
            "bytes": [len(s.encode()) for s, _ in rows],
        }
        print(f"{path.relative_to(REPO)}: {n} strings of ~{SIZES[name]} tokens", file=sys.stderr)
    for name, target in ENSEMBLE_SIZES.items():
        rows = strings(target, 16, offset=7)
        path = out / f"ens_{name}.json"
        data = [{"text_input": [s], "max_tokens": [16]} for s, _ in rows]
        path.write_text(json.dumps({"data": data}, ensure_ascii=False))
        manifest["files"][path.name] = {"tokens": [k for _, k in rows], "max_tokens": 16}
        print(f"{path.relative_to(REPO)}: 16 prompts of ~{target} tokens", file=sys.stderr)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def ensure(sizes: list[str], out: Path = OUT, force: bool = False) -> None:
    """Build the inputs unless every requested file exists (used by the scenario scripts)."""
    if force or not all((out / f"tok_{s}.json").is_file() for s in sizes):
        build("ci", list(SIZES), 1.0, out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default="ci", choices=["ci", "bench"])
    p.add_argument("--sizes", default=",".join(SIZES), help="comma list of " + ",".join(SIZES))
    p.add_argument("--count-scale", type=float, default=1.0, help="scale the strings per size")
    p.add_argument("--out", type=Path, default=OUT)
    a = p.parse_args(argv)
    sizes = [s for s in a.sizes.split(",") if s]
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        p.error(f"unknown sizes {bad}; choose from {list(SIZES)}")
    build(a.profile, sizes, a.count_scale, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
