"""The loop every fuzz harness shares: seeded inputs, a count and a time budget, one summary line.

A harness defines ``one(rng, i)``, which builds input ``i`` from ``rng`` (a ``random.Random``
seeded from ``(seed, i)``, so every input can be rebuilt alone with ``--only i``), feeds it to
gputok and raises ``Finding`` (or lets any unexpected exception out) when the contract breaks.
A native crash ends the process: under ``make sanitize`` ASan/UBSan print the report first.

Run one directly (the editable build) or through ``make sanitize`` (the ASan+UBSan build):
    .venv/bin/python fuzz/fuzz_tokenizer.py --budget 5000 --seed 1 [--seconds 60] [--only 17]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class Finding(AssertionError):
    """The code under test broke its contract on this input."""


@contextlib.contextmanager
def scratch_folder():
    """A temporary folder for a harness's files, holding ``a-folder`` (a path that is not a
    regular file); removed after."""
    with tempfile.TemporaryDirectory(prefix="gputok-fuzz-") as folder:
        root = Path(folder)
        (root / "a-folder").mkdir()
        yield root


def some_files(
    rng: random.Random, root: Path, name: str, count: int, body: Callable[[], bytes], bad: float
) -> tuple[list[str], list[bytes | None]]:
    """``count`` paths under ``root`` (files ``name-k`` holding ``body()``), each instead, with
    probability ``bad``, a path that is not a readable regular file (missing, a folder, empty,
    NUL-bearing), its body None."""
    paths: list[str] = []
    bodies: list[bytes | None] = []
    for k in range(count):
        if rng.random() < bad:
            paths.append(rng.choice([str(root / "missing"), str(root / "a-folder"), "", "a\0b"]))
            bodies.append(None)
            continue
        data = body()
        path = root / f"{name}-{k}"
        path.write_bytes(data)
        paths.append(str(path))
        bodies.append(data)
    return paths, bodies


def _use_sanitized_build() -> None:
    """Import gputok from the staged ASan+UBSan build (fuzz/sanitize.sh) instead of the
    editable one: the editable install's import hook sits on sys.meta_path and would win."""
    stage = os.environ.get("GPUTOK_SANITIZED_STAGE")
    if not stage:
        raise SystemExit("--sanitized needs GPUTOK_SANITIZED_STAGE (run `make sanitize`)")
    sys.meta_path[:] = [f for f in sys.meta_path if "_editable_skbc" not in type(f).__module__]
    sys.path.insert(0, stage)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=2000, help="inputs to run (default 2000)")
    p.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the whole run (default 0)")
    p.add_argument("--only", type=int, default=None, help="run input number ONLY alone")
    p.add_argument("--sanitized", action="store_true", help="use build/sanitize's module")
    args = p.parse_args(argv)
    if args.sanitized:
        _use_sanitized_build()
    return args


def run(name: str, one: Callable[[random.Random, int], None], args: argparse.Namespace) -> int:
    """Runs ``one`` over the budget; prints one summary line; returns the exit status."""
    import gputok

    where = "ASan+UBSan" if args.sanitized else "plain"
    core = Path(gputok._core.__file__)
    if args.sanitized and "sanitize" not in str(core):
        raise SystemExit(f"{name}: expected the sanitized module, imported {core}")
    warnings.simplefilter("ignore")  # numpy's cast warnings on the weird arguments fed to it
    todo = [args.only] if args.only is not None else range(args.budget)
    start = time.perf_counter()
    done = 0
    for i in todo:
        if args.seconds and time.perf_counter() - start > args.seconds:
            break
        rng = random.Random(f"{args.seed}:{i}")
        try:
            one(rng, i)
        except Exception:
            traceback.print_exc()
            print(
                f"{name}: FINDING at input {i}: rerun alone with "
                f"`python fuzz/{name}.py --seed {args.seed} --only {i}`",
                file=sys.stderr,
            )
            return 1
        done += 1
        if args.budget >= 10_000 and done % (args.budget // 10) == 0:  # progress of long runs
            print(f"{name}: {done} inputs, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    took = time.perf_counter() - start
    print(f"{name}: {done} inputs, {took:.1f} s, seed {args.seed}, {where} build, 0 findings")
    return 0


def expect_errors(fn: Callable[[], object], allowed: tuple[type[BaseException], ...], what: str):
    """``fn()``'s value, or None when it raised one of ``allowed``; any other exception is a
    finding (a RuntimeError or SystemError from a native call means an untranslated error)."""
    try:
        return fn()
    except allowed:
        return None
    except Exception as e:
        raise Finding(f"{what}: {type(e).__name__} is not one of {allowed}: {e}") from e
