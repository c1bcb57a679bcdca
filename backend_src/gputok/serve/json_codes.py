"""HTTP 400, not 500, for a request body that is not JSON or has fields of the wrong type.

Triton 2.51's HTTP frontend reports every error of its JSON wrapper as INTERNAL, which it answers
with 500 (docs/reliability.md gives the source lines). gputok-serve and the Docker image's entry
point preload `libgputok_triton_codes.so` (backend_src/csrc/serve/triton_error_codes.cpp) into
tritonserver: it relabels exactly the errors of the wrapper's readers as INVALID_ARG, which
Triton answers with 400, and passes every other error through. Standard library only (imported
before the native extension may be importable).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

LIB_NAME = "libgputok_triton_codes.so"
# The Docker entry point's switch: "1" keeps Triton's 500s (no preload).
KEEP_500_ENV = "GPUTOK_TRITON_JSON_500"


class MissingCodesLibrary(RuntimeError):
    """The build has no libgputok_triton_codes.so (a package built before it existed)."""


def codes_library() -> Path:
    """The built library, found beside the package's native modules without importing them
    (an editable install keeps them in site-packages, apart from the Python files)."""
    spec = importlib.util.find_spec("gputok")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(folder) / LIB_NAME
        if lib.is_file():
            return lib
    raise MissingCodesLibrary(
        f"{LIB_NAME} is not in the gputok package (an older build?): rebuild it (make setup), "
        "or keep Triton's 500s for malformed JSON (gputok-serve --triton-json-500, or "
        f"{KEEP_500_ENV}=1 in the Docker image)"
    )


def with_preload(env: dict, lib: Path) -> dict:
    """`env` with `lib` first on LD_PRELOAD (what was there stays, after it)."""
    out = dict(env)
    rest = [p for p in out.get("LD_PRELOAD", "").replace(":", " ").split() if p != str(lib)]
    out["LD_PRELOAD"] = " ".join([str(lib), *rest])
    return out


def keep_500(env: dict | None = None) -> bool:
    """Whether the Docker entry point is told to keep Triton's 500s."""
    value = (os.environ if env is None else env).get(KEEP_500_ENV, "").strip().lower()
    return value in ("1", "true", "yes", "on")
