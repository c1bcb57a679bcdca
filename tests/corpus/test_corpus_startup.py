"""A run in this process reads its first shards while its tokenizer builds: the reader
thread starts at once (batch._Prefetch), and the tokenizer builds on a thread of its own
(shard.start_tokenizer), which the tasks wait for only when they first encode."""

from __future__ import annotations

import threading
import time

import pytest

import gputok
from gputok import corpus as C
from gputok.corpus import batch, group, shard

BUILD_S = 0.6  # a slow tokenizer build, long enough to see the reads inside it


def test_prefetch_reads_before_the_first_next():
    started = threading.Event()

    def items():
        started.set()
        yield 1

    reader = batch._prefetch(items())
    try:
        assert started.wait(5), "the reader waited for its consumer's first next()"
        assert list(reader) == [1]
    finally:
        reader.close()


def test_prefetch_closed_unread_stops_its_thread():
    def endless():
        while True:
            yield b"x"

    reader = batch._prefetch(endless(), depth=1)
    reader.close()
    reader._thread.join(5)
    assert not reader._thread.is_alive()
    with pytest.raises(StopIteration):
        next(reader)


def test_prefetch_hands_the_readers_error_over():
    def failing():
        yield 1
        raise OSError("disk gone")

    reader = batch._prefetch(failing())
    assert next(reader) == 1
    with pytest.raises(OSError, match="disk gone"):
        next(reader)
    with pytest.raises(StopIteration):  # ended: no wait on a queue nobody fills
        next(reader)


@pytest.fixture
def slow_build(monkeypatch):
    """gputok.gpt2 that takes BUILD_S longer, in a process with no tokenizer yet; yields
    the times (time.monotonic) its builds ended."""
    monkeypatch.setattr(shard, "_TOKENIZERS", {})
    ended: list[float] = []
    real = gputok.gpt2

    def gpt2(*args, **kwargs):
        time.sleep(BUILD_S)
        tok = real(*args, **kwargs)
        ended.append(time.monotonic())
        return tok

    monkeypatch.setattr(gputok, "gpt2", gpt2)
    return ended


def _reads(monkeypatch, module, name: str) -> list[float]:
    """Patches the reader ``module.name`` (a function returning a list or an iterator) to
    record when each of its items was read (time.monotonic)."""
    calls: list[float] = []
    real = getattr(module, name)

    def items(got):
        for item in got:
            calls.append(time.monotonic())
            yield item

    def wrapper(*args, **kwargs):
        got = real(*args, **kwargs)
        if isinstance(got, list):  # read in the call
            calls.append(time.monotonic())
            return got
        return items(got)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def _shards(tmp_path, n: int) -> list[str]:
    d = tmp_path / "in"
    d.mkdir()
    for k in range(n):
        (d / f"s{k}.txt").write_text(f"document {k}, " * 50)
    return [str(d)]


def test_joined_shards_are_read_while_the_tokenizer_builds(tmp_path, monkeypatch, slow_build):
    reads = _reads(monkeypatch, group, "read_files_run")
    run = C.tokenize_corpus(
        _shards(tmp_path, 6), tmp_path / "out", format="text", device="cpu",
        in_process=True, progress=False, log=lambda m: None, num_threads=1,
    )  # fmt: skip
    assert len(run.written) == 6 and len(slow_build) == 1
    assert reads and min(reads) < slow_build[0], "the shards were read after the build"
    assert run.startup["tokenizers"] >= BUILD_S


def test_a_shard_alone_is_read_while_the_tokenizer_builds(tmp_path, monkeypatch, slow_build):
    reads = _reads(monkeypatch, shard, "read_shard")
    run = C.tokenize_corpus(
        _shards(tmp_path, 2), tmp_path / "out", format="text", device="cpu",
        in_process=True, progress=False, log=lambda m: None, num_threads=1, task_bytes=0,
    )  # fmt: skip
    assert len(run.written) == 2 and len(slow_build) == 1
    assert reads and min(reads) < slow_build[0], "the shard was read after the build"


def test_a_build_that_fails_fails_every_shard_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(shard, "_TOKENIZERS", {})

    def gpt2(*args, **kwargs):
        raise MemoryError("no room for the tokenizer")

    monkeypatch.setattr(gputok, "gpt2", gpt2)
    with pytest.raises(C.CorpusError, match="no room for the tokenizer"):
        C.tokenize_corpus(
            _shards(tmp_path, 3), tmp_path / "out", format="text", device="cpu",
            in_process=True, progress=False, log=lambda m: None,
        )  # fmt: skip


@pytest.mark.skipif(gputok.cuda_available()[0], reason="needs a machine with no usable GPU")
def test_device_cuda_without_a_gpu_fails_before_any_task(tmp_path):
    with pytest.raises(gputok.CudaUnavailableError, match="device='cuda' is not available"):
        C.tokenize_corpus(
            _shards(tmp_path, 2), tmp_path / "out", format="text", device="cuda",
            in_process=True, progress=False, log=lambda m: None,
        )  # fmt: skip
    assert not list((tmp_path / "out").glob("*.bin"))


@pytest.mark.parametrize("fmt", ["text", "jsonl", "parquet"])
def test_regression_a_run_of_plain_files_does_not_import_pyarrow(tmp_path, fmt):
    """Arrow reads what gputok's own readers leave undecided, never text; importing it for
    the worker's I/O set-up took 140 ms of a run's start (dev VM, 2026-11-28), and opening
    each Parquet file with it held the GIL between 16 readers (2026-11-28, H100 host:
    pyarrow's ParquetFile was as much of a reader's time as decoding)."""
    import subprocess
    import sys

    if fmt == "text":
        (inputs,) = _shards(tmp_path, 2)
    elif fmt == "jsonl":
        inputs = tmp_path / "in"
        inputs.mkdir()
        for k in range(2):
            (inputs / f"s{k}.jsonl").write_text('{"text": "hello world"}\n{"text": "x"}\n')
        inputs = str(inputs)
    else:
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        inputs = tmp_path / "in"
        inputs.mkdir()
        for k in range(2):
            pq.write_table(pa.table({"text": ["hello world", "x"]}), inputs / f"s{k}.parquet")
        inputs = str(inputs)
    code = (
        "import sys; from gputok import corpus as C; "
        f"C.tokenize_corpus([{inputs!r}], {str(tmp_path / 'out')!r}, format={fmt!r}, "
        "device='cpu', in_process=True, progress=False, log=lambda m: None); "
        "print('pyarrow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "False"


@pytest.mark.parametrize(("fmt", "want"), [("text", 8 << 20), ("jsonl", 32 << 20)])
def test_text_files_default_to_smaller_tokenizer_calls(tmp_path, monkeypatch, fmt, want):
    """Text files are cut into calls of at most 8 MB by default, others 32 MB (corpus/_common.py:
    measured on the H200); fails with one default for both, checked."""
    d = tmp_path / "in"
    d.mkdir()
    (d / f"a.{'txt' if fmt == 'text' else 'jsonl'}").write_text(
        "some text\n" if fmt == "text" else '{"text": "some text"}\n'
    )
    seen: list[int] = []
    real = shard.read_shard

    def spy(*args, **kwargs):
        seen.append(kwargs["batch_bytes"])
        return real(*args, **kwargs)

    monkeypatch.setattr(shard, "read_shard", spy)
    C.tokenize_corpus([str(d)], tmp_path / "out", format=fmt, device="cpu", in_process=True,
                      progress=False, log=lambda m: None, task_bytes=0)  # fmt: skip
    assert seen == [want]
