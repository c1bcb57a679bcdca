#!/usr/bin/env python3
"""Time to first text of `ensemble_stream` against the latency of `ensemble` with max_tokens=1.

Both are measured by perf_analyzer over gRPC at concurrency 1 on the same prompts of 128
tokens (cut from the held corpus, each checked to tokenize to exactly 128 ids), and both from
perf_analyzer's own per-request timestamps (`--profile-export-file`): for `ensemble`, the one
response's time; for `ensemble_stream` (`--streaming`, max_tokens as given), the first
response's time. The target: stream TTFT <= 1.1x the one-shot latency.

    .venv/bin/python bench/bench_stream_ttft.py --out bench/results/stream_ttft.json
    .venv/bin/python bench/bench_stream_ttft.py --tiny      # 2-layer gpt2, for a quick CPU check
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PA = REPO / "perf_analyzer_configs" / "pa"


def source_docs(source: str):
    """Documents to cut prompts from: the held corpus (`corpus`), or the Python standard
    library's sources (`stdlib`: the GPU machine has no corpus and no network)."""
    if source == "stdlib":
        for f in sorted(Path(json.__file__).parent.parent.glob("*.py")):
            yield f.read_text(errors="replace").replace("<|endoftext|>", "")
        return
    sys.path.insert(0, str(REPO / "bench"))
    import corpus

    yield from corpus.load_corpus("ci")


def prompts_of(n_tokens: int, count: int, source: str = "corpus") -> list[str]:
    """`count` strings of `source` that tokenize to exactly `n_tokens` ids."""
    import gputok

    tok = gputok.gpt2(device="cpu")
    out = []
    for doc in source_docs(source):
        ids = tok.encode_ordinary(doc)
        for cut in range(n_tokens, n_tokens - 8, -1):
            if len(ids) < cut:
                break
            s = tok.decode(ids[:cut])
            if len(tok.encode_ordinary(s)) == n_tokens and "\ufffd" not in s:
                out.append(s)
                break
        if len(out) == count:
            return out
    raise SystemExit(f"{source} gave only {len(out)} prompts of {n_tokens} tokens")


def run_pa(url: str, model: str, data: Path, export: Path, requests: int, stream: bool) -> str:
    cmd = [
        str(PA),
        "-m",
        model,
        "-i",
        "grpc",
        "-u",
        url,
        f"--input-data={data}",
        "--concurrency-range=1",
        "--measurement-mode=count_windows",
        f"--measurement-request-count={requests}",
        "--max-trials=3",
        "--stability-percentage=999",
        f"--profile-export-file={export}",
    ]
    if stream:
        cmd.append("--streaming")
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"perf_analyzer failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return " ".join(cmd)


def first_response_ms(export: Path) -> list[float]:
    """Per request: first response time minus send time, in ms, from a profile export."""
    doc = json.loads(export.read_text())
    out = []
    for exp in doc.get("experiments", []):
        for r in exp.get("requests", []):
            ts = r.get("response_timestamps") or []
            if ts:
                out.append((min(ts) - r["timestamp"]) / 1e6)
    if not out:
        raise SystemExit(f"no responses in {export}")
    return out


def summary(ms: list[float]) -> dict:
    q = statistics.quantiles(ms, n=100) if len(ms) > 1 else [ms[0]] * 99
    return {
        "n": len(ms),
        "mean_ms": statistics.fmean(ms),
        "p50_ms": statistics.median(ms),
        "p99_ms": q[98],
    }


