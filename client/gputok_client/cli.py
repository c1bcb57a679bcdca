"""`gputok-client`: tokenize, detokenize, generate and health against a gputok Triton server.

gputok-client health
gputok-client tokenize "hello world"                 # 31373 995
gputok-client tokenize --file big.txt -o ids.npy     # concurrent requests, progress bar
cat f.txt | gputok-client --protocol grpc tokenize -  # stdin
gputok-client detokenize 31373 995                   # hello world
gputok-client detokenize --file ids.npy
gputok-client generate "Once upon a time" --max-tokens 32
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from .client import ClientError, GputokClient


def _read_input(args) -> bytes:
    if args.file is not None:
        return Path(args.file).read_bytes()
    if args.text in (None, "-"):
        return sys.stdin.buffer.read()
    return args.text.encode("utf-8")


def _save_atomically(path: Path, arr: np.ndarray) -> None:
    """Write to a temporary file and rename: a failed run never leaves output that looks complete."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".partial", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, arr)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_tokenize(c: GputokClient, args) -> int:
    data = _read_input(args)
    if args.lines:
        rows = data.splitlines()
        out = []
        for i in range(0, len(rows), args.rows_per_request):
            out += c.tokenize(rows[i : i + args.rows_per_request])
        if args.output:
            offsets = np.zeros(len(out) + 1, np.int64)
            offsets[1:] = np.cumsum([len(r) for r in out])
            flat = np.concatenate(out) if out else np.zeros(0, np.int32)
            _save_atomically(Path(args.output), flat.astype(np.int32))
            _save_atomically(Path(args.output).with_suffix(".offsets.npy"), offsets)
        else:
            for r in out:
                print(" ".join(map(str, r.tolist())))
        return 0
    bar = None
    if not args.no_progress and len(data) > args.chunk_bytes:
        from tqdm import tqdm

        bar = tqdm(total=len(data), unit="B", unit_scale=True, desc="tokenize", file=sys.stderr)
    try:
        ids = c.tokenize_large(
            data,
            chunk_bytes=args.chunk_bytes,
            rows_per_request=args.rows_per_request,
            concurrency=args.concurrency,
            progress=bar.update if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()
    if args.output:
        _save_atomically(Path(args.output), ids)
        print(f"{len(ids)} ids from {len(data)} bytes -> {args.output}", file=sys.stderr)
    else:
        print(" ".join(map(str, ids.tolist())))
    return 0


def cmd_detokenize(c: GputokClient, args) -> int:
    if args.file:
        if args.file.endswith(".npy"):
            ids = np.load(args.file).reshape(-1).tolist()
        else:
            ids = [int(x) for x in Path(args.file).read_text().split()]
    elif args.ids:
        ids = [int(x) for x in args.ids]
    else:
        ids = [int(x) for x in sys.stdin.read().split()]
    sys.stdout.write(c.detokenize([ids])[0])
    if sys.stdout.isatty():
        sys.stdout.write("\n")
    return 0


def cmd_generate(c: GputokClient, args) -> int:
    prompts = list(args.prompt)
    if args.file:
        prompts += Path(args.file).read_text(encoding="utf-8").splitlines()
    if not prompts:
        prompts = sys.stdin.read().splitlines()
    for p, out in zip(prompts, c.generate(prompts, max_tokens=args.max_tokens), strict=True):
        print(
            json.dumps({"prompt": p, "text_output": out}, ensure_ascii=False)
            if args.json
            else p + out
        )
    return 0


def cmd_health(c: GputokClient, args) -> int:
    h = c.health()
    print(json.dumps(h, indent=2))
    return 0 if h.get("ready") and all(h.get("models", {}).values()) else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gputok-client", description="Client for gputok's Triton models."
    )
    p.add_argument(
        "--url", default=None, help="host:port (default 127.0.0.1:8000 http, :8001 grpc)"
    )
    p.add_argument("--protocol", choices=("http", "grpc"), default="http")
    p.add_argument(
        "--api-key", default=os.environ.get("GPUTOK_API_KEY"), help="sent as header gputok-key"
    )
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    p.add_argument("--retries", type=int, default=3, help="retries when the server is unreachable")
    sub = p.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("tokenize", help="text, --file or stdin (-) -> ids")
    t.add_argument("text", nargs="?", default=None)
    t.add_argument("--file", "-f", default=None)
    t.add_argument(
        "--output", "-o", default=None, help="write int32 ids to this .npy instead of printing"
    )
    t.add_argument(
        "--lines", action="store_true", help="each line is its own text; one row of ids per line"
    )
    t.add_argument(
        "--chunk-bytes", type=int, default=256 << 10, help="bytes per piece of a large input"
    )
    t.add_argument("--rows-per-request", type=int, default=4)
    t.add_argument("--concurrency", type=int, default=8)
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(fn=cmd_tokenize)

    d = sub.add_parser("detokenize", help="ids (arguments, --file .npy/.txt or stdin) -> text")
    d.add_argument("ids", nargs="*")
    d.add_argument("--file", "-f", default=None)
    d.set_defaults(fn=cmd_detokenize)

    g = sub.add_parser("generate", help="prompts -> generated text through the ensemble")
    g.add_argument("prompt", nargs="*")
    g.add_argument("--file", "-f", default=None, help="one prompt per line")
    g.add_argument("--max-tokens", type=int, default=16)
    g.add_argument("--json", action="store_true")
    g.set_defaults(fn=cmd_generate)

    h = sub.add_parser("health", help="server and model readiness; exit 0 when all are ready")
    h.set_defaults(fn=cmd_health)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    c = GputokClient(
        args.url,
        protocol=args.protocol,
        api_key=args.api_key,
        timeout_s=args.timeout,
        retries=args.retries,
    )
    try:
        with c:
            return args.fn(c, args)
    except ClientError as e:
        # Output is written only after every request succeeded (and atomically), so say so:
        # a failed run must not be mistaken for a short result.
        wrote = f"; nothing written to {args.output}" if getattr(args, "output", None) else ""
        print(f"gputok-client: error: {e}{wrote}", file=sys.stderr)
        return 3 if e.retryable else 2
    except (OSError, ValueError) as e:
        print(f"gputok-client: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
