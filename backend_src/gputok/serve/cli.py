"""`gputok-serve`: run Triton Inference Server on our model repository, supervised.

Runs the tritonserver binary that PyPI's nvidia-pytriton==0.7.0 bundles (server 2.51), not
PyTriton's bind API, with the Python-backend stub that matches this Python and an environment
with numpy<2 (see gputok.serve.triton). Binds to 127.0.0.1 unless told otherwise, model control
is off, waits until the server is ready, prints the URLs, restarts it when it crashes
(gputok.serve.supervisor) and stops it cleanly on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from gputok.serve.isolate import isolated_repository, isolation_note
from gputok.serve.supervisor import RestartPolicy, Supervisor
from gputok.serve.triton import ServeError, ServerOptions, TritonServer, prepare_stub_env

KEY_ENV = "GPUTOK_API_KEY"
DEFAULT_RESTRICTED = (
    "inference,model-config,model-repository,metadata,statistics,shared-memory,trace,logging"
)


def default_model_repository() -> Path:
    """The repo's model_repository: GPUTOK_MODEL_REPOSITORY, else ../model_repository next to
    backend_src (editable install or a checkout), else ./model_repository."""
    env = os.environ.get("GPUTOK_MODEL_REPOSITORY")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    for cand in (here.parent.parent / "model_repository", Path.cwd() / "model_repository"):
        if cand.is_dir():
            return cand
    return Path.cwd() / "model_repository"


def needed_packages(repo: Path) -> tuple[str, ...]:
    """Packages the stub environment must import for the models in `repo`."""
    need = ["numpy", "gputok"]
    if (repo / "gpt2").is_dir():
        need += ["torch", "transformers"]
    return tuple(need)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gputok-serve", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--model-repository", type=Path, default=None, help="default: the repo's model_repository"
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address for HTTP and gRPC (default 127.0.0.1; 0.0.0.0 exposes them)",
    )
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address for the metrics port, which no key protects (default 127.0.0.1 "
        "even when --host exposes HTTP and gRPC)",
    )
    p.add_argument(
        "--stub-env",
        type=Path,
        default=None,
        help="Python environment (venv or prefix) for the backend stub; needs numpy<2. "
        "Default: this Python's, or one built in ~/.cache/gputok when its numpy is 2.x",
    )
    p.add_argument(
        "--prepare-stub-env",
        type=Path,
        default=None,
        metavar="DIR",
        help="build a numpy<2 venv at DIR that sees this Python's packages, use it, and keep it",
    )
    p.add_argument(
        "--api-key-file",
        type=Path,
        default=None,
        help=f"file holding the key that the protected APIs require (header gputok-key; "
        f"over gRPC triton-grpc-protocol-gputok-key). Or set {KEY_ENV}. Never on the "
        "command line: every local user can read a process's arguments",
    )
    p.add_argument("--api-key", default=None, help=argparse.SUPPRESS)  # refused, see read_key
    p.add_argument(
        "--restricted-apis",
        default=DEFAULT_RESTRICTED,
        help="APIs that the key protects (health stays open for probes)",
    )
    _add_request_options(p)
    p.add_argument(
        "--max-restarts",
        type=int,
        default=5,
        help="restarts after crashes within --restart-window seconds before giving up "
        "(exit 4); 0 = never restart (a dead stub then stops the server, exit 3)",
    )
    p.add_argument("--restart-window", type=float, default=300.0)
    p.add_argument(
        "--ready-timeout", type=float, default=600.0, help="seconds to wait for readiness"
    )
    p.add_argument("--log-verbose", type=int, default=0)
    p.add_argument("extra", nargs="*", help="extra tritonserver arguments, after --")
    return p


def _add_request_options(p: argparse.ArgumentParser) -> None:
    """How requests reach the models: batching, and the libraries preloaded into tritonserver
    (gputok.serve.preload)."""
    p.add_argument(
        "--isolate-requests",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="serve Python models with string inputs (the tokenizer) without Triton's dynamic "
        "batcher: one request per execute (default off: the string check below already keeps "
        "a malformed string tensor from failing its batch-mates; docs/reliability.md)",
    )
    p.add_argument(
        "--triton-json-500",
        action="store_true",
        help="answer a body that is not JSON, or JSON of the wrong types, with Triton 2.51's 500 "
        "(by default gputok-serve preloads libgputok_triton_codes.so into tritonserver, which "
        "makes them 400: docs/reliability.md)",
    )
    p.add_argument(
        "--string-check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="refuse a string input that ends inside its last element before Triton's dynamic "
        "batcher sees it (libgputok_triton_strings.so, preloaded; Triton 2.51 lets it through "
        "and the Python backend then fails its whole batch: docs/reliability.md)",
    )


def read_key(args: argparse.Namespace) -> str | None:
    """The API key from --api-key-file or $GPUTOK_API_KEY; ServeError for --api-key."""
    if args.api_key is not None:
        raise ServeError(
            f"--api-key is refused: a key on the command line is readable by every local user "
            f"in /proc/PID/cmdline. Put it in a file (--api-key-file, mode 600) or in {KEY_ENV}."
        )
    if args.api_key_file is not None:
        try:
            key = args.api_key_file.read_text().strip()
        except OSError as e:
            raise ServeError(f"cannot read --api-key-file: {e}") from e
        if not key:
            raise ServeError(f"--api-key-file {args.api_key_file} is empty")
    else:
        key = os.environ.get(KEY_ENV, "").strip() or None
    return check_key(key)


def check_key(key: str | None) -> str | None:
    """`key` unchanged; ServeError where Triton would read it as more than a key."""
    if key is not None and (any(c in key for c in ",:= \t\n") or not key.isprintable()):
        # Triton parses `<apis>:<header>=<key>`: these characters would change its meaning
        raise ServeError("the API key may not contain ',', ':', '=', whitespace or controls")
    return key


def options(args: argparse.Namespace, repo: Path, key: str | None) -> ServerOptions:
    return ServerOptions(
        model_repository=repo,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        log_verbose=args.log_verbose,
        restricted_apis=tuple(a for a in args.restricted_apis.split(",") if a) if key else (),
        restricted_value=key,
        extra_args=list(args.extra),
        json_errors_400=not args.triton_json_500,
        check_strings=args.string_check,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    repo = (args.model_repository or default_model_repository()).resolve()
    try:
        key = read_key(args)
        served = repo
        if args.isolate_requests and repo.is_dir():
            served, names = isolated_repository(repo)
            if names:
                note = isolation_note(names, "--no-isolate-requests, the default,")
                print(f"gputok-serve: {note}", flush=True)
        stub_env = args.stub_env
        if args.prepare_stub_env is not None:
            stub_env = prepare_stub_env(args.prepare_stub_env).parent
        server = TritonServer(
            options(args, served, key), stub_env=stub_env, need=needed_packages(repo)
        )
    except (ServeError, ValueError) as e:
        print(f"gputok-serve: {e}", file=sys.stderr)
        return 2
    os.environ.pop(KEY_ENV, None)  # not inherited by tritonserver and its stubs

    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    server.env.pop(KEY_ENV, None)
    print(
        f"gputok-serve: starting tritonserver on {repo} (numpy {server.report['numpy']} in the stub)",
        flush=True,
    )
    policy = RestartPolicy(
        max_restarts=max(0, args.max_restarts),
        window_s=args.restart_window,
        ready_timeout_s=args.ready_timeout,
    )
    code = Supervisor(server, policy, stop, on_ready=_print_ready).run()
    print("gputok-serve: stopped", flush=True)
    return code


def _print_ready(server: TritonServer) -> None:
    print(
        "gputok-serve: READY\n"
        f"  HTTP     http://{server.http_url}\n"
        f"  gRPC     {server.grpc_url}\n"
        f"  metrics  {server.metrics_url}\n"
        "  Ctrl-C to stop",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
