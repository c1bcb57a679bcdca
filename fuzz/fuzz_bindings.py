"""Binding arguments: every public Tokenizer call and the tokenizer's native entry points with
arguments of the wrong type, huge or negative sizes, and offsets that do not match their
buffer. The contract: TypeError, ValueError (its subclasses VocabError, Utf8Error,
DisallowedSpecialError) or OverflowError, never a crash or another error; a call whose
arguments are valid gives the ids of the plain path (buffer calls equal encode_batch_flat of
the slices).

    .venv/bin/python fuzz/fuzz_bindings.py --budget 20000 --seed 4
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Finding, expect_errors, parse_args, run  # noqa: E402

ALLOWED = (TypeError, ValueError, OverflowError)
BIG = [0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, -(2**63), 2**64, 10**30]
DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64, np.uint64, np.float32]
DTYPES += [np.float64, np.bool_, object, "U3", "S2", np.complex64]


def weird(rng: random.Random):
    """A value of an arbitrary type: what a careless caller might pass anywhere."""
    k = rng.randrange(12)
    if k == 0:
        return rng.choice(BIG)
    if k == 1:
        return rng.choice([None, 1.5, float("nan"), True, "text", b"bytes", object()])
    if k == 2:
        return rng.choice([[], [1, 2], [1.5], ["a"], [None], [[1]], [2**70], (3, 4)])
    if k == 3:
        return np.array([rng.choice(BIG[:5])] * rng.randint(0, 4)).astype(rng.choice(DTYPES))
    if k == 4:
        return np.arange(rng.randint(0, 12), dtype=np.int64).reshape(-1, 1)[:: rng.randint(1, 3)]
    if k == 5:
        return np.array([b"ab", "cd", None], dtype=object)
    if k == 6:
        return bytearray(rng.randbytes(rng.randint(0, 20)))
    if k == 7:
        return memoryview(rng.randbytes(rng.randint(0, 20)))
    if k == 8:
        return {"a": 1}
    if k == 9:
        return iter([1, 2, 3])
    if k == 10:
        return rng.choice(["strict", "replace", "all", "ignore", ""])
    return rng.randbytes(rng.randint(0, 30))


def random_bounds(rng: random.Random, size: int) -> np.ndarray:
    """Offsets for a buffer of `size` bytes: valid, or off by a little, or absurd."""
    n = rng.randint(0, 6)
    if rng.random() < 0.5:
        cuts = sorted(rng.randint(0, size) for _ in range(n + 1))
        arr = np.array(cuts if cuts else [0])
    else:
        a = [rng.randint(0, size) for _ in range(n)]
        arr = np.array([(x, rng.randint(x, size)) for x in a]).reshape(-1, 2)
    if rng.random() < 0.4 and arr.size:  # break it
        flat = arr.reshape(-1)
        flat[rng.randrange(flat.size)] = rng.choice([-1, size + 1, 2**31, -(2**62), 2**62, 0])
    dtype = rng.choice([np.int64, np.int64, np.int32, np.uint64, np.int16, np.float64])
    with np.errstate(all="ignore"):
        return arr.astype(dtype)


def check_buffer_call(tok, rng: random.Random) -> None:
    data = rng.randbytes(rng.randint(0, 40)) if rng.random() < 0.3 else b"hello world, " * 3
    bounds = random_bounds(rng, len(data))
    buf = rng.choice([data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)])
    got = expect_errors(
        lambda: tok.encode_buffer_flat(buf, bounds, errors="replace", num_threads=2),
        ALLOWED,
        f"encode_buffer_flat({data!r}, {bounds!r})",
    )
    if got is None:
        return
    b = bounds.astype(np.int64)
    spans = b.tolist() if b.ndim == 2 else list(zip(b[:-1].tolist(), b[1:].tolist(), strict=True))
    if any(not (0 <= s <= e <= len(data)) for s, e in spans):
        raise Finding(f"encode_buffer_flat accepted out-of-range bounds {bounds!r}")
    want = tok.encode_batch_flat([data[s:e] for s, e in spans], errors="replace")
    if got[0].tolist() != want[0].tolist() or got[1].tolist() != want[1].tolist():
        raise Finding(f"encode_buffer_flat differs from encode_batch_flat on {bounds!r}")


def public_calls(tok, rng: random.Random):
    """(name, zero-argument call) of a public method with one or more weird arguments."""
    x, y = weird(rng), weird(rng)
    return rng.choice(
        [
            ("encode", lambda: tok.encode(x)),
            ("encode_kw", lambda: tok.encode("hi <|endoftext|>", allowed_special=x, errors=y)),
            ("encode_ordinary", lambda: tok.encode_ordinary(x, errors=y)),
            ("encode_batch", lambda: tok.encode_batch(x, num_threads=y)),
            ("encode_batch_flat", lambda: tok.encode_batch_flat([b"a", x], num_threads=y)),
            ("encode_batch_uint16", lambda: tok.encode_batch_uint16(["a b"], separator=x)),
            ("encode_buffer_flat", lambda: tok.encode_buffer_flat(x, y)),
            ("encode_buffer_uint16", lambda: tok.encode_buffer_uint16(x, [0, 1], separator=y)),
            ("decode", lambda: tok.decode(x, errors=rng.choice(["replace", "strict"]))),
            ("decode_bytes", lambda: tok.decode_bytes(x)),
            ("decode_batch", lambda: tok.decode_batch([x, y])),
            ("decode_single_token_bytes", lambda: tok.decode_single_token_bytes(x)),
            ("vocab.pair", lambda: tok._vocab.pair(x, y)),
            ("vocab.token_bytes", lambda: tok._vocab.token_bytes(x)),
            ("vocab.pieces", lambda: tok._vocab.pieces(x)),
            ("vocab.merge", lambda: tok._vocab.merge(x)),
            ("vocab.merge_reference", lambda: tok._vocab.merge_reference(x)),
            ("core.encode_list", lambda: tok._core.encode_list(x, [], y, "strict", "per_word")),
            ("core.encode_flat", lambda: tok._core.encode_flat([b"ab"], x, [], "replace", y, "x")),
            ("core.decode_bytes", lambda: tok._core.decode_bytes(x)),
            ("char_class", lambda: _core().char_class(x)),
            ("utf8_replace", lambda: _core().utf8_replace(x)),
            ("utf8_first_invalid", lambda: _core().utf8_first_invalid(x)),
            ("Vocab.from_ranks", lambda: _core().Vocab.from_ranks(x, y)),
            ("Vocab.from_merges", lambda: _core().Vocab.from_merges([b"a", b"b"], x, y)),
            ("Tokenizer", lambda: _tokenizer(x)),
        ]
    )


def _core():
    from gputok import _core

    return _core


def _tokenizer(x):
    import gputok

    return gputok.Tokenizer(gputok.gpt2_vocab(), {"<|endoftext|>": x}, device="cpu")


def check_ids(tok, rng: random.Random) -> None:
    """decode of ids in any integer dtype equals decode of the same Python ints."""
    dtype = rng.choice([np.int32, np.int64, np.uint16, np.uint32, np.uint64])
    ids = [rng.randrange(50257) for _ in range(rng.randint(0, 20))]
    if tok.decode_bytes(np.array(ids, dtype=dtype)) != tok.decode_bytes(ids):
        raise Finding(f"decode of {np.dtype(dtype)} ids differs from decode of ints")


def main() -> int:
    args = parse_args()
    import gputok

    tok = gputok.gpt2(device="cpu")

    def one(rng: random.Random, i: int) -> None:
        if i % 3 == 0:
            check_buffer_call(tok, rng)
        if i % 5 == 1:
            check_ids(tok, rng)
        name, call = public_calls(tok, rng)
        expect_errors(call, ALLOWED, name)

    return run("fuzz_bindings", one, args)


if __name__ == "__main__":
    sys.exit(main())
