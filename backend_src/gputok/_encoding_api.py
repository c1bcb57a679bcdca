"""The rest of tiktoken's ``Encoding`` API, as a mixin of ``Tokenizer``, and tiktoken's registry
functions (``get_encoding``, ``encoding_for_model``, ``list_encoding_names``).

Every method keeps tiktoken 0.14's semantics (its ``tiktoken/core.py`` and the Rust
``_encode_unstable_native``); ``tests/core/test_encoding_api.py`` re-expresses tiktoken's own tests
for each one and compares with tiktoken itself. The mixin only uses what ``Tokenizer`` provides:
``encode``, ``encode_ordinary``, ``decode_bytes``, ``decode_single_token_bytes``, ``n_vocab``,
``_special_tokens`` and ``_vocab``.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Collection, Sequence
from typing import Literal

# r50k_base's pattern as tiktoken writes it (tiktoken_ext/openai_public.py, tiktoken 0.14):
# the pattern gputok's pretokenizer implements, for every vocabulary it loads.
R50K_PAT_STR = (
    r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
)
ENCODINGS = ("gpt2", "r50k_base")
# tiktoken 0.14's model table (tiktoken/model.py), the entries whose encoding gputok provides.
_R50K_MODELS = [
    "text-davinci-001",
    "text-curie-001",
    "text-babbage-001",
    "text-ada-001",
    "davinci",
    "curie",
    "babbage",
    "ada",
    "text-similarity-davinci-001",
    "text-similarity-curie-001",
    "text-similarity-babbage-001",
    "text-similarity-ada-001",
    "text-search-davinci-doc-001",
    "text-search-curie-doc-001",
    "text-search-babbage-doc-001",
    "text-search-ada-doc-001",
    "code-search-babbage-code-001",
    "code-search-ada-code-001",
]
MODEL_TO_ENCODING = {**dict.fromkeys(_R50K_MODELS, "r50k_base"), "gpt2": "gpt2", "gpt-2": "gpt2"}


class UnknownTokenError(KeyError, ValueError):
    """A token id that is not in the vocabulary (negative, a gap, or past the last id). A
    KeyError, as tiktoken raises for one, and a ValueError, as gputok always has."""

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else ""


def list_encoding_names() -> list[str]:
    """The encodings ``get_encoding`` provides: ``["gpt2", "r50k_base"]`` (the same ranks)."""
    return list(ENCODINGS)


def get_encoding(encoding_name: str, **options):
    """tiktoken's ``get_encoding``: a ``Tokenizer`` for "gpt2" or "r50k_base" (one vocabulary
    under two names, as in tiktoken). Without ``options`` the same object is returned on every
    call, as tiktoken caches its encodings; ``options`` go to ``gputok.gpt2`` (device, ...).
    Any other name raises ValueError, as tiktoken does for an unknown encoding.

        >>> gputok.get_encoding("gpt2").encode("hello world")
        [31373, 995]
    """
    if encoding_name not in ENCODINGS:
        raise ValueError(
            f"Unknown encoding {encoding_name!r}: gputok provides {list(ENCODINGS)} "
            "(GPT-2's byte-level BPE); use tiktoken for the others"
        )
    if options:
        return _make(encoding_name, tuple(sorted(options.items())))
    return _cached(encoding_name)


def _make(name: str, options: tuple):
    from . import gpt2

    tok = gpt2(**dict(options))
    tok.name = name
    return tok


@functools.cache
def _cached(name: str):
    return _make(name, ())


def encoding_name_for_model(model_name: str) -> str:
    """The encoding of a model, from tiktoken 0.14's table: "gpt2" for gpt2 / gpt-2,
    "r50k_base" for the GPT-3 base models (davinci, curie, ...). KeyError for any other model,
    as tiktoken raises for a model it does not know; a model of another encoding (gpt-4's
    cl100k_base, ...) is one gputok does not provide, and the message says to use tiktoken."""
    try:
        return MODEL_TO_ENCODING[model_name]
    except KeyError:
        raise KeyError(
            f"Could not map {model_name!r} to one of gputok's encodings {list(ENCODINGS)}; "
            "models of other encodings need tiktoken.encoding_for_model"
        ) from None


def encoding_for_model(model_name: str, **options):
    """tiktoken's ``encoding_for_model``: ``get_encoding(encoding_name_for_model(name))``."""
    return get_encoding(encoding_name_for_model(model_name), **options)


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte < 0xC0


def _last_char(data: bytes) -> tuple[str | None, int]:
    """(the last UTF-8 character of ``data``, its length), or (None, 1) when the tail is not
    valid UTF-8: bstr's ``decode_last_utf8``, which tiktoken's unstable encoding uses."""
    for k in range(1, min(4, len(data)) + 1):
        try:
            s = data[-k:].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(s) == 1:
            return s, k
    return None, 1


