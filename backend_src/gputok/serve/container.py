"""The Docker image's entry point (`python3 -m gputok.serve.container`): tritonserver on /models,
with the API key read from a file or the environment, never from the command line.

Triton 2.51 takes the restricted-API key only as an argument (`--http-restricted-api=
<apis>:<header>=<key>`), which `docker run ... gputok-triton --http-restricted-api=...` would
show to every user of the host (`ps`, the container's /proc/PID/cmdline) and store in the
container's configuration. So the key comes from `$GPUTOK_API_KEY_FILE` (a mounted secret) or
`$GPUTOK_API_KEY`; a restricted-API argument is refused; the variables are not inherited by
tritonserver; and the key is blanked in tritonserver's argv as soon as it has parsed its
options (its first line of output), as gputok-serve does (gputok.serve.triton.scrub_argv).

As under gputok-serve, tritonserver runs with gputok.serve.preload's libraries preloaded:
malformed JSON gets 400 (`GPUTOK_TRITON_JSON_500=1` keeps Triton 2.51's 500s), and a string
input that ends inside its last element is refused before batching (`GPUTOK_STRING_CHECK=0`
leaves it to Triton).

Request isolation without the batcher, as `gputok-serve --isolate-requests` does it, with
`GPUTOK_ISOLATE_REQUESTS=1`: the models that take strings on the Python backend are served from
an isolated copy of /models without the dynamic batcher. By default /models is served as it is,
batched: the string check keeps a malformed string from failing its batch-mates
(docs/reliability.md).

This process stays as the container's PID 1: it forwards SIGTERM and SIGINT to tritonserver
and exits with its code (128 + signal for a signal), so `docker run --restart` still sees a
crash as one. It also watches the Python-backend stubs, as gputok-serve does: Triton 2.51 never
restarts a dead stub and keeps answering ready while every request to its model fails (one
gRPC request can kill the detokenizer's: docs/reliability.md), so a dead stub stops
tritonserver, and the container ends with exit code 3 for `--restart` to start it again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from gputok.serve.cli import DEFAULT_RESTRICTED, KEY_ENV, check_key
from gputok.serve.isolate import isolated_repository, isolation_note
from gputok.serve.preload import MissingLibrary, container_libraries, env_flag, with_preload
from gputok.serve.procs import dead_stub_cause, stub_processes
from gputok.serve.shm import regions_of, unlink_regions
from gputok.serve.supervisor import EXIT_STUB_DIED
from gputok.serve.triton import ServeError, scrub_argv

KEY_FILE_ENV = "GPUTOK_API_KEY_FILE"
ISOLATE_ENV = "GPUTOK_ISOLATE_REQUESTS"
MODELS = Path("/models")
KEYED_OPTIONS = ("--http-restricted-api", "--grpc-restricted-protocol")
BASE_COMMAND = (
    "tritonserver",
    "--model-control-mode=none",
    "--strict-readiness=true",
    "--disable-auto-complete-config",
    "--http-address=0.0.0.0",
    "--http-port=8000",
    "--grpc-address=0.0.0.0",
    "--grpc-port=8001",
    "--metrics-address=0.0.0.0",
    "--metrics-port=8002",
)


def container_key(env: dict) -> str | None:
    """The key from the file named by $GPUTOK_API_KEY_FILE, else $GPUTOK_API_KEY, else None."""
    path = env.get(KEY_FILE_ENV, "")
    if path:
        try:
            key = Path(path).read_text().strip()
        except OSError as e:
            raise ServeError(f"cannot read {KEY_FILE_ENV}: {e}") from e
        if not key:
            raise ServeError(f"{KEY_FILE_ENV} {path} is empty")
        return check_key(key)
    return check_key(env.get(KEY_ENV, "").strip() or None)


def command(
    extra: list[str],
    key: str | None,
    base: tuple[str, ...] = BASE_COMMAND,
    models: Path = MODELS,
) -> list[str]:
    """tritonserver's argv: the image's options, the key's restricted APIs, then `extra`;
    ServeError for an argument that would carry a key."""
    for arg in extra:
        if arg.split("=", 1)[0] in KEYED_OPTIONS:
            raise ServeError(
                f"{arg.split('=', 1)[0]} is refused: a key on the command line is readable by "
                f"every user of the host. Mount the key as a file and pass its path in "
                f"{KEY_FILE_ENV} (or the key in {KEY_ENV})."
            )
    cmd = [base[0], f"--model-repository={models}", *base[1:]]
    if key is not None:
        spec = f"{DEFAULT_RESTRICTED}:gputok-key={key}"
        cmd += [f"--http-restricted-api={spec}", f"--grpc-restricted-protocol={spec}"]
    return cmd + list(extra)


class StubWatch(threading.Thread):
    """Every `poll_s`, lists tritonserver's Python-backend stubs and the shared-memory regions
    they use; when one has died (and no stop was asked for), says why and stops the server."""

    def __init__(self, proc: subprocess.Popen, poll_s: float = 0.5) -> None:
        super().__init__(name="gputok-stub-watch", daemon=True)
        self.proc, self.poll_s = proc, poll_s
        # Set when a signal asks the server to stop: a plain flag, as a signal handler may
        # run while the main thread holds an Event's lock (a deadlock).
        self.stopping = False
        self.cause: str | None = None
        self.regions: set[str] = set()

    def run(self) -> None:
        stubs: dict[int, str] = {}
        while True:
            time.sleep(self.poll_s)
            if self.stopping or self.proc.poll() is not None:
                return
            for pid, model in stub_processes(self.proc.pid).items():
                stubs.setdefault(pid, model)  # a stub seen alive keeps its model's name
            self.regions |= regions_of([self.proc.pid, *stubs])
            cause = dead_stub_cause(stubs)
            if cause is not None and not self.stopping:
                self.cause = (
                    f"{cause}: stopping tritonserver (exit code {EXIT_STUB_DIED}) for the "
                    "container's --restart to start it again"
                )
                print(f"gputok: {self.cause}", file=sys.stderr, flush=True)
                # SIGTERM, then SIGKILL after 5 s, as gputok-serve does: with a dead stub,
                # Triton 2.51 waits out --exit-timeout-secs (30 s) before it exits.
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                return


def run(cmd: list[str], key: str | None, env: dict, poll_s: float = 0.5) -> int:
    """Run tritonserver, blank the key in its argv after its first line, pass its output on,
    forward SIGTERM / SIGINT, stop it when a stub dies (StubWatch); its exit code (128 +
    signal when a signal ended it; EXIT_STUB_DIED after a dead stub). The regions its
    processes used are unlinked once it has exited (none are left after a clean stop)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    watch = StubWatch(proc, poll_s)

    def forward(signum: int, _frame: object) -> None:
        watch.stopping = True
        proc.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    watch.start()
    pending = key
    for line in proc.stdout:
        if pending:
            try:
                scrub_argv(proc.pid, pending)
            except (OSError, ValueError, IndexError) as e:
                print(f"gputok: WARNING: could not blank the API key in tritonserver's "
                      f"command line ({e})", file=sys.stderr, flush=True)  # fmt: skip
            pending = None
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
    code = proc.wait()
    watch.stopping = True
    watch.join(timeout=60)
    unlink_regions(watch.regions)
    if watch.cause is not None:
        return EXIT_STUB_DIED
    return 128 - code if code < 0 else code


