"""The walk of the string check preloaded into tritonserver (``libgputok_triton_strings.so``,
backend_src/csrc/serve/triton_string_check.cpp): BYTES tensor data as a client may send it,
whole elements (4-byte little-endian length, then the bytes), then cut short, padded, given
boundary lengths (0, 2^31, 0xFFFFFFFF, one past what follows) or random bytes, and split into
1-6 buffers at random points, some empty. The contract: the bytes it reports missing equal a
Python statement of core's ValidateBytesInputs walk (0 where the walk stops on an element's
boundary or at a length indicator split across buffers, which core refuses itself); never a
read outside the buffers (ASan under ``make sanitize``) and never a crash.

    .venv/bin/python fuzz/fuzz_string_check.py --budget 5000 --seed 1 [--seconds 60] [--only 17]
"""

from __future__ import annotations

import ctypes
import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Finding, parse_args, run  # noqa: E402

LENGTHS = [0, 1, 2, 3, 4, 5, 2**31, 2**32 - 1, 2**31 - 1, 255, 256, 65536]


def reference(buffers: list[bytes]) -> int:
    """Core's walk: the bytes of the last element still missing at the end, else 0."""
    remaining = 0
    for buf in buffers:
        at = 0
        while at < len(buf):
            if remaining == 0:
                if len(buf) - at < 4:
                    return 0  # a split length indicator: core's own error
                remaining = struct.unpack_from("<I", buf, at)[0]
                at += 4
                if remaining == 0:
                    continue
            take = min(len(buf) - at, remaining)
            at += take
            remaining -= take
    return remaining


def _data(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randrange(0, 6)):
        n = rng.choice([0, 1, 3, 4, 7, 16, 100, rng.randrange(0, 2000)])
        parts.append(struct.pack("<I", n) + bytes(rng.getrandbits(8) for _ in range(n)))
    data = bytearray(b"".join(parts))
    r = rng.random()
    if r < 0.25 and data:
        del data[rng.randrange(len(data)) :]  # cut short anywhere
    elif r < 0.45:
        data += struct.pack("<I", rng.choice(LENGTHS)) + bytes(rng.randrange(0, 8))
    elif r < 0.55:
        data += bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 40)))
    elif r < 0.65 and len(data) >= 4:
        at = rng.randrange(len(data) - 3)
        data[at : at + 4] = struct.pack("<I", rng.choice(LENGTHS))
    return bytes(data)


def _split(rng: random.Random, data: bytes) -> list[bytes]:
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(0, 6)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def main() -> int:
    args = parse_args()
    from gputok.serve.preload import STRING_CHECK, library

    lib = library(STRING_CHECK)
    if args.sanitized and "sanitize" not in str(lib):
        raise SystemExit(f"expected the sanitized {STRING_CHECK}, found {lib}")
    so = ctypes.CDLL(str(lib))
    so.gputok_missing_string_bytes.argtypes = [
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_size_t,
    ]
    so.gputok_missing_string_bytes.restype = ctypes.c_uint64
    libc = ctypes.CDLL(None)
    libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]

    def one(rng: random.Random, i: int) -> None:
        buffers = _split(rng, _data(rng))
        # each buffer a malloc block of exactly its size, so ASan sees any read past it
        blocks = [libc.malloc(len(b)) if b else None for b in buffers]
        try:
            for block, b in zip(blocks, buffers, strict=True):
                if block is not None:
                    ctypes.memmove(block, b, len(b))
            bases = (ctypes.c_void_p * max(1, len(blocks)))(*blocks)
            sizes = (ctypes.c_size_t * max(1, len(blocks)))(*[len(b) for b in buffers])
            got = so.gputok_missing_string_bytes(bases, sizes, len(buffers))
        finally:
            for block in blocks:
                if block is not None:
                    libc.free(block)
        want = reference(buffers)
        if got != want:
            raise Finding(f"input {i}: {got} bytes missing, the reference says {want}")

    return run("fuzz_string_check", one, args)


if __name__ == "__main__":
    sys.exit(main())