def _rust_is_whitespace(c: str) -> bool:
    """Rust's char::is_whitespace (Unicode White_Space). Python's isspace() also counts the
    information separators U+001C..U+001F, which White_Space does not."""
    return c.isspace() and not "\x1c" <= c <= "\x1f"


class EncodingAPI:
    """tiktoken's ``Encoding`` methods that ``Tokenizer``'s own core does not implement."""

    # -- properties -----------------------------------------------------------------------
    @property
    def pat_str(self) -> str:
        """The pretokenization pattern, as tiktoken writes r50k_base's. gputok's scanner is a
        hand-written implementation of exactly this pattern, for every vocabulary it loads."""
        return R50K_PAT_STR

    @property
    def max_token_value(self) -> int:
        """The largest id, ordinary or special (50256 for GPT-2); ``n_vocab - 1``."""
        return self.n_vocab - 1

    @functools.cached_property
    def _special_token_values(self) -> frozenset[int]:
        return frozenset(self._special_tokens.values())

    @functools.cached_property
    def _mergeable_ranks(self) -> dict[bytes, int]:
        """Ordinary token bytes -> id (tiktoken's attribute of the same name; ids are ranks)."""
        out = {}
        for token in range(self.n_vocab):
            if token in self._special_token_values:
                continue
            try:
                out[self.decode_single_token_bytes(token)] = token
            except ValueError:  # a gap in the ids
                continue
        return out

    @functools.cached_property
    def _sorted_token_bytes(self) -> list[bytes]:
        return sorted(self._mergeable_ranks)

    def is_special_token(self, token: int) -> bool:
        """True when ``token`` is the id of a special token (``<|endoftext|>``'s 50256)."""
        return token in self._special_token_values

    def token_byte_values(self) -> list[bytes]:
        """Every ordinary token's bytes, sorted bytewise (tiktoken's order)."""
        return list(self._sorted_token_bytes)

    # -- encoding -------------------------------------------------------------------------
    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of the text or bytes of one token, special tokens included.

        Raises KeyError when it is not one token, as tiktoken does.

            >>> enc.encode_single_token("hello")
            31373
        """
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self._special_tokens:
                return self._special_tokens[text_or_bytes]
            text_or_bytes = text_or_bytes.encode("utf-8", "surrogatepass")
        data = bytes(text_or_bytes)
        token = self._mergeable_ranks.get(data)
        if token is None:
            specials = {k.encode(): v for k, v in self._special_tokens.items()}
            if data not in specials:
                raise KeyError(text_or_bytes)
            token = specials[data]
        return token

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Collection[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """Stable tokens, and every token sequence that could continue them into ``text``.

        The stable tokens cover a prefix of ``text``; the last piece (and any whitespace tokens
        before it) may tokenize differently once more text follows, so its bytes are left out
        and each completion is a sequence that decodes to text starting with them. tiktoken
        calls this API unstable itself; the completions come in no particular order (tiktoken
        returns a set's order), here sorted.

            >>> stable, completions = enc.encode_with_unstable("hello fanta")
            >>> stable
            [31373]
        """
        tokens = self.encode(
            text, allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        n_last = self._last_piece_token_len(text, allowed_special)
        if n_last == 0:
            return tokens, []
        n_last = self._with_trailing_spaces(tokens, n_last)
        unstable = self.decode_bytes(tokens[len(tokens) - n_last :])
        stable = tokens[: len(tokens) - n_last]
        if not unstable:
            return stable, []
        return stable, sorted(self._completions(unstable))

    def _last_piece_token_len(self, text: str, allowed_special) -> int:
        """How many tokens the last piece of ``text`` became: 0 when the text ends on an
        allowed special token (or is empty)."""
        allowed = self.special_tokens_set if allowed_special == "all" else set(allowed_special)
        start = 0
        if allowed:  # tiktoken's loop: the text after the last allowed special is the tail
            specials = re.compile("|".join(re.escape(s) for s in self._special_tokens))
            pos = 0
            while m := specials.search(text, pos):
                if m.group() in allowed:
                    start = pos = m.end()
                else:
                    pos = m.start() + 1
        tail = text[start:]
        data = tail.encode("utf-8", "surrogatepass")
        try:
            pieces = self._vocab.pieces(data)
        except ValueError:  # lone surrogates: the text encode() fixes up; redo it the same way
            data = tail.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode()
            pieces = self._vocab.pieces(data)
        if not pieces:
            return 0
        start, length = pieces[-1]
        piece = data[start : start + length]
        return 1 if piece in self._mergeable_ranks else len(self._vocab.merge(piece))

    def _with_trailing_spaces(self, tokens: list[int], n_last: int) -> int:
        """tiktoken's _increase_last_piece_token_len: a last piece of spaces, newlines and tabs
        takes the whitespace tokens before it along (a split there may disappear)."""

        def all_space(token: int) -> bool:
            if token in self._special_token_values:
                return False
            return all(b in b" \n\t" for b in self.decode_single_token_bytes(token))

        if all_space(tokens[len(tokens) - n_last]):
            while n_last < len(tokens) and all_space(tokens[len(tokens) - n_last - 1]):
                n_last += 1
        return n_last

    def _completions(self, unstable: bytes) -> set[tuple[int, ...]]:
        """tiktoken's three sources of completions of ``unstable`` (see its
        _encode_unstable_native): single tokens that start with it; a token straddling each
        split point, retokenized with the prefix; and a whitespace split at the end."""
        sorted_bytes, ranks = self._sorted_token_bytes, self._mergeable_ranks
        out: set[tuple[int, ...]] = set()
        point = bisect.bisect_left(sorted_bytes, unstable)
        while point < len(sorted_bytes) and sorted_bytes[point].startswith(unstable):
            out.add((ranks[sorted_bytes[point]],))
            point += 1
        straddling = []
        for i in range(1, len(unstable)):
            prefix, suffix = unstable[:i], unstable[i:]
            point = bisect.bisect_left(sorted_bytes, suffix)
            while point < len(sorted_bytes) and sorted_bytes[point].startswith(suffix):
                straddling.append(prefix + sorted_bytes[point])
                point += 1
        out.update(self._straddling(straddling, len(unstable)))
        if len(unstable) > 1:
            char, size = _last_char(unstable)
            if len(unstable) - size > 0 and char is not None and _rust_is_whitespace(char):
                head, last = unstable[:-size], unstable[-size:]
                out.add(tuple(self._byte_pair_encode(head) + self._byte_pair_encode(last)))
        return out

    def _straddling(self, possibilities: list[bytes], need: int) -> list[tuple[int, ...]]:
        """For each possibility, the leading tokens that cover ``need`` bytes: of its ordinary
        encoding where it is UTF-8 text, of its BPE without pretokenization where it is not (as
        tiktoken does). The texts go through one batch call: a one-byte suffix such as " "
        starts ~30,000 tokens, and a call each cost ~1 s in all."""
        texts, encodings = [], {}
        for k, p in enumerate(possibilities):
            try:
                texts.append((k, p.decode("utf-8")))
            except UnicodeDecodeError:
                encodings[k] = self._byte_pair_encode(p)
        batch = self.encode_ordinary_batch([t for _, t in texts]) if texts else []
        for (k, _), ids in zip(texts, batch, strict=True):
            encodings[k] = ids
        lengths = self._token_lengths
        out = []
        for k in range(len(possibilities)):
            seq, covered = [], 0
            for token in encodings[k]:
                seq.append(token)
                covered += lengths[token]
                if covered >= need:
                    break
            out.append(tuple(seq))
        return out

    @functools.cached_property
    def _token_lengths(self) -> list[int]:
        """Byte length of each ordinary token, by id (0 for specials and gaps)."""
        lengths = [0] * self.n_vocab
        for token_bytes, token in self._mergeable_ranks.items():
            lengths[token] = len(token_bytes)
        return lengths

    def _byte_pair_encode(self, piece: bytes) -> list[int]:
        """BPE of raw bytes with no pretokenization (tiktoken's byte_pair_encode)."""
        return list(self._vocab.merge(piece))

    # -- decoding -------------------------------------------------------------------------
    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """Each token's bytes, one entry a token (for showing where the tokens fall).

        >>> enc.decode_tokens_bytes([31373, 995])
        [b'hello', b' world']
        """
        return [self.decode_single_token_bytes(token) for token in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text, and for each token the index of the first character holding its bytes.

        Where a character straddles two tokens, the second token's offset is that
        character's. Raises UnicodeDecodeError when the tokens do not decode to valid UTF-8,
        as tiktoken does.

            >>> enc.decode_with_offsets([31373, 995])
            ('hello world', [0, 5])
        """
        token_bytes = self.decode_tokens_bytes(tokens)
        text_len = 0
        offsets = []
        for token in token_bytes:
            offsets.append(max(0, text_len - _is_continuation(token[0])))
            text_len += sum(1 for c in token if not _is_continuation(c))
        text = b"".join(token_bytes).decode("utf-8", errors="strict")
        return text, offsets

    def decode_bytes_batch(
        self, batch: Sequence[Sequence[int]], *, num_threads: int = 8
    ) -> list[bytes]:
        """``decode_bytes`` of each list of ids. ``num_threads`` is accepted for tiktoken's
        signature; decoding is a copy of the tokens' bytes, cheaper than handing it to threads."""
        del num_threads
        return [self.decode_bytes(tokens) for tokens in batch]
