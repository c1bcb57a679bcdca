#!/usr/bin/env python3
"""The facade's one-text methods as builtins (gputok/_fast_methods.py) against the class's
Python methods they replace, in one process, interleaved: `tok.encode(text)` (the builtin)
against `Tokenizer.encode(tok, text)` (the method, as every call went before), and the same for
encode_ordinary and encode_to_numpy, and `encode_to_numpy(text, errors="strict")` (a call with
a keyword, which the builtin hands to the method), with gigatoken's `encode` beside them in
both its exact configurations (bench_envelope.gigatoken_makers; "gigatoken best" is the faster
per size). Texts of about 1 to 1,024 tokens cut from the bench corpus; best of --rounds rounds
of --number calls each, nanoseconds a call. Every output is checked equal to tiktoken's first.
Not a test.

    python bench/bench_fast_methods.py [--rounds 15] [--number 20000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
from _common import write_results  # noqa: E402

os.environ.setdefault("RAYON_NUM_THREADS", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,64,256,1024")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--number", type=int, default=20000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    from bench_envelope import gigatoken_makers

    import gputok
    from corpus_fixture import load_corpus
    from references import tiktoken_gpt2

    tt = tiktoken_gpt2()
    gts = {f"gigatoken {name}": make() for name, make in gigatoken_makers()}
    assert gts, "gigatoken is not installed"
    tok = gputok.gpt2(device="cpu")
    unit = " " + "".join(load_corpus("bench")).strip()
    ids = tt.encode_ordinary(unit[:200_000])
    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        text = tt.decode(ids[:n])
        want = tt.encode_ordinary(text)
        assert want, "tiktoken returned nothing: reference misbuilt"
        calls = {}
        for name in ("encode", "encode_ordinary", "encode_to_numpy"):
            fast, method = getattr(tok, name), getattr(gputok.Tokenizer, name)
            assert type(fast).__name__ == "builtin_function_or_method", name
            assert list(fast(text)) == want and list(method(tok, text)) == want, name
            calls[f"{name} builtin"] = lambda f=fast, t=text: f(t)
            calls[f"{name} method"] = lambda f=method, t=text: f(tok, t)
        fast, method = tok.encode_to_numpy, gputok.Tokenizer.encode_to_numpy
        calls["encode_to_numpy builtin, keyword"] = lambda f=fast, t=text: f(t, errors="strict")
        calls["encode_to_numpy method, keyword"] = lambda f=method, t=text: f(
            tok, t, errors="strict"
        )
        for name, gt in gts.items():
            assert list(gt.encode(text)) == want, name
            calls[name] = lambda g=gt, t=text: g.encode(t)
        best = {k: float("inf") for k in calls}
        for _ in range(a.rounds):  # interleaved: each round runs every call once
            for k, f in calls.items():
                best[k] = min(best[k], timeit.timeit(f, number=a.number) / a.number * 1e9)
        best["gigatoken best"] = min(best[name] for name in gts)
        rows.append(
            {"tokens": n, "bytes": len(text.encode()), **{k: round(v, 1) for k, v in best.items()}}
        )
        print(json.dumps(rows[-1]), flush=True)
    if a.json:
        write_results(a.json, rows)


if __name__ == "__main__":
    main()
