"""The manifest: the run's settings, each shard's entry, verifying shards against it, and
reading the output."""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

import numpy as np

from ._common import FORMAT_NAME, FORMAT_VERSION, MANIFEST
from .files import _digest_of, _load_json, hash_file

if TYPE_CHECKING:
    from .spec import ShardSpec


def _settings(spec: ShardSpec) -> dict:
    import gputok

    return {
        "tokenizer": "gpt2",
        "ranks_sha256": gputok.GPT2_RANKS_SHA256,
        "dtype": "uint16",
        "eot": bool(spec.eot),
        "eot_token": 50256,
        "input_format": spec.format,
        "field": spec.field if spec.format != "text" else None,
        "text_separator": spec.text_separator if spec.format == "text" else None,
        "utf8_errors": spec.errors,
        "skip_empty": bool(spec.skip_empty),
    }


def settings_digest(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def verify_entry(out_dir: str, entry: dict, *, hashes: bool = True) -> str | None:
    """None when the shard's files match ``entry`` (sizes, and the recorded digest, xxh3_128 or
    sha256, when ``hashes``), else why not."""
    for part in ("bin", "idx"):
        rec = entry.get(part) or {}
        if rec.get("file") != f"{entry.get('name')}.{part}":
            return f"{part}: the entry names {rec.get('file')!r}"
        path = os.path.join(out_dir, rec["file"])
        if not os.path.isfile(path):
            return f"{rec['file']} missing"
        if os.path.getsize(path) != rec.get("bytes"):
            return f"{rec['file']}: size {os.path.getsize(path)} != {rec.get('bytes')}"
        if hashes:
            recorded = _digest_of(rec)
            if recorded is None:
                return f"{rec['file']}: the entry has no hash"
            algorithm, digest = recorded
            if hash_file(path, algorithm) != digest:
                return f"{rec['file']}: {algorithm} differs from the manifest"
    return None


def build_manifest(
    settings: dict, base: str, fmt: str, entries: list[dict], *, complete: bool
) -> dict:
    """manifest.json: deterministic (no times or hosts), so reruns can be compared."""

    def total(key):
        vals = [e.get(key) for e in entries]
        return None if any(v is None for v in vals) else sum(vals)

    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "layout": {
            "bin": "raw little-endian uint16 token ids, no header",
            "idx": "raw little-endian int64 offsets into .bin, documents + 1, from 0",
        },
        "settings": settings,
        "settings_sha256": settings_digest(settings),
        "input_root": base,
        "complete": complete,
        "totals": {
            "shards": len(entries),
            "documents": total("documents"),
            "tokens": total("tokens"),
            "text_bytes": total("text_bytes"),
            "skipped_invalid_utf8": total("skipped_invalid_utf8"),
            "skipped_empty": total("skipped_empty"),
        },
        "shards": entries,
    }


def load_shard(out_dir, name: str) -> tuple[np.memmap, np.memmap]:
    """(tokens uint16, offsets int64) of one shard, memory-mapped (an empty file, the .bin of
    a shard with no documents, as an empty array: mmap refuses empty files)."""
    out_dir = os.fspath(out_dir)
    return tuple(
        np.memmap(path, dtype=dt, mode="r") if os.path.getsize(path) else np.zeros(0, dt)
        for path, dt in (
            (os.path.join(out_dir, f"{name}.bin"), "<u2"),
            (os.path.join(out_dir, f"{name}.idx"), "<i8"),
        )
    )


def verify_corpus(out_dir, *, hashes: bool = True) -> list[str]:
    """Problems found checking every manifest entry against its files ([] = all good)."""
    out_dir = os.fspath(out_dir)
    man = _load_json(os.path.join(out_dir, MANIFEST))
    if man is None:
        return [f"{out_dir}: no readable {MANIFEST}"]
    problems = []
    if not man.get("complete"):
        problems.append("manifest says the run is not complete")
    for e in man.get("shards", []):
        why = verify_entry(out_dir, e, hashes=hashes)
        if why:
            problems.append(f"{e.get('name')}: {why}")
            continue
        tokens, offsets = load_shard(out_dir, e["name"])
        if (
            len(offsets) != e["documents"] + 1
            or int(offsets[0]) != 0
            or int(offsets[-1]) != len(tokens)
            or len(tokens) != e["tokens"]
        ):
            problems.append(f"{e['name']}: index does not match the token file")
    return problems
