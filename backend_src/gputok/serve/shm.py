"""The Python backend's shared-memory regions, and freeing the ones a dead server leaves.

Each Python-backend model instance of Triton 2.51 gets its own POSIX shared-memory region,
`/dev/shm/triton_python_backend_shm_region_<uuid>` (1 MiB, growing in 1 MiB steps). tritonserver
unlinks them on a clean shutdown, but a crash (SIGSEGV), a SIGKILL or a killed stub leaves them
behind: 95 MiB after five crashes in a probe on 2026-11-25. The names hold a random UUID, so the
regions of one server are exactly the ones its processes map or name on their command line;
`regions_of` reads those from /proc while the server runs, and `unlink_regions` frees them once
it is gone. Nothing else in /dev/shm is touched: other servers on the host keep theirs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PREFIX = "triton_python_backend_shm_region_"
SHM_DIR = Path("/dev/shm")


def _names_in(text: str) -> set[str]:
    out = set()
    for word in text.replace("\0", " ").replace("/", " ").split():
        if word.startswith(PREFIX) and "\n" not in word:
            out.add(word)
    return out


def regions_of(pids: Iterable[int]) -> set[str]:
    """Names of the Python-backend regions that processes `pids` map or name in their argv
    (the stub's second argument is its region). Linux /proc; empty elsewhere."""
    found: set[str] = set()
    for pid in pids:
        for part in ("maps", "cmdline"):
            try:
                text = Path(f"/proc/{pid}/{part}").read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            found |= _names_in(text)
    return found


def unlink_regions(names: Iterable[str], shm_dir: Path = SHM_DIR) -> tuple[int, int]:
    """Unlink the regions `names` that still exist; returns (count, bytes) freed. Only names
    with the Python backend's prefix are touched, and only as plain names in `shm_dir`."""
    count = size = 0
    for name in sorted(set(names)):
        if not name.startswith(PREFIX) or os.sep in name or name in (".", ".."):
            continue
        path = shm_dir / name
        try:
            n = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError:
            continue  # not ours to remove (another user's): leave it
        count += 1
        size += n
    return count, size
