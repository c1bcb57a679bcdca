"""A joined call's shard files written together (``gputok._corpus_native.write_shards``, the
corpus tool's writer): random shards of 0-4 files, each of 0-5 parts (bytes, bytearray,
memoryview, numpy arrays of several dtypes, sometimes large, sometimes empty), under paths
that are fine, in a missing folder, a folder itself, empty or NUL-bearing, or whose temporary
name already exists; sometimes a malformed argument (a part that is no buffer, a non-contiguous
array, a file tuple of the wrong length, a shard that is no list). The contract: a malformed
argument raises ``TypeError`` / ``ValueError`` and writes nothing; otherwise each shard's result
is (0, -1) with every file holding exactly its parts and no temporary file left, or (errno, k)
for the first file k it could not write or rename, with none of that shard's temporary files
left and none of its files from k on in place; never a crash.

    .venv/bin/python fuzz/fuzz_write_shards.py --budget 5000 --seed 1 [--seconds 60] [--only 17]
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Finding, expect_errors, parse_args, run, scratch_folder  # noqa: E402

DTYPES = [np.uint8, np.uint16, np.int32, np.int64, np.float64]


def _part(rng: random.Random):
    n = rng.choice([0, 1, 3, 100, 4096, 300_000 if rng.random() < 0.03 else 7])
    kind = rng.randrange(4)
    raw = bytes(rng.getrandbits(8) for _ in range(min(n, 64))) * (n // 64 + 1)
    raw = raw[:n]
    if kind == 0:
        return raw
    if kind == 1:
        return bytearray(raw)
    if kind == 2:
        return memoryview(raw)
    dt = np.dtype(rng.choice(DTYPES))
    return np.frombuffer(raw[: len(raw) // dt.itemsize * dt.itemsize], dtype=dt).copy()


def _bad_part(rng: random.Random):
    return rng.choice(["text", 7, None, np.arange(10)[::2], [b"a"], 1.5])


def _path(rng: random.Random, d: Path, k: int) -> tuple[bytes, bytes, str]:
    """(tmp, final, where it fails: "" nowhere, "write" or "rename", "taken" its tmp name is
    another's): mostly fine; else a missing folder, a final name that is a folder, an empty or
    NUL-bearing path, or a tmp name that exists."""
    final, tmp = d / f"f{k}", d / f"f{k}.tmp"
    r = rng.random()
    if r < 0.04:
        return os.fsencode(d / "missing" / f"f{k}.tmp"), os.fsencode(final), "write"
    if r < 0.07:
        (d / f"dir{k}").mkdir(exist_ok=True)
        return os.fsencode(tmp), os.fsencode(d / f"dir{k}"), "rename"
    if r < 0.09:
        return rng.choice([(b"", os.fsencode(final)), (os.fsencode(tmp) + b"\0x", b"y")]) + (
            "write",
        )
    if r < 0.11:
        tmp.write_bytes(b"taken")
        return os.fsencode(tmp), os.fsencode(final), "taken"
    return os.fsencode(tmp), os.fsencode(final), ""


def _check_shard(shard: list, fails: list, got: tuple) -> None:
    """The shard's result against where its files fail: all are written before any is renamed."""
    err, at = got
    first = {
        how: next((k for k, f in enumerate(fails) if f and f in how.split()), -1)
        for how in ("write taken", "rename")
    }
    want_at = first["write taken"] if first["write taken"] >= 0 else first["rename"]
    if (err == 0) != (want_at < 0) or (err and at != want_at):
        raise Finding(f"result {got}, first failing file {want_at} ({fails})")
    for k, (tmp, final, parts) in enumerate(shard):
        if fails[k] == "taken":
            continue  # another's file: left as it was
        if os.path.lexists(tmp):
            raise Finding(f"temporary file {tmp!r} left (result {got})")
        placed = os.path.isfile(final)
        if err and k >= at and placed:
            raise Finding(f"file {k} of a shard that failed at {at} is in place")
        if (err == 0 or (fails[at] == "rename" and k < at)) and (
            not placed
            or Path(os.fsdecode(final)).read_bytes()
            != b"".join(memoryview(p).cast("B").tobytes() for p in parts)
        ):
            raise Finding(f"file {k}: not in place or wrong bytes (result {got})")


def main() -> int:
    args = parse_args()
    from gputok import _corpus_native as native

    with scratch_folder() as root:

        def one(rng: random.Random, i: int) -> None:
            d = root / str(i)
            d.mkdir()
            try:
                shards, oks, k = [], [], 0
                for _ in range(rng.randint(0, 4)):
                    files, ok = [], []
                    for _ in range(rng.randint(0, 4)):
                        tmp, final, fails = _path(rng, d, k)
                        files.append((tmp, final, [_part(rng) for _ in range(rng.randint(0, 5))]))
                        ok.append(fails)
                        k += 1
                    shards.append(files)
                    oks.append(ok)
                if shards and rng.random() < 0.08:  # a malformed argument: nothing written
                    s = rng.randrange(len(shards))
                    shards[s] = rng.choice(
                        [b"nope", 5, [(b"a", b"b")], [(b"a", b"b", [_bad_part(rng)])]]
                    )
                    before = sorted(os.listdir(d))
                    if (
                        expect_errors(
                            lambda: native.write_shards(shards, False),
                            (TypeError, ValueError),
                            "bad argument",
                        )
                        is not None
                    ):
                        raise Finding("a malformed argument was taken")
                    if sorted(os.listdir(d)) != before:
                        raise Finding("a malformed argument wrote files")
                    return
                got = native.write_shards(shards, rng.random() < 0.05)
                if len(got) != len(shards):
                    raise Finding(f"{len(got)} results for {len(shards)} shards")
                for shard, ok, res in zip(shards, oks, got, strict=True):
                    _check_shard(shard, ok, res)
            finally:
                shutil.rmtree(d, ignore_errors=True)

        return run("fuzz_write_shards", one, args)


if __name__ == "__main__":
    sys.exit(main())
