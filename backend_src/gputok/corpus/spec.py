"""ShardSpec: what one Dask task is told (plain data, pickled to the workers)."""

from __future__ import annotations

import dataclasses

from ._common import DEFAULT_BATCH_BYTES
from .files import DEFAULT_HASH
from .parquet import MAX_EXPANSION


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """One input file and its shard, and the run's settings. The first block (format to
    skip_empty) is what the manifest records (manifest._settings); the rest is how the worker
    goes about it. ``manifest_entry``: the shard's entry in an earlier manifest, for a resume;
    ``fault``: a test hook (shard._maybe_fault)."""

    path: str = ""
    source: str = ""  # path relative to the inputs' root, as the manifest names it
    name: str = ""  # shard_00000, ...
    out_dir: str = ""
    format: str = "text"  # noqa: A003 - the CLI's --format
    field: str = "text"
    text_separator: str | None = None
    eot: bool = True
    errors: str = "strict"
    skip_empty: bool = False
    device: str = "auto"
    num_threads: int | None = 0  # None: the cluster decides (run._run_on_cluster)
    gpus: int = 0
    gpu_by_worker_name: bool = False
    batch_bytes: int = DEFAULT_BATCH_BYTES
    min_batch_bytes: int | None = None
    fsync: bool = True
    parquet_decoder: str = "auto"
    max_expansion: float = MAX_EXPANSION  # read_parquet's
    hash: str = DEFAULT_HASH  # noqa: A003 - the CLI's --hash
    manifest_entry: dict | None = None
    fault: dict | None = None
    # What the run saw before its tasks began, so that a task need not look again (one
    # system call each, and the GIL given up and waited for, a shard: 1 MB shards at 949 a GB):
    size: int | None = None  # the input file's size (None: stat it)
    entry_absent: bool = False  # no entry file of this shard: nothing to load or remove
