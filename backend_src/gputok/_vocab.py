"""Vocabulary loaders: tiktoken files, HF vocab.json + merges.txt, HF tokenizer.json.

Every loader ends in a native ``_core.Vocab``; anything that is not a byte-level BPE with
GPT-2's pattern is refused with a ``VocabError`` that says what was wrong and where.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import sys
from functools import lru_cache
from pathlib import Path

from . import _core

VocabError = _core.VocabError

DATA_DIR = Path(__file__).resolve().parent / "data"
GPT2_RANKS = DATA_DIR / "gpt2.tiktoken"
# r50k_base, byte for byte (openai-whisper==20250625 sdist, whisper/assets/gpt2.tiktoken).
GPT2_RANKS_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
ENDOFTEXT = "<|endoftext|>"
GPT2_SPECIALS = {ENDOFTEXT: 50256}
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (used by the HF file formats)."""
    keep = list(range(ord("!"), ord("~") + 1))
    keep += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, (chr(c) for c in chars), strict=True))


_UNICODE_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}


def _hf_token_bytes(token: str, where: str) -> bytes:
    try:
        return bytes(_UNICODE_TO_BYTE[c] for c in token)
    except KeyError as e:
        raise VocabError(
            f"{where}: token {token!r} has character {e.args[0]!r} outside GPT-2's byte map; "
            "not a byte-level BPE vocabulary"
        ) from None


# No BPE vocabulary comes near 2^24 ids (o200k_base has 200,019); a larger id is a corrupt file
# and would make the id table, or a native int32, overflow.
MAX_ID = (1 << 24) - 1


def _read_bytes(path: Path) -> bytes:
    """A vocabulary file's bytes: FileNotFoundError when it is missing (as open() does), a
    VocabError naming it for any other reason it cannot be read (a directory, permissions)."""
    try:
        return path.read_bytes()
    except FileNotFoundError as e:
        raise FileNotFoundError(e.errno, f"vocabulary file not found: {path}", str(path)) from None
    except OSError as e:
        raise VocabError(f"cannot read vocabulary file {path}: {e.strerror or e}") from None


