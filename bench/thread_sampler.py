"""Where a process's CPU goes, by thread and by Python line, without a profiler (the GPU
machine has no perf, py-spy or nsys). Used by ``bench_corpus.py --sample-threads`` in every
Dask worker.

Two measures, both over the time between ``start()`` and ``stop()``:
- CPU seconds of every OS thread of the process (utime + stime from /proc/self/task), named
  by its Python thread where it has one; threads with no Python object (the tokenizer's copy
  pools, Arrow's, CUDA's) are "native";
- an on-CPU sample: every ``interval`` seconds, each Python thread whose OS thread is running
  (state R) counts once for its innermost frames. A thread that runs Python bytecode holds
  the GIL, so the sampler (which needs it) sees it less often than one inside a C call that
  released the GIL: read the sample as "where threads sit when they burn CPU in native code".
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time

_state: dict = {}


def _task_times() -> dict[int, float]:
    """CPU seconds per OS thread id of this process."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            continue
    return out


def _running(tid: int) -> bool:
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "R"
    except OSError:
        return False


def _where(frame, depth: int) -> str:
    parts = []
    while frame is not None and len(parts) < depth:
        code = frame.f_code
        parts.append(f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return " < ".join(parts)


def _loop(interval: float, depth: int, stop: threading.Event, st: dict):
    """Samples until ``stop``: on-CPU frames every tick, every thread's CPU time every 4th
    (threads that end before stop(), such as a shard's reader and writer, still count)."""
    me, tick = threading.get_ident(), 0
    counts, seen, cpu0 = st["counts"], st["seen"], st["cpu0"]
    while not stop.wait(interval):
        by_ident = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            t = by_ident.get(ident)
            if ident == me or t is None or t.native_id is None:
                continue
            if _running(t.native_id):
                counts[_where(frame, depth)] += 1
        counts["(samples)"] += 1
        tick += 1
        if tick % 4 == 0:
            names = {t.native_id: t.name for t in by_ident.values() if t.native_id is not None}
            for tid, secs in _task_times().items():
                name, first, _ = seen.get(tid, (None, cpu0.get(tid, 0.0), 0.0))
                seen[tid] = (name or names.get(tid), first, secs)


def start(interval: float = 0.005, depth: int = 3) -> bool:
    """Starts sampling this process (again: the previous counts are dropped)."""
    stop()
    ev = threading.Event()
    st = {"counts": collections.Counter(), "seen": {}, "cpu0": _task_times()}
    th = threading.Thread(
        target=_loop, args=(interval, depth, ev, st), name="thread-sampler", daemon=True
    )
    _state.update(ev=ev, st=st, thread=th, t0=time.perf_counter())
    th.start()
    return True


def _group(name: str | None) -> str:
    """Numbered pool threads under one name: "gputok-corpus-writer_3" -> "gputok-corpus-writer",
    "Dask-Default-Threads-1234-2" -> "Dask-Default-Threads"."""
    if not name:
        return "native"
    return name.rstrip("0123456789_-")


def stop() -> dict | None:
    """Stops sampling; returns {"seconds", "threads": {name: CPU s}, "samples": {where: n}}."""
    if "ev" not in _state:
        return None
    _state["ev"].set()
    _state["thread"].join()
    st = _state["st"]
    for tid, secs in _task_times().items():  # the last reading for threads still alive
        name, first, _ = st["seen"].get(tid, (None, st["cpu0"].get(tid, 0.0), 0.0))
        st["seen"][tid] = (name, first, secs)
    threads: collections.Counter = collections.Counter()
    for name, first, last in st["seen"].values():
        threads[_group(name)] += max(0.0, last - first)
    out = {
        "seconds": time.perf_counter() - _state["t0"],
        "threads": {k: round(v, 3) for k, v in threads.most_common()},
        "samples": dict(st["counts"].most_common(60)),
    }
    _state.clear()
    return out
