"""perf_analyzer (the `perf_analyzer_configs/pa` wrapper) runs against the session server.

A few seconds of load on `tokenizer` over gRPC: perf_analyzer must exit 0 and write its CSV
with percentile columns, and the server's statistics must show no failed request.
"""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PA = REPO / "perf_analyzer_configs" / "pa"
TEXTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog. " * 20,
    "def f(x):\n    return x ** 2  # squares\n" * 10,
    "日本語のテキストとEnglish mixed, 123456789 digits.",
    "Ünïcödé — “quotes” and emoji 🙂 " * 5,
]


def _fail_count(triton) -> int:
    import tritonclient.http as httpclient

    c = httpclient.InferenceServerClient(triton.http_url)
    stats = c.get_inference_statistics("tokenizer")["model_stats"]
    return sum(int(s["inference_stats"]["fail"]["count"]) for s in stats)


def test_perf_analyzer_tokenizer(triton, tmp_path):
    data = tmp_path / "inputs.json"
    data.write_text(json.dumps({"data": [{"QUERY": [t]} for t in TEXTS]}, ensure_ascii=False))
    out = tmp_path / "tokenizer.csv"
    failed_before = _fail_count(triton)
    cmd = [
        str(PA),
        "-m",
        "tokenizer",
        "-i",
        "grpc",
        "-u",
        triton.grpc_url,
        f"--input-data={data}",
        "--concurrency-range=4",
        "--measurement-interval=2000",  # 1 s windows came back empty on a loaded CI machine
        "--stability-percentage=999",  # 3 windows, no stability check (shared CI machine)
        "--max-trials=3",
        "--percentile=99",
        "-f",
        str(out),
        "--verbose-csv",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if res.returncode == 127:
        pytest.fail(f"perf_analyzer cannot run: {res.stderr}")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert out.is_file(), res.stdout[-2000:]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 1, rows
    assert float(rows[0]["Inferences/Second"]) > 0
    assert int(rows[0]["p99 latency"]) > 0  # microseconds
    assert _fail_count(triton) == failed_before
