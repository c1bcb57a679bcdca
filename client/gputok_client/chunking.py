"""Split a large text into pieces whose token ids, concatenated, equal the ids of the whole text.

GPT-2's pretokenizer regex has no look-behind, so tokenization restarts cleanly at any point
where a pretoken ends in the whole text *and* the piece before it ends the same way. Two kinds
of cut are provably safe (only ASCII bytes are inspected, which never occur inside a UTF-8
multi-byte sequence, so cuts never split a character):

- after a newline between two printable non-space ASCII characters (`x\\ny` -> `x\\n` | `y`):
  in the whole text that newline is a pretoken of its own (the whitespace run is one character
  and is followed by a non-space), and at the end of a piece `\\s++$` gives the same single
  newline;
- before a space between a printable non-space ASCII character and an ASCII letter
  (`x y` -> `x` | ` y`): ` ?\\p{L}+` takes the space with the word in both cases.

`<|endoftext|>` contains neither a space nor a newline, so no cut splits it.
"""

from __future__ import annotations

_PRINTABLE = frozenset(range(0x21, 0x7F))  # printable ASCII without space
_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def is_safe_cut(data: bytes, p: int) -> bool:
    """True when tokenizing data[:p] and data[p:] separately gives the ids of data."""
    if p <= 1 or p >= len(data) - 1:
        return False
    if data[p - 1] == 0x0A and data[p - 2] in _PRINTABLE and data[p] in _PRINTABLE:
        return True
    return data[p] == 0x20 and data[p - 1] in _PRINTABLE and data[p + 1] in _LETTERS


def split_text(data: bytes, target: int, hard_max: int | None = None) -> list[tuple[int, int]]:
    """(start, end) pieces of about `target` bytes, cut only at safe points.

    Searches back from start+target to start+target/2, then forward up to start+hard_max
    (default 4*target). Raises ValueError when no safe cut exists in that window (for example
    a megabyte without spaces or newlines): the caller should send a bigger piece.
    """
    if target <= 0:
        raise ValueError("target must be positive")
    hard_max = hard_max or 4 * target
    pieces = []
    start = 0
    n = len(data)
    while n - start > target:
        cut = None
        for p in range(start + target, start + target // 2, -1):
            if is_safe_cut(data, p):
                cut = p
                break
        if cut is None:
            for p in range(start + target + 1, min(n, start + hard_max + 1)):
                if is_safe_cut(data, p):
                    cut = p
                    break
        if cut is None:
            if n - start <= hard_max:
                break
            raise ValueError(
                f"no safe split point in bytes {start}..{start + hard_max}; use a larger chunk size"
            )
        pieces.append((start, cut))
        start = cut
    if start < n or not pieces:
        pieces.append((start, n))
    return pieces
