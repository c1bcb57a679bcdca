"""`gputok-client`: tokenize, detokenize, generate and health against a gputok Triton server.

gputok-client health
gputok-client tokenize "hello world"                        # 31373 995
gputok-client --url grpc://127.0.0.1:8001 tokenize -f big.txt -o ids.npy
gputok-client tokenize --lines -f docs.txt -o ids.npy       # + ids.offsets.npy (row starts)
cat f.txt | gputok-client tokenize -                         # stdin
gputok-client detokenize 31373 995                           # hello world
gputok-client detokenize --file ids.npy
gputok-client generate "Once upon a time" --max-tokens 32
gputok-client --protocol grpc generate --stream "Once upon a time"   # text as it is made
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from .client import GputokClient
from .errors import EXIT_CODES, INPUT, NOT_READY, OK, ClientError
from .plan import SPECIAL_TOKENS, allowed_specials


def _read_input(args) -> bytes:
    if args.file is not None:
        if args.text is not None:
            raise ClientError(f"give either TEXT or --file, not both (TEXT {args.text[:40]!r})")
        data = Path(args.file).read_bytes()
    elif args.text in (None, "-"):
        data = sys.stdin.buffer.read()
    else:
        data = args.text.encode("utf-8", "surrogateescape")
    if args.errors == "replace":  # Python's decoder: one U+FFFD per maximal invalid subpart
        data = data.decode("utf-8", "replace").encode("utf-8")
    return data


def _save_atomically(path: Path, arr: np.ndarray) -> None:
    """Write to a temporary file and rename: a failed run never leaves output that looks complete.
    The file gets the mode a plain open() would give (0666 less the umask), not mkstemp's 0600."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".partial", dir=path.parent or ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as f:
            np.save(f, arr)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def offsets_path(output: str | Path) -> Path:
    """Where `tokenize --lines -o ids.npy` writes the row offsets: ids.offsets.npy."""
    return Path(output).with_suffix(".offsets.npy")


def cmd_tokenize(c: GputokClient, args) -> int:
    data = _read_input(args)
    rows = data.splitlines() if args.lines else [data]
    bar = None
    if not args.no_progress and len(data) > args.chunk_bytes:
        from tqdm import tqdm

        bar = tqdm(total=len(data), unit="B", unit_scale=True, desc="tokenize", file=sys.stderr)
    try:
        out = c.tokenize_rows(
            rows,
            chunk_bytes=args.chunk_bytes,
            concurrency=args.concurrency,
            allowed_special=allowed_specials(args.allowed_special),
            rows_per_request=args.rows_per_request,
            progress=bar.update if bar is not None else None,
        )
    finally:
        if bar is not None:
            bar.close()
    if not args.output:
        for r in out:
            print(" ".join(map(str, r.tolist())))
        return OK
    flat = np.concatenate(out).astype(np.int32) if out else np.zeros(0, np.int32)
    _save_atomically(Path(args.output), flat)
    msg = f"{len(flat)} ids from {len(data)} bytes -> {args.output}"
    if args.lines:
        offsets = np.zeros(len(out) + 1, np.int64)
        offsets[1:] = np.cumsum([len(r) for r in out])
        _save_atomically(offsets_path(args.output), offsets)
        msg += f" (line i: ids[offsets[i]:offsets[i + 1]], offsets in {offsets_path(args.output)})"
    print(msg, file=sys.stderr)
    return OK


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
    return OK


def cmd_generate(c: GputokClient, args) -> int:
    prompts = list(args.prompt)
    if args.file:
        prompts += Path(args.file).read_text(encoding="utf-8").splitlines()
    if not prompts:
        prompts = sys.stdin.read().splitlines()
    if args.stream:
        return _generate_stream(c, args, prompts)
    for p, out in zip(prompts, c.generate(prompts, max_tokens=args.max_tokens), strict=True):
        print(
            json.dumps({"prompt": p, "text_output": out}, ensure_ascii=False)
            if args.json
            else p + out
        )
    return OK


def _generate_stream(c: GputokClient, args, prompts: list[str]) -> int:
    """Print each prompt, then its completion as the chunks arrive (gRPC streaming)."""
    from .stream import generate_stream

    if c.protocol != "grpc":
        raise ClientError(
            "--stream needs gRPC (decoupled models stream only there): "
            "pass --url grpc://HOST:PORT (gputok-serve prints it) or --protocol grpc"
        )
    key = next(iter(c.headers.values())) if c.headers else None
    for p in prompts:
        chunks = []
        if not args.json:
            sys.stdout.write(p)
        for chunk in generate_stream(c.url, p, args.max_tokens, api_key=key, timeout_s=c.timeout_s):
            chunks.append(chunk)
            if not args.json:
                sys.stdout.write(chunk)
                sys.stdout.flush()
        if args.json:
            print(json.dumps({"prompt": p, "text_output": "".join(chunks)}, ensure_ascii=False))
        else:
            sys.stdout.write("\n")
    return OK