def _read_json(path) -> object:
    try:
        return json.loads(_read_bytes(Path(path)).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise VocabError(f"cannot read {path} as JSON: {e}") from None


def _tokens_by_id(by_id: dict[int, bytes], where: str) -> list[bytes]:
    if not by_id:
        raise VocabError(f"{where}: the vocabulary is empty")
    n = max(by_id) + 1
    if n > MAX_ID + 1:
        raise VocabError(f"{where}: id {n - 1} is implausibly large for a BPE vocabulary")
    tokens = [b""] * n
    for i, t in by_id.items():
        if i < 0:
            raise VocabError(f"{where}: negative id {i}")
        tokens[i] = t
    return tokens


def _check_specials(specials: dict[str, int], where: str) -> dict[str, int]:
    out = {}
    for text, i in specials.items():
        if not isinstance(text, str) or not text:
            raise VocabError(f"{where}: special token names must be non-empty strings")
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i <= MAX_ID:
            raise VocabError(
                f"{where}: special token {text!r} needs an int id in 0..{MAX_ID}, got {i!r}"
            )
        out[text] = i
    return out


# A whole tiktoken file in its canonical form: lines of "<base64> <decimal rank>", one space,
# "\n" or "\r\n" line ends. Only such a file takes the fast parse.
_CANONICAL_TIKTOKEN = re.compile(
    rb"(?:[A-Za-z0-9+/]+={0,2} [0-9]{1,9}\r?\n)*(?:[A-Za-z0-9+/]+={0,2} [0-9]{1,9}\r?\n?)?"
)


def _parse_canonical(data: bytes) -> dict[int, bytes] | None:
    """The tokens by id of a canonical file (the packaged GPT-2 ranks, tiktoken's own files)
    in a few whole-file passes, or None for anything else, which the line-by-line parse then
    reads or names. Each line's two fields are checked by the pattern before the file's fields
    are paired, strict base64 by binascii (Python 3.11+), duplicates by set sizes. The GPT-2
    file (50,256 lines): 86 ms line by line, 23 here (min of 7, 2-core dev VM under load,
    2026-11-27); the H100
    host's profile of a corpus run showed the line-by-line parse at 0.21 s of its start-up."""
    if sys.version_info < (3, 11) or not _CANONICAL_TIKTOKEN.fullmatch(data):
        return None
    fields = data.split()
    a2b = binascii.a2b_base64
    try:
        tokens = [a2b(t, strict_mode=True) for t in fields[0::2]]
    except binascii.Error:
        return None
    ranks = list(map(int, fields[1::2]))
    if len(set(ranks)) != len(ranks) or len(set(tokens)) != len(tokens) or not all(tokens):
        return None
    return dict(zip(ranks, tokens, strict=True))


def parse_tiktoken_bytes(data: bytes, where: str = "tiktoken file") -> list[bytes]:
    """Parse ``base64 rank`` lines into tokens by id (rank == id)."""
    fast = _parse_canonical(data)
    if fast is not None:
        return _tokens_by_id(fast, where)
    by_id: dict[int, bytes] = {}
    seen: set[bytes] = set()
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise VocabError(
                f"{where}:{lineno}: expected '<base64 token> <rank>', got {line[:60]!r}"
            )
        try:
            token = base64.b64decode(parts[0], validate=True)
            rank = int(parts[1])
        except (binascii.Error, ValueError):
            raise VocabError(f"{where}:{lineno}: bad base64 token or rank: {line[:60]!r}") from None
        if not token:
            raise VocabError(f"{where}:{lineno}: empty token")
        if rank in by_id:
            raise VocabError(f"{where}:{lineno}: rank {rank} appears twice")
        if token in seen:
            raise VocabError(f"{where}:{lineno}: token {token!r} appears twice")
        seen.add(token)
        by_id[rank] = token
    return _tokens_by_id(by_id, where)


def vocab_from_tiktoken_file(path, special_tokens=None, sha256=None) -> tuple[_core.Vocab, dict]:
    path = Path(path)
    data = _read_bytes(path)
    if sha256 is not None:
        digest = hashlib.sha256(data).hexdigest()
        if digest != sha256:
            raise VocabError(f"{path}: sha256 {digest} does not match the pinned {sha256}")
    specials = _check_specials(dict(special_tokens or {}), str(path))
    tokens = parse_tiktoken_bytes(data, str(path))
    return _core.Vocab.from_ranks(tokens, specials), specials


def vocab_from_hf_files(vocab_json, merges_txt, special_tokens=None) -> tuple[_core.Vocab, dict]:
    specials_wanted = dict(GPT2_SPECIALS if special_tokens is None else special_tokens)
    raw = _read_json(vocab_json)
    try:
        merges_lines = _read_bytes(Path(merges_txt)).decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise VocabError(f"cannot read {merges_txt}: {e}") from None
    if not isinstance(raw, dict):
        raise VocabError(f"{vocab_json}: expected a JSON object of token -> id")
    merges = []
    for lineno, line in enumerate(merges_lines, 1):
        if lineno == 1 and line.startswith("#version"):
            continue
        if not line.strip():
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise VocabError(f"{merges_txt}:{lineno}: expected two tokens, got {line!r}")
        merges.append(parts)
    try:
        return _vocab_from_hf(raw, merges, specials_wanted, str(vocab_json), str(merges_txt))
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        raise VocabError(f"{vocab_json}: malformed vocabulary ({type(e).__name__}: {e})") from None


def _vocab_from_hf(raw_vocab, merges, specials_wanted, where_vocab, where_merges):
    by_id: dict[int, bytes] = {}
    specials: dict[str, int] = {}
    for tok, i in raw_vocab.items():
        if not isinstance(i, int):
            raise VocabError(f"{where_vocab}: id of {tok!r} is not an integer")
        if tok in specials_wanted:
            specials[tok] = i
            continue
        by_id[i] = _hf_token_bytes(tok, where_vocab)
    for tok, i in specials_wanted.items():
        specials.setdefault(tok, i)
    pairs = []
    for k, (a, b) in enumerate(merges, 1):
        pairs.append(
            (
                _hf_token_bytes(a, f"{where_merges}:{k}"),
                _hf_token_bytes(b, f"{where_merges}:{k}"),
            )
        )
    tokens = _tokens_by_id(by_id, where_vocab)
    return _core.Vocab.from_merges(tokens, pairs, _check_specials(specials, where_vocab)), specials


def _is_gpt2_pretokenizer(pre) -> bool:
    if not isinstance(pre, dict):
        return False
    if pre.get("type") == "ByteLevel":
        return pre.get("use_regex", True) and not pre.get("add_prefix_space", False)
    if pre.get("type") == "Sequence":
        steps = pre.get("pretokenizers") or []
        if len(steps) != 2:
            return False
        split, byte_level = steps
        pattern = (split.get("pattern") or {}).get("Regex")
        return (
            split.get("type") == "Split"
            and pattern in (GPT2_PATTERN,)
            and split.get("behavior") == "Isolated"
            and not split.get("invert", False)
            and byte_level.get("type") == "ByteLevel"
            and not byte_level.get("use_regex", True)
            and not byte_level.get("add_prefix_space", False)
        )
    return False


def vocab_from_tokenizer_json(path) -> tuple[_core.Vocab, dict]:
    spec = _read_json(path)
    try:
        return _vocab_from_tokenizer_spec(spec, path)
    except (AttributeError, TypeError, KeyError, IndexError) as e:
        # JSON of the wrong shape (a list where an object belongs, ...): tests/core/test_fuzz.py
        raise VocabError(f"{path}: malformed tokenizer.json ({type(e).__name__}: {e})") from None


def _vocab_from_tokenizer_spec(spec, path) -> tuple[_core.Vocab, dict]:
    model = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        got = model.get("type") if isinstance(model, dict) else model
        raise VocabError(f"{path}: model.type must be 'BPE' (got {got!r})")
    if spec.get("normalizer") is not None:
        raise VocabError(f"{path}: a normalizer is set; gputok supports GPT-2's (none)")
    if not _is_gpt2_pretokenizer(spec.get("pre_tokenizer")):
        raise VocabError(
            f"{path}: pre_tokenizer must be ByteLevel with GPT-2's pattern "
            f"(got {json.dumps(spec.get('pre_tokenizer'))[:200]})"
        )
    for key in ("continuing_subword_prefix", "end_of_word_suffix", "dropout"):
        if model.get(key):
            raise VocabError(f"{path}: model.{key} = {model[key]!r} is not supported")
    if model.get("byte_fallback") or model.get("ignore_merges"):
        raise VocabError(f"{path}: byte_fallback / ignore_merges are not supported")
    merges = []
    for k, m in enumerate(model.get("merges") or [], 1):
        parts = m.split(" ") if isinstance(m, str) else list(m)
        if len(parts) != 2:
            raise VocabError(f"{path}: merge {k} is not a pair: {m!r}")
        merges.append(parts)
    specials = {t["content"]: t["id"] for t in spec.get("added_tokens") or [] if t.get("special")}
    return _vocab_from_hf(model.get("vocab") or {}, merges, specials, str(path), str(path))


@lru_cache(maxsize=1)
def gpt2_vocab() -> _core.Vocab:
    """The packaged GPT-2 ranks, verified by sha256, built once per process."""
    vocab, _ = vocab_from_tiktoken_file(GPT2_RANKS, GPT2_SPECIALS, sha256=GPT2_RANKS_SHA256)
    return vocab
