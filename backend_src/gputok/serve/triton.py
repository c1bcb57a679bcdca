"""Locate and prepare the tritonserver that PyPI's nvidia-pytriton==0.7.0 bundles (server 2.51).

This module only runs the bundled binary; it never uses PyTriton's bind API. It is imported by
`gputok.serve` (the `gputok-serve` command), by the end-to-end test fixtures and by scripts on the
GPU machine, and depends on the standard library alone, so it works before the native extension
is importable and can report that the build is missing.

What the server needs (found on these machines; docs/serving.md):
- `nvidia_pytriton.libs` on LD_LIBRARY_PATH;
- a Python-backend stub built for the running Python's X.Y, placed in `backends/python/`
  (the wheel ships one per version under `python_backend_stubs/X.Y/`);
- the stub takes its packages from the environment whose `bin/` is first on PATH (it ignores
  PYTHONPATH), and that environment must have numpy<2: with numpy 2.x every TYPE_STRING input
  crashes the stub. Where the system Python has numpy 2 (the GPU machine), `prepare_stub_env`
  builds a small venv with numpy 1.26.4 plus a .pth that points at the system site-packages.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

STUB_NUMPY = "numpy==1.26.4"
# Every Python-backend shared-memory region any TritonServer of this process has seen: the
# test suite checks at its end that none is left (tests/e2e/conftest.py).
SEEN_REGIONS: set[str] = set()
PYTRITON_SPEC = "nvidia-pytriton==0.7.0"


class ServeError(RuntimeError):
    """A precondition for serving is not met; the message says what to do."""


@dataclass(frozen=True)
class TritonDist:
    """Paths inside the installed nvidia-pytriton wheel."""

    root: Path  # .../site-packages/pytriton/tritonserver

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def libs(self) -> Path:
        return self.root.parent.parent / "nvidia_pytriton.libs"

    @property
    def python_backend(self) -> Path:
        return self.root / "backends" / "python"

    @property
    def caches(self) -> Path:
        return self.root / "caches"

    def stub(self, version: str) -> Path:
        return self.root / "python_backend_stubs" / version / "triton_python_backend_stub"


def find_dist() -> TritonDist:
    """Find the tritonserver bundled with nvidia-pytriton in this Python's environment.

    Looks the package up by file, not by import: importing `pytriton` pulls in its own
    dependencies (tritonclient~=2.50), which we do not install (we pin tritonclient 2.49.0 for
    its perf_analyzer, see requirements/serve.txt).
    """
    import importlib.util

    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise ServeError(
            "tritonserver is missing: the nvidia-pytriton wheel is not installed in "
            f"{sys.prefix}. Install it with: pip install --no-deps {PYTRITON_SPEC} "
            "(or run `make setup`)."
        )
    dist = TritonDist(Path(next(iter(spec.submodule_search_locations))) / "tritonserver")
    if not dist.binary.is_file():
        raise ServeError(
            f"tritonserver binary not found at {dist.binary}; reinstall {PYTRITON_SPEC}"
        )
    if not dist.libs.is_dir():
        raise ServeError(
            f"nvidia_pytriton.libs not found at {dist.libs}; reinstall {PYTRITON_SPEC}"
        )
    return dist


def python_version_of(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import sys;print('%d.%d' % sys.version_info[:2])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def missing_libs(binary: Path, ld_library_path: str) -> list[str]:
    """Shared libraries that `ldd` cannot resolve for `binary` (empty when all resolve)."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    env = dict(os.environ, LD_LIBRARY_PATH=ld_library_path)
    out = subprocess.run([ldd, str(binary)], capture_output=True, text=True, env=env, check=False)
    return [line.split()[0] for line in out.stdout.splitlines() if "not found" in line]


def prepare_backend_dir(
    dist: TritonDist, workdir: Path, python_version: str, ld_path: str | None = None
) -> Path:
    """Build `workdir/backends` with the python backend and the stub for `python_version`.

    Returns the directory to pass as --backend-directory. The wheel's own backends/python has no
    stub; tritonserver looks for `triton_python_backend_stub` next to libtriton_python.so.
    """
    stub = dist.stub(python_version)
    if not stub.is_file():
        have = sorted(p.name for p in (dist.root / "python_backend_stubs").iterdir())
        raise ServeError(
            f"{PYTRITON_SPEC} has no Python-backend stub for Python {python_version} "
            f"(it has {', '.join(have)}); run gputok-serve with one of those Pythons"
        )
    backends = workdir / "backends"
    dst = backends / "python"
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy2(dist.python_backend / name, dst / name)
    shutil.copy2(stub, dst / "triton_python_backend_stub")
    libs = missing_libs(dst / "triton_python_backend_stub", ld_path or str(dist.libs))
    if libs:
        raise ServeError(
            f"the Python {python_version} backend stub cannot load {', '.join(libs)}. "
            f"Install the shared libpython (Debian: apt-get install libpython{python_version})."
        )
    return backends


