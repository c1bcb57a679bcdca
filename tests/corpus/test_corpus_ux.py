"""`gputok corpus` as a user meets it: docs/corpus.md's examples run as written, a wrong
--field is refused before any cluster starts, an interrupt ends with one line saying how to
resume, progress counts MB/s, and the UTF-8 advice works as given."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "corpus.md"
DOCS_TEXT = [f"document {i}: héllo wörld, some text to tokenize." * 20 for i in range(40)]


def _write_jsonl(d: Path, n_files: int = 3, field: str = "text") -> None:
    d.mkdir(parents=True, exist_ok=True)
    for k in range(n_files):
        rows = [json.dumps({field: t}) for t in DOCS_TEXT]
        (d / f"part{k}.jsonl").write_text("\n".join(rows) + "\n")


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _block(heading: str, lang: str) -> str:
    text = DOCS.read_text()
    at = text.index(heading)
    start = text.index(f"```{lang}\n", at) + len(lang) + 4
    return text[start : text.index("```", start)]


@pytest.mark.slow
@pytest.mark.parametrize("cluster", [False, True], ids=["as-written", "on-a-cluster"])
def test_docs_python_example_runs_as_written(tmp_path, cluster):
    """As written (a small input runs in process), and with in_process=False, the one change
    that makes it start the local cluster a large input gets: its worker processes re-import
    the script, which failed with "Nanny failed to start" before the __main__ guard."""
    _write_jsonl(tmp_path / "data")
    example = _block("## Python API", "python")
    if cluster:
        assert example.count("in_process=None,") == 1
        example = example.replace("in_process=None,", "in_process=False,")
    (tmp_path / "example.py").write_text(example)
    r = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert man["complete"] and man["totals"]["documents"] == 3 * len(DOCS_TEXT)
    last = r.stdout.strip().splitlines()[-1]  # print(run.startup, run.in_process, run.tasks)
    assert re.search(rf"\}} {not cluster} \d+$", last), last


@pytest.mark.slow
def test_docs_first_command_runs_as_written(tmp_path):
    _write_jsonl(tmp_path / "data")
    first = _block("## Command line", "bash").splitlines()[0].split("#")[0].strip()
    assert first == "gputok corpus data/*.jsonl -o out/ --field text"
    r = subprocess.run(
        ["bash", "-c", first], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"3/3 shards, [\d.]+/[\d.]+ MB of input, [\d.]+ MB/s, ETA", r.stdout), r.stdout
    assert "done: 3 shards (3 written" in r.stdout


def _docs_inputs(tmp: Path, line: str) -> int:
    """The inputs a docs command line names; returns the documents they hold."""
    if "--format parquet" in line:
        import pyarrow as pa
        import pyarrow.parquet as pq

        (tmp / "data" / "sub").mkdir(parents=True)
        for k in range(2):
            pq.write_table(pa.table({"content": DOCS_TEXT}), tmp / "data" / "sub" / f"p{k}.parquet")
        return 2 * len(DOCS_TEXT)
    (tmp / "books").mkdir()
    for k in range(2):
        (tmp / "books" / f"b{k}.txt").write_text("\n\n\n".join(DOCS_TEXT))
    return 2 * len(DOCS_TEXT)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2])
def test_docs_other_commands_run_as_written(tmp_path, k):
    """The block's 2nd and 3rd lines (a Parquet directory, text files cut at a separator); the
    4th needs a running scheduler at the address it names."""
    line = _block("## Command line", "bash").splitlines()[k].split("   #")[0].strip()
    docs = _docs_inputs(tmp_path, line)
    r = subprocess.run(
        ["bash", "-c", line], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, (line, r.stderr[-3000:])
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert man["complete"] and man["totals"]["documents"] == docs, man["totals"]


@pytest.mark.parametrize(
    "where", [[], ["--cluster", "--workers", "1", "--no-dashboard"]], ids=["in-process", "cluster"]
)
def test_wrong_field_is_refused_before_the_cluster_starts(tmp_path, where):
    """A small run goes in process by default; with --cluster the check must still come
    before the cluster does (it came after it, behind Dask's traceback blob)."""
    _write_jsonl(tmp_path / "data", field="body")
    t = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "gputok", "corpus", str(tmp_path / "data")]
        + ["-o", str(tmp_path / "o"), "--device", "cpu", *where],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "part0.jsonl:1: no field 'text' (fields: 'body')" in r.stderr, r.stderr
    assert "dashboard" not in r.stdout and "tokenizing" not in r.stdout, r.stdout
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert time.perf_counter() - t < 30


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupt_prints_one_line_with_how_to_resume(tmp_path, sig):
    """SIGINT to the whole process group (what Ctrl-C sends), or SIGTERM to the tool alone
    (what `kill` sends; it exited silently), mid-run on a cluster: exit 130 and one line naming
    the shards done and the resume, instead of Dask's tracebacks."""
    d = tmp_path / "data"
    d.mkdir()
    big = [json.dumps({"text": t * 40}) for t in DOCS_TEXT] * 30
    for k in range(12):
        (d / f"part{k:02d}.jsonl").write_text("\n".join(big) + "\n")
    p = subprocess.Popen(
        [sys.executable, "-m", "gputok", "corpus", str(d), "-o", str(tmp_path / "o")]
        + ["--workers", "1", "--no-dashboard", "--device", "cpu"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for line in p.stdout:
            if line.startswith("tokenizing"):
                break
        time.sleep(1.0)
        if sig == "SIGINT":
            os.killpg(p.pid, signal.SIGINT)
        else:
            os.kill(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, (p.returncode, err[-3000:])
    assert re.search(
        r"interrupted; \d+ of 12 shards done in .*; run the same command to resume", err
    ), err[-3000:]
    assert "Traceback" not in err, err[-3000:]


def _utf8_inputs(d: Path, fmt: str) -> None:
    d.mkdir()
    if fmt == "jsonl":  # the line reader's message
        (d / "a.jsonl").write_bytes(b'{"text": "good one"}\n{"text": "bad \xff here"}\n')
    else:  # the document encoder's message
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": pa.array([b"good", b"bad \xff x"])}), d / "a.parquet")


def _advice(err: str) -> list[str]:
    """The flags a message tells the user to add: 'rerun with --a x|y and --b' -> [--a, x, --b]
    (the first of alternatives)."""
    m = re.search(r"rerun with (--.*)$", err, re.M)
    assert m, err
    args = []
    for part in m.group(1).split(" and "):
        args += [w.split("|")[0] for w in part.split()]
    return args


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_utf8_advice_works_as_given(tmp_path, capsys, fmt):
    """'use --utf8-errors replace' led to a second error with the same -o (the manifest holds
    the first run's settings). The advice, followed word for word on the same command, works."""
    from gputok import cli

    _utf8_inputs(tmp_path / "data", fmt)
    cmd = ["corpus", str(tmp_path / "data"), "-o", str(tmp_path / "out")]
    cmd += ["--device", "cpu", "--no-progress", "--no-dashboard"]
    assert cli.main(cmd) == 1
    advice = _advice(capsys.readouterr().err)
    assert "--utf8-errors" in advice, advice
    assert cli.main(cmd + advice) == 0, capsys.readouterr().err
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert man["complete"] and man["totals"]["documents"] == 2


def test_progress_line_has_mb_per_s_and_an_eta(tmp_path, capsys, monkeypatch):
    """The bar counted shards only. Four 1 MB shards, one ending per tick of a fake clock
    (1 s): each line says the MB done of the total, MB/s, and the seconds left at that rate."""
    from types import SimpleNamespace

    from gputok.corpus import tasks

    groups = []
    for k in range(4):
        (tmp_path / f"s{k}").write_bytes(b"x" * 1_000_000)
        groups.append([SimpleNamespace(path=str(tmp_path / f"s{k}"))])
    clock = {"t": 0.0, "ended": 0}
    monkeypatch.setattr(tasks.time, "perf_counter", lambda: clock["t"])

    def wait_for(seconds):
        clock["t"] += 1.0
        clock["ended"] += 1

    tasks._progress(list(range(4)), groups, lambda f: f < clock["ended"], wait_for)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "0/4 shards, 0.0/4.0 MB of input, 0.0 MB/s, ETA -"
    assert lines[1] == "1/4 shards, 1.0/4.0 MB of input, 1.0 MB/s, ETA 3 s"
    assert lines[2] == "2/4 shards, 2.0/4.0 MB of input, 1.0 MB/s, ETA 2 s"
    assert lines[-1] == "4/4 shards, 4.0/4.0 MB of input, 1.0 MB/s, ETA -"
