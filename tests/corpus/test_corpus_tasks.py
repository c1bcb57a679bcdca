"""gputok corpus's tasks: start-up (every worker's tokenizer at once, timed apart), small runs
in this process with no cluster (same files and manifest as a cluster run), and small shards
grouped into tasks (still one output shard per input, resumable shard by shard)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from gputok import cli  # noqa: E402
from gputok.corpus import (  # noqa: E402
    CorpusError,
    ShardSpec,
    group_specs,
    tokenize_corpus,
    verify_corpus,
    warm_all,
)
from gputok.corpus.cluster import _ClusterOptions  # noqa: E402
from gputok.corpus.run import _choose_in_process  # noqa: E402

N_SHARDS = 12


@pytest.fixture(scope="module")
def docs(corpus) -> list[str]:
    picked = [d[:3000] for d in corpus[:60] if "\x1e\n" not in d and d]
    assert len(picked) >= 40
    return picked


def write_jsonl(tmp: Path, docs: list[str], shards: int = N_SHARDS) -> Path:
    d = tmp / "in"
    d.mkdir()
    for k in range(shards):
        lines = [json.dumps({"text": x}) for x in docs[k::shards]]
        (d / f"part{k:03d}.jsonl").write_text("\n".join(lines) + "\n")
    return d


def quiet(**kw):
    return {"progress": False, "log": lambda m: None, "device": "cpu", "num_threads": 1, **kw}


def test_group_specs_sizes_and_spread():
    specs = [ShardSpec(name=f"s{k}") for k in range(10)]
    sizes = [10] * 8 + [500, 10]
    # target 40 bytes: 4 small shards a task, the big one alone
    groups = group_specs(specs, sizes, 40, slots=1)
    assert [[s.name for s in g] for g in groups] == [
        ["s0", "s1", "s2", "s3"],
        ["s4", "s5", "s6", "s7"],
        ["s8"],
        ["s9"],
    ]
    # a large target shrinks to total / (2 x slots): every thread gets two tasks or more
    assert len(group_specs(specs[:8], sizes[:8], 1 << 30, slots=2)) == 4
    assert [len(g) for g in group_specs(specs, sizes, 0, slots=1)] == [1] * 10
    assert [s for g in group_specs(specs, sizes, 1 << 30, slots=3) for s in g] == specs


def test_regression_groups_even_out_to_a_multiple_of_the_threads():
    """Groups of at most the target came out at 17 for 1 GB of 1 MB shards on 8 threads, the
    last task running alone at the end: they are evened out to 16, each within a shard of
    the others' bytes, in order."""
    specs = [ShardSpec(name=f"s{k}") for k in range(949)]
    sizes = [1_053_000] * 949
    groups = group_specs(specs, sizes, 64 << 20, slots=8)
    assert len(groups) == 16
    assert [s for g in groups for s in g] == specs
    counts = [len(g) for g in groups]
    assert max(counts) - min(counts) <= 1
    # a shard over the target keeps the greedy groups (it is a task alone)
    assert len(group_specs(specs[:20], [10] * 19 + [10**6], 64 << 20, slots=2)) >= 2


def test_startup_builds_every_workers_tokenizer_at_once(client):
    """Two workers each take 0.8 s to build their tokenizer (a test hook); they build at the
    same time, and the run reports that start-up apart from the shards."""
    warm_all(client, ShardSpec(device="cpu"))  # the real build once, outside the timing
    spec = ShardSpec(device="cpu", fault={"mode": "slow_start", "seconds": 0.8})
    t = time.perf_counter()
    got = warm_all(client, spec)
    took = time.perf_counter() - t
    assert len(got) == 2 and {g["device"] for g in got.values()} == {"cpu"}
    a, b = sorted(got.values(), key=lambda g: g["start"])
    assert b["start"] < a["end"], f"built one after another: {got}"
    assert took < 1.5, took


