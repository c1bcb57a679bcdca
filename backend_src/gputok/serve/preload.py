"""The libraries gputok-serve and the Docker image's entry point preload into tritonserver
(`LD_PRELOAD`), each standing in front of a few of Triton 2.51's C API calls
(backend_src/csrc/serve/, docs/reliability.md):

- `libgputok_triton_codes.so`: a request body that is not JSON, or JSON with fields of the wrong
  type, gets HTTP 400 instead of 500 (Triton reports its JSON wrapper's errors as INTERNAL);
- `libgputok_triton_strings.so`: a request whose BYTES input ends inside its last element is
  refused alone, before the dynamic batcher can put it in a batch, where the Python backend
  fails every request of the batch with it (Triton core misses that case).

Standard library only (imported before the native extension may be importable).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

JSON_CODES = "libgputok_triton_codes.so"
STRING_CHECK = "libgputok_triton_strings.so"
# The Docker entry point's switches: GPUTOK_TRITON_JSON_500=1 keeps Triton's 500s,
# GPUTOK_STRING_CHECK=0 leaves strings to Triton alone.
KEEP_500_ENV = "GPUTOK_TRITON_JSON_500"
STRING_CHECK_ENV = "GPUTOK_STRING_CHECK"
_SWITCHES = {JSON_CODES: "--triton-json-500", STRING_CHECK: "--no-string-check"}


class MissingLibrary(RuntimeError):
    """The build lacks one of the preloaded libraries (a package built before it existed)."""


def library(name: str) -> Path:
    """The built library `name`, found beside the package's native modules without importing
    them (an editable install keeps them in site-packages, apart from the Python files)."""
    spec = importlib.util.find_spec("gputok")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(folder) / name
        if lib.is_file():
            return lib
    raise MissingLibrary(
        f"{name} is not in the gputok package (an older build?): rebuild it (make setup), or "
        f"serve without it (gputok-serve {_SWITCHES.get(name, '')})"
    )


def libraries(json_400: bool, check_strings: bool) -> list[Path]:
    """The libraries to preload for these settings (MissingLibrary if one is not built)."""
    names = ([JSON_CODES] if json_400 else []) + ([STRING_CHECK] if check_strings else [])
    return [library(n) for n in names]


def with_preload(env: dict, libs: list[Path]) -> dict:
    """`env` with `libs` first on LD_PRELOAD, in order (what was there stays, after them)."""
    out = dict(env)
    mine = [str(p) for p in libs]
    rest = [p for p in out.get("LD_PRELOAD", "").replace(":", " ").split() if p not in mine]
    if mine or rest:
        out["LD_PRELOAD"] = " ".join(mine + rest)
    return out


def env_flag(env: dict, name: str, default: bool) -> bool:
    """The Docker entry point's switch `name` in `env`: 1/true/yes/on, 0/false/no/off, else
    `default`."""
    value = env.get(name, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return default


def container_libraries(env: dict | None = None) -> list[Path]:
    """What the Docker entry point preloads, by its environment (both by default)."""
    env = os.environ if env is None else env
    return libraries(
        json_400=not env_flag(env, KEEP_500_ENV, False),
        check_strings=env_flag(env, STRING_CHECK_ENV, True),
    )
