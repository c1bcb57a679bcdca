#!/usr/bin/env python3
"""When each step of one ``gputok corpus`` command begins and ends, on every thread, from the
process's spawn: no sampler (py-spy stops the process for each sample, and at 250 Hz took a
1 GB run from 1.0 to 1.4 s), only timestamps around a few functions. Not a test.

    TRACE_T0=$(date +%s.%N) python3 bench/corpus_startup_trace.py IN -o OUT --no-fsync ...

The arguments are `gputok corpus`'s. TRACE_T0 (the shell's clock just before it starts
Python) makes the first line the interpreter's own start; without it times count from this
script's first line. The timeline goes to stderr (ms, the process's CPU ms so far, thread,
step), then the run's stage seconds summed over its shards (CorpusRun.stage_seconds: what its
tasks waited on), and the timeline as JSON to TRACE_JSON if set.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

T0 = float(os.environ.get("TRACE_T0") or time.time())
EVENTS: list[tuple[float, float, str, str]] = []
_LOCK = threading.Lock()
STAGES: dict = {}  # CorpusRun.stage_seconds of the run, printed last


def ev(what: str) -> None:
    """A step, with the process's CPU time so far (every thread's, user + system)."""
    t = os.times()
    with _LOCK:
        EVENTS.append(
            (
                (time.time() - T0) * 1e3,
                (t.user + t.system) * 1e3,
                threading.current_thread().name,
                what,
            )
        )


def wrap(obj, name: str, label: str, every: bool = False, then=None) -> None:
    """obj.name timed: its first call's start and end on each thread (every call: every);
    ``then`` is given each result."""
    fn = getattr(obj, name)
    seen: set[str] = set()

    def timed(*a, **k):
        th = threading.current_thread().name
        log = every or th not in seen
        seen.add(th)
        if log:
            ev(f"{label} start")
        try:
            got = fn(*a, **k)
            if then is not None:
                then(got)
            return got
        finally:
            if log:
                ev(f"{label} end")

    setattr(obj, name, timed)


def main() -> int:
    ev("python up")
    import gputok

    ev("import gputok")
    from gputok import _vocab
    from gputok.corpus import files, group, run, runners, shard, tasks

    ev("import gputok.corpus")
    wrap(gputok, "_start_device", "start_device")
    wrap(_vocab, "parse_tiktoken_bytes", "vocab parse")
    wrap(_vocab, "vocab_from_tiktoken_file", "vocab build")
    wrap(gputok.Tokenizer, "__init__", "Tokenizer()")
    for mod in (shard, group, tasks):
        if hasattr(mod, "_tokenizer"):
            wrap(mod, "_tokenizer", f"{mod.__name__.rsplit('.', 1)[-1]}._tokenizer")
    wrap(run, "plan_shards", "plan_shards")
    wrap(run, "_check_out_dir", "check out dir")
    wrap(run, "_run_here", "run here")
    # the run's stage sums: what its tasks waited on
    wrap(run, "_finish", "finish", then=lambda got: STAGES.update(got.stage_seconds))
    wrap(runners, "group_specs", "group_specs")
    wrap(tasks, "tokenize_group", "task")
    wrap(gputok.Tokenizer, "encode_buffer_uint16", "encode")
    wrap(files, "write_shards", "write_shards")
    from gputok import cli

    code = 1
    try:
        code = cli.main(["corpus", *sys.argv[1:]])
    finally:
        ev("returned")
        report()
    if cli._SKIP_TEARDOWN:  # as the console script ends a run in process (cli.entry)
        cli.hand_off_driver_teardown()
        cli.exit_now(code)
    return code


def report() -> None:
    rows = sorted(EVENTS)
    for ms, cpu, th, what in rows:
        print(f"{ms:9.1f} ms  cpu {cpu:7.0f} ms  {th:<28} {what}", file=sys.stderr)
    if STAGES:
        sums = ", ".join(f"{k} {v:.2f}" for k, v in STAGES.items())
        print(f"stage seconds, summed over shards: {sums}", file=sys.stderr)
    if os.environ.get("TRACE_JSON"):
        with open(os.environ["TRACE_JSON"], "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    sys.exit(main())