def serve(args, workdir: Path):
    """tritonserver on a copy of the repository, the tokenizer batched as gputok-serve serves it
    by default; unbatched with --isolate (gputok-serve --isolate-requests)."""
    from gputok.serve.triton import (
        ServerOptions,
        TritonServer,
        copy_models,
        free_ports,
        set_config_parameter,
    )

    sys.path.insert(0, str(REPO / "scripts"))
    from serve_plan import drop_dynamic_batching

    dst = copy_models(args.model_repository, workdir / "repo")
    if args.tiny:
        for m in ("gpt2", "gpt2_stream"):
            set_config_parameter(dst / m / "config.pbtxt", "model_config", "tiny")
    if args.isolate:
        config = dst / "tokenizer" / "config.pbtxt"
        config.write_text(drop_dynamic_batching(config.read_text()))
    http, grpc, metrics = free_ports(3)
    server = TritonServer(
        ServerOptions(model_repository=dst, http_port=http, grpc_port=grpc, metrics_port=metrics),
        stub_env=args.stub_env,
        need=("numpy", "gputok", "torch", "transformers"),
        log_path=workdir / "tritonserver.log",
    )
    server.start()
    server.wait_ready(timeout=600)
    return server


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-repository", type=Path, default=REPO / "model_repository")
    ap.add_argument("--tiny", action="store_true", help="2-layer gpt2 (a quick CPU check)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--stream-max-tokens", type=int, default=16)
    ap.add_argument("--requests", type=int, default=100, help="per measurement window")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    ap.add_argument("--keep", type=Path, default=None, help="copy perf_analyzer's exports here")
    ap.add_argument("--prompt-source", choices=("corpus", "stdlib"), default="corpus")
    ap.add_argument("--stub-env", type=Path, default=None, help="the stub's environment")
    ap.add_argument(
        "--isolate",
        action="store_true",
        help="serve the tokenizer without its dynamic batcher (gputok-serve --isolate-requests)",
    )
    args = ap.parse_args()

    prompts = prompts_of(args.prompt_tokens, 16, args.prompt_source)
    with tempfile.TemporaryDirectory(prefix="ttft-") as tmp:
        work = Path(tmp)
        one = work / "one.json"
        one.write_text(
            json.dumps({"data": [{"text_input": [s], "max_tokens": [1]} for s in prompts]})
        )
        many = work / "stream.json"
        many.write_text(
            json.dumps(
                {
                    "data": [
                        {"text_input": [s], "max_tokens": [args.stream_max_tokens]} for s in prompts
                    ]
                }
            )
        )
        server = serve(args, work)
        try:
            url = server.grpc_url
            # warm both paths (first calls pay for imports and allocations)
            run_pa(url, "ensemble", one, work / "w1.json", 20, False)
            run_pa(url, "ensemble_stream", many, work / "w2.json", 20, True)
            cmd_one = run_pa(url, "ensemble", one, work / "e1.json", args.requests, False)
            cmd_stream = run_pa(url, "ensemble_stream", many, work / "e2.json", args.requests, True)
            base = summary(first_response_ms(work / "e1.json"))
            ttft = summary(first_response_ms(work / "e2.json"))
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for name in ("e1.json", "e2.json", "tritonserver.log"):
                    shutil.copy2(work / name, args.keep / name)
        finally:
            server.stop()
    result = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "prompt_tokens": args.prompt_tokens,
        "gpt2": "tiny" if args.tiny else "gpt2 (124M)",
        "tokenizer_batching": "isolated (no dynamic batcher)" if args.isolate else "batched",
        "prompt_source": args.prompt_source,
        "ensemble_max_tokens_1": base,
        "ensemble_stream_ttft": ttft,
        "stream_max_tokens": args.stream_max_tokens,
        "ratio_p50": ttft["p50_ms"] / base["p50_ms"],
        "ratio_mean": ttft["mean_ms"] / base["mean_ms"],
        "commands": [cmd_one, cmd_stream],
    }
    print(
        f"ensemble max_tokens=1: p50 {base['p50_ms']:.2f} ms, mean {base['mean_ms']:.2f} ms | "
        f"ensemble_stream TTFT: p50 {ttft['p50_ms']:.2f} ms, mean {ttft['mean_ms']:.2f} ms | "
        f"ratio p50 {result['ratio_p50']:.3f}, mean {result['ratio_mean']:.3f} (target <= 1.1)"
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
