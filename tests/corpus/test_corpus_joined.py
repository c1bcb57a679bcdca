"""Small shards through the tokenizer together (group.tokenize_joined): the same files and
manifest as shard by shard, and a bad shard fails (or skips) alone, exactly as on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputok.corpus import CorpusError, tokenize_corpus, verify_corpus
from gputok.corpus import tasks as tasks_mod

N = 9


@pytest.fixture(scope="module")
def docs(corpus) -> list[str]:
    picked = [d[:2500] for d in corpus[:80] if "\x1e\n" not in d and d]
    assert len(picked) >= 60
    # non-ASCII, escapes, an empty document (skip_empty) and a lone-surrogate-free emoji pair
    return [*picked, "", 'tab\tquote" back\\slash \u00e9\u4e2d \U0001f600', "", "x"]


def quiet(**kw):
    return {"progress": False, "log": lambda m: None, "device": "cpu", "num_threads": 1, **kw}


def write(d: Path, fmt: str, parts: list[list[str]]) -> Path:
    d.mkdir()
    for k, part in enumerate(parts):
        if fmt == "jsonl":
            body = "".join(json.dumps({"text": x}) + "\n" for x in part)
            (d / f"p{k:02d}.jsonl").write_text(body)
        elif fmt == "text":
            (d / f"p{k:02d}.txt").write_text("".join(x + "\x1e\n" for x in part))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(
                pa.table({"text": pa.array(part, pa.string())}),
                d / f"p{k:02d}.parquet",
                row_group_size=5,
            )
    return d


@pytest.fixture
def joined(monkeypatch):
    """The shards the joined path wrote."""
    seen = []
    real = tasks_mod.tokenize_joined

    def spy(specs, group_bytes):
        results, alone = real(specs, group_bytes)
        seen.extend(r["entry"]["name"] for r in results)
        return results, alone

    monkeypatch.setattr(tasks_mod, "tokenize_joined", spy)
    return seen


def files(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(out.glob("shard_*.*")) if p.suffix != ".json"}


@pytest.mark.parametrize("skip_empty", [False, True])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "text"])
def test_joined_equals_shard_by_shard(tmp_path, docs, joined, fmt, skip_empty):
    """Every .bin / .idx byte and the manifest equal to one task per shard; the joined path
    wrote every shard (a small batch target: several joined calls per task)."""
    parts = [docs[k::N] for k in range(N)]
    # an empty shard (Parquet: one empty document; a 0-row file written by pyarrow is refused
    # by the page reader's footer check, shard by shard too)
    parts[4] = [""] if fmt == "parquet" else []
    inputs = write(tmp_path / "in", fmt, parts)
    kw = quiet(text_separator="\x1e\n", skip_empty=skip_empty, in_process=True)
    one = tokenize_corpus(inputs, tmp_path / "one", task_bytes=0, **kw)
    assert joined == []
    grouped = tokenize_corpus(inputs, tmp_path / "grp", batch_bytes=20_000, **kw)
    # a task of one shard runs it alone (tokenize_shard): at most the last one here
    assert grouped.tasks < N and len(set(joined)) >= N - 1, (grouped.tasks, joined)
    assert grouped.manifest["totals"]["tokens"] > 10_000
    assert grouped.manifest["shards"] == one.manifest["shards"]
    assert files(tmp_path / "grp") == files(tmp_path / "one")
    assert verify_corpus(tmp_path / "grp") == []
    if skip_empty:
        assert grouped.manifest["totals"]["skipped_empty"] > 0


def _bad_text_inputs(tmp_path: Path, docs: list[str]) -> Path:
    inputs = write(tmp_path / "in", "text", [docs[k::N] for k in range(N)])
    bad = inputs / "p03.txt"
    bad.write_bytes(bad.read_bytes() + b"bad \xff\xfe utf-8\x1e\n")
    return inputs


def _failure_line(err: Exception, out: Path) -> str:
    lines = [ln for ln in str(err).replace(str(out), "OUT").splitlines() if "shard_00003" in ln]
    assert len(lines) == 1, str(err)
    return lines[0]


def test_joined_invalid_utf8_strict_fails_that_shard_alone(tmp_path, docs, joined):
    """Invalid UTF-8 in one shard under strict: that shard fails with the message it gets on
    its own, the group's other shards are written as shard by shard."""
    inputs = _bad_text_inputs(tmp_path, docs)
    kw = quiet(text_separator="\x1e\n", in_process=True)
    with pytest.raises(CorpusError) as one:
        tokenize_corpus(inputs, tmp_path / "one", task_bytes=0, **kw)
    with pytest.raises(CorpusError) as grp:
        tokenize_corpus(inputs, tmp_path / "grp", **kw)
    assert "1 of 9 shard(s) failed" in str(grp.value)
    assert "invalid UTF-8" in _failure_line(grp.value, tmp_path / "grp")
    assert _failure_line(one.value, tmp_path / "one") == _failure_line(grp.value, tmp_path / "grp")
    assert files(tmp_path / "grp") == files(tmp_path / "one")
    assert len(files(tmp_path / "grp")) == 2 * (N - 1)


