"""Exact incremental detokenization: token ids arrive a few at a time, text leaves only when whole.

A byte-level BPE token can end inside a multi-byte UTF-8 character (one CJK character or emoji
is often two or three GPT-2 tokens), so decoding each step's tokens on its own garbles text, and
re-decoding a growing window costs O(n^2) and can move backwards. The exact rule: keep the
undecoded tail bytes and emit the longest prefix that is complete UTF-8. The concatenated chunks
then equal the one-shot `decode` of all the ids, with any `errors` mode.

The byte-level work is Python's own incremental UTF-8 decoder (`codecs`, in C), which holds at
most 3 bytes (the longest incomplete prefix of a 4-byte character), emits text as soon as it is
complete, never takes text back, and treats a real U+FFFD (EF BF BD) as text like any other
character. Invalid sequences: under errors="replace" each one becomes U+FFFD as soon as it is
known to be invalid, following the same "maximal subpart" rule as `bytes.decode("utf-8",
"replace")`, so the chunks equal `decode(ids, errors="replace")` of the whole; a sequence cut
by the end of the stream becomes one U+FFFD at `finish()`. Under errors="strict" the step that
completes an invalid sequence raises UnicodeDecodeError.

Cost (2-core CPU machine, 2026-11-25, `tests/serving/test_stream.py::test_cost_per_token` prints it):
a few microseconds per step, dominated by the per-call overhead of `decode_bytes`, not by the
UTF-8 work; a C++ twin would save little.

`decode_step` is the stateless form the Triton detokenizer uses: a server may send a stream's
steps to any model instance, so instead of state the streaming model sends, with each step's new
ids, up to 3 ids before them. The pending tail depends only on the last 3 bytes before the step
(a lead byte within them resynchronises UTF-8; bytes before them are complete or already
replaced), and those bytes come from at most 3 previous tokens, since every token is >= 1 byte.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

MAX_PENDING = 3  # bytes: the longest incomplete prefix of a UTF-8 character
CONTEXT_TOKENS = 3  # previous ids a stateless step needs (every token decodes to >= 1 byte)


def _decoder(errors: str, pending: bytes = b""):
    d = codecs.getincrementaldecoder("utf-8")(errors)
    if pending:
        d.setstate((pending, 0))
    return d


def pending_tail(prev: bytes) -> bytes:
    """The bytes of `prev` that an incremental decoder still holds after reading all of it.

    Only the last 3 bytes matter (see the module's docstring); the result has at most 3 bytes.
    Under errors="strict" an invalid sequence inside those bytes is not raised again here: it
    was the error of the step that read it.
    """
    d = _decoder("replace")
    d.decode(prev[-MAX_PENDING:], False)
    return d.getstate()[0]


def decode_step(prev: bytes, new: bytes, final: bool, errors: str = "replace") -> str:
    """Text that `new` completes, given the stream's bytes `prev` before it (only its last 3
    bytes are read). With final=True an incomplete tail is flushed (U+FFFD, or an error)."""
    d = _decoder(errors, pending_tail(prev))
    return d.decode(new, final)


class IncrementalDecoder:
    """Per-stream detokenizer: `feed(ids)` returns the text those ids complete; `finish()` the rest.

    `tok` is a gputok Tokenizer (anything with `decode_bytes(ids) -> bytes`).
    """

    def __init__(self, tok, errors: str = "replace"):
        if errors not in ("replace", "strict"):
            raise ValueError(f"errors must be 'replace' or 'strict', not {errors!r}")
        self._tok = tok
        self._d = _decoder(errors)

    @property
    def pending(self) -> bytes:
        """Bytes read but not yet emitted as text (at most 3)."""
        return self._d.getstate()[0]

    def feed_bytes(self, data: bytes) -> str:
        return self._d.decode(data, False)

    def feed(self, ids: Iterable[int]) -> str:
        return self._d.decode(self._tok.decode_bytes(ids), False)

    def finish(self) -> str:
        """Flush the end of the stream: an incomplete tail becomes U+FFFD (or raises, strict)."""
        return self._d.decode(b"", True)