def test_run_reports_startup(client, tmp_path, docs):
    warm_all(client, ShardSpec(device="cpu"))
    fault = {"mode": "slow_start", "seconds": 0.8, "shard": "none", "marker": "x"}
    r = tokenize_corpus(
        write_jsonl(tmp_path, docs), tmp_path / "o", client=client, _fault=fault, **quiet()
    )
    assert set(r.startup) == {"cluster", "tokenizers"} and not r.in_process
    assert 0.8 <= r.startup["tokenizers"] < 1.5, r.startup
    assert r.startup_seconds < r.seconds


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "text"])
def test_in_process_equals_cluster(client, tmp_path, docs, fmt):
    """The same inputs in this process (no cluster) and on the cluster: the same manifest
    (every file's hash); a resume in process keeps them all."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for k in range(4):
        part = docs[k::4]
        if fmt == "jsonl":
            (inputs / f"p{k}.jsonl").write_text(
                "".join(json.dumps({"text": x}) + "\n" for x in part)
            )
        elif fmt == "text":
            (inputs / f"p{k}.txt").write_text("".join(x + "\x1e\n" for x in part))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"text": part}), inputs / f"p{k}.parquet", row_group_size=4)
    kw = quiet(text_separator="\x1e\n")
    here = tokenize_corpus(inputs, tmp_path / "here", in_process=True, **kw)
    there = tokenize_corpus(inputs, tmp_path / "there", client=client, **kw)
    assert here.in_process and not there.in_process
    assert here.manifest["totals"]["tokens"] > 1000
    assert here.manifest == there.manifest
    assert set(here.startup) == {"tokenizers"}
    again = tokenize_corpus(inputs, tmp_path / "here", in_process=True, **kw)
    assert again.written == [] and len(again.verified) == 4
    assert verify_corpus(tmp_path / "here") == []


def test_small_corpus_runs_in_process_by_default(tmp_path, docs):
    inputs = write_jsonl(tmp_path, docs, shards=2)
    r = tokenize_corpus(inputs, tmp_path / "o", dashboard=False, **quiet())
    assert r.in_process and r.written == ["shard_00000", "shard_00001"]


def test_choose_in_process_rules():
    opts = _ClusterOptions()
    assert _choose_in_process(None, 100, None, opts, 99)
    assert not _choose_in_process(None, 100, None, opts, 100)  # at the threshold: a cluster
    assert _choose_in_process(True, 100, None, opts, 10**12)  # forced
    assert not _choose_in_process(False, 100, None, opts, 1)
    assert not _choose_in_process(None, 100, object(), opts, 1)  # a client: its cluster
    for shaped in (
        {"n_workers": 2},
        {"workers_per_gpu": 2},
        {"processes": False},
        {"scheduler": "tcp://x:1"},
    ):
        assert not _choose_in_process(None, 100, None, _ClusterOptions(**shaped), 1)
    with pytest.raises(ValueError, match="no client or scheduler"):
        _choose_in_process(True, 100, None, _ClusterOptions(scheduler="tcp://x:1"), 1)


@pytest.mark.parametrize("here", [True, False])
def test_small_shards_grouped_one_output_each_and_resume(client, tmp_path, docs, here):
    """12 small shards in a few tasks: 12 output shards, the same manifest as one task per
    shard; one shard failing fails alone; a resume redoes only the damaged shard."""
    inputs = write_jsonl(tmp_path, docs)
    where = {"in_process": True} if here else {"client": client}
    one_each = tokenize_corpus(inputs, tmp_path / "single", task_bytes=0, **where, **quiet())
    assert one_each.tasks == N_SHARDS
    out = tmp_path / "grouped"
    fault = {
        "shard": "shard_00001",
        "mode": "raise",
        "stage": "mid",
        "marker": str(tmp_path / "fault"),
    }
    with pytest.raises(CorpusError, match=r"(?s)1 of 12 shard\(s\) failed.*shard_00001"):
        tokenize_corpus(inputs, out, _fault=fault, batch_bytes=1024, **where, **quiet())
    assert len(list(out.glob("shard_*.json"))) == N_SHARDS - 1
    r = tokenize_corpus(inputs, out, **where, **quiet())
    assert r.tasks < N_SHARDS / 2, r.tasks
    assert r.written == ["shard_00001"] and len(r.verified) == N_SHARDS - 1
    assert r.manifest == one_each.manifest
    b = bytearray((out / "shard_00007.bin").read_bytes())
    b[1] ^= 1
    (out / "shard_00007.bin").write_bytes(bytes(b))
    r = tokenize_corpus(inputs, out, **where, **quiet())
    assert r.written == ["shard_00007"] and r.manifest == one_each.manifest


def test_progress_ends_with_the_last_task(tmp_path, docs, capsys):
    """Progress into a log (not a terminal) printed a line every 10 s by sleeping; a short run
    waited out that sleep. It now waits on the tasks."""
    inputs = write_jsonl(tmp_path, docs, shards=3)
    t = time.perf_counter()
    tokenize_corpus(inputs, tmp_path / "o", in_process=True, **{**quiet(), "progress": True})
    assert time.perf_counter() - t < 5.0
    assert "3/3 shards" in capsys.readouterr().out


def test_cli_in_process_summary_and_flags(tmp_path, docs, capsys):
    inputs = write_jsonl(tmp_path, docs, shards=3)
    base = ["corpus", str(inputs), "--no-dashboard", "--no-progress", "--device", "cpu"]
    assert cli.main([*base, "-o", str(tmp_path / "a"), "--in-process", "--task-mb", "0"]) == 0
    out = capsys.readouterr().out
    assert "in this process (no cluster)" in out and "in 3 task(s)" in out
    assert "(start-up " in out and "3 task(s) in process)" in out
    assert (
        cli.main(
            [*base, "-o", str(tmp_path / "b"), "--in-process", "--scheduler", "tcp://127.0.0.1:1"]
        )
        == 1
    )
    assert "no client or scheduler" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main([*base, "-o", str(tmp_path / "c"), "--in-process", "--cluster"])
