"""Turn rows of text into tokenizer requests that fit the server's limits, and the ids back into rows.

A row (a whole file, or one line with --lines) is cut into pieces only at exact points
(chunking.py) and at allowed special tokens, whose ids the client puts in place itself. Pieces
go into requests of at most the server's rows and bytes per request; the answers are stitched
back in order, so the ids of every row equal those of the row sent whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .chunking import split_text

# r50k_base's one special token (tiktoken's gpt2 / r50k_base encodings: <|endoftext|> = 50256).
SPECIAL_TOKENS = {"<|endoftext|>": 50256}


@dataclass(frozen=True)
class Limits:
    """What one tokenizer request may hold (the model's config.pbtxt)."""

    rows: int = 256  # min(max_batch_size, max_rows_per_request)
    bytes: int = 4 << 20  # max_bytes_per_request


def allowed_specials(value: str | None) -> dict[bytes, int]:
    """--allowed-special: "" (none), "all", or a comma list of special tokens -> {bytes: id}."""
    if not value:
        return {}
    if value.strip() == "all":
        return {k.encode(): v for k, v in SPECIAL_TOKENS.items()}
    out = {}
    for tok in (t.strip() for t in value.split(",")):
        if tok not in SPECIAL_TOKENS:
            raise ValueError(
                f"--allowed-special: unknown special token {tok!r}; "
                f"known: {', '.join(SPECIAL_TOKENS)} (or all)"
            )
        out[tok.encode()] = SPECIAL_TOKENS[tok]
    return out


@dataclass
class Plan:
    """pieces[i] = (row, start, end) of text to tokenize; layout[row] = piece indices (>= 0)
    and special ids (stored as -1 - id), in order."""

    rows: list[bytes]
    pieces: list[tuple[int, int, int]] = field(default_factory=list)
    layout: list[list[int]] = field(default_factory=list)

    def groups(self, limits: Limits, spread: int = 1) -> list[list[int]]:
        """Consecutive piece indices per request: at most limits.rows pieces and limits.bytes
        bytes. `spread` > 1 keeps requests to about 1/spread of the text, so that one big file
        still makes `spread` requests to run at once."""
        total = sum(b - a for _, a, b in self.pieces)
        budget = min(limits.bytes, max(1, -(-total // max(1, spread))))
        out: list[list[int]] = []
        cur: list[int] = []
        size = 0
        for i, (_, a, b) in enumerate(self.pieces):
            n = b - a
            if cur and (len(cur) >= limits.rows or size + n > budget):
                out.append(cur)
                cur, size = [], 0
            cur.append(i)
            size += n
        if cur:
            out.append(cur)
        return out

    def assemble(self, piece_ids: list[np.ndarray]) -> list[np.ndarray]:
        """int32 ids of every row from the ids of every piece."""
        out = []
        for items in self.layout:
            parts = [piece_ids[i] if i >= 0 else np.array([-1 - i], np.int32) for i in items]
            out.append(np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32))
        return out

    def locate(self, piece: int, offset: int | None) -> str:
        """Where byte `offset` of piece `piece` (or the piece itself) is in the input, in words."""
        row, a, b = self.pieces[piece]
        line = "" if len(self.rows) == 1 else f"line {row + 1}, "
        if offset is None:
            return f"in {line}bytes {a}..{b}"
        return f"at {line}byte offset {a + offset}"


def make_plan(
    rows: list[bytes], target: int, hard_max: int, specials: dict[bytes, int] | None = None
) -> Plan:
    """Cut every row at allowed special tokens, then into pieces of about `target` bytes and at
    most `hard_max` (ValueError where no exact cut exists within hard_max)."""
    plan = Plan(rows)
    pattern = (
        re.compile(b"|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
        if specials
        else None
    )
    for r, data in enumerate(rows):
        items: list[int] = []
        segments = []
        pos = 0
        for m in pattern.finditer(data) if pattern else ():
            segments.append((pos, m.start(), specials[m.group(0)]))
            pos = m.end()
        segments.append((pos, len(data), None))
        for a, b, special in segments:
            if b > a:
                try:
                    cuts = split_text(data[a:b], target, hard_max)
                except ValueError as e:
                    where = "" if len(rows) == 1 else f"line {r + 1}: "
                    raise ValueError(f"{where}{e}") from None
                for pa, pb in cuts:
                    items.append(len(plan.pieces))
                    plan.pieces.append((r, a + pa, a + pb))
            if special is not None:
                items.append(-1 - special)
        plan.layout.append(items)
    return plan
