"""The Docker image's entry point (`python3 -m gputok.serve.container`): tritonserver on /models,
with the API key read from a file or the environment, never from the command line.

Triton 2.51 takes the restricted-API key only as an argument (`--http-restricted-api=
<apis>:<header>=<key>`), which `docker run ... gputok-triton --http-restricted-api=...` would
show to every user of the host (`ps`, the container's /proc/PID/cmdline) and store in the
container's configuration. So the key comes from `$GPUTOK_API_KEY_FILE` (a mounted secret) or
`$GPUTOK_API_KEY`; a restricted-API argument is refused; the variables are not inherited by
tritonserver; and the key is blanked in tritonserver's argv as soon as it has parsed its
options (its first line of output), as gputok-serve does (gputok.serve.triton.scrub_argv).

Request isolation, as gputok-serve does it by default: the models that take strings on the Python
backend are served from an isolated copy of /models without the dynamic batcher (Triton 2.51
fails a malformed string's batch-mates before any model code runs: docs/reliability.md);
`GPUTOK_ISOLATE_REQUESTS=0` serves /models as it is, batched.

This process stays as the container's PID 1: it forwards SIGTERM and SIGINT to tritonserver
and exits with its code (128 + signal for a signal), so `docker run --restart` still sees a
crash as one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from gputok.serve.cli import DEFAULT_RESTRICTED, KEY_ENV, check_key
from gputok.serve.isolate import isolated_repository, isolation_note
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


def run(cmd: list[str], key: str | None, env: dict) -> int:
    """Run tritonserver, blank the key in its argv after its first line, pass its output on,
    forward SIGTERM / SIGINT; its exit code (128 + signal when a signal ended it)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
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
    return 128 - code if code < 0 else code


def served_repository(env: dict, models: Path = MODELS) -> Path:
    """/models, or its isolated copy (under /tmp: the image's cache may be read-only) unless
    $GPUTOK_ISOLATE_REQUESTS is 0."""
    flag = env.get(ISOLATE_ENV, "1").strip().lower()
    if flag in ("0", "false", "no", "off") or not models.is_dir():
        return models
    served, names = isolated_repository(models, cache=Path(env.get("TMPDIR", "/tmp")) / "gputok")
    if names:
        print(f"gputok: {isolation_note(names, f'{ISOLATE_ENV}=0')}", flush=True)
    return served


def main(argv: list[str] | None = None, models: Path = MODELS) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    try:
        key = container_key(env)
        cmd = command(extra, key, models=served_repository(env, models))
    except (ServeError, OSError, ValueError) as e:
        print(f"gputok: {e}", file=sys.stderr, flush=True)
        return 2
    for name in (KEY_ENV, KEY_FILE_ENV):
        env.pop(name, None)
    return run(cmd, key, env)


if __name__ == "__main__":
    sys.exit(main())
