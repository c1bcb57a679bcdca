"""What bench/bench_corpus.py's parts share: its log, the machine it ran on, the input shards,
and the host's busy cores during a run."""

from __future__ import annotations

import json
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

from _common import cpu_model, ncores, nvidia_smi, package_versions

TEXT_SEP = "\x1e\n"  # text-format document separator (record separator + newline)


def log(msg: str) -> None:
    print(f"[bench_corpus {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine() -> dict:
    return {
        "host": platform.node(),
        "cpu": cpu_model("?"),
        "cores": ncores(),
        "gpus": nvidia_smi("name,memory.total"),
        "python": platform.python_version(),
        "versions": package_versions(
            ("gputok", "gigatoken", "dask", "distributed", "dask-cuda", "pyarrow", "numpy")
        ),
    }


def write_inputs(work: Path, fmt: str, docs: list[str], shards: int) -> tuple[Path, int, int]:
    """Input shards (contiguous runs of documents) -> (dir, text bytes, documents)."""
    d = work / f"in-{fmt}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    if fmt == "text":
        docs = [x for x in docs if TEXT_SEP not in x]
    n = len(docs)
    bounds = [round(k * n / shards) for k in range(shards + 1)]
    for k in range(shards):
        part = docs[bounds[k] : bounds[k + 1]]
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(
                pa.table({"text": part}), d / f"part{k:04d}.parquet", row_group_size=2048
            )
        elif fmt == "jsonl":
            with open(d / f"part{k:04d}.jsonl", "w", encoding="utf-8") as f:
                for x in part:
                    f.write(json.dumps({"text": x}, ensure_ascii=False) + "\n")
        else:
            (d / f"part{k:04d}.txt").write_bytes("".join(x + TEXT_SEP for x in part).encode())
    return d, sum(len(x.encode("utf-8")) for x in docs), n


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores from /proc/stat, or None off Linux."""
    try:
        with open("/proc/stat") as f:
            vals = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    return sum(vals) - idle, sum(vals)


class HostCpu:
    """Share of all the host's cores busy between start() and stop() (None off Linux): tells
    a run bound by the host's cores from one that waits on something else."""

    def start(self) -> None:
        self.a = _cpu_jiffies()

    def stop(self) -> float | None:
        b = _cpu_jiffies()
        if self.a is None or b is None or b[1] == self.a[1]:
            return None
        return (b[0] - self.a[0]) / (b[1] - self.a[1])


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def log_stages(who: str, stage_seconds: dict) -> None:
    """Where the shard tasks' threads spent the last run (seconds summed over shards)."""
    log(
        f"{who} stages (s, summed over shards): "
        + ", ".join(f"{k} {v:.2f}" for k, v in stage_seconds.items())
    )
