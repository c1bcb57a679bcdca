"""Serving check on a GPU machine: the same model_repository, KIND_AUTO -> GPU instances.

Starts tritonserver (nvidia-pytriton 0.7.0's binary) with a numpy<2 stub venv built by
gputok._triton_env.prepare_stub_env (the GPU image's Python has numpy 2), then checks through
HTTP/JSON (no tritonclient needed there):
  - the models loaded as GPU instances, gputok on cuda, gpt2 on cuda, INPUT_ID via DLPack;
  - tokenizer == tiktoken on a few thousand lines of the Python stdlib and on odd strings;
  - a bad request fails alone; concurrent requests are batched; the ensemble returns text.
Writes a JSON summary and the server log to --out.

    python3 scripts/gpu_serve_check.py --out $OUT --wheels DIR [--gputok-site DIR]
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def reference():
    import tiktoken

    ranks = {}
    for line in (ROOT / "backend_src/gputok/data/gpt2.tiktoken").read_bytes().splitlines():
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return tiktoken.Encoding(
        "r50k", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256}
    )


def stdlib_token_ids():
    """(reference encoding, ids of the Python standard library's sources): request texts for
    the GPU machine, which has no corpus; any length is cut from these ids."""
    enc = reference()
    text = "".join(
        f.read_text(errors="replace")
        for f in sorted(Path(json.__file__).parent.parent.glob("*.py"))
    ).replace("<|endoftext|>", "")
    return enc, enc.encode_ordinary(text)


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:  # noqa: S310 (loopback)
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def tokenize(base: str, texts: list[str]) -> tuple[int, object]:
    code, out = post(
        f"{base}/v2/models/tokenizer/infer",
        {
            "inputs": [
                {"name": "QUERY", "shape": [len(texts), 1], "datatype": "BYTES", "data": texts}
            ]
        },
    )
    if code != 200:
        return code, out.get("error")
    o = {x["name"]: x for x in out["outputs"]}
    width = o["INPUT_ID"]["shape"][1]
    ids, lens = o["INPUT_ID"]["data"], o["REQUEST_INPUT_LEN"]["data"]
    return 200, [ids[i * width : i * width + lens[i]] for i in range(len(texts))]


def start_server(args: argparse.Namespace, summary: dict):
    """The stub environment, a throwaway copy of model_repository/ and a TritonServer on free
    ports (not started yet); its log goes to `args.out`."""
    from gputok._triton_env import (
        ServerOptions,
        TritonServer,
        copy_models,
        free_ports,
        prepare_stub_env,
    )

    t0 = time.time()
    pip_args = ["--no-index", "--find-links", args.wheels] if args.wheels else None
    extra = [args.gputok_site] if args.gputok_site else []
    stub_bin = prepare_stub_env(
        args.stub_env, sys.executable, extra_site_dirs=extra, pip_args=pip_args
    )
    summary["stub_env_s"] = round(time.time() - t0, 1)
    repo = Path("/tmp/gputok-gpu-repo")
    shutil.rmtree(repo, ignore_errors=True)
    copy_models(ROOT / "model_repository", repo)
    http, grpc, metrics = free_ports(3)
    log = args.out / "tritonserver.log"
    server = TritonServer(
        ServerOptions(model_repository=repo, http_port=http, grpc_port=grpc, metrics_port=metrics),
        stub_env=stub_bin.parent,
        need=("numpy", "gputok", "torch", "transformers"),
        log_path=log,
    )
    summary["stub_report"] = server.report
    return server, log


def check_tokenizer(base: str, enc, summary: dict) -> None:
    """Stdlib sources and pathological lines through the tokenizer model, 8 batches at once,
    against the reference ids."""
    lines = []
    for f in sorted(Path(json.__file__).parent.parent.glob("*.py"))[:200]:
        lines += f.read_text(errors="replace").splitlines(keepends=True)
    lines = [x for x in lines if "<|endoftext|>" not in x][:4000]
    lines += ["a" * 100000, " " * 5000 + "x", "日本語テキスト🎉", "DON'T 's", "\u00a0\u3000 x"]
    want = enc.encode_ordinary_batch(lines)
    assert sum(map(len, want)) > 0
    batches = [lines[i : i + 64] for i in range(0, len(lines), 64)]
    t0 = time.time()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda b: tokenize(base, b), batches))
    summary["tokenize_s"] = round(time.time() - t0, 2)
    got = [r for code, rows in results if code == 200 for r in rows]
    summary["tokenizer_rows"] = len(lines)
    summary["tokenizer_errors"] = [rows for code, rows in results if code != 200][:3]
    summary["tokenizer_mismatches"] = sum(g != w for g, w in zip(got, want, strict=False)) + abs(
        len(got) - len(want)
    )


def check_bad_request(base: str, enc, summary: dict) -> None:
    """A bad request among concurrent good ones fails alone."""
    barrier = threading.Barrier(9)

    def one(t):
        barrier.wait()
        return tokenize(base, [t])

    texts = [f"good request {i}" for i in range(8)] + ["bad <|endoftext|>"]
    with ThreadPoolExecutor(9) as pool:
        out = list(pool.map(one, texts))
    summary["bad_request"] = out[-1]
    summary["good_with_bad_ok"] = all(
        code == 200 and rows[0] == enc.encode_ordinary(t)
        for (code, rows), t in zip(out[:-1], texts[:-1], strict=True)
    )


def check_stats_and_ensemble(base: str, summary: dict) -> None:
    """The tokenizer's batching statistics, then four prompts through the ensemble."""
    with urllib.request.urlopen(f"{base}/v2/models/tokenizer/stats") as r:  # noqa: S310
        s = json.loads(r.read())["model_stats"][0]
    summary["tokenizer_stats"] = {
        "inference_count": s["inference_count"],
        "execution_count": s["execution_count"],
    }
    prompts = ["Hello, my name is", "The GPU is", "", "日本語"]
    t0 = time.time()
    code, out = post(
        f"{base}/v2/models/ensemble/infer",
        {
            "inputs": [
                {"name": "text_input", "shape": [4, 1], "datatype": "BYTES", "data": prompts},
                {"name": "max_tokens", "shape": [4, 1], "datatype": "INT32", "data": [16] * 4},
            ]
        },
    )
    summary["ensemble_s"] = round(time.time() - t0, 2)
    summary["ensemble"] = (code, out.get("outputs", out.get("error")))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--wheels", default=None, help="folder with a numpy 1.26.4 wheel (offline)")
    ap.add_argument("--gputok-site", default=None, help="where gputok was installed (--target)")
    ap.add_argument("--stub-env", type=Path, default=Path("/tmp/gputok-stub-env"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {}
    server, log = start_server(args, summary)
    base = f"http://{server.http_url}"
    server.start()
    try:
        t0 = time.time()
        server.wait_ready(600)
        summary["ready_s"] = round(time.time() - t0, 1)
        text = log.read_text(errors="replace")
        summary["log_lines"] = [
            line[line.find('"') :][:400]
            for line in text.splitlines()
            if "tokenizer:" in line or "gpt2:" in line or "detokenizer:" in line
        ]
        enc = reference()
        check_tokenizer(base, enc, summary)
        check_bad_request(base, enc, summary)
        check_stats_and_ensemble(base, summary)
        summary["ready_after"] = server.is_ready()
    finally:
        summary["stop_code"] = server.stop()
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False))
    print(json.dumps(summary, indent=1, ensure_ascii=False)[:6000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
