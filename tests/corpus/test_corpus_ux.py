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
def test_docs_python_example_runs_as_written(tmp_path):
    _write_jsonl(tmp_path / "data")
    (tmp_path / "example.py").write_text(_block("## Python API", "python"))
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


def test_wrong_field_is_refused_before_the_cluster_starts(tmp_path):
    _write_jsonl(tmp_path / "data", field="body")
    t = time.perf_counter()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputok",
            "corpus",
            str(tmp_path / "data"),
            "-o",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "part0.jsonl:1: no field 'text' (fields: 'body')" in r.stderr, r.stderr
    assert "dashboard" not in r.stdout and "tokenizing" not in r.stdout, r.stdout
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert time.perf_counter() - t < 30


def test_interrupt_prints_one_line_with_how_to_resume(tmp_path):
    """SIGINT to the whole process group (what Ctrl-C sends) mid-run: exit 130 and one line
    naming the shards done and the resume, instead of Dask's tracebacks."""
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
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130, err[-3000:]
    assert re.search(
        r"interrupted; \d+ of 12 shards done in .*; run the same command to resume", err
    )
    assert "Traceback" not in err, err[-3000:]
