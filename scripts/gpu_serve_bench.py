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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ROOT / "perf_analyzer_configs" / "baseline_repository"
MODELS = ("tokenizer", "preprocessing_hf", "preprocessing_tiktoken")
SWEEP_MODELS = "tokenizer,preprocessing_gigatoken,preprocessing_tiktoken"
sys.path.insert(0, str(ROOT / "scripts"))


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


def _sweep_points(spec: str, models: tuple[str, ...]) -> list[tuple]:
    """--sweep "128,4k:1,8,64" -> (size, concurrency, models, window ms) for the grid."""
    sizes, concs = spec.split(":")
    return [(s, int(c), models, 1500) for s in sizes.split(",") for c in concs.split(",")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wheels", required=True)
    ap.add_argument("--pa", type=Path, required=True)
    ap.add_argument("--gputok-site", required=True)
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
    ap.add_argument("--sweep", default="", help="SIZES:CONCURRENCIES grid on one GPU (128,4k:1,8)")
    ap.add_argument("--models", default=SWEEP_MODELS, help="models of the --sweep grid")
    ap.add_argument("--extra-site", default="", help="site folder for the stub (gigatoken)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from gputok._triton_env import (
        ServerOptions,
        TritonServer,
        copy_models,
        free_ports,
        prepare_stub_env,
    )

    stub_bin = prepare_stub_env(
        Path("/tmp/gputok-stub-env"),
        sys.executable,
        extra_site_dirs=[args.gputok_site] + ([args.extra_site] if args.extra_site else []),
        pip_args=["--no-index", "--find-links", args.wheels],
    )
    data = inputs(args.out)
    repo = Path("/tmp/gputok-serve-bench")
    shutil.rmtree(repo, ignore_errors=True)
    copy_models(ROOT / "model_repository", repo, ["tokenizer"])
    gpus = args.gpus.split(",")
    settings = [",".join(gpus[:k]) for k in range(1, len(gpus) + 1)]
    if args.sweep:
        settings = settings[:1]
    results = []
    for k, visible in enumerate(settings):
        os.environ["CUDA_VISIBLE_DEVICES"] = visible
        # (size, concurrency, models, window ms). quick: the scaling point only. Otherwise the
        # first setting (1 GPU) compares ours with both baselines (same server, same run) at
        # 128 tokens c1/c16 and 4K c64, and every setting measures our capacity at 4K tokens
        # (c128, and c256 with more than one GPU) in 4 s windows for the scaling ratio.
        if args.sweep:
            points = _sweep_points(args.sweep, tuple(args.models.split(",")))
        elif args.quick:
            points = [("4k", 128, ("tokenizer",), 2000)]
        else:
            points = [("4k", 128, ("tokenizer",), 4000)]
            if k > 0 or args.scaling:
                points.append(("4k", 256, ("tokenizer",), 4000))
                if args.clients > 1:  # the same load from several client processes
                    points.append(("4k", -128, ("tokenizer",), 4000))
            else:
                points = [
                    ("128", 1, MODELS, 2000),
                    ("128", 16, MODELS, 2000),
                    ("4k", 64, MODELS, 2000),
                    *points,
                ]
        baselines = any(m != "tokenizer" for _, _, models, _ in points for m in models)
        http, grpc, metrics = free_ports(3)
        server = TritonServer(
            ServerOptions(
                model_repository=repo,
                http_port=http,
                grpc_port=grpc,
                metrics_port=metrics,
                extra_args=[
                    f"--model-repository={BASELINES}",
                    "--exit-on-error=false",
                    "--strict-readiness=false",
                ]
                if baselines
                else [],
            ),
            stub_env=stub_bin.parent,
            need=("numpy", "gputok"),
            log_path=args.out / f"server_{visible.replace(',', '')}.log",
        )
        server.start()
        try:
            server.wait_ready(300)
            for size, point_conc, models, window in points:
                # a negative concurrency marks the multi-client point: args.clients processes
                # at |concurrency| each
                conc, clients = abs(point_conc), (args.clients if point_conc < 0 else 1)
                for model in models:
                    t0 = time.time()
                    r = perf(
                        args.pa, server.grpc_url, model, data[size], conc,
                        args.out / f"{model}_{size}_c{conc}x{clients}_{len(visible.split(','))}gpu.csv",
                        window, clients,
                    )  # fmt: skip
                    r.update(model=model, size=size, concurrency=conc * clients, gpus=visible)
                    r["wall_s"] = round(time.time() - t0, 1)
                    results.append(r)
                    print(json.dumps(r), flush=True)
        finally:
            server.stop()
    (args.out / "serve_results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
