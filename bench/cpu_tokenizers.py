"""The tokenizers bench_cpu.py times, built offline, and their outputs normalised for the
exactness check that runs before any timing (split from bench_cpu.py to keep modules short)."""

from __future__ import annotations

import itertools
import sys
import time

TOKENIZERS = ("tiktoken", "hf", "gigatoken", "gigatoken-tt", "gputok", "gputok-lists")
# gigatoken in both exact configurations: Tokenizer(hf) and Tokenizer.from_tiktoken(ranks,
# pretokenizer="gpt2"); the "vs gigatoken" column compares with the faster of the two.


def log(msg: str) -> None:
    """bench_cpu.py's progress line, on stderr (the worker and driver use it too)."""
    print(f"[bench_cpu {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def flat_from_lists(lists) -> tuple:
    import numpy as np

    lens = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(offsets[-1]))
    return ids, offsets


def to_flat(name: str, out) -> tuple:
    """Normalize each API's batch output to (ids int64, offsets int64)."""
    import numpy as np

    if name == "hf":
        return flat_from_lists([e.ids for e in out])
    if name.startswith("gigatoken"):
        import awkward as ak

        lay = ak.to_layout(out)
        offs = np.asarray(lay.offsets, dtype=np.int64)
        ids = np.asarray(lay.content.data, dtype=np.int64)[offs[0] : offs[-1]]
        return ids, offs - offs[0]
    if name == "gputok":
        ids, offs = out
        return np.asarray(ids, dtype=np.int64), np.asarray(offs, dtype=np.int64)
    return flat_from_lists(out)  # tiktoken, gputok-lists


def first_mismatch(ref, got, srcs) -> str | None:
    import numpy as np

    rid, roff = ref
    gid, goff = got
    if len(roff) != len(goff):
        return f"{len(goff) - 1} rows, expected {len(roff) - 1}"
    if np.array_equal(roff, goff) and np.array_equal(rid, gid):
        return None
    for i in range(len(roff) - 1):
        a = rid[roff[i] : roff[i + 1]]
        b = gid[goff[i] : goff[i + 1]]
        if not np.array_equal(a, b):
            j = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
            return (
                f"doc {i} ({srcs[i] if srcs else '?'}): first difference at token {j}: "
                f"got {b[j : j + 5].tolist()} expected {a[j : j + 5].tolist()} "
                f"(lengths {len(b)} vs {len(a)})"
            )
    return "offsets differ"


def build_tokenizers(wanted: list[str], threads: int) -> tuple[dict, dict]:
    """name -> (batch_fn(texts), single_fn(text) -> ids)."""
    import numpy as np

    import references as refs

    fns: dict = {}
    skipped: dict = {}
    par = threads > 1
    if "tiktoken" in wanted:
        tt = refs.tiktoken_gpt2()
        fns["tiktoken"] = (
            lambda texts: tt.encode_ordinary_batch(texts, num_threads=threads),
            tt.encode_ordinary,
        )
    if "hf" in wanted:
        hf = refs.hf_gpt2()
        fns["hf"] = (
            lambda texts: hf.encode_batch(texts, add_special_tokens=False),
            lambda t: hf.encode(t, add_special_tokens=False).ids,
        )
    for name, build in (
        ("gigatoken", refs.gigatoken_gpt2),
        ("gigatoken-tt", refs.gigatoken_tiktoken_gpt2),
    ):
        if name in wanted:
            import awkward  # noqa: F401  (import before any timing; to_flat reads its layouts)

            fns[name] = _gigatoken_fns(build(), par)
    if "gputok" in wanted or "gputok-lists" in wanted:
        try:
            import gputok

            tok = gputok.gpt2(device="cpu")
            probe = tok.encode_ordinary("hello world")
            assert list(probe) == [31373, 995], probe
        except Exception as e:  # not built yet, or broken: report, don't fail the others
            skipped["gputok"] = f"{type(e).__name__}: {e}"
            log(f"gputok unavailable: {skipped['gputok']}")
        else:

            def g_single(t):
                # encode_ordinary splits a long text across all cores, so the thread count
                # is pinned through encode_batch_flat in every configuration.
                ids, _ = tok.encode_batch_flat([t], num_threads=threads, disallowed_special=())
                return np.asarray(ids)

            if "gputok" in wanted:
                fns["gputok"] = (
                    lambda texts: tok.encode_batch_flat(
                        texts, num_threads=threads, disallowed_special=()
                    ),
                    g_single,
                )
            if "gputok-lists" in wanted:
                fns["gputok-lists"] = (
                    lambda texts: tok.encode_ordinary_batch(texts, num_threads=threads),
                    None,
                )
    return fns, skipped


def _gigatoken_fns(gt, par: bool) -> tuple:
    """gigatoken's batch call, and its single-text call: `encode` on 1 thread, `encode_batch([t])`
    on more (it splits one document across cores)."""
    single = (
        gt.encode
        if not par
        else (lambda t: to_flat("gigatoken", gt.encode_batch([t], parallel=True))[0])
    )
    return (lambda texts: gt.encode_batch(texts, parallel=par), single)
