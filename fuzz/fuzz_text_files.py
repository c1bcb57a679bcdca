"""Text shards read together (``gputok._corpus_native.read_text_files``, the corpus tool's
joined text reader): random files (separators dense or absent, arbitrary bytes, empty,
sometimes large), missing paths, folders, empty and NUL-bearing paths, separators of 1-12
bytes or none, and bounds from 0 up. The contract: every file before the first it cannot read
(a bad path, or one that would take the data to ``max_bytes``) split exactly as ``bytes.split``
splits it, less a trailing empty piece; that first file's index and errno; the data never over
the bound; ``ValueError`` / ``TypeError`` for bad arguments; never a crash.

    .venv/bin/python fuzz/fuzz_text_files.py --budget 5000 --seed 1 [--seconds 60] [--only 17]
"""

from __future__ import annotations

import errno
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Finding, parse_args, run, scratch_folder, some_files  # noqa: E402

SEPS = [b"\x1e\n", b"\n", b"\n\n", b"a", b"aa", b"\xe3\x80\x82", b"ab" * 6]


def reference(body: bytes, sep: bytes | None) -> list[bytes]:
    """readers.read_text's documents of one file."""
    if sep is None:
        return [body]
    parts = body.split(sep)
    return parts[:-1] if len(parts) > 1 and parts[-1] == b"" else parts


def _body(rng: random.Random, sep: bytes | None) -> bytes:
    alphabet = [b"a", b"b", b"\n", b"\x1e", b"\xe3", b"\x80", b"\x82", b"\x00", b" "]
    if sep:
        alphabet += [sep] * 3
    n = rng.choice([0, 1, 2, 5, 40, 300, 3000, 70_000 if rng.random() < 0.05 else 10])
    if rng.random() < 0.2:
        return bytes(rng.getrandbits(8) for _ in range(min(n, 500)))
    return b"".join(rng.choice(alphabet) for _ in range(n))


def main() -> int:
    args = parse_args()
    from gputok import _corpus_native as native

    with scratch_folder() as root:

        def one(rng: random.Random, i: int) -> None:
            sep = rng.choice(
                [None, *SEPS, bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 12)))]
            )
            paths, bodies = some_files(
                rng, root, f"{i}.txt", rng.randint(0, 6), lambda: _body(rng, sep), 0.06
            )
            total = sum(len(b) for b in bodies if b is not None)
            max_bytes = rng.choice(
                [0, 1, total // 2, total, total + 1, total + len(paths) + 5, 1 << 30]
            )
            if sep == b"" or (sep is not None and rng.random() < 0.01):
                try:
                    native.read_text_files(paths, b"", max_bytes)
                except ValueError:
                    return
                raise Finding("an empty separator was taken")
            data, ends, _mtimes, spans, docs, failed, err = native.read_text_files(
                paths, sep, max_bytes
            )
            # Where it must stop: a bad path, or the file that would take the data to the bound.
            want_failed, t = -1, 0
            for k, body in enumerate(bodies):
                if body is None or t + len(body) >= max_bytes:
                    want_failed = k
                    break
                t += len(body)
            if failed != want_failed:
                raise Finding(f"stopped at {failed} (errno {err}), expected {want_failed}")
            if failed >= 0 and bodies[failed] is not None and err != errno.EFBIG:
                raise Finding(f"a file past the bound failed with errno {err}")
            if len(data) > max_bytes or len(data) != t:
                raise Finding(f"{len(data)} bytes of data, bound {max_bytes}, files {t}")
            mv = memoryview(data).cast("B")
            d = start = 0
            for k, (end, n) in enumerate(zip(ends.tolist(), docs.tolist(), strict=True)):
                got = [mv[a:z].tobytes() for a, z in spans[d : d + n].tolist()]
                if got != reference(bodies[k], sep) or mv[start:end].tobytes() != bodies[k]:
                    raise Finding(f"file {k}: {got[:5]} != {reference(bodies[k], sep)[:5]}")
                d, start = d + n, end
            if d != len(spans):
                raise Finding(f"{len(spans)} spans, {d} counted by file")

        return run("fuzz_text_files", one, args)


if __name__ == "__main__":
    sys.exit(main())
