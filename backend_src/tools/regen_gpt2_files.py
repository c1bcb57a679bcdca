#!/usr/bin/env python3
"""Regenerate GPT-2's original ``encoder.json`` and ``vocab.bpe`` from the tiktoken ranks.

Why: the HF reference tokenizer (tests, bench) and ``gputok.load_hf_files`` need GPT-2's
original files, and we have no network on the GPU machine. The ranks file
(``gpt2.tiktoken``, sha256 306cd27f...930, shipped as package data) determines both
files byte for byte:

* ``vocab.bpe``: ``#version: 0.2`` then the 50,000 merges in rank order. The merge that
  creates token *r* (r >= 256) is the unique two-part split that BPE over *r*'s bytes
  produces when only ranks < r may be used: the last merge BPE performs joins exactly
  those two parts.
* ``encoder.json``: ``json.dumps(vocab)`` with default arguments, tokens spelled with
  GPT-2's bytes->unicode map, in id order, ``<|endoftext|>`` (50256) last.

Both outputs are checked against the original sha256s; the CLI exits non-zero on a
mismatch. Cost: ~1-2 s on one core (50k tiny BPE runs in pure Python).

Usage::

    python backend_src/tools/regen_gpt2_files.py --out-dir .cache/gpt2
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from pathlib import Path

RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
EOT = "<|endoftext|>"
EOT_ID = 50256

DEFAULT_RANKS = Path(__file__).resolve().parents[1] / "gputok" / "data" / "gpt2.tiktoken"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-unicode map (encoder.py, verbatim logic)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


def load_ranks(path: str | Path = DEFAULT_RANKS, check_hash: bool = True) -> dict[bytes, int]:
    """Read a tiktoken-format ranks file (``base64 rank`` per line)."""
    data = Path(path).read_bytes()
    if check_hash:
        got = hashlib.sha256(data).hexdigest()
        if got != RANKS_SHA256:
            raise ValueError(f"{path}: sha256 {got} != expected {RANKS_SHA256}")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if not line:
            continue
        tok, rank = line.split()
        ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def _last_merge(token: bytes, limit: int, ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    """Run tiktoken-style BPE on ``token`` using only ranks < ``limit``; return the final
    two parts. BPE must end with exactly two parts (else the vocab is not a BPE vocab)."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best_rank = limit
        best_i = -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < best_rank:
                best_rank = r
                best_i = i
        if best_i < 0:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    if len(parts) != 2:
        raise ValueError(f"token {token!r} (rank {limit}) does not split into two parts: {parts!r}")
    return parts[0], parts[1]


def build_files(ranks: dict[bytes, int]) -> tuple[bytes, bytes]:
    """Return (encoder_json_bytes, vocab_bpe_bytes) for the given ranks."""
    b2u = bytes_to_unicode()

    def spell(b: bytes) -> str:
        return "".join(b2u[x] for x in b)

    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    if [r for _, r in by_rank] != list(range(len(by_rank))):
        raise ValueError("ranks are not dense 0..n-1")
    vocab = {spell(tok): rank for tok, rank in by_rank}
    vocab[EOT] = EOT_ID if len(by_rank) == EOT_ID else len(by_rank)

    lines = ["#version: 0.2"]
    for tok, rank in by_rank:
        if len(tok) == 1:
            continue  # the 256 byte tokens are the alphabet, not merges
        left, right = _last_merge(tok, rank, ranks)
        lines.append(f"{spell(left)} {spell(right)}")
    vocab_bpe = ("\n".join(lines) + "\n").encode("utf-8")
    encoder_json = json.dumps(vocab).encode("utf-8")
    return encoder_json, vocab_bpe


def regenerate(
    out_dir: str | Path,
    ranks_path: str | Path = DEFAULT_RANKS,
    check: bool = True,
) -> dict[str, Path]:
    """Write ``encoder.json`` and ``vocab.bpe`` (plus HF-named copies ``vocab.json`` and
    ``merges.txt``) into ``out_dir``. With ``check`` raise ValueError on a hash mismatch
    (files are still written, for inspection). Returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    encoder_json, vocab_bpe = build_files(load_ranks(ranks_path))
    paths = {}
    for name, data in (
        ("encoder.json", encoder_json),
        ("vocab.bpe", vocab_bpe),
        ("vocab.json", encoder_json),  # HF's names for the same bytes
        ("merges.txt", vocab_bpe),
    ):
        p = out / name
        p.write_bytes(data)
        paths[name] = p
    if check:
        errors = []
        for name, data, want in (
            ("encoder.json", encoder_json, ENCODER_JSON_SHA256),
            ("vocab.bpe", vocab_bpe, VOCAB_BPE_SHA256),
        ):
            got = hashlib.sha256(data).hexdigest()
            if got != want:
                errors.append(f"{name}: sha256 {got} != expected {want}")
        if errors:
            raise ValueError("; ".join(errors))
    return paths


def ensure_files(out_dir: str | Path, ranks_path: str | Path = DEFAULT_RANKS) -> dict[str, Path]:
    """Regenerate only if the files are missing or wrong (cheap cache for tests/bench)."""
    out = Path(out_dir)
    want = {
        "encoder.json": ENCODER_JSON_SHA256,
        "vocab.bpe": VOCAB_BPE_SHA256,
        "vocab.json": ENCODER_JSON_SHA256,
        "merges.txt": VOCAB_BPE_SHA256,
    }
    ok = all(
        (out / n).is_file() and hashlib.sha256((out / n).read_bytes()).hexdigest() == h
        for n, h in want.items()
    )
    if ok:
        return {n: out / n for n in want}
    return regenerate(out, ranks_path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default=str(DEFAULT_RANKS), help="tiktoken-format ranks file")
    ap.add_argument("--out-dir", required=True, help="where to write encoder.json / vocab.bpe")
    args = ap.parse_args(argv)
    try:
        paths = regenerate(args.out_dir, args.ranks)
    except ValueError as e:
        print(f"regen_gpt2_files: FAILED: {e}", file=sys.stderr)
        return 1
    for p in paths.values():
        print(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
