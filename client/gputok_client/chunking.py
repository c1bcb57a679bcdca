"""Split a large text into pieces whose token ids, concatenated, equal the ids of the whole text.

GPT-2's pretokenizer (tiktoken's r50k pattern
`'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s`) has no
look-behind, and BPE runs on each pretoken alone. So a cut at byte p is exact when p is a
pretoken boundary of the whole text and the last pretoken of the piece before it is the same as
in the whole text. With X the character before p and Y the one after it:

1. X is not White_Space and Y is: no alternative takes a whitespace character after a
   non-whitespace one, so p is a boundary; the piece ends in X, which no look-ahead alternative
   (`\\s++$`, `\\s+(?!\\S)`) can match, and every other alternative that matched in the whole
   text matches the same way at the piece's end (possessive runs stop there either way).
2. X and Y are both not White_Space and of different classes (letter L, number N, other):
   every pretoken holding a letter is letters (after an optional space or apostrophe), one
   holding a number is numbers, so p is a boundary; the end of the piece follows as in 1.
   Except X = `'`, which may start a contraction (`'s`, `'ll`, ...).
3. `x\\ny` -> `x\\n` | `y` with x, y printable non-space ASCII: in the whole text the newline
   is a pretoken of its own, and at the end of a piece `\\s++$` gives the same single newline.

Cuts fall only on character boundaries (X and Y must decode), never inside a `<|...|>` special
token (cutting one would hide it from the server's special-token check), and never next to a
character that Python's Unicode tables leave unassigned (gputok classifies with Unicode 16; a
character new to it would be classed "other" here). `tests/serving/test_client_chunking.py` checks every
rule against tiktoken, for every code point Python assigns.
"""

from __future__ import annotations

import re
import unicodedata

# Unicode 16 White_Space (PropList.txt): what `\s` means to tiktoken and HF tokenizers.
# (Python's str.isspace() also counts U+001C..U+001F, so it is not used.)
WHITE_SPACE = frozenset(
    [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B)]
    + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)
_SPECIAL_SHAPE = re.compile(rb"<\|[^\s<>|]{1,64}\|>")
_MAX_SPECIAL = 68  # longest text _SPECIAL_SHAPE matches
_PRINTABLE = frozenset(range(0x21, 0x7F))  # printable ASCII without space


def _char_at(data: bytes, p: int) -> str | None:
    """The character that starts at byte p, or None (not a UTF-8 boundary, or invalid)."""
    b = data[p]
    if b < 0x80:
        return chr(b)
    n = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    if b < 0xC2 or b > 0xF4:
        return None
    try:
        return data[p : p + n].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _char_before(data: bytes, p: int) -> str | None:
    """The character that ends at byte p (exclusive), or None."""
    if data[p - 1] < 0x80:
        return chr(data[p - 1])
    for q in range(p - 2, max(-1, p - 5), -1):
        if not 0x80 <= data[q] < 0xC0:
            ch = _char_at(data, q)
            return ch if ch is not None and q + len(ch.encode("utf-8")) == p else None
    return None


def char_class(ch: str) -> str | None:
    """S (White_Space), L, N, P (anything else), or None when Python leaves it unassigned."""
    if ord(ch) in WHITE_SPACE:
        return "S"
    if ord(ch) < 0x80:
        return "L" if ch.isalpha() else "N" if ch.isdigit() else "P"
    cat = unicodedata.category(ch)
    if cat == "Cn":
        return None
    return cat[0] if cat[0] in "LN" else "P"


def _in_special(data: bytes, p: int) -> bool:
    lo = max(0, p - _MAX_SPECIAL)
    if data.find(b"<|", lo, p) == -1:
        return False
    return any(m.start() < p < m.end() for m in _SPECIAL_SHAPE.finditer(data, lo, p + _MAX_SPECIAL))


def is_safe_cut(data: bytes, p: int) -> bool:
    """True when tokenizing data[:p] and data[p:] separately gives the ids of data."""
    if p <= 0 or p >= len(data):
        return False
    x, y = data[p - 1], data[p]
    if x == 0x0A and y in _PRINTABLE and p >= 2 and data[p - 2] in _PRINTABLE:
        ok = True  # rule 3
    elif 0x80 <= y < 0xC0:
        return False  # inside a character
    else:
        cx, cy = _char_before(data, p), _char_at(data, p)
        if cx is None or cy is None or cx == "'":
            return False
        kx, ky = char_class(cx), char_class(cy)
        ok = kx not in (None, "S") and ky is not None and (ky == "S" or kx != ky)
    return ok and not _in_special(data, p)


def split_text(data: bytes, target: int, hard_max: int | None = None) -> list[tuple[int, int]]:
    """(start, end) pieces of about `target` bytes and at most `hard_max`, cut only at safe points.

    Searches back from start+target to start+target/2, then forward up to start+hard_max
    (default 4*target). Raises ValueError when no safe cut exists in that window (for example
    megabytes of one letter repeated, a single pretoken): no exact split exists there.
    """
    if target <= 0:
        raise ValueError("target must be positive")
    hard_max = max(hard_max or 4 * target, target)
    pieces = []
    start = 0
    n = len(data)
    while n - start > target:
        cut = _find_cut(data, start, target, hard_max)
        if cut is None:
            if n - start <= hard_max:
                break
            raise ValueError(
                f"no exact split point in bytes {start}..{start + hard_max} (one pretoken, such "
                f"as a run of letters or digits, longer than {hard_max} bytes)"
            )
        pieces.append((start, cut))
        start = cut
    if start < n or not pieces:
        pieces.append((start, n))
    return pieces


def _find_cut(data: bytes, start: int, target: int, hard_max: int) -> int | None:
    for p in range(start + target, start + target // 2, -1):
        if is_safe_cut(data, p):
            return p
    for p in range(start + target + 1, min(len(data), start + hard_max + 1)):
        if is_safe_cut(data, p):
            return p
    return None
