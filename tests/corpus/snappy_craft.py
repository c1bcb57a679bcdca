"""Parquet column chunks and snappy streams built by hand, apart from pyarrow: a Thrift compact
struct writer for page headers, PLAIN values, and snappy streams of two kinds pyarrow's encoder
never writes: literals that straddle the 64 KiB fragments with copies reaching across them (the
GPU's sequential path), and tag by tag, every kind of tag, kept to Google's blocks. Used by
test_parquet_snappy.py (tests/corpus is on sys.path)."""

from __future__ import annotations

import random


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def zigzag(n: int) -> bytes:
    return varint((n << 1) ^ (n >> 63))


def thrift_struct(fields) -> bytes:
    """Thrift compact struct: fields (id, type, payload) in ascending id order, then STOP."""
    out, last = bytearray(), 0
    for fid, typ, payload in fields:
        delta = fid - last
        out.append((delta << 4) | typ if 0 < delta <= 15 else typ)
        if not 0 < delta <= 15:
            out += zigzag(fid)
        out += payload
        last = fid
    return bytes(out + b"\x00")


def i32_field(v: int) -> tuple[int, bytes]:
    return 5, zigzag(v)


def page_header(kind, uncompressed, compressed, inner, extra=()) -> bytes:
    fields = [
        (1, *i32_field(kind)),
        (2, *i32_field(uncompressed)),
        (3, *i32_field(compressed)),
        *extra,
    ]
    which = {0: 5, 2: 7, 3: 8}[kind]
    fields.append((which, 12, inner))
    return thrift_struct(sorted(fields, key=lambda f: f[0]))


def plain_values(values: list[bytes]) -> bytes:
    return b"".join(len(v).to_bytes(4, "little") + v for v in values)


def snappy_literals_and_far_copies(raw: bytes) -> bytes:
    """A valid snappy stream of ``raw`` that Google's encoder would never write: a 200-byte
    literal at every 64 KiB boundary straddles it, and copies reach back across it."""
    out = bytearray(varint(len(raw)))
    i = 0

    def literal(b: bytes):
        n = len(b) - 1
        if n < 60:
            out.append(n << 2)
        else:
            out.append(61 << 2)
            out.extend(n.to_bytes(2, "little"))
        out.extend(b)

    while i < len(raw):
        # a copy (tag 2, offset < 65536) of up to 64 bytes where the same bytes occur earlier
        j = raw.rfind(raw[i : i + 16], max(0, i - 60000), i) if i >= 16 else -1
        if j >= 0 and len(raw) - i >= 16:
            n = 16
            while n < 64 and i + n < len(raw) and raw[j + n] == raw[i + n]:
                n += 1
            out.append(((n - 1) << 2) | 2)
            out.extend((i - j).to_bytes(2, "little"))
            i += n
        else:
            n = min(200, len(raw) - i)
            literal(raw[i : i + n])
            i += n
    return bytes(out)


def snappy_tags(n: int, rng: random.Random, weights=(3, 3, 3, 1, 1)) -> tuple[bytes, bytes]:
    """(raw, a snappy stream of it) of ``n`` bytes, built tag by tag the way Google's encoder
    keeps to its blocks (no tag crosses a 64 KiB block, no copy reaches into an earlier one),
    so the GPU decodes it fragment by fragment, but with tags that encoder seldom writes: 1-byte
    literals, literals with 1-4 length bytes even where one would do, copies of kinds 1, 2 and
    4 down to offset 1 (overlapping: a repeating pattern), many tags in one 32-byte window.
    The first four bytes are the rest's length, so that the raw bytes are one PLAIN value."""
    raw = bytearray((n - 4).to_bytes(4, "little"))
    out = bytearray(varint(n))
    out += bytes([3 << 2]) + raw  # a literal of the 4 length bytes
    block = 1 << 16
    alphabet = b"ab \n\xc3\xa9" + bytes(range(48, 58))
    while len(raw) < n:
        room = min(n - len(raw), block - len(raw) % block)  # to the end of the block
        back = len(raw) % block  # how far a copy may reach
        kind = rng.choices(["lit", "lit_long", "copy1", "copy2", "copy4"], weights)[0]
        if kind.startswith("copy") and back >= 1 and room >= 4:
            if kind == "copy1":
                length, off = rng.randint(4, min(11, room)), rng.randint(1, min(back, 2047))
                out += bytes([((off >> 8) << 5) | ((length - 4) << 2) | 1, off & 0xFF])
            else:
                length = rng.randint(1, min(64, room))
                off = rng.choice([1, 2, 3, 7, rng.randint(1, back)])
                off = min(off, back)
                size = 2 if kind == "copy2" else 4
                out += bytes([((length - 1) << 2) | (2 if size == 2 else 3)])
                out += off.to_bytes(size, "little")
            for _ in range(length):
                raw.append(raw[-off])
            continue
        length = rng.randint(1, min(room, 8 if kind == "lit" else 300))
        extra = rng.choice([0, 1, 2, 3, 4]) if length <= 60 else rng.choice([1, 2, 3, 4])
        if length > 256 and extra == 1:
            extra = 2
        if extra == 0:
            out.append((length - 1) << 2)
        else:
            out.append((59 + extra) << 2)
            out += (length - 1).to_bytes(extra, "little")
        lit = bytes(rng.choice(alphabet) for _ in range(length))
        out += lit
        raw += lit
    return bytes(raw), bytes(out)


def one_value_page(raw: bytes, body: bytes) -> bytes:
    """A chunk of one v1 data page holding one required PLAIN value (``raw``, its 4 length
    bytes included), its body compressed as ``body``."""
    inner = thrift_struct(
        [(1, *i32_field(1)), (2, *i32_field(0)), (3, *i32_field(3)), (4, *i32_field(3))]
    )
    return page_header(0, len(raw), len(body), inner) + body
