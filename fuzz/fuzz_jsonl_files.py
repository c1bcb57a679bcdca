"""JSONL shards read together (``gputok._corpus_native.read_jsonl_files``, the corpus tool's
joined JSONL reader): random records (json.dumps of nested values, ASCII-escaped or not),
then random byte edits (quotes, backslashes, escapes, braces, surrogates, invalid UTF-8,
newlines), missing paths, folders, bad paths, odd fields and bounds from 0 up. The contract:
every file before the first it cannot read or decide gives json.loads's documents exactly
(readers._read_jsonl_python's); a file it does not decide is one json.loads might read
otherwise or reject; that first file's index and reason; never over the bound; never a crash.

    .venv/bin/python fuzz/fuzz_jsonl_files.py --budget 5000 --seed 1 [--seconds 60]
"""

from __future__ import annotations

import errno
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Finding, parse_args, run, scratch_folder, some_files  # noqa: E402

FIELDS = [b"text", b"", b"t\xc3\xa9xt", b'a"b', b"te\\u0078t", b"\xff"]
EDITS = [b'"', b"\\", b"\\u", b"\\ud800", b"\\udc00", b"{", b"}", b"[", b"]", b",", b":",
         b"\n", b"\r", b"\x00", b"\xff", b"\xc3", b"\xe2\x82", b"NaN", b"1" * 50, b" "]  # fmt: skip


def reference(path: str, field: bytes) -> list[bytes] | None:
    """The documents of gputok's line-by-line reader (json.loads, strict UTF-8; the one the
    native reader hands undecided files to), or None where it refuses the file."""
    from gputok.corpus import CorpusInputError
    from gputok.corpus.readers import _read_jsonl_python

    name = field.decode("utf-8", "surrogateescape")  # a field no UTF-8 key can equal
    try:
        docs = [d for b in _read_jsonl_python(path, name, "strict", 1 << 30) for d in b.docs]
        return [d.encode("utf-8") for d in docs]
    except (CorpusInputError, RecursionError, UnicodeEncodeError):
        return None


def _value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 3 or roll < 0.5:
        return rng.choice([None, True, False, rng.randint(-(10**12), 10**12), rng.random() * 1e9,
                           "".join(chr(rng.choice([0x41, 0xE9, 0x20AC, 0x1F600, 0x0A, 0x22, 0x5C, 0x1F]))
                                   for _ in range(rng.randint(0, 8)))])  # fmt: skip
    if roll < 0.75:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{j}": _value(rng, depth + 1) for j in range(rng.randint(0, 3))}


def _body(rng: random.Random, field: bytes) -> bytes:
    name = field.decode("utf-8", "replace")
    lines = []
    for _ in range(rng.choice([0, 1, 2, 5, 30])):
        rec = {f"o{j}": _value(rng) for j in range(rng.randint(0, 3))}
        rec[name] = "".join(chr(rng.choice([0x61, 0x20, 0xE9, 0x4E2D, 0x1F600, 0x0A, 0x22, 0x5C]))
                            for _ in range(rng.randint(0, 30)))  # fmt: skip
        lines.append(json.dumps(rec, ensure_ascii=rng.random() < 0.5))
        if rng.random() < 0.1:
            lines.append(rng.choice(["", "  ", "\r"]))
    data = bytearray("\n".join(lines).encode("utf-8", "surrogatepass"))
    for _ in range(rng.choice([0, 0, 1, 2, 5])):
        k = rng.randint(0, len(data))
        data[k : k + rng.randint(0, 2)] = rng.choice(EDITS)
    return bytes(data)


def main() -> int:
    args = parse_args()
    from gputok import _corpus_native as native

    with scratch_folder() as root:

        def one(rng: random.Random, i: int) -> None:
            field = rng.choice(FIELDS)
            paths, bodies = some_files(
                rng, root, f"{i}.jsonl", rng.randint(0, 5), lambda: _body(rng, field), 0.05
            )
            total = sum(len(b) for b in bodies if b is not None)
            max_bytes = rng.choice([0, 1, total // 2, total + len(paths) + 5, 1 << 30])
            data, spans, docs, sizes, _mt, failed, err, _at = native.read_jsonl_files(
                paths, field, max_bytes
            )
            if len(data) > max_bytes:
                raise Finding(f"{len(data)} bytes of data, bound {max_bytes}")
            mv = memoryview(data).cast("B")
            d = 0
            for k, (n, size) in enumerate(zip(docs.tolist(), sizes.tolist(), strict=True)):
                if bodies[k] is None or size != len(bodies[k]):
                    raise Finding(f"file {k} read as {size} bytes")
                got = [mv[a:z].tobytes() for a, z in spans[d : d + n].tolist()]
                want = reference(paths[k], field)
                if got != want:
                    raise Finding(f"file {k}: {got[:4]} != json.loads's {str(want)[:200]}")
                d += n
            if d != len(spans):
                raise Finding(f"{len(spans)} spans, {d} counted by file")
            read = len(docs)
            if failed == -1:
                if read != len(paths):
                    raise Finding(f"{read} of {len(paths)} files read, none failed")
                return
            if failed != read:
                raise Finding(f"failed at {failed} after reading {read}")
            body = bodies[failed]
            if err == native.JSONL_NOT_PLAIN:
                if body is None:
                    raise Finding("a bad path called undecided")
                return  # json.loads decides it (the general reader); nothing to compare
            if body is None and err not in (errno.ENOENT, errno.EINVAL):  # "" or a NUL: EINVAL
                raise Finding(f"a bad path failed with errno {err}")
            if body is not None and err != errno.EFBIG:
                raise Finding(f"a readable file failed with errno {err}")

        return run("fuzz_jsonl_files", one, args)


if __name__ == "__main__":
    sys.exit(main())
