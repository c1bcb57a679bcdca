"""Serving benchmark on a GPU machine: our tokenizer vs the TRT-LLM-style baselines, and 1 vs 2
GPUs, with perf_analyzer, in one call.

The GPU image has no tritonclient and numpy 2, so everything travels (docs/serving.md's
recipe): the slim nvidia-pytriton server, a numpy 1.26.4 wheel for the stub environment and a
folder with perf_analyzer, libb64.so.0d and libcudart.so.12. Inputs are cut from the Python
standard library's sources (no corpus needs to travel) and sized with tiktoken.

For each GPU setting (CUDA_VISIBLE_DEVICES: 1 GPU, then 2, ...), one server serves `tokenizer`
(KIND_AUTO: config.pbtxt's count of instances per visible GPU). On the first setting the
baselines `preprocessing_hf` and `preprocessing_tiktoken` (same max_batch_size, delay and
instance count) are served beside it and perf_analyzer (gRPC) measures all three at 128 tokens
(concurrency 1 and 16) and 4K tokens (concurrency 64); every setting measures our capacity at
4K tokens (c128; c256 too from 2 GPUs, and with --clients N also N perf_analyzer processes at
c128 each, their throughput summed, in case one client cannot load N GPUs) in 4 s windows, the
1 -> N GPU scaling figure. With --scaling only those capacity points run, for every GPU count
(no baselines). With --sweep SIZES:CONCURRENCIES (e.g. 128,4k:1,8,32,64,128) only that grid
runs, on one GPU, for --models (default: ours, the gigatoken baseline and tiktoken's; the
gigatoken baseline's wheels come from --extra-site). Writes serve_results.json and the
perf_analyzer CSVs to --out.

    python3 scripts/gpu_serve_bench.py --out $OUT --wheels DIR --pa DIR --gputok-site DIR
    python3 scripts/gpu_serve_bench.py ... --gpus 0,1 --scaling --clients 2
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ROOT / "perf_analyzer_configs" / "baseline_repository"
MODELS = ("tokenizer", "preprocessing_hf", "preprocessing_tiktoken")
SWEEP_MODELS = "tokenizer,preprocessing_gigatoken,preprocessing_tiktoken"
sys.path.insert(0, str(ROOT / "scripts"))
T0 = time.time()


def inputs(out: Path) -> dict[str, Path]:
    from gpu_serve_check import stdlib_token_ids

    enc, ids = stdlib_token_ids()
    files = {}
    for name, n in (("128", 128), ("4k", 4096)):
        rows = [enc.decode(ids[i : i + n]) for i in range(0, 64 * n, n)]
        path = out / f"in_{name}.json"
        path.write_text(json.dumps({"data": [{"QUERY": [r]} for r in rows]}))
        files[name] = path
    return files


def _pa_command(pa: Path, url, model, data, conc, csv_path: Path, interval_ms: int) -> list[str]:
    return [
        str(pa / "perf_analyzer"), "-m", model, "-i", "grpc", "-u", url,
        f"--input-data={data}", f"--concurrency-range={conc}", "--percentile=99",
        f"--measurement-interval={interval_ms}", "--stability-percentage=999", "--max-trials=3",
        "-f", str(csv_path), "--verbose-csv",
    ]  # fmt: skip


def perf(
    pa: Path,
    url: str,
    model: str,
    data: Path,
    conc: int,
    csv_path: Path,
    interval_ms: int = 2000,
    clients: int = 1,
) -> dict:
    """One perf_analyzer point. With clients > 1, that many perf_analyzer processes run at the
    same time, each at concurrency `conc`: throughput is their sum, p50/p99 the worst client's
    (one client process may not generate a 2-GPU server's load: the 1 -> 2 GPU scaling run)."""
    env = dict(os.environ, LD_LIBRARY_PATH=f"{pa}:{os.environ.get('LD_LIBRARY_PATH', '')}")
    paths = [
        csv_path if k == 0 else csv_path.with_suffix(f".client{k}.csv") for k in range(clients)
    ]
    procs = [
        subprocess.Popen(
            _pa_command(pa, url, model, data, conc, path, interval_ms),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for path in paths
    ]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    bad = [o for p, o in zip(procs, outs, strict=True) if p.returncode != 0]
    if bad:
        return {"error": bad[0][-600:]}
    rows = [next(csv.DictReader(path.open())) for path in paths]
    out = {
        "infer_per_s": sum(float(r["Inferences/Second"]) for r in rows),
        "p50_ms": max(float(r["p50 latency"]) for r in rows) / 1e3,
        "p99_ms": max(float(r["p99 latency"]) for r in rows) / 1e3,
    }
    if clients > 1:
        out["clients"] = clients
        out["per_client_infer_per_s"] = [float(r["Inferences/Second"]) for r in rows]
    return out


def _legacy_points(args, k: int) -> list[tuple]:
    """(size, concurrency, models, window ms) of the 2026-11-22 modes for GPU setting k.

    quick: the scaling point only. Otherwise the first setting (1 GPU) compares ours with both
    baselines (same server, same run) at 128 tokens c1/c16 and 4K c64, and every setting
    measures our capacity at 4K tokens (c128, and c256 with more than one GPU) in 4 s windows
    for the scaling ratio. A negative concurrency marks the multi-client point."""
    if args.quick:
        return [("4k", 128, ("tokenizer",), 2000)]
    points = [("4k", 128, ("tokenizer",), 4000)]
    if k > 0 or args.scaling:
        points.append(("4k", 256, ("tokenizer",), 4000))
        if args.clients > 1:  # the same load from several client processes
            points.append(("4k", -128, ("tokenizer",), 4000))
        return points
    return [
        ("128", 1, MODELS, 2000),
        ("128", 16, MODELS, 2000),
        ("4k", 64, MODELS, 2000),
        *points,
    ]


def _server(args, stub_env: Path, repos: list[Path], log: Path):
    from gputok.serve.triton import ServerOptions, TritonServer, free_ports

    http, grpc, metrics = free_ports(3)
    extra = [f"--model-repository={r}" for r in repos[1:]]
    if extra:  # a baseline that fails to load must not hide ours
        extra += ["--exit-on-error=false", "--strict-readiness=false"]
    return TritonServer(
        ServerOptions(
            model_repository=repos[0],
            http_port=http,
            grpc_port=grpc,
            metrics_port=metrics,
            extra_args=extra,
        ),
        stub_env=stub_env,
        need=("numpy", "gputok"),
        log_path=log,
    )


def warm_up(http_url: str, models: tuple[str, ...], data: dict, n: int = 32) -> None:
    """`n` requests per model and size, 16 at a time (so that every instance gets some), before
    measuring: a cold first request (gigatoken's thread pool, gputok's GPU pool) took longer
    than a whole window on the CPU machine, and perf_analyzer then had no valid request."""
    from concurrent.futures import ThreadPoolExecutor

    from gpu_serve_check import post

    def one(args):
        model, text = args
        body = {"inputs": [{"name": "QUERY", "shape": [1, 1], "datatype": "BYTES", "data": [text]}]}
        return post(f"http://{http_url}/v2/models/{model}/infer", body)[0]

    jobs = [
        (model, row["QUERY"][0])
        for model in models
        for path in data.values()
        for row in json.loads(path.read_text())["data"][:n]
    ]
    with ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(one, jobs))
    if any(c != 200 for c in codes):
        print(f"# warm-up: HTTP codes {sorted(set(codes))}", flush=True)


def _record(args, r: dict, results: list) -> None:
    """Keep a point: appended to serve_results.jsonl and printed as a table row at once, so a
    step killed by its time limit still leaves every point measured before it."""
    results.append(r)
    with (args.out / "serve_results.jsonl").open("a") as f:
        f.write(json.dumps(r) + "\n")
    where = r.get("setting", r.get("gpus"))
    if "error" in r:
        print(f"| {where} | {r['size']} | {r['concurrency']} | {r['model']} | error |", flush=True)
        return
    print(
        f"| {where} | {r['size']} | {r['concurrency']} | {r['model']} | "
        f"{r['infer_per_s']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |",
        flush=True,
    )


def run_legacy(args, stub_env: Path, data: dict, results: list) -> None:
    """The 2026-11-22 modes: ours alone per GPU count (scaling), or the 1-GPU comparison."""
    from gputok.serve.triton import copy_models

    repo = Path("/tmp/gputok-serve-bench")
    shutil.rmtree(repo, ignore_errors=True)
    copy_models(ROOT / "model_repository", repo, ["tokenizer"])
    gpus = args.gpus.split(",")
    for k, visible in enumerate(",".join(gpus[:i]) for i in range(1, len(gpus) + 1)):
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
        points = _legacy_points(args, k)
        baselines = any(m != "tokenizer" for _, _, models, _ in points for m in models)
        repos = [repo, BASELINES] if baselines else [repo]
        server = _server(args, stub_env, repos, args.raw / f"server_{visible.replace(',', '')}.log")
        server.start()
        try:
            server.wait_ready(300)
            for size, point_conc, models, window in points:
                conc, clients = abs(point_conc), (args.clients if point_conc < 0 else 1)
                for model in models:
                    t0 = time.time()
                    r = perf(
                        args.pa, server.grpc_url, model, data[size], conc,
                        args.raw / f"{model}_{size}_c{conc}x{clients}_{len(visible.split(','))}gpu.csv",
                        window, clients,
                    )  # fmt: skip
                    r.update(model=model, size=size, concurrency=conc * clients, gpus=visible)
                    r["wall_s"] = round(time.time() - t0, 1)
                    _record(args, r, results)
        finally:
            server.stop()


def run_plan(args, stub_env: Path, data: dict, results: list) -> None:
    """Each setting of --plan: one server with ours and the baselines, edited alike; every
    (size, concurrency) measured for each model in turn. --budget-s (counted from this
    process's start) stops between points."""
    from serve_plan import build_repository, parse_plan

    models = tuple(args.models.split(","))
    baselines = tuple(m for m in models if m != "tokenizer")
    os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus.split(",")[0]
    for setting in parse_plan(args.plan):
        repo = build_repository(Path("/tmp/gputok-serve-plan") / setting.label, setting, baselines)
        server = _server(args, stub_env, [repo], args.raw / f"server_{setting.label}.log")
        t0 = time.time()
        server.start()
        try:
            server.wait_ready(300)
            print(f"# {setting.label}: ready in {time.time() - t0:.1f} s", flush=True)
            warm_up(server.http_url, models, {k: data[k] for k in setting.sizes})
            for size in setting.sizes:
                for conc in setting.concurrencies:
                    for model in models:
                        if args.budget_s and time.time() - T0 > args.budget_s:
                            print("# --budget-s spent: stopping", flush=True)
                            return
                        csv_path = args.raw / f"{setting.label}_{model}_{size}_c{conc}.csv"
                        r = perf(
                            args.pa, server.grpc_url, model, data[size], conc, csv_path,
                            args.window_ms,
                        )  # fmt: skip
                        r.update(model=model, size=size, concurrency=conc, setting=setting.label)
                        r.update(mode=setting.mode, device=setting.device)
                        r.update(instances=setting.instances or "config")
                        _record(args, r, results)
        finally:
            server.stop()


def table(results: list) -> str:
    """Markdown: ours against each baseline per (setting, size, concurrency)."""
    key = lambda r: (r.get("setting", r.get("gpus")), r["size"], r["concurrency"])  # noqa: E731
    groups: dict = {}
    for r in results:
        groups.setdefault(key(r), {})[r["model"]] = r
    lines = [
        "| setting | tokens | conc | model | infer/s | p99 ms | ours / model | ours p99 / model p99 |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for (setting, size, conc), by_model in groups.items():
        ours = by_model.get("tokenizer", {})
        for model, r in by_model.items():
            if "error" in r:
                lines.append(f"| {setting} | {size} | {conc} | {model} | error | | | |")
                continue
            ratio = p99 = ""
            if model != "tokenizer" and "infer_per_s" in ours:
                ratio = f"{ours['infer_per_s'] / r['infer_per_s']:.2f}x"
                p99 = f"{ours['p99_ms'] / r['p99_ms']:.2f}"
            lines.append(
                f"| {setting} | {size} | {conc} | {model} | {r['infer_per_s']:,.0f} | "
                f"{r['p99_ms']:.2f} | {ratio} | {p99} |"
            )
    return "\n".join(lines)


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wheels", default="", help="numpy 1.26.4 wheel folder (offline stub env)")
    ap.add_argument("--pa", type=Path, required=True, help="folder with perf_analyzer + libs")
    ap.add_argument("--gputok-site", default="", help="site folder of gputok for the stub")
    ap.add_argument("--stub-env", type=Path, default=None, help="use this stub environment")
    ap.add_argument("--gpus", default="0,1")
    ap.add_argument("--quick", action="store_true", help="only our tokenizer at 4K tokens, c128")
    ap.add_argument(
        "--scaling",
        action="store_true",
        help="only the capacity points of our tokenizer (no baselines): 4K tokens at c128 and "
        "c256 for every GPU count, plus the --clients point",
    )
    ap.add_argument(
        "--clients",
        type=int,
        default=1,
        help="perf_analyzer processes per capacity point with more than one GPU (each at the "
        "point's concurrency; throughput summed)",
    )
    ap.add_argument(
        "--sweep", default="", help="SIZES:CONCURRENCIES grid (= --plan batch:auto:0:GRID)"
    )
    ap.add_argument(
        "--plan", default="", help="MODE:DEVICE:INSTANCES:SIZES:CONCS;... (serve_plan.py)"
    )
    ap.add_argument("--models", default=SWEEP_MODELS, help="models of the --plan / --sweep grid")
    ap.add_argument("--window-ms", type=int, default=1000, help="perf_analyzer window (--plan)")
    ap.add_argument("--budget-s", type=float, default=0, help="stop the plan after this long")
    ap.add_argument("--extra-site", default="", help="site folder for the stub (gigatoken)")
    args = ap.parse_args(argv)
    if args.sweep:
        args.plan = f"batch:auto:0:{args.sweep}"
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from gputok.serve.triton import choose_stub_bin, prepare_stub_env

    if args.stub_env is not None or not args.wheels:
        stub_env = choose_stub_bin(args.stub_env).parent
    else:
        sites = [s for s in (args.gputok_site, args.extra_site) if s]
        stub_env = prepare_stub_env(
            Path("/tmp/gputok-stub-env"),
            sys.executable,
            extra_site_dirs=sites,
            pip_args=["--no-index", "--find-links", args.wheels],
        ).parent
    args.raw = Path(tempfile.mkdtemp(prefix="gputok-serve-raw-"))
    data = inputs(args.raw)
    results: list = []
    print("| setting | tokens | conc | model | infer/s | p50 ms | p99 ms |", flush=True)
    try:
        (run_plan if args.plan else run_legacy)(args, stub_env, data, results)
    finally:
        (args.out / "serve_results.json").write_text(json.dumps(results, indent=1))
        # at most 8 files come back from the GPU machine: the CSVs, logs and inputs in one
        with tarfile.open(args.out / f"raw-{int(T0)}.tar.gz", "w:gz") as tar:
            tar.add(args.raw, arcname="raw")
        shutil.rmtree(args.raw, ignore_errors=True)
        print(table(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
