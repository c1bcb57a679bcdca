"""`gputok-serve` / `python -m gputok.serve`: run Triton Inference Server on our model repository.

Runs the tritonserver binary that PyPI's nvidia-pytriton==0.7.0 bundles (server 2.51), not
PyTriton's bind API, with the Python-backend stub that matches this Python and an environment
with numpy<2 (see gputok._triton_env). Binds to 127.0.0.1 unless told otherwise, model control
is off, waits until the server is ready, prints the URLs and stops the server cleanly on Ctrl-C
or SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from gputok._triton_env import (
    ServeError,
    ServerOptions,
    TritonServer,
    prepare_stub_env,
    stub_processes,
)


def default_model_repository() -> Path:
    """The repo's model_repository: GPUTOK_MODEL_REPOSITORY, else ../model_repository next to
    backend_src (editable install or a checkout), else ./model_repository."""
    env = os.environ.get("GPUTOK_MODEL_REPOSITORY")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
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
        help="address to bind (default 127.0.0.1; 0.0.0.0 exposes it)",
    )
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
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
        "--api-key", default=None, help="require header gputok-key: KEY on the protected APIs"
    )
    p.add_argument(
        "--restricted-apis",
        default="inference,model-config,model-repository,metadata,statistics,shared-memory,trace,logging",
        help="APIs that --api-key protects (health stays open for probes)",
    )
    p.add_argument(
        "--ready-timeout", type=float, default=600.0, help="seconds to wait for readiness"
    )
    p.add_argument("--log-verbose", type=int, default=0)
    p.add_argument("extra", nargs="*", help="extra tritonserver arguments, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    repo = (args.model_repository or default_model_repository()).resolve()
    opts = ServerOptions(
        model_repository=repo,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        log_verbose=args.log_verbose,
        restricted_apis=tuple(a for a in args.restricted_apis.split(",") if a)
        if args.api_key
        else (),
        restricted_value=args.api_key,
        extra_args=list(args.extra),
    )
    try:
        stub_env = args.stub_env
        if args.prepare_stub_env is not None:
            stub_env = prepare_stub_env(args.prepare_stub_env).parent
        server = TritonServer(opts, stub_env=stub_env, need=needed_packages(repo))
    except ServeError as e:
        print(f"gputok-serve: {e}", file=sys.stderr)
        return 2

    stop = threading.Event()

    def on_signal(signum, _frame):
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    server.start()
    try:
        print(
            f"gputok-serve: starting tritonserver on {repo} (numpy {server.report['numpy']} in the stub)",
            flush=True,
        )
        waiter = threading.Thread(
            target=_wait, args=(server, args.ready_timeout, stop), daemon=True
        )
        waiter.start()
        stubs: dict[int, str] = {}
        while not stop.is_set():
            if server.proc is not None and server.proc.poll() is not None:
                print(
                    f"gputok-serve: tritonserver exited with code {server.proc.returncode}",
                    file=sys.stderr,
                )
                return server.proc.returncode or 1
            dead = _dead_stubs(server, stubs, ready=not waiter.is_alive())
            if dead:
                print(
                    f"gputok-serve: the Python-backend stub of model(s) {', '.join(dead)} died. "
                    "Triton 2.51 does not restart it and keeps reporting ready while every "
                    "request to it fails, so gputok-serve stops the server (exit 3). Restart "
                    "gputok-serve, or let your supervisor restart it (docs/reliability.md).",
                    file=sys.stderr,
                    flush=True,
                )
                return 3
            stop.wait(0.5)
    finally:
        server.stop()
    print("gputok-serve: stopped", flush=True)
    return 0


def _dead_stubs(server: TritonServer, known: dict[int, str], ready: bool) -> list[str]:
    """Watchdog: once the server is ready, remembers its stubs; returns the models whose stub
    has gone since (a killed stub is never restarted by Triton 2.51)."""
    if not ready or server.proc is None:
        return []
    if not known:
        known.update(stub_processes(server.proc.pid))
        return []
    return sorted({m for pid, m in known.items() if not _alive(pid)})


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie is a dead stub Triton has not reaped


def _wait(server: TritonServer, timeout: float, stop: threading.Event) -> None:
    try:
        server.wait_ready(timeout)
    except ServeError as e:
        print(f"gputok-serve: {e}", file=sys.stderr, flush=True)
        stop.set()
        return
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
