"""Shared code of the perf_analyzer scenarios: serve both repositories, run perf_analyzer, merge CSVs.

Every scenario starts one tritonserver (gputok._triton_env.TritonServer, as tests/e2e does) on
127.0.0.1 with free ports, serving two repositories at once (tritonserver takes several
`--model-repository`): a copy of our `tokenizer` and `baseline_repository/` with
`preprocessing_gigatoken`, `preprocessing_hf` and `preprocessing_tiktoken`. It runs perf_analyzer (the `pa` wrapper)
against all four models in the same run, one after another for every setting, and always
stops the server (context manager; SIGTERM, then SIGKILL of its process group).

perf_analyzer writes one CSV per run (`-f`, `--verbose-csv`, p50/p90/p95/p99 columns); we add
the columns `scenario, model, input, tokens, protocol, rc` and merge them into
`results/<scenario>.csv`, which report.py reads.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PA = HERE / "pa"
BASELINES = HERE / "baseline_repository"
RESULTS = HERE / "results"
INPUTS = HERE / "inputs"
MODELS = ("tokenizer", "preprocessing_gigatoken", "preprocessing_tiktoken", "preprocessing_hf")

sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))


def log(msg: str) -> None:
    print(f"[perf] {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--models", default=",".join(MODELS), help="comma list (default: all four)")
    p.add_argument("--window-ms", type=int, default=2000, help="perf_analyzer -p (ms)")
    # perf_analyzer reports a setting only after 3 windows agree within -s percent on
    # throughput and on the --percentile latency (p99 here). On the shared 2-core machine p99
    # of 1-2 s windows varies more than 2x between windows, so even -s 100 failed; the default
    # 999 turns the check off and each point is then the mean of its 3 windows. Use -s 10 and
    # longer windows on a quiet machine.
    p.add_argument("--stability", type=int, default=999, help="perf_analyzer -s (percent)")
    p.add_argument("--max-trials", type=int, default=3, help="perf_analyzer -r")
    p.add_argument("--out", type=Path, default=RESULTS, help="folder for the CSVs")
    p.add_argument("--tag", default="", help="results/<scenario>_<tag>.csv: keep several runs")
    p.add_argument(
        "--model-repository",
        type=Path,
        default=None,
        help="our repository (default: a temporary copy of model_repository/tokenizer alone)",
    )
    p.add_argument("--server-url-http", default=None, help="use a running server (host:port)")
    p.add_argument("--server-url-grpc", default=None, help="use a running server (host:port)")
    return p


@contextlib.contextmanager
def server(args) -> Iterator[dict]:
    """Yield {"http": url, "grpc": url}; start (and always stop) a server unless given URLs."""
    if args.server_url_http or args.server_url_grpc:
        yield {"http": args.server_url_http, "grpc": args.server_url_grpc}
        return
    from gputok._triton_env import ServerOptions, TritonServer, copy_models, free_ports
    from references import gpt2_files

    gpt2_files()  # preprocessing_hf reads <repo>/.cache/gpt2; regenerated offline if missing
    tmp = Path(tempfile.mkdtemp(prefix="gputok-perf-"))
    try:
        repo = args.model_repository
        if repo is None:
            repo = copy_models(REPO / "model_repository", tmp / "repo", ["tokenizer"])
        http, grpc, metrics = free_ports(3)
        # env_report checks numpy/torch/transformers/gputok only; the baselines also need
        # tiktoken and tokenizers, and the stub uses this Python's environment (numpy 1.x).
        import tiktoken  # noqa: F401
        import tokenizers  # noqa: F401

        need = ("numpy", "gputok")
        if (Path(repo) / "gpt2").is_dir():
            need += ("torch", "transformers")
        srv = TritonServer(
            ServerOptions(
                model_repository=Path(repo),
                http_port=http,
                grpc_port=grpc,
                metrics_port=metrics,
                extra_args=[f"--model-repository={BASELINES}"],
            ),
            need=need,
            log_path=tmp / "tritonserver.log",
        )
        log(f"starting tritonserver: {repo} + {BASELINES}")
        srv.start()
        try:
            srv.wait_ready(timeout=300)
            log(f"ready: http {srv.http_url}, grpc {srv.grpc_url}")
            yield {"http": srv.http_url, "grpc": srv.grpc_url}
        finally:
            code = srv.stop()
            log(f"tritonserver stopped (exit code {code})")
            if code not in (0, None):
                log(f"server log: {tmp / 'tritonserver.log'} (kept)")
                tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _file_name(size: str) -> str:
    """`4k` -> tok_4k.json (QUERY); `ens_128` -> ens_128.json (text_input, max_tokens)."""
    return f"{size}.json" if size.startswith("ens_") else f"tok_{size}.json"


def input_file(size: str) -> Path:
    from make_inputs import ensure

    path = INPUTS / _file_name(size)
    if not path.is_file():
        ensure([size], force=True)  # one build writes every tok_ and ens_ file
    return path


def mean_tokens(size: str) -> tuple[float, float]:
    """(mean tokens, mean bytes; 0 when not recorded) of the strings in the input file."""
    m = json.loads((INPUTS / "manifest.json").read_text())["files"][_file_name(size)]
    nbytes = m.get("bytes") or [0]
    return sum(m["tokens"]) / len(m["tokens"]), sum(nbytes) / len(nbytes)


def run_pa(
    args, model: str, size: str, protocol: str, url: str, load: list[str], csv_path: Path
) -> int:
    """One perf_analyzer run; returns its exit code. Its stdout goes to `csv_path`.log."""
    cmd = [
        str(PA),
        "-m",
        model,
        "-i",
        protocol,
        "-u",
        url,
        f"--input-data={input_file(size)}",
        "--percentile=99",
        f"--measurement-interval={args.window_ms}",
        f"--stability-percentage={args.stability}",
        f"--max-trials={args.max_trials}",
        "-f",
        str(csv_path),
        "--verbose-csv",
        *load,
    ]
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    log(f"{model:24s} {size:>5s} {protocol:4s} {' '.join(load)}")
    with open(str(csv_path) + ".log", "w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if rc != 0:
        log(f"  perf_analyzer exit code {rc}; see {csv_path}.log")
    return rc


def warm_up(urls: dict, models: list[str], size: str, n: int = 16) -> None:
    """A few requests per model before measuring: the first perf_analyzer run right after the
    server start failed its request-rate measurement (first-call costs in the stubs)."""
    if not urls.get("http"):
        return
    data = json.loads(input_file(size).read_text())["data"]
    try:
        import numpy as np
        import tritonclient.http as httpclient
    except ImportError:  # the GPU image has no tritonclient: KServe v2 JSON over urllib
        for model in models:
            for i in range(n):
                _infer_json(urls["http"], model, data[i % len(data)])
        return
    client = httpclient.InferenceServerClient(urls["http"])
    for model in models:
        for i in range(n):
            inputs = []
            for name, values in data[i % len(data)].items():  # perf_analyzer's JSON format
                if isinstance(values[0], str):
                    arr = np.array([[v.encode() for v in values]], dtype=object)
                    inp = httpclient.InferInput(name, list(arr.shape), "BYTES")
                else:
                    arr = np.array([values], dtype=np.int32)
                    inp = httpclient.InferInput(name, list(arr.shape), "INT32")
                inp.set_data_from_numpy(arr)
                inputs.append(inp)
            client.infer(model, inputs)
    client.close()


def _infer_json(http_url: str, model: str, row: dict) -> None:
    """One request of perf_analyzer's input-data format (`{name: [values]}`, batch 1) as JSON."""
    import urllib.request

    inputs = [
        {
            "name": name,
            "shape": [1, len(values)],
            "datatype": "BYTES" if isinstance(values[0], str) else "INT32",
            "data": values,
        }
        for name, values in row.items()
    ]
    req = urllib.request.Request(
        f"http://{http_url}/v2/models/{model}/infer",
        data=json.dumps({"inputs": inputs}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=300) as r:  # noqa: S310 (loopback URL we built)
        r.read()


def merge(scenario: str, runs: list[dict], out_dir: Path) -> Path:
    """Merge per-run CSVs into out_dir/<scenario>.csv with our columns first."""
    rows, fields = [], ["scenario", "model", "input", "tokens", "bytes", "protocol", "rc"]
    for r in runs:
        tokens, nbytes = mean_tokens(r["input"])
        base = {
            "scenario": scenario,
            "model": r["model"],
            "input": r["input"],
            "tokens": f"{tokens:.0f}",
            "bytes": f"{nbytes:.0f}",
            "protocol": r["protocol"],
            "rc": r["rc"],
        }
        path = Path(r["csv"])
        if not path.is_file():
            rows.append(base)
            continue
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                for k in row:
                    if k not in fields:
                        fields.append(k)
                rows.append({**base, **row})
    out = out_dir / f"{scenario}.csv"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    log(f"wrote {out} ({len(rows)} rows)")
    return out


def run_matrix(
    scenario: str,
    args,
    settings: list[tuple[str, str, list[str]]],
) -> int:
    """For each (input size, protocol, perf_analyzer load options): every model, same server.

    Returns 0 when every run succeeded, else 1 (the CSV still holds what was measured)."""
    models = [m for m in args.models.split(",") if m]
    if getattr(args, "tag", ""):
        scenario = f"{scenario}_{args.tag}"
    out_dir = Path(args.out)
    raw = out_dir / scenario
    if raw.exists():
        shutil.rmtree(raw)
    for size, _, _ in settings:
        input_file(size)
    runs = []
    with server(args) as urls:
        warm_up(urls, models, settings[0][0])
        for size, protocol, load in settings:
            for model in models:
                tag = "_".join(
                    [model, size, protocol, *(a.lstrip("-").split("=")[-1] for a in load)]
                )
                csv_path = raw / f"{tag.replace(':', '-')}.csv"
                rc = run_pa(args, model, size, protocol, urls[protocol], load, csv_path)
                if rc != 0:  # one retry: a noisy window on the shared machine is not a result
                    rc = run_pa(args, model, size, protocol, urls[protocol], load, csv_path)
                runs.append(
                    {"model": model, "input": size, "protocol": protocol, "rc": rc, "csv": csv_path}
                )
    merge(scenario, runs, out_dir)
    return 0 if all(r["rc"] == 0 for r in runs) else 1
