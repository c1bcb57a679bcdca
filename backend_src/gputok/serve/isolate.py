"""Serve Python models with string inputs without Triton's dynamic batcher (`gputok-serve
--isolate-requests`; off by default since 2026-12-02, when the preloaded string check,
libgputok_triton_strings.so, began refusing the malformed requests below before batching).

Measured on 2026-11-25 (server 2.51, the 2-core CPU machine, 8 clients sending valid one-row
requests over HTTP and gRPC): 40 HTTP binary-tensor requests whose QUERY length prefix says
0xFFFFFFFF while 4 bytes follow made 162 of the valid requests fail, each with the attacker's
error text. Where: Triton core's `InferenceRequest::ValidateBytesInputs` does not check that
the last string element is complete (it stops when the buffer ends), so the request passes
validation and is batched; the Python backend's `SaveRequestsToSharedMemory` then finds the
truncated element and fails the whole batch with it. Neither is our code, and core's check
still lacks the test in its main branch of June 2026, so a newer image does not help.
Without the dynamic batcher each request executes alone, and only the malformed one fails
(0 failures in the same run); it cost 31% of the CPU machine's throughput on small requests
(1,052 vs 1,526 requests/s at 8 clients). docs/reliability.md has the figures.

The isolated repository is a content-named folder in the user's cache: links to every model
file, and a rewritten config.pbtxt for the models changed. Nothing is left per run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from gputok.serve import pbtxt


def models_to_isolate(repo: Path) -> list[str]:
    """Models of `repo` with a string input, the Python backend and a dynamic batcher."""
    names = []
    for config_path in sorted(Path(repo).glob("*/config.pbtxt")):
        config = pbtxt.read_config(config_path)
        if (
            config.backend == "python"
            and config.HasField("dynamic_batching")
            and pbtxt.has_string_input(config)
        ):
            names.append(config_path.parent.name)
    return names


def isolation_note(names: list[str], batch_hint: str) -> str:
    """The line a launcher prints when it isolates `names`; `batch_hint` says how to batch."""
    return (
        f"model(s) {', '.join(names)} served without the dynamic batcher, one request per "
        f"execute ({batch_hint} batches them)"
    )


def isolated_repository(repo: Path, cache: Path | None = None) -> tuple[Path, list[str]]:
    """(a repository that serves `repo` with those models unbatched, the models changed).
    `repo` itself when no model needs it."""
    repo = Path(repo).resolve()
    names = models_to_isolate(repo)
    if not names:
        return repo, []
    key = hashlib.sha256(str(repo).encode())
    for config_path in sorted(repo.glob("*/config.pbtxt")):
        key.update(config_path.read_bytes())
    root = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gputok"
    final = root / "isolated-repos" / key.hexdigest()[:20]
    if final.is_dir():
        return final, names
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
    try:
        for model in sorted(p for p in repo.iterdir() if p.is_dir()):
            if model.name not in names:
                (tmp / model.name).symlink_to(model)
                continue
            (tmp / model.name).mkdir()
            for entry in model.iterdir():
                if entry.name != "config.pbtxt":
                    (tmp / model.name / entry.name).symlink_to(entry)
            shutil.copy2(model / "config.pbtxt", tmp / model.name / "config.pbtxt")
            pbtxt.drop_dynamic_batching(tmp / model.name / "config.pbtxt")
        # OSError: another gputok-serve built the same folder first
        with contextlib.suppress(OSError):
            os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final, names