def cached_backend_dir(
    dist: TritonDist, python_version: str, ld_path: str | None = None, cache: Path | None = None
) -> Path:
    """`prepare_backend_dir` once per (wheel files, Python version), kept in the user's cache.

    A folder per server in /tmp was left behind whenever gputok-serve died by SIGKILL (2.8 MB
    each, 2026-11-25); one shared, content-named folder leaves nothing per run. It is built in
    a temporary sibling and renamed into place, so servers starting at once never see half of it.
    """
    import hashlib

    root = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gputok"
    root = root / "triton-backends"
    key = hashlib.sha256()
    for f in (dist.stub(python_version), dist.python_backend / "libtriton_python.so"):
        st = f.stat() if f.exists() else None
        key.update(f"{f}:{st and st.st_size}:{st and st.st_mtime_ns}".encode())
    final = root / f"py{python_version}-{key.hexdigest()[:16]}"
    if not (final / "backends" / "python" / "triton_python_backend_stub").is_file():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        try:
            prepare_backend_dir(dist, tmp, python_version, ld_path)
            # OSError: another server won the race; its folder is as good as ours
            with contextlib.suppress(OSError):
                os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / "backends"


def env_report(python: Path) -> dict:
    """What the stub would see in the environment of `python`: versions or import errors."""
    code = r"""
import json, sys
import os, sysconfig
r = {"python": "%d.%d" % sys.version_info[:2], "version": sys.version.split()[0], "prefix": sys.prefix}
lib = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
r["libpython"] = lib if os.path.isfile(lib) else None
# torch before gputok: on the H200 image `import gputok, torch` (CUDA build) segfaulted
# while `import torch, gputok` worked (2026-11-22); the models import in this order too.
for name in ("numpy", "torch", "transformers", "gputok"):
    try:
        m = __import__(name)
        r[name] = m.__version__  # a bare namespace package (no build) has none: reported below
    except Exception as e:  # report, do not fail: the caller decides what is required
        r[name] = None
        r[name + "_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(r))
"""
    out = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, check=False, env=_clean_env()
    )
    if out.returncode != 0:
        raise ServeError(
            f"cannot run {python} (exit code {out.returncode}; negative = killed by that signal): "
            f"{out.stdout.strip()[-1000:]} {out.stderr.strip()[-2000:]}"
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _clean_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the stub ignores it, so our checks must too
    env.pop("PYTHONHOME", None)
    return env


def numpy_major(version: str | None) -> int | None:
    if not version:
        return None
    return int(version.split(".")[0])


# Packages hidden from the stub environment when its base has numpy 2 (they are built against
# numpy 2); matched on the first part of each site-packages entry ("scipy.libs", "scipy-1.x.dist-info").
STUB_EXCLUDE = frozenset({"numpy", "scipy", "sklearn", "scikit_learn", "pandas"})


def filtered_site(src: Path, dst: Path, exclude: frozenset[str]) -> Path:
    """A folder of symlinks to every entry of `src` except the `exclude`d packages."""

    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for entry in src.iterdir():
        key = re.split(r"[-.]", entry.name.lower(), maxsplit=1)[0]
        if key not in exclude:
            (dst / entry.name).symlink_to(entry)
    return dst


def prepare_stub_env(
    dest: Path,
    base_python: Path | str = sys.executable,
    numpy_spec: str = STUB_NUMPY,
    extra_site_dirs: list[str] | None = None,
    pip_args: list[str] | None = None,
) -> Path:
    """Create (or reuse) a venv at `dest` whose numpy is `numpy_spec`, seeing `base_python`'s packages.

    The recipe that worked on the H200 machine (docs/serving.md): the venv holds numpy
    alone; a .pth file appends the site-packages of `base_python` (where torch, transformers and
    gputok live), so the venv's numpy comes first and the rest is still found. Returns the venv's
    bin/ directory, to put first on PATH when starting tritonserver.

    The venv is made `--without-pip` (Debian-based images often lack ensurepip) and numpy goes in
    with `base_python -m pip install --target`. Offline (the GPU machine reaches no index), pass
    `pip_args=["--no-index", "--find-links", WHEEL_DIR]` with a numpy 1.26.4 wheel there, or set
    GPUTOK_STUB_PIP_ARGS to the same words.
    """
    dest = Path(dest)
    py = dest / "bin" / "python3"
    if not py.exists():
        subprocess.run([str(base_python), "-m", "venv", "--without-pip", str(dest)], check=True)
    code = "import site, json; print(json.dumps(site.getsitepackages()))"

    def sites(python) -> list[str]:
        out = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, check=True, env=_clean_env()
        )
        return json.loads(out.stdout)

    venv_site = Path(sites(py)[0])
    base_sites = sites(base_python)
    if numpy_major(env_report(Path(base_python)).get("numpy")) not in (None, 1):
        # The base has numpy 2: packages compiled against it must not be importable next to
        # numpy 1.26, or an optional import breaks the models. Seen on the H200 image:
        # transformers' GenerationMixin imports sklearn -> scipy, which fails with numpy 1.26
        # ("module 'numpy' has no attribute 'long'"), so GPT2LMHeadModel did not import.
        # We expose the base site-packages through a folder of symlinks without them.
        base_sites = [
            str(filtered_site(Path(d), dest / "base-sites" / str(i), STUB_EXCLUDE))
            for i, d in enumerate(base_sites)
            if Path(d).is_dir()
        ]
    lines = [*(extra_site_dirs or []), *base_sites]
    # `site.addsitedir`, not bare paths: it also runs the .pth files found there, which is how
    # editable installs (gputok's own, `pip install -e backend_src`) hook themselves in.
    (venv_site / "gputok_base_env.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in lines)
    )
    if numpy_major(env_report(py).get("numpy")) != 1:
        if pip_args is None:
            pip_args = os.environ.get("GPUTOK_STUB_PIP_ARGS", "").split()
        subprocess.run(
            [
                str(base_python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--upgrade",
                "--target",
                str(venv_site),
                *pip_args,
                numpy_spec,
            ],
            check=True,
            env=_clean_env(),
        )
        got = env_report(py).get("numpy")
        if numpy_major(got) != 1:
            raise ServeError(f"{dest}: numpy is {got} after installing {numpy_spec}")
    return dest / "bin"


def choose_stub_bin(stub_env: Path | None = None, cache_dir: Path | None = None) -> Path:
    """The bin/ directory of the environment the stub will use.

    `stub_env` given: that environment (a venv or prefix). Otherwise this Python's own
    environment when its numpy is 1.x; else a venv prepared under `cache_dir` by `prepare_stub_env`.
    """
    if stub_env is not None:
        return Path(stub_env) / "bin"
    here = Path(sys.executable).parent
    if numpy_major(env_report(here / Path(sys.executable).name).get("numpy")) == 1:
        return here
    cache_dir = (
        cache_dir or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gputok"
    )
    return prepare_stub_env(cache_dir / f"stub-env-py{sys.version_info[0]}.{sys.version_info[1]}")


def check_stub_env(stub_bin: Path, need: tuple[str, ...] = ("numpy", "gputok")) -> dict:
    """Fail with a clear message unless the stub's environment has numpy<2 and `need` imports."""
    python = stub_bin / "python3"
    if not python.exists():
        raise ServeError(f"{stub_bin} has no python3; the stub finds its environment through it")
    report = env_report(python)
    for name in need:
        if report.get(name) is None:
            hint = {
                "gputok": "the gputok extension is not built: run `make build` "
                "(pip install --no-build-isolation -e backend_src)",
                "torch": "install torch (pip install torch==2.13.0 on the CPU machine)",
                "transformers": "install requirements/serve.txt",
            }.get(name, "install it")
            raise ServeError(
                f"the Python-backend environment {report['prefix']} cannot import {name}: "
                f"{report.get(name + '_error')}; {hint}"
            )
    if numpy_major(report.get("numpy")) != 1:
        raise ServeError(
            f"the Python-backend environment {report['prefix']} has numpy {report.get('numpy')}; "
            "the stub of nvidia-pytriton 0.7.0 crashes on every string input with numpy 2. "
            "Use --stub-env with a numpy<2 venv, or let gputok-serve build one (--prepare-stub-env)."
        )
    return report


def server_env(dist: TritonDist, stub_bin: Path, report: dict, base: dict | None = None) -> dict:
    """Environment for tritonserver and its stubs.

    LD_LIBRARY_PATH: the bundled libs, and first the folder of the libpython that belongs to the
    stub environment's interpreter. The stub links `libpython3.X.so.1.0` by soname; without this
    it gets the system's (Debian 3.11.2 here) while its stdlib comes from the venv's base (pyenv
    3.11.7 here), and extension modules such as _ssl then fail with `undefined symbol`.
    """
    env = dict(os.environ if base is None else base)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    env["LD_LIBRARY_PATH"] = ld_library_path(dist, report, env.get("LD_LIBRARY_PATH"))
    env["PATH"] = f"{stub_bin}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def ld_library_path(dist: TritonDist, report: dict, current: str | None = None) -> str:
    parts = []
    if report.get("libpython"):
        parts.append(str(Path(report["libpython"]).parent))
    parts.append(str(dist.libs))
    if current:
        parts.append(current)
    return ":".join(parts)


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on (or holds) the port. SO_REUSEADDR, as Triton's own
    listeners set it: without it, the connections a just-stopped server closed (TIME_WAIT, up
    to 60 s) made a restart on the same port fail with "already in use" (
    tests/e2e/test_restart.py), although tritonserver itself could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(n: int = 3, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct free ports, ascending (for a server's HTTP, gRPC and metrics ports)."""
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port(host))
    return sorted(ports)


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


def _processes() -> Iterator[tuple[Path, int, int]]:
    """(/proc entry, parent pid, process group) of every process (Linux; none elsewhere)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            yield entry, int(fields[1]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue


def process_group(pgid: int) -> list[int]:
    """Pids of the processes in process group `pgid` (Linux /proc; empty elsewhere)."""
    return [int(entry.name) for entry, _, group in _processes() if group == pgid]


def stub_processes(server_pid: int) -> dict[int, str]:
    """{pid: model} of the Python-backend stubs that tritonserver `server_pid` started (Linux
    /proc; empty elsewhere). The stub's command line names the model's folder."""
    out: dict[int, str] = {}
    for entry, ppid, _ in _processes():
        if ppid != server_pid:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"triton_python_backend_stub"):
            model = (
                Path(argv[1].decode(errors="replace")).parent.parent.name if len(argv) > 1 else "?"
            )
            out[int(entry.name)] = model
    return out


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


# tritonserver prints nothing before it has parsed its options, so from its first line of
# output on, the key can be blanked in its argv (TritonServer.start).
KEY_MASK = "*"


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


def scrub_argv(pid: int, secret: str) -> int:
    """Overwrite every copy of `secret` in process `pid`'s argv with `KEY_MASK`s, in place, so
    /proc/PID/cmdline (readable by every local user) no longer shows it. Returns how many
    copies were blanked. tritonserver 2.51 takes the restricted-API key only as an argument and
    copies it into its own strings while parsing, so blanking the original afterwards is safe.
    Needs ptrace access to `pid` (our own child qualifies); raises OSError otherwise."""
    if not secret:
        return 0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    arg_start, arg_end = int(fields[45]), int(fields[46])  # stat fields 48 and 49
    needle = secret.encode()
    done = 0
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
        mem.seek(arg_start)
        args = mem.read(arg_end - arg_start)
        at = args.find(needle)
        while at >= 0:
            mem.seek(arg_start + at)
            mem.write(KEY_MASK.encode() * len(needle))
            done += 1
            at = args.find(needle, at + len(needle))
    return done


def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to send SIGTERM when the parent exits."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass  # not Linux/glibc: the atexit-free path is then only SIGTERM/Ctrl-C handling


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
            preexec_fn=_die_with_parent,
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
            _wait_group_gone(proc.pid, 10.0)
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


def _wait_group_gone(pgid: int, timeout: float) -> None:
    """Wait until no process of group `pgid` is left (a SIGKILLed stub may take a moment to
    exit, and its regions must not be unlinked while it could still map them anew)."""
    deadline = time.monotonic() + timeout
    while process_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
