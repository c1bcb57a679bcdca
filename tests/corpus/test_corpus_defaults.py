"""Defaults of the corpus tool that depend on the machine: shards at once per worker and in
process, worker processes per GPU."""

from __future__ import annotations

import json

from gputok import corpus as C


def test_default_threads_per_worker():
    assert C.default_threads_per_worker(0, 64) == 1  # CPU workers: one shard at a time
    assert C.default_threads_per_worker(1, 16) == 4
    assert C.default_threads_per_worker(2, 32) == 4
    assert C.default_threads_per_worker(2, 4) == 2
    assert C.default_threads_per_worker(4, 2) == 1
    # Several worker processes per GPU split the cores between them: ~1 shard per core.
    assert C.default_threads_per_worker(1, 16, workers_per_gpu=4) == 4
    assert C.default_threads_per_worker(1, 8, workers_per_gpu=4) == 2
    assert C.default_threads_per_worker(2, 16, workers_per_gpu=4) == 2
    assert C.default_threads_per_worker(2, 8, workers_per_gpu=8) == 1


def test_default_in_process_threads():
    """A run in this process keeps more shards in flight on a GPU than one cluster worker
    does (4): 12 measured best on 16-core H200 hosts (2026-11-29; 8 before the joined call's
    writer gave the GIL up once, on the H100 host, 2026-11-27)."""
    # The CPU: half the cores, at most 8 (H200 host, 2026-11-29: 200 MB in 1 MB shards 0.80
    # -> 0.66 s against one shard at a time on every core).
    assert C.default_in_process_threads(0, 64) == C.MAX_IN_PROCESS_CPU_THREADS == 8
    assert C.default_in_process_threads(0, 16) == 8
    assert C.default_in_process_threads(0, 6) == 3
    assert C.default_in_process_threads(0, 2) == 1
    assert C.default_in_process_threads(0, 1) == 1
    assert C.default_in_process_threads(1, 16) == 12
    assert C.default_in_process_threads(1, 64) == C.MAX_IN_PROCESS_GPU_THREADS == 12
    assert C.default_in_process_threads(1, 6) == 4
    assert C.default_in_process_threads(1, 1) == 1


def test_a_run_in_process_takes_the_in_process_default(tmp_path, monkeypatch):
    """_run_here asks default_in_process_threads, not the cluster workers' rule."""
    import gputok.corpus.runners as run_mod

    d = tmp_path / "in"
    d.mkdir()
    for k in range(6):  # tasks enough for 3 at once (the CPU runs no more than the tasks)
        (d / f"s{k}.jsonl").write_text(json.dumps({"text": f"hello world {k}"}) + "\n")
    monkeypatch.setattr(run_mod, "default_in_process_threads", lambda gpus: 3)
    lines: list[str] = []
    C.tokenize_corpus(
        [str(d)],
        str(tmp_path / "out"),
        in_process=True,
        progress=False,
        log=lines.append,
        device="cpu",
        num_threads=1,
    )
    said = [m for m in lines if "in this process" in m]
    assert said and "3 shard(s) at a time" in said[0], lines


def test_default_workers_per_gpu():
    assert C.default_workers_per_gpu(0, 64) == 1  # CPU clusters: not used
    assert C.default_workers_per_gpu(1, 16) == 4  # the H200 host: 4 x 4 shards measured best
    assert C.default_workers_per_gpu(2, 32) == 4
    assert C.default_workers_per_gpu(1, 8) == 2
    assert C.default_workers_per_gpu(1, 2) == 1
    assert C.default_workers_per_gpu(8, 64) == 2


def test_in_process_threads_run_a_few_large_shards_in_one_round():
    """10 shards of 100 MB on 8 threads left 2 to run alone after the others (H100,
    2026-11-28: 1.65 s at 10 at once against 1.91 at 8, Parquet). Tasks of grouped small
    shards keep the default: 16 at once was no faster for 1 MB shards."""
    from gputok.corpus.cluster import in_process_threads

    def alone(n):
        return [["shard"]] * n

    assert in_process_threads(8, 1, alone(10), cores=16) == 10
    assert in_process_threads(8, 1, alone(16), cores=16) == 16
    assert in_process_threads(8, 1, alone(17), cores=16) == 8  # more than one round anyway
    assert in_process_threads(8, 1, alone(5), cores=16) == 8
    assert in_process_threads(8, 1, [["a", "b"]] * 10, cores=16) == 8  # grouped
    assert in_process_threads(1, 0, alone(10), cores=16) == 1  # the CPU: told 1
    # The CPU: no more at once than the tasks, which then share the cores (3 shards of 100 MB
    # of Parquet: 1.29 s one at a time, 1.48 with 8 threads of 2 cores, 3 of them busy).
    assert in_process_threads(8, 0, alone(3), cores=16) == 3
    assert in_process_threads(8, 0, alone(20), cores=16) == 8
    assert in_process_threads(8, 0, [["a", "b"]] * 16, cores=16) == 8
