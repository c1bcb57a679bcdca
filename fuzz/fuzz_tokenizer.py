"""Tokenizer bytes on the CPU path: encode (strict, replace, specials), batches, the pretokenizer,
the merge, UTF-8 repair, decode, encode_with_unstable and decode_with_offsets, each compared
with tiktoken 0.14 (or CPython's UTF-8 codec) wherever the answer is defined. Inputs are spliced from fragments that reach every
UTF-8 error class, whitespace run, contraction and special-token edge, then mutated.

    .venv/bin/python fuzz/fuzz_tokenizer.py --budget 20000 --seed 3
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Finding, parse_args, run  # noqa: E402

EOT = "<|endoftext|>"
N_VOCAB = 50257
FRAGMENTS = [
    b"\x80", b"\xbf", b"\xc0\xaf", b"\xc2", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
    b"\xf5", b"\xff", b"\xe2\x82", b"\xf0\x9f\x98", b"\xf0", b"\xf0\x9f", b"\x00", b" ", b"   ",
    b"\n", b"\r\n", b"\t", b"\x0b", b"'s", b"'ll", b"'VE", b"DON'T", EOT.encode(), b"<|endof",
    b"text|>", "é".encode(), "日本語".encode(), "🎉".encode(), "\u00a0".encode(), "\u3000".encode(),
    "\u2028".encode(), b"123", b"4567", b"a", b"hello", b" world", b"!!", b"$$$", "ﬁ".encode(),
    "\u0301".encode(), "Ⅻ".encode(), "٣".encode(), "\U0001d7d8".encode(), "\ufeff".encode(),
]  # fmt: skip


def make_bytes(rng: random.Random) -> bytes:
    """A spliced, then mutated, byte string: mostly short, sometimes a long run of one
    fragment ending in a truncated sequence (the shape of the pretokenizer's over-read)."""
    shape = rng.random()
    if shape < 0.15:
        frag = rng.choice(FRAGMENTS)
        out = bytearray(frag * rng.randint(1, 2000 // len(frag)))
    else:
        out = bytearray()
        for _ in range(rng.randint(0, 40)):
            out += rng.choice(FRAGMENTS) if rng.random() < 0.8 else rng.randbytes(rng.randint(1, 6))
    for _ in range(rng.choice((0, 0, 1, 2, 4))):
        op = rng.randrange(4)
        if op == 0 and out:  # flip a bit
            k = rng.randrange(len(out))
            out[k] ^= 1 << rng.randrange(8)
        elif op == 1:  # insert random bytes
            k = rng.randint(0, len(out))
            out[k:k] = rng.randbytes(rng.randint(1, 4))
        elif op == 2 and out:  # truncate
            del out[rng.randrange(len(out)) :]
        elif op == 3 and out:  # duplicate a span
            a = rng.randrange(len(out))
            b = rng.randint(a, min(len(out), a + 64))
            out[b:b] = out[a:b] * rng.randint(1, 8)
    if rng.random() < 0.1:  # end on a lead byte with its tail missing
        out += rng.choice((b"\xf0", b"\xf0\x9f", b"\xe6", b"\xc3", b"\xf4\x8f\xbf"))
    return bytes(out)


def _utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_encode(tok, ref, b: bytes) -> None:
    import gputok

    s = _utf8(b)
    try:
        got = tok.encode(b)
    except gputok.Utf8Error:
        if s is not None:
            raise Finding(f"valid UTF-8 rejected: {b!r}") from None
        got = None
    except gputok.DisallowedSpecialError:
        if s is None or EOT not in s:
            raise Finding(f"DisallowedSpecialError without the special token: {b!r}") from None
        return
    if s is None:
        if got is not None:
            raise Finding(f"invalid UTF-8 accepted: {b!r}")
    elif got != ref.encode(s, disallowed_special=()) or EOT in s:
        raise Finding(f"strict encode differs from tiktoken on {b!r}: {got}")
    r = b.decode("utf-8", "replace")
    want = ref.encode(r, allowed_special="all")
    if b and not want:
        raise Finding("tiktoken returned no ids for a non-empty text")
    if tok.encode(b, errors="replace", allowed_special="all") != want:
        raise Finding(f"replace encode differs from tiktoken on {b!r}")
    if tok.encode_ordinary(b, errors="replace") != ref.encode_ordinary(r):
        raise Finding(f"encode_ordinary differs from tiktoken on {b!r}")


def check_pieces(tok, b: bytes) -> None:
    """The pretokenizer alone: invalid UTF-8 is refused before it scans; valid text is cut
    into contiguous, non-empty pieces that cover it."""
    import gputok

    vocab = tok._vocab
    try:
        pieces = vocab.pieces(b)
    except gputok.Utf8Error:
        if _utf8(b) is not None:
            raise Finding(f"pieces() refused valid UTF-8: {b!r}") from None
        return
    if _utf8(b) is None:
        raise Finding(f"pieces() scanned invalid UTF-8: {b!r}")
    at = 0
    for start, length in pieces:
        if start != at or length <= 0:
            raise Finding(f"pieces() of {b!r} are not contiguous: {pieces}")
        at += length
    if at != len(b):
        raise Finding(f"pieces() of {b!r} cover {at} of {len(b)} bytes")


def check_merge_and_utf8(tok, ref, rng: random.Random, b: bytes) -> None:
    from gputok import _core

    piece = b[: rng.randint(1, 48)] or b"x"
    want = ref._encode_single_piece(piece)
    if tok._vocab.merge(piece) != want or tok._vocab.merge_reference(piece) != want:
        raise Finding(f"merge of {piece!r} differs from tiktoken's {want}")
    if _core.utf8_replace(b) != b.decode("utf-8", "replace").encode():
        raise Finding(f"utf8_replace differs from CPython on {b!r}")
    first = _core.utf8_first_invalid(b)
    if first != _core.utf8_first_invalid_reference(b):
        raise Finding(f"utf8_first_invalid's fast and reference answers differ on {b!r}")
    try:
        b.decode("utf-8")
        py_first = len(b)
    except UnicodeDecodeError as e:
        py_first = e.start
    if first != py_first:
        raise Finding(f"utf8_first_invalid says {first}, CPython {py_first}, on {b!r}")


def check_batch_and_decode(tok, ref, rng: random.Random, b: bytes) -> None:
    rows = [b] + [make_bytes(rng) for _ in range(rng.randint(0, 6))]
    threads = rng.choice((1, 2, 3, 0))
    flat, offsets = tok.encode_batch_flat(
        rows, errors="replace", disallowed_special=(), num_threads=threads
    )
    got = [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(rows))]
    if got != [ref.encode_ordinary(r.decode("utf-8", "replace")) for r in rows]:
        raise Finding(f"encode_batch_flat differs from tiktoken on {rows!r}")
    ids = [rng.choice((rng.randrange(N_VOCAB), rng.randint(-3, N_VOCAB + 3))) for _ in range(20)]
    ids = ids[: rng.randint(0, 20)]
    in_range = all(0 <= x < N_VOCAB for x in ids)
    try:
        out = tok.decode_bytes(ids)
    except ValueError:
        if in_range:
            raise Finding(f"decode_bytes refused in-range ids {ids}") from None
        return
    if not in_range or out != ref.decode_bytes(ids):
        raise Finding(f"decode_bytes({ids}) = {out!r}, tiktoken {ref.decode_bytes(ids)!r}")


def check_tiktoken_api(tok, ref, b: bytes) -> None:
    """encode_with_unstable and decode_with_offsets (pure Python over the native calls) against
    tiktoken on the same text: equal stable ids, completion sets and offsets."""
    s = b.decode("utf-8", "replace")[:24]  # completions cost one encode per candidate token
    got = tok.encode_with_unstable(s, disallowed_special=())
    want = ref.encode_with_unstable(s, disallowed_special=())
    if got[0] != want[0] or sorted(map(tuple, got[1])) != sorted(map(tuple, want[1])):
        raise Finding(f"encode_with_unstable({s!r}) differs from tiktoken")
    ids = ref.encode(s, allowed_special="all")
    if tok.decode_with_offsets(ids) != ref.decode_with_offsets(ids):
        raise Finding(f"decode_with_offsets({ids}) differs from tiktoken")


def main() -> int:
    args = parse_args()
    import gputok

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from references import tiktoken_gpt2

    tok = gputok.gpt2(device="cpu")
    ref = tiktoken_gpt2()
    # The smallest pretoken cache: it fills and freezes within the first inputs, its arena too,
    # so the fuzz also runs the cache's full paths (spilled ids, frozen inserts) under ASan.
    small = gputok.gpt2(device="cpu", piece_cache_bytes=64 * 1024)

    def one(rng: random.Random, i: int) -> None:
        b = make_bytes(rng)
        check_encode(tok, ref, b)
        if i % 2 == 0:
            check_encode(small, ref, b)
        check_pieces(tok, b)
        if i % 4 == 0:
            check_merge_and_utf8(tok, ref, rng, b)
        if i % 8 == 0:
            check_batch_and_decode(tok, ref, rng, b)
        if i % 1024 == 3:  # ~0.1-0.5 s each under ASan: completions of a trailing space
            check_tiktoken_api(tok, ref, b)

    return run("fuzz_tokenizer", one, args)


if __name__ == "__main__":
    sys.exit(main())