def served_repository(env: dict, models: Path = MODELS) -> Path:
    """/models, or its isolated copy (under /tmp: the image's cache may be read-only) when
    $GPUTOK_ISOLATE_REQUESTS is 1."""
    if not env_flag(env, ISOLATE_ENV, False) or not models.is_dir():
        return models
    served, names = isolated_repository(models, cache=Path(env.get("TMPDIR", "/tmp")) / "gputok")
    if names:
        print(f"gputok: {isolation_note(names, f'{ISOLATE_ENV}=0, the default,')}", flush=True)
    return served


def server_env(env: dict) -> dict:
    """tritonserver's environment: `env` with the libraries of gputok.serve.preload preloaded
    (400 for malformed JSON unless $GPUTOK_TRITON_JSON_500 is 1; the string check unless
    $GPUTOK_STRING_CHECK is 0)."""
    return with_preload(env, container_libraries(env))


def main(argv: list[str] | None = None, models: Path = MODELS) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    try:
        env = server_env(dict(os.environ))
        key = container_key(env)
        cmd = command(extra, key, models=served_repository(env, models))
    except (ServeError, MissingLibrary, OSError, ValueError) as e:
        print(f"gputok: {e}", file=sys.stderr, flush=True)
        return 2
    for name in (KEY_ENV, KEY_FILE_ENV):
        env.pop(name, None)
    return run(cmd, key, env)


if __name__ == "__main__":
    sys.exit(main())
