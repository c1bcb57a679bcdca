"""The environment the Python-backend stub runs in, and tritonserver's environment variables.

What the server needs (found on these machines; docs/serving.md):
- `nvidia_pytriton.libs` on LD_LIBRARY_PATH;
- a Python-backend stub built for the running Python's X.Y, placed in `backends/python/`
  (the wheel ships one per version under `python_backend_stubs/X.Y/`; `gputok.serve.dist`);
- the stub takes its packages from the environment whose `bin/` is first on PATH (it ignores
  PYTHONPATH), and that environment must have numpy<2: with numpy 2.x every TYPE_STRING input
  crashes the stub. Where the system Python has numpy 2 (the GPU machine), `prepare_stub_env`
  builds a small venv with numpy 1.26.4 plus a .pth that points at the system site-packages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from gputok.serve.dist import ServeError, TritonDist, ld_library_path

STUB_NUMPY = "numpy==1.26.4"


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
