"""Run the tritonserver that PyPI's nvidia-pytriton==0.7.0 bundles (server 2.51) as a child
process: its options and command line, start, readiness, and a stop that leaves no process
and no shared memory behind.

This package only runs the bundled binary; it never uses PyTriton's bind API. This module is
imported by `gputok.serve` (the `gputok-serve` command), by the end-to-end test fixtures and by
scripts on the GPU machine (also under its old name `gputok._triton_env`), and depends on the
standard library alone, so it works before the native extension is importable and can report
that the build is missing. Its parts, re-exported here under their old names: `dist` (the
bundled server and its backends folder), `stubenv` (the Python-backend stub's environment),
`procs` (ports, process groups, stubs, the key in argv), `shm` (shared-memory regions).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from gputok.serve.dist import (
    PYTRITON_SPEC,
    ServeError,
    TritonDist,
    cached_backend_dir,
    find_dist,
    ld_library_path,
    missing_libs,
    prepare_backend_dir,
    python_version_of,
)
from gputok.serve.preload import MissingLibrary, libraries, with_preload
from gputok.serve.procs import (
    KEY_MASK,
    _processes,
    die_with_parent,
    free_port,
    free_ports,
    port_in_use,
    process_group,
    scrub_argv,
    stub_processes,
    wait_group_gone,
)
from gputok.serve.stubenv import (
    STUB_EXCLUDE,
    STUB_NUMPY,
    _clean_env,
    check_stub_env,
    choose_stub_bin,
    env_report,
    filtered_site,
    numpy_major,
    prepare_stub_env,
    server_env,
)

__all__ = [
    "KEY_MASK",
    "PYTRITON_SPEC",
    "SEEN_REGIONS",
    "STUB_EXCLUDE",
    "STUB_NUMPY",
    "ServeError",
    "ServerOptions",
    "TritonDist",
    "TritonServer",
    "_clean_env",
    "_processes",
    "cached_backend_dir",
    "check_stub_env",
    "choose_stub_bin",
    "copy_models",
    "env_report",
    "filtered_site",
    "find_dist",
    "free_port",
    "free_ports",
    "ld_library_path",
    "missing_libs",
    "numpy_major",
    "port_in_use",
    "prepare_backend_dir",
    "prepare_stub_env",
    "process_group",
    "python_version_of",
    "scrub_argv",
    "server_command",
    "server_env",
    "set_config_parameter",
    "stub_processes",
]

# Every Python-backend shared-memory region any TritonServer of this process has seen: the
# test suite checks at its end that none is left (tests/e2e/conftest.py).
SEEN_REGIONS: set[str] = set()


def copy_models(src: Path, dest: Path, names: tuple[str, ...] | list[str] | None = None) -> Path:
    """A throwaway model repository at `dest` holding the models `names` of `src` (all of them
    when None), without __pycache__ folders. Returns `dest`."""
    dest = Path(dest)
    ignore = shutil.ignore_patterns("__pycache__")
    if names is None:
        shutil.copytree(src, dest, ignore=ignore)
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copytree(Path(src) / name, dest / name, ignore=ignore)
    return dest


def set_config_parameter(config: Path, key: str, value: str) -> None:
    """Set a `parameters { key: ... }` string value in a config.pbtxt (a throwaway copy)."""
    from gputok.serve import pbtxt

    pbtxt.set_parameter(config, key, value)


@dataclass
class ServerOptions:
    model_repository: Path
    host: str = "127.0.0.1"
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    # Triton's metrics endpoint has no key (restricted APIs do not cover it), so it binds to
    # loopback even when `host` exposes HTTP and gRPC; widen it on purpose with its own flag.
    metrics_host: str = "127.0.0.1"
    log_verbose: int = 0
    # Triton's restricted-endpoint protection: requests to these APIs must carry header
    # `restricted_key: restricted_value` (over gRPC as `triton-grpc-protocol-<key>`). Health
    # stays open for probes.
    restricted_apis: tuple[str, ...] = ()
    restricted_key: str = "gputok-key"
    restricted_value: str | None = field(default=None, repr=False)
    extra_args: list[str] = field(default_factory=list)
    # Libraries preloaded into tritonserver (gputok.serve.preload): a body that is not JSON, or
    # JSON of the wrong types, gets 400 instead of Triton 2.51's 500; a string input that ends
    # inside its last element is refused before the dynamic batcher can fail its batch-mates.
    json_errors_400: bool = True
    check_strings: bool = True


def server_command(dist: TritonDist, backends: Path, opts: ServerOptions) -> list[str]:
    cmd = [
        str(dist.binary),
        f"--model-repository={Path(opts.model_repository).resolve()}",
        f"--backend-directory={backends}",
        f"--cache-directory={dist.caches}",
        "--model-control-mode=none",
        "--strict-readiness=true",
        "--exit-on-error=true",
        "--disable-auto-complete-config",
        f"--http-address={opts.host}",
        f"--http-port={opts.http_port}",
        f"--grpc-address={opts.host}",
        f"--grpc-port={opts.grpc_port}",
        f"--metrics-address={opts.metrics_host}",
        f"--metrics-port={opts.metrics_port}",
        f"--log-verbose={opts.log_verbose}",
    ]
    if opts.restricted_value is not None and opts.restricted_apis:
        spec = f"{','.join(opts.restricted_apis)}:{opts.restricted_key}={opts.restricted_value}"
        cmd += [f"--http-restricted-api={spec}", f"--grpc-restricted-protocol={spec}"]
    return cmd + list(opts.extra_args)


class TritonServer:
    """A tritonserver child process: start, wait until ready, stop (always; also from atexit).
    `start()` may be called again after `stop()`: the supervisor restarts the same server.

    Output goes to `log_path` when given (the e2e fixtures), else to our stdout/stderr
    (`gputok-serve`); the last lines are kept for error messages either way.
    """

    def __init__(
        self,
        opts: ServerOptions,
        stub_env: Path | None = None,
        need: tuple[str, ...] = ("numpy", "gputok"),
        log_path: Path | None = None,
    ) -> None:
        self.opts = opts
        self._group_reaped: int | None = None  # the server pid whose group stop() killed
        self.dist = find_dist()
        for name, port in (
            ("http", opts.http_port),
            ("grpc", opts.grpc_port),
            ("metrics", opts.metrics_port),
        ):
            if port_in_use(opts.metrics_host if name == "metrics" else opts.host, port):
                raise ServeError(
                    f"{name} port {opts.host}:{port} is already in use; stop what holds it "
                    f"or pass --{name}-port"
                )
        if not Path(opts.model_repository).is_dir():
            raise ServeError(f"model repository {opts.model_repository} does not exist")
        self.stub_bin = choose_stub_bin(stub_env)
        self.report = check_stub_env(self.stub_bin, need)
        self.backends = cached_backend_dir(
            self.dist, self.report["python"], ld_library_path(self.dist, self.report)
        )
        self.env = server_env(self.dist, self.stub_bin, self.report)
        try:
            self.env = with_preload(self.env, libraries(opts.json_errors_400, opts.check_strings))
        except MissingLibrary as e:
            raise ServeError(str(e)) from None
        self.cmd = server_command(self.dist, self.backends, opts)
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.tail: deque[str] = deque(maxlen=60)
        self._pump: threading.Thread | None = None
        self.shm_regions: set[str] = set()  # Python-backend regions this server has used
        self.last_freed: tuple[int, int] = (0, 0)  # (regions, bytes) the last stop unlinked
        self.key_scrubbed: bool | None = None  # None: no key; else whether argv was blanked
        self.started_at = 0.0
        self.key_visible_s: float | None = None  # start -> key blanked in its argv

    @property
    def http_url(self) -> str:
        return f"{self.opts.host}:{self.opts.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.opts.host}:{self.opts.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.opts.metrics_host}:{self.opts.metrics_port}/metrics"

    def start(self) -> TritonServer:
        # New session: a Ctrl-C in the terminal reaches only us, and we stop the server in order.
        # PR_SET_PDEATHSIG: if we die without stopping it (SIGKILL), the server gets SIGTERM
        # instead of living on as an orphan that holds the ports.
        self._group_reaped = None
        self.tail.clear()
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.key_scrubbed = None if self.opts.restricted_value is None else False
        self.started_at = time.monotonic()
        self.key_visible_s = None
        self._pump = threading.Thread(
            target=self._pump_output, args=(self.proc,), name="tritonserver-log", daemon=True
        )
        self._pump.start()
        return self

    def _pump_output(self, proc: subprocess.Popen) -> None:
        sink = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        try:
            for line in proc.stdout:
                if self.key_scrubbed is False:
                    self._scrub_key(proc.pid)
                self.tail.append(line.decode("utf-8", "replace"))
                if sink is not None:
                    sink.write(line)
                    sink.flush()
                else:
                    sys.stdout.buffer.write(line)
                    sys.stdout.flush()
        finally:
            if sink is not None:
                sink.close()

    def _scrub_key(self, pid: int) -> None:
        try:
            scrub_argv(pid, self.opts.restricted_value or "")
            self.key_scrubbed = True
            self.key_visible_s = time.monotonic() - self.started_at
        except (OSError, ValueError, IndexError) as e:
            self.key_scrubbed = None  # tried once; say so once
            print(
                f"gputok-serve: WARNING: could not blank the API key in tritonserver's command "
                f"line ({e}); local users can read it in /proc/{pid}/cmdline",
                file=sys.stderr,
                flush=True,
            )

    def pids(self) -> list[int]:
        """tritonserver and the processes of its group (its stubs), while they run."""
        if self.proc is None:
            return []
        return sorted({self.proc.pid, *process_group(self.proc.pid)})

    def track_shm(self) -> set[str]:
        """Remember the Python-backend regions the server's processes map or name now."""
        from gputok.serve.shm import regions_of

        self.shm_regions |= regions_of(self.pids())
        SEEN_REGIONS.update(self.shm_regions)
        return self.shm_regions

    def free_shm(self) -> tuple[int, int]:
        """Unlink the regions this server used that outlived it; (count, bytes)."""
        from gputok.serve.shm import unlink_regions

        self.last_freed = unlink_regions(self.shm_regions)
        self.shm_regions = set()
        return self.last_freed

    def is_ready(self) -> bool:
        url = f"http://{self.opts.host}:{self.opts.http_port}/v2/health/ready"
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 (loopback URL we built)
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                if self._pump is not None:
                    self._pump.join(timeout=5)
                raise ServeError(f"tritonserver exited with code {code}:\n{''.join(self.tail)}")
            if self.is_ready():
                self.track_shm()
                return
            time.sleep(0.25)
        self.stop()
        raise ServeError(f"tritonserver not ready after {timeout:.0f} s:\n{''.join(self.tail)}")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (Triton shuts down gracefully: it drains requests and stops the stubs), then
        SIGKILL to the whole process group after `timeout` seconds. Whatever is left in the
        group once the server has exited is killed too: a Python-backend stub that Triton did
        not wait for (with a short --exit-timeout-secs) outlives it, orphaned, for good; two
        were found from CI runs of tests/e2e/test_restart.py on 2026-11-23. Last, the
        Python-backend shared-memory regions the server used and left are unlinked."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                self.track_shm()
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if proc is not None and self._group_reaped != proc.pid:
            # Once per server: the group outlives its leader while a member is alive, but a
            # later stop() must not signal a new group that reused the number.
            self._group_reaped = proc.pid
            with contextlib.suppress(OSError):
                self.track_shm()  # stubs still alive map their regions
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            wait_group_gone(proc.pid, 10.0)
        if self._pump is not None:
            self._pump.join(timeout=5)
        self.free_shm()
        return None if proc is None else proc.returncode

    def __enter__(self) -> TritonServer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
