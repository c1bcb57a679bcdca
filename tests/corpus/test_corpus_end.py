"""The end and the Parquet decoder of a corpus run: after a run in this process the command
exits without the interpreter's teardown, its output flushed; "auto" decodes a short run's
Parquet pages on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gputok import corpus as C
from gputok.corpus import shard as shard_mod


def _write(tmp_path, shards: int) -> list[str]:
    d = tmp_path / "in"
    d.mkdir()
    paths = []
    for k in range(shards):
        p = d / f"p{k}.jsonl"
        p.write_text("".join(json.dumps({"text": f"doc {k} {j} hello"}) + "\n" for j in range(50)))
        paths.append(str(p))
    return paths


def _run(tmp_path, paths, **kw):
    return C.tokenize_corpus(
        paths,
        str(tmp_path / "out"),
        in_process=True,
        progress=False,
        log=lambda m: None,
        device="cpu",
        num_threads=1,
        **kw,
    )


def _entry(*args: str) -> subprocess.CompletedProcess:
    """The console script's entry() in a fresh interpreter that registers an atexit line, with
    stdout a pipe (block-buffered: a line not flushed before the exit is lost)."""
    code = (
        "import atexit, sys; atexit.register(lambda: print('teardown ran', flush=True)); "
        "sys.argv = ['gputok', *sys.argv[1:]]; from gputok.cli import entry; entry()"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_a_corpus_run_in_process_exits_without_teardown_and_loses_no_output(tmp_path):
    """After a run in this process the command ends with os._exit (no atexit handlers, no
    teardown of the GPU tokenizer), its summary line flushed first; a failed run exits as
    before."""
    paths = _write(tmp_path, 2)
    out = tmp_path / "out"
    r = _entry("corpus", *paths, "-o", str(out), "--in-process", "--device", "cpu",
               "--no-progress", "--no-fsync")  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert "done: 2 shards (2 written" in r.stdout, r.stdout
    assert "teardown ran" not in r.stdout
    assert json.loads((out / "manifest.json").read_text())["totals"]["shards"] == 2
    bad = _entry("corpus", str(tmp_path / "none*.jsonl"), "-o", str(out), "--in-process")
    assert bad.returncode != 0 and "gputok corpus: error" in bad.stderr
    assert "teardown ran" in bad.stdout


def test_auto_decodes_parquet_pages_on_the_cpu_in_a_short_run(tmp_path, monkeypatch):
    """ "auto" becomes the CPU page reader below PARQUET_GPU_MIN_RUN_BYTES of input; the other
    settings, and "auto" in a longer run, are passed on as given."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gputok.corpus import decoders

    assert decoders.parquet_decoder_for_run("auto", 1 << 30) == "gputok"
    assert decoders.parquet_decoder_for_run("auto", 4 << 30) == "auto"
    for mode in ("gputok-gpu", "arrow", "gputok"):
        assert decoders.parquet_decoder_for_run(mode, 1) == mode
    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(pa.table({"text": ["hello world", "and more"]}), d / "a.parquet")
    seen = []
    real = shard_mod._parquet_decoder
    monkeypatch.setattr(
        shard_mod, "_parquet_decoder", lambda mode, tok: seen.append(mode) or real(mode, tok)
    )
    for asked, got in (("auto", "gputok"), ("gputok-gpu", "gputok-gpu")):
        seen.clear()
        _run(tmp_path, [str(d / "a.parquet")], parquet_decoder=asked, overwrite=True)
        assert seen and set(seen) == {got}, seen
