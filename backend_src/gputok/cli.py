"""The ``gputok`` command: ``gputok <subcommand> ...`` (also ``python -m gputok ...``).

Subcommands register in ``SUBCOMMANDS`` (name -> (help, add_arguments, run)); each ``run``
returns the process exit status. Heavy imports (dask, pyarrow) happen inside ``run``.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence

CORPUS_DESCRIPTION = """\
Tokenize a corpus with GPT-2's tokenizer: in this process when it is small, else on a Dask
cluster (local by default).

Every input file (text, JSONL or Parquet; .gz/.bz2/.xz for text and JSONL) becomes one
output shard in OUT: shard_NNNNN.bin (raw little-endian uint16 token ids), shard_NNNNN.idx
(raw little-endian int64 document offsets, documents + 1 of them) and shard_NNNNN.json (its
manifest entry), plus OUT/manifest.json with counts and hashes (xxh3_128 or sha256).
Rerunning the same command skips shards whose files still match their hashes. See
docs/corpus.md.
"""

CORPUS_EPILOG = """\
examples:
  gputok corpus data/*.jsonl -o out/ --field text
  gputok corpus data/ -o out/ --format parquet --field content --workers 4
  gputok corpus books/ -o out/ --format text --text-separator '\\n\\n\\n'
  gputok corpus 'corpus/**/*.jsonl.gz' -o out/ --scheduler tcp://10.0.0.1:8786

read in numpy (nanoGPT style):
  tokens = np.memmap("out/shard_00000.bin", dtype=np.uint16, mode="r")
  offsets = np.memmap("out/shard_00000.idx", dtype=np.int64, mode="r")
