"""The tritonserver that PyPI's nvidia-pytriton==0.7.0 bundles (server 2.51): find it, and build
the backends folder with the Python-backend stub for the running Python.

Standard library only (like all of `gputok.serve.triton`), so it works before the native
extension is importable and can report that the build is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

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


def ld_library_path(dist: TritonDist, report: dict, current: str | None = None) -> str:
    parts = []
    if report.get("libpython"):
        parts.append(str(Path(report["libpython"]).parent))
    parts.append(str(dist.libs))
    if current:
        parts.append(current)
    return ":".join(parts)