@pytest.mark.parametrize("errors", ["skip", "replace"])
def test_joined_invalid_utf8_skip_replace_equal(tmp_path, docs, errors):
    inputs = _bad_text_inputs(tmp_path, docs)
    kw = quiet(text_separator="\x1e\n", in_process=True, errors=errors)
    one = tokenize_corpus(inputs, tmp_path / "one", task_bytes=0, **kw)
    grp = tokenize_corpus(inputs, tmp_path / "grp", **kw)
    assert grp.manifest["shards"] == one.manifest["shards"]
    assert files(tmp_path / "grp") == files(tmp_path / "one")
    skipped = grp.manifest["shards"][3]["skipped_invalid_utf8"]
    assert skipped == (1 if errors == "skip" else 0)


def test_joined_bad_json_line_fails_that_shard_alone(tmp_path, docs, joined):
    """A malformed JSONL file (Arrow refuses it, the line-by-line reader names the line)
    fails alone; the others go through the joined path."""
    inputs = write(tmp_path / "in", "jsonl", [docs[k::N] for k in range(N)])
    with open(inputs / "p05.jsonl", "a") as f:
        f.write('{"text": "ok"}\n{"text": nope}\n')
    with pytest.raises(CorpusError) as grp:
        tokenize_corpus(inputs, tmp_path / "grp", **quiet(in_process=True))
    line = [ln for ln in str(grp.value).splitlines() if "shard_00005" in ln]
    assert len(line) == 1 and "p05.jsonl:" in line[0] and "invalid JSON" in line[0]
    assert "shard_00005" not in joined and len(set(joined)) >= N - 2, joined


def test_joined_leaves_a_shard_that_expands_to_its_own_pipeline(
    tmp_path, docs, joined, monkeypatch
):
    """A small Parquet file whose repeated values come to more text than a joined shard may
    hold (JOIN_MAX_TEXT_BYTES, lowered here) goes alone, batch by batch; the output is the
    same."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gputok.corpus import group

    monkeypatch.setattr(group, "JOIN_MAX_TEXT_BYTES", 50_000)
    inputs = write(tmp_path / "in", "parquet", [docs[k::N][:3] for k in range(N)])
    rep = pa.table({"text": pa.array(["the same value, again " * 5] * 4000, pa.string())})
    pq.write_table(rep, inputs / "p02.parquet", use_dictionary=True)
    assert (inputs / "p02.parquet").stat().st_size < 50_000  # 440 KB of text
    kw = quiet(in_process=True)
    one = tokenize_corpus(inputs, tmp_path / "one", task_bytes=0, **kw)
    grp = tokenize_corpus(inputs, tmp_path / "grp", **kw)
    assert "shard_00002" not in joined and len(set(joined)) >= N - 2, joined
    assert grp.manifest["shards"][2]["documents"] == 4000
    assert grp.manifest["shards"] == one.manifest["shards"]
    assert files(tmp_path / "grp") == files(tmp_path / "one")


def test_the_run_lists_its_output_folder_at_its_start_and_end_not_per_task(
    tmp_path, docs, monkeypatch
):
    """A killed run's temporary files of this run's shards go at the start (another name's
    stay); the output folder is listed once then and once at the end (for temporary files of
    this run's killed attempts), not once per task: in 1 GB of 1 MB shards that per-task scan
    of a folder filling with three files a shard took 0.25 s of each second-round task (H200
    host, py-spy, 2026-11-28)."""
    import os

    inputs = write(tmp_path / "in", "text", [docs[k::N] for k in range(N)])
    out = tmp_path / "out"
    out.mkdir()
    for name in ("shard_00001.bin.tmp-999-dead-0", "shard_00004.idx.tmp-999-dead-1", "x.tmp-9"):
        (out / name).write_bytes(b"\0" * 7)
    listed = []
    for fn in ("listdir", "scandir"):
        real = getattr(os, fn)

        def counted(path=".", _real=real, _fn=fn):
            if Path(path) == out:
                listed.append(_fn)
            return _real(path)

        monkeypatch.setattr(os, fn, counted)
    stale_at_tasks = []
    real_joined = tasks_mod.tokenize_joined

    def joined(specs, sizes):
        stale_at_tasks.append(len(list(out.glob("shard_*.tmp-*"))))
        return real_joined(specs, sizes)

    monkeypatch.setattr(tasks_mod, "tokenize_joined", joined)
    size = sum(p.stat().st_size for p in inputs.iterdir())
    kw = quiet(text_separator="\x1e\n", in_process=True)
    r = tokenize_corpus(inputs, out, batch_bytes=20_000, task_bytes=size // 4, **kw)
    assert r.tasks >= 3, r.tasks
    assert listed[0] == "listdir" and listed[-1] == "listdir", listed
    assert len(listed) == 2 + len(stale_at_tasks), listed  # pathlib's glob: one scandir each
    assert stale_at_tasks and max(stale_at_tasks) == 0, stale_at_tasks
    monkeypatch.undo()
    assert sorted(p.name for p in out.glob("*.tmp-*")) == ["x.tmp-9"]
    assert verify_corpus(out) == []