def cmd_health(c: GputokClient, args) -> int:
    try:
        h = c.health()
    except ClientError as e:
        h = {"url": f"{c.protocol}://{c.url}", "live": False, "ready": False, "error": str(e)}
        print(json.dumps(h, indent=2))
        return e.code
    print(json.dumps(h, indent=2))
    return OK if h.get("ready") and all(h.get("models", {}).values()) else NOT_READY


_EPILOG = "exit codes (every subcommand):\n" + "\n".join(
    f"  {k}  {v}" for k, v in EXIT_CODES.items()
)


def _add_tokenize(sub) -> None:
    t = sub.add_parser(
        "tokenize",
        help="text, --file or stdin (-) -> ids",
        description="Tokenize a text, a file or stdin. Large inputs are cut only where the ids "
        "provably do not change, sent as concurrent requests, and stitched back in order.",
    )
    t.add_argument("text", nargs="?", default=None, help="the text; - (or nothing) reads stdin")
    t.add_argument("--file", "-f", default=None, help="read the text from this file")
    t.add_argument(
        "--output",
        "-o",
        default=None,
        help="write int32 ids to this .npy instead of printing them; with --lines also "
        "OUTPUT.offsets.npy (int64, one more than the lines: line i is "
        "ids[offsets[i]:offsets[i+1]])",
    )
    t.add_argument(
        "--lines",
        action="store_true",
        help="each line (split at \\n, \\r\\n or \\r) is its own text: one row of ids per line",
    )
    t.add_argument(
        "--allowed-special",
        default="",
        metavar="all|TOKEN,...",
        help=f"encode these special tokens as their ids ({', '.join(SPECIAL_TOKENS)}); "
        "by default the server refuses text that holds one",
    )
    t.add_argument(
        "--errors",
        choices=("strict", "replace"),
        default="strict",
        help="invalid UTF-8: strict (the server refuses it, the default) or replace (each "
        "invalid sequence becomes U+FFFD here, before sending)",
    )
    t.add_argument(
        "--chunk-bytes",
        type=int,
        default=256 << 10,
        help="bytes per piece of a large text (default 256 KiB; at most the server's "
        "max_bytes_per_request)",
    )
    t.add_argument(
        "--rows-per-request",
        type=int,
        default=None,
        help="rows per request (default: as many as the server's max_batch_size and "
        "max_rows_per_request allow)",
    )
    t.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    t.set_defaults(fn=cmd_tokenize)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gputok-client",
        description="Client for gputok's Triton models.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--url",
        default=None,
        help="http://HOST:PORT or grpc://HOST:PORT (the scheme picks the protocol), as "
        "gputok-serve prints them; HOST:PORT alone uses --protocol. "
        "Default http://127.0.0.1:8000",
    )
    p.add_argument(
        "--protocol",
        choices=("http", "grpc"),
        default=None,
        help="for a --url without scheme (default http; grpc's default port is 8001)",
    )
    p.add_argument(
        "--api-key",
        default=os.environ.get("GPUTOK_API_KEY"),
        help="sent as header gputok-key (default: $GPUTOK_API_KEY)",
    )
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    p.add_argument("--retries", type=int, default=3, help="retries when the server is unreachable")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    _add_tokenize(sub)

    d = sub.add_parser("detokenize", help="ids (arguments, --file .npy/.txt or stdin) -> text")
    d.add_argument("ids", nargs="*", help="token ids (none: read them from stdin)")
    d.add_argument("--file", "-f", default=None, help="ids from a .npy or a whitespace text file")
    d.set_defaults(fn=cmd_detokenize)

    g = sub.add_parser("generate", help="prompts -> generated text through the ensemble")
    g.add_argument("prompt", nargs="*", help="prompts (none: one per line from stdin)")
    g.add_argument("--file", "-f", default=None, help="one prompt per line")
    g.add_argument("--max-tokens", type=int, default=16, help="tokens to generate per prompt")
    g.add_argument("--json", action="store_true", help="one JSON object per prompt")
    g.add_argument(
        "--stream",
        action="store_true",
        help="print the text as it is made (ensemble_stream; needs gRPC: --url grpc://HOST:PORT)",
    )
    g.set_defaults(fn=cmd_generate)

    h = sub.add_parser(
        "health", help="server and model readiness as JSON; exit 0 when all are ready"
    )
    h.set_defaults(fn=cmd_health)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        c = GputokClient(
            args.url,
            protocol=args.protocol,
            api_key=args.api_key,
            timeout_s=args.timeout,
            retries=args.retries,
        )
        with c:
            return args.fn(c, args)
    except ClientError as e:
        # Output is written only after every request succeeded (and atomically), so say so:
        # a failed run must not be mistaken for a short result.
        wrote = f"; nothing written to {args.output}" if getattr(args, "output", None) else ""
        print(f"gputok-client: error: {e}{wrote}", file=sys.stderr)
        return e.code
    except (OSError, ValueError) as e:
        print(f"gputok-client: error: {e}", file=sys.stderr)
        return INPUT
    except KeyboardInterrupt:
        print("gputok-client: interrupted; nothing written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