"""


def _add_corpus_arguments(p: argparse.ArgumentParser) -> None:
    _add_corpus_input_arguments(p)
    _add_corpus_cluster_arguments(p)
    _add_corpus_output_arguments(p)


def _add_corpus_input_arguments(p: argparse.ArgumentParser) -> None:
    """What is read and how documents are made of it."""
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="input files, directories (searched recursively) or glob patterns",
    )
    p.add_argument("-o", "--out", required=True, help="output directory (created if missing)")
    p.add_argument(
        "--format",
        choices=("auto", "text", "jsonl", "parquet"),
        default="auto",
        help="input format (default: auto, from the file extension)",
    )
    p.add_argument(
        "--field",
        default="text",
        help="JSONL field / Parquet column holding the document (default: text)",
    )
    p.add_argument(
        "--text-separator",
        default=None,
        metavar="SEP",
        help=r"split text files into documents on SEP (escapes \n \t \r \0 \\); "
        "default: each text file is one document",
    )
    p.add_argument(
        "--eot",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="append <|endoftext|> (50256) after every document (default: on)",
    )
    p.add_argument(
        "--utf8-errors",
        choices=("strict", "replace", "skip"),
        default="strict",
        help="invalid UTF-8: fail naming the place, replace with U+FFFD, or skip the "
        "document (default: strict)",
    )
    p.add_argument(
        "--skip-empty", action="store_true", help="drop empty documents (counted in the manifest)"
    )


def _add_corpus_cluster_arguments(p: argparse.ArgumentParser) -> None:
    """Where it runs: device, scheduler, workers and threads."""
    p.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="tokenize on the GPU where usable, but for a run in process of under ~64 MB of "
        "text, which the CPU finishes before a GPU has started (auto); or force cpu / cuda "
        "(default: auto)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="address of a running dask scheduler (default: start a local cluster)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local cluster workers (default: --workers-per-gpu on each GPU, else min(cores, 8))",
    )
    p.add_argument(
        "--workers-per-gpu",
        type=int,
        default=None,
        metavar="P",
        help="local worker processes per GPU, each with its own tokenizer (default: "
        "min(4, cores / (4 x GPUs)))",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="gputok CPU threads per tokenizer call (default: cores / shards at once in "
        "process, cores / (workers x threads per worker) on a local cluster, all cores on a "
        "remote one)",
    )
    p.add_argument(
        "--threads-per-worker",
        type=int,
        default=None,
        metavar="N",
        help="shards each local worker (or this process, in process) tokenizes at once, "
        "sharing its tokenizer (default: min(4, cores / (GPUs x workers per GPU)) on GPU "
        "workers, min(12, 3/4 of the cores) in process on a GPU, or every task up to the cores where "
        "each is one shard; 1 on CPU workers, min(8, half the cores) in process on the CPU, "
        "no more than the tasks)",
    )
    p.add_argument(
        "--no-processes",
        action="store_true",
        help="local workers as threads of this process instead of processes",
    )


def _add_corpus_output_arguments(p: argparse.ArgumentParser) -> None:
    """Progress, output shards and manifest, Parquet decoding and call sizes."""
    p.add_argument("--no-dashboard", action="store_true", help="do not start the dashboard")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="delete OUT's shards and manifest first (default: resume)",
    )
    p.add_argument(
        "--no-fsync",
        action="store_true",
        help="skip fsync (still renamed only when complete; a crash may cost rework)",
    )
    p.add_argument(
        "--parquet-decoder",
        choices=("auto", "gputok", "gputok-gpu", "arrow"),
        default="auto",
        help="who decodes Parquet pages: auto (default), gputok's page reader with snappy "
        "on the GPU of GPU workers, on the CPU of CPU workers and in runs of under 4 GiB of "
        "input; gputok-gpu, snappy on the GPU of GPU workers; gputok, "
        "the page reader on the CPU everywhere; arrow, Arrow; what the page reader cannot read "
        "goes to Arrow, and the output is the same (docs/corpus.md)",
    )
    p.add_argument(
        "--max-expansion",
        type=float,
        default=64,
        metavar="X",
        help="a Parquet file may decode to at most X times its size (16 MiB at least; 16 "
        "bytes a row besides its text), else its shard fails as a decompression bomb; "
        "0: no limit (default: 64)",
    )
    p.add_argument(
        "--hash",
        choices=("xxh3_128", "sha256"),
        default="xxh3_128",
        help="how the manifest hashes each shard file: xxh3_128 (default; ~9x faster, "
        "`xxhsum -H2` checks it) or sha256; a resume checks each shard with the hash it "
        "was written with",
    )
    p.add_argument(
        "--batch-mb",
        type=int,
        default=None,
        help="the most MB of text per tokenizer call (default: 32, 8 for text files); a shard "
        "is cut into 4 calls or more, none below --min-batch-mb",
    )
    p.add_argument(
        "--min-batch-mb",
        type=float,
        default=None,
        metavar="MB",
        help="the fewest MB of text per tokenizer call where the shard has that much "
        "(default: 4 on the GPU, 1 on the CPU)",
    )


def _add_corpus_task_arguments(p: argparse.ArgumentParser) -> None:
    """Where the run happens and how shards become tasks."""
    from .corpus.tasks import DEFAULT_TASK_BYTES, IN_PROCESS_BELOW_BYTES

    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--in-process",
        dest="in_process",
        action="store_const",
        const=True,
        default=None,
        help="run in this process, with no Dask cluster (default: when the inputs hold less "
        f"than {IN_PROCESS_BELOW_BYTES / 2**30:g} GiB and no cluster option is given)",
    )
    where.add_argument(
        "--cluster",
        dest="in_process",
        action="store_const",
        const=False,
        help="always start (or join, with --scheduler) a Dask cluster",
    )
    p.add_argument(
        "--task-mb",
        type=float,
        default=DEFAULT_TASK_BYTES / 2**20,
        metavar="MB",
        help="group consecutive smaller shards into tasks of about MB of input, still one "
        f"output shard per input (default: {DEFAULT_TASK_BYTES >> 20}; 0: one task per shard)",
    )


def _run_corpus(args: argparse.Namespace) -> int:
    import importlib.util

    # Found, not imported: importing distributed takes ~1-2 s (2.1 s on the 2-core dev VM,
    # 2026-11-25), which a run in this process never needs.
    if importlib.util.find_spec("distributed") is None:
        print(
            "gputok corpus needs dask.distributed: pip install -r requirements/corpus.txt",
            file=sys.stderr,
        )
        return 2
    from ._tokenizer import CudaUnavailableError
    from .corpus import CorpusError, tokenize_corpus, unescape_separator

    sep = None if args.text_separator is None else unescape_separator(args.text_separator)
    # SIGTERM ends the run as Ctrl-C does: one line saying what is done and how to resume.
    old = {}
    with contextlib.suppress(ValueError):  # only the main thread may set them
        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, _interrupted)
    try:
        run = tokenize_corpus(
            args.inputs,
            args.out,
            format=args.format,
            field=args.field,
            text_separator=sep,
            eot=args.eot,
            errors=args.utf8_errors,
            skip_empty=args.skip_empty,
            device=args.device,
            num_threads=args.threads,
            scheduler=args.scheduler,
            n_workers=args.workers,
            processes=not args.no_processes,
            dashboard=not args.no_dashboard,
            progress=not args.no_progress,
            overwrite=args.overwrite,
            batch_bytes=None if args.batch_mb is None else args.batch_mb << 20,
            min_batch_bytes=None if args.min_batch_mb is None else int(args.min_batch_mb * 2**20),
            threads_per_worker=args.threads_per_worker,
            workers_per_gpu=args.workers_per_gpu,
            fsync=not args.no_fsync,
            parquet_decoder=args.parquet_decoder,
            max_expansion=args.max_expansion,
            hash=args.hash,
            in_process=args.in_process,
            task_bytes=int(args.task_mb * 2**20),
        )
    except (CorpusError, CudaUnavailableError, ValueError, OSError) as e:
        print(f"gputok corpus: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _quiet_dask()
        print(f"\ngputok corpus: interrupted; {_shards_done(args)}", file=sys.stderr)
        return 130
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    global _SKIP_TEARDOWN
    _SKIP_TEARDOWN = run.in_process
    t = run.manifest["totals"]
    mb = (t["text_bytes"] or 0) / 1e6
    on = f" on {'/'.join(run.devices)}" if run.devices else ""
    where = "in process" if run.in_process else "on the cluster"
    steps = ", ".join(f"{k} {v:.1f}" for k, v in run.startup.items())
    print(
        f"done: {t['shards']} shards ({len(run.written)} written, {len(run.verified)} verified "
        f"and kept), {t['documents']} documents, {t['tokens']} tokens, {mb:.1f} MB of text "
        f"in {run.seconds:.1f} s{on} (start-up {run.startup_seconds:.1f} s: {steps}; "
        f"{run.tasks} task(s) {where}); manifest: {run.out_dir}/manifest.json"
    )
    return 0


def _interrupted(signum, frame) -> None:
    """Ctrl-C or SIGTERM: Dask's loggers go quiet first (the cluster's shutdown that follows
    logs cancelled tasks with tracebacks), then KeyboardInterrupt ends the run."""
    _quiet_dask()
    raise KeyboardInterrupt


def _quiet_dask() -> None:
    """After an interrupt, the cluster's shutdown logs cancelled tasks and closed comms at
    ERROR with tracebacks (97 lines for one Ctrl-C): noise once the user has stopped it."""
    import logging

    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _shards_done(args: argparse.Namespace) -> str:
    """'N of M shards done in OUT; run the same command to resume' (the shards whose entry
    was written: those a rerun keeps after checking them)."""
    import os

    from .corpus import plan_shards

    try:
        out = os.path.abspath(args.out)
        _, paths, _, names = plan_shards(args.inputs, args.format, exclude=out)
        done = sum(os.path.exists(os.path.join(out, f"{n}.json")) for n in names)
        of = f"{done} of {len(paths)} shards done in {args.out}; "
    except (ValueError, OSError):
        of = ""
    return of + "run the same command to resume"


SUBCOMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "corpus": ("tokenize a corpus into uint16 shards on Dask", _add_corpus_arguments, _run_corpus),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gputok", description="gputok command line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_, add_args, run) in SUBCOMMANDS.items():
        kw = {}
        if name == "corpus":
            kw = {
                "description": CORPUS_DESCRIPTION,
                "epilog": CORPUS_EPILOG,
                "formatter_class": argparse.RawDescriptionHelpFormatter,
            }
        p = sub.add_parser(name, help=help_, **kw)
        add_args(p)
        if name == "corpus":
            _add_corpus_task_arguments(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._run(args))


# Set by a subcommand when nothing is left for the interpreter's teardown to do (entry).
_SKIP_TEARDOWN = False


def entry() -> None:
    """The ``gputok`` console script and ``python -m gputok``: main(), then exit. After a
    ``gputok corpus`` run in this process the process ends without the interpreter's teardown:
    by then every shard, entry and the manifest are written, closed and renamed into place, no
    cluster or child process exists, and the teardown only frees what the OS takes back anyway
    (the GPU tokenizer's device and pinned memory, the pretoken cache, the interpreter's heap).
    On the H100 host (2026-11-27) a process that had built a GPU tokenizer and encoded 3 x 42 MB
    took 0.19-0.22 s from its last line to its end, 0.14 s with os._exit. main() itself returns
    normally, so callers in Python keep their process, and a run on a Dask cluster exits as
    before."""
    rc = main()
    if _SKIP_TEARDOWN:
        hand_off_driver_teardown()
        exit_now(rc)
    sys.exit(rc)


def exit_now(rc: int) -> None:
    """End the process with ``rc`` at once: flush stdout, stderr and logging, then
    ``os._exit`` (no atexit handlers, no finalizers, no teardown of native objects)."""
    import logging
    import os

    logging.shutdown()
    for f in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            f.flush()
    os._exit(rc)


# The device files whose descriptors hand_off_driver_teardown passes on (a test points it
# elsewhere).
_DRIVER_FILES = "/dev/nvidia"


def hand_off_driver_teardown() -> int | None:
    """Lets a helper process end this one's GPU context, after this one has exited.

    The NVIDIA driver frees a process's context (its device memory, pinned pages and
    mappings) when the last descriptor of its device files closes, inside the process's exit:
    90-140 ms that a shell or a calling script waits for, after everything is written. Here a
    ``cat`` is started holding copies of those descriptors (nothing else: its stdout and
    stderr are /dev/null) and reading a pipe that only this process writes; this process's
    exit closes the pipe, ``cat`` ends, and the driver's teardown runs in its exit instead.
    H100 host, 2026-11-28 (bench/native/exit_cost.cu, medians of 5 processes that made a
    context, 160 MiB pinned and 1 GiB of device memory; two calls): 406-457 -> 315-350 ms
    from spawn to exit.
    Returns the helper's pid; None (nothing done) where no driver file is open or the helper
    cannot start."""
    import os
    import subprocess

    fds = []
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # listdir's own descriptor is gone by now
                if os.readlink(f"/proc/self/fd/{fd}").startswith(_DRIVER_FILES):
                    fds.append(int(fd))
    if not fds:
        return None
    try:
        r, _w = os.pipe()  # _w stays here only (not inheritable); our exit closes it
        helper = subprocess.Popen(
            ["cat"],
            stdin=r,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=fds,
            start_new_session=True,
        )
        os.close(r)
    except OSError:
        return None
    return helper.pid


if __name__ == "__main__":  # pragma: no cover
    entry()
