"""Vocabulary loaders on mutated files: tiktoken ranks, GPT-2's encoder.json + vocab.bpe, an HF
tokenizer.json, and special-token maps. Each seed file is a small valid vocabulary (the 256
bytes and a few merges, GPT-2's byte map); each input mutates it by line, by byte or by JSON
value.

The contract: a loader returns a Tokenizer or raises VocabError (FileNotFoundError for a
missing path), nothing else; a Tokenizer that loaded encodes and decodes back to the same
bytes, and a tiktoken file that loaded gives tiktoken's own ids for the same ranks.

    .venv/bin/python fuzz/fuzz_loaders.py --budget 5000 --seed 2
"""

from __future__ import annotations

import base64
import json
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Finding, parse_args, run  # noqa: E402

MERGED = [b"ab", b"abc", b" t", b"he", b" the", b"in", b"ing", b" a", b"ll", b"hell", b"hello"]
PROBES = [b"abc abcd", b"hello the thing", "é日🎉".encode(), b"<|endoftext|> x", b"\xff\xfe"]
GPT2_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
WEIRD_IDS = [-1, 0, 255, 256, 2**24 - 1, 2**24, 2**31 - 1, 2**31, 2**63, -(2**63), 10**30]


def seed_tokens() -> list[bytes]:
    """The 256 single bytes (rank = byte), then MERGED, each a merge of two earlier tokens."""
    return [bytes([b]) for b in range(256)] + MERGED


def tiktoken_text(tokens: list[bytes]) -> bytes:
    return b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens))


def hf_files(tokens: list[bytes]) -> tuple[dict, list[str]]:
    from gputok import bytes_to_unicode

    m = bytes_to_unicode()

    def u(b: bytes) -> str:
        return "".join(m[x] for x in b)

    vocab = {u(t): i for i, t in enumerate(tokens)}
    merges = []
    for t in tokens[256:]:
        for k in range(1, len(t)):  # the first split whose halves are earlier tokens
            if u(t[:k]) in vocab and u(t[k:]) in vocab:
                merges.append(f"{u(t[:k])} {u(t[k:])}")
                break
    return vocab, merges


def mutate_lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.choice((1, 1, 2, 4))):
        k = rng.randrange(len(lines))
        op = rng.randrange(6)
        if op == 0:
            del lines[k]
        elif op == 1:
            lines.insert(k, lines[rng.randrange(len(lines))])
        elif op == 2:
            lines[k], lines[-1] = lines[-1], lines[k]
        elif op == 3:
            parts = lines[k].split(b" ")
            parts[-1] = str(rng.choice(WEIRD_IDS + [rng.randint(-5, 400)])).encode()
            lines[k] = b" ".join(parts)
        elif op == 4:
            lines.insert(k, rng.randbytes(rng.randint(0, 12)))
        else:
            lines[k] = lines[k].replace(b" ", rng.choice([b"  ", b"\t", b"", b" x "]), 1)
    return b"\n".join(lines)


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        k = rng.randrange(len(out) + 1)
        op = rng.randrange(3)
        if op == 0 and k < len(out):
            out[k] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[k:k] = rng.randbytes(rng.randint(1, 3))
        elif k < len(out):
            del out[k : k + rng.randint(1, 8)]
    return bytes(out)


def weird_value(rng: random.Random):
    return rng.choice(
        [None, True, 1.5, "x", "", [], {}, [1, 2], {"a": 1}, "a b", rng.choice(WEIRD_IDS)]
    )


def mutate_json(rng: random.Random, value):
    """A copy of `value` with one to three nodes replaced, dropped or retyped."""
    value = json.loads(json.dumps(value))
    for _ in range(rng.randint(1, 3)):
        node, key = value, None
        while isinstance(node, (dict, list)) and node and rng.random() < 0.7:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            key = rng.choice(keys)
            if not isinstance(node[key], (dict, list)) or rng.random() < 0.3:
                break
            node = node[key]
        if (
            key is None
            or not isinstance(node, (dict, list))
            or key not in (node if isinstance(node, dict) else range(len(node)))
        ):
            return weird_value(rng) if rng.random() < 0.1 else value
        if isinstance(node, dict) and rng.random() < 0.3:
            del node[key]
        else:
            node[key] = weird_value(rng)
    return value


def specials(rng: random.Random) -> dict | None:
    if rng.random() < 0.8:
        return None
    out = {}
    for _ in range(rng.randint(0, 3)):
        name = rng.choice(["<|endoftext|>", "<|x|>", "", "ab", "a", "\udcff", 7])
        out[name] = rng.choice(WEIRD_IDS + [rng.randint(250, 300), True, 1.5, "9"])
    return out


class Loaders:
    def __init__(self, folder: Path):
        self.folder = folder
        self.tokens = seed_tokens()
        self.tiktoken = tiktoken_text(self.tokens)
        self.vocab, self.merges = hf_files(self.tokens)
        self.tokenizer_json = {
            "model": {"type": "BPE", "vocab": self.vocab, "merges": self.merges},
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "normalizer": None,
            "added_tokens": [{"id": 267, "content": "<|endoftext|>", "special": True}],
        }

    def write(self, name: str, data: bytes) -> str:
        p = self.folder / name
        p.write_bytes(data)
        return str(p)

    def input(self, rng: random.Random):
        """(loader name, call, tiktoken ranks or None when no comparison applies)."""
        import gputok

        kind = rng.choices(range(4), weights=(40, 28, 28, 4))[0]
        if kind == 0:
            data = self.tiktoken
            data = mutate_lines(rng, data) if rng.random() < 0.6 else mutate_bytes(rng, data)
            path = self.write("v.tiktoken", data)
            sp = specials(rng)
            return "tiktoken", lambda: gputok.load_tiktoken_file(path, sp, device="cpu"), data
        if kind == 1:
            vocab = mutate_json(rng, self.vocab) if rng.random() < 0.4 else self.vocab
            merges = "\n".join(["#version: 0.2", *self.merges]).encode()
            enc = json.dumps(vocab).encode()
            if rng.random() < 0.5:
                merges = (
                    mutate_lines(rng, merges) if rng.random() < 0.5 else mutate_bytes(rng, merges)
                )
            elif rng.random() < 0.5:
                enc = mutate_bytes(rng, enc)
            v, m = self.write("encoder.json", enc), self.write("vocab.bpe", merges)
            sp = specials(rng)
            return "hf_files", lambda: gputok.load_hf_files(v, m, sp, device="cpu"), None
        if kind == 2:
            spec = mutate_json(rng, self.tokenizer_json)
            data = json.dumps(spec).encode()
            data = mutate_bytes(rng, data) if rng.random() < 0.2 else data
            path = self.write("tokenizer.json", data)
            return "tokenizer_json", lambda: gputok.load_tokenizer_json(path, device="cpu"), None
        missing = str(self.folder / rng.choice(["missing.tiktoken", ""]))
        fn = rng.choice([gputok.load_tiktoken_file, gputok.load_tokenizer_json])
        return "path", lambda: fn(missing, device="cpu"), None


def check_loaded(tok, ranks_text: bytes | None) -> None:
    """A loaded vocabulary must round-trip bytes, and match tiktoken on the same ranks."""
    for b in PROBES:
        ids = tok.encode(b, errors="replace", disallowed_special=())
        want = b.decode("utf-8", "replace").encode()
        if tok.decode_bytes(ids) != want:
            raise Finding(f"{tok.name}: {b!r} -> {ids} decodes to {tok.decode_bytes(ids)!r}")
    if ranks_text is None:
        return
    import tiktoken

    ranks = {}
    for line in ranks_text.splitlines():
        if line.strip():
            t, r = line.split()
            ranks[base64.b64decode(t)] = int(r)
    ref = tiktoken.Encoding("fuzz", pat_str=GPT2_PAT, mergeable_ranks=ranks, special_tokens={})
    for b in PROBES:
        s = b.decode("utf-8", "replace")
        got = tok.encode_ordinary(s)
        if got != ref.encode_ordinary(s):
            raise Finding(f"{tok.name}: {s!r} -> {got}, tiktoken {ref.encode_ordinary(s)}")


def main() -> int:
    args = parse_args()
    import gputok

    with tempfile.TemporaryDirectory(prefix="gputok-fuzz-") as folder:
        loaders = Loaders(Path(folder))

        def one(rng: random.Random, i: int) -> None:
            name, call, ranks_text = loaders.input(rng)
            try:
                tok = call()
            except gputok.VocabError:
                return
            except FileNotFoundError:
                if name != "path":
                    raise Finding(f"{name}: FileNotFoundError for a file that exists") from None
                return
            if name == "path":
                raise Finding("a missing path loaded")
            check_loaded(tok, ranks_text)

        return run("fuzz_loaders", one, args)


if __name__ == "__main__":
    sys.exit(main())
