"""The bad-input matrix's cases (test_bad_input.py sends each through HTTP and gRPC): each is a
request built from the reference tokenizer, the error words it must get back (a bad case) or the
check of its result (a valid one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

EOT = "<|endoftext|>"
N_VOCAB = 50257
BIG = 4 * 1024 * 1024  # the product tokenizer's max_bytes_per_request
GOOD_TEXTS = ["hello world", "the quick brown fox", "DON'T  stop", "日本語 text 123"]


def _eq(a, b):
    assert a == b


def _b(*rows: bytes) -> np.ndarray:
    """A BYTES tensor [n, 1]."""
    a = np.empty((len(rows), 1), dtype=np.object_)
    a[:, 0] = list(rows)
    return a


def _i32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int32)


@dataclass
class Case:
    id: str
    model: str
    inputs: Callable[[object], list]  # ref -> [(name, array, datatype)]
    error: tuple[str, ...] = ()  # substrings of the message (case-insensitive); () = valid
    check: Callable | None = None  # (result, ref) -> None, for valid cases


def tok_rows(r) -> list[list[int]]:
    ids, lens = r.as_numpy("INPUT_ID"), r.as_numpy("REQUEST_INPUT_LEN")
    return [ids[i, : lens[i, 0]].tolist() for i in range(ids.shape[0])]


def expect_ids(*texts: bytes, ordinary: bool = True, replace: bool = False):
    """Check that the tokenizer returned tiktoken's ids for these rows."""

    def check(r, ref):
        want = []
        for t in texts:
            s = t.decode("utf-8", "replace" if replace else "strict")
            want.append(
                ref.encode_ordinary(s) if ordinary else ref.encode(s, allowed_special="all")
            )
        assert tok_rows(r) == want

    return check


def expect_text(*texts: bytes):
    def check(r, ref):
        assert r.as_numpy("OUTPUT").reshape(-1).tolist() == list(texts)

    return check


def expect_completion(r, ref):
    out = r.as_numpy("text_output")
    assert out.shape[0] == 1 and isinstance(out.reshape(-1)[0], bytes)


def q(*rows: bytes, name: str = "QUERY"):
    return lambda ref: [(name, _b(*rows), "BYTES")]


def detok(tokens, lengths, tokens_name: str = "TOKENS_BATCH", dtype: str = "INT32"):
    np_dtype = {"INT32": np.int32, "INT64": np.int64}[dtype]

    def build(ref):
        t = tokens(ref) if callable(tokens) else tokens
        return [
            (tokens_name, np.asarray(t, dtype=np_dtype), dtype),
            ("SEQUENCE_LENGTH", _i32(lengths), "INT32"),
        ]

    return build


def single(ref, b: bytes) -> int:
    return ref.encode_single_token(b)


def ens(text: bytes, max_tokens, text_dtype: str = "BYTES", drop: str = "", extra: bool = False):
    def build(ref):
        inputs = [
            ("text_input", _b(text) if text_dtype == "BYTES" else _i32([[1]]), text_dtype),
            ("max_tokens", _i32([[max_tokens]]), "INT32"),
        ]
        inputs = [x for x in inputs if x[0] != drop]
        if extra:
            inputs.append(("temperature", np.ones((1, 1), np.float32), "FP32"))
        return inputs

    return build


def gpt2(ids, lengths, out_len, dtype: str = "INT32"):
    np_dtype = {"INT32": np.int32, "INT64": np.int64}[dtype]
    return lambda ref: [
        ("input_ids", np.asarray(ids, dtype=np_dtype), dtype),
        ("input_lengths", _i32(lengths), "INT32"),
        ("request_output_len", _i32(out_len), "INT32"),
    ]


BAD_UTF8 = b"ok \xff\xfe bytes"
SURROGATE = b"a\xed\xa0\x80b"  # UTF-8 encoding of U+D800: invalid in strict UTF-8
OVERLONG = b"\xc0\xaf"  # overlong '/'
TRUNCATED = b"abc\xe2\x82"

CASES = [
    # --- tokenizer: text -------------------------------------------------------------------
    Case("tok-invalid-utf8-strict", "tokenizer", q(BAD_UTF8), ("invalid utf-8", "offset 3")),
    Case("tok-surrogate-strict", "tokenizer", q(SURROGATE), ("invalid utf-8", "0xed")),
    Case("tok-overlong-strict", "tokenizer", q(OVERLONG), ("invalid utf-8",)),
    Case("tok-truncated-strict", "tokenizer", q(TRUNCATED), ("invalid utf-8", "offset 3")),
    Case(
        "tok-invalid-utf8-in-row-2",
        "tokenizer",
        q(b"fine", b"also fine", BAD_UTF8),
        ("invalid utf-8", "text 2"),
    ),
    Case(
        "tok-invalid-utf8-replace",
        "tokenizer_replace",
        q(BAD_UTF8, SURROGATE, OVERLONG, TRUNCATED),
        check=expect_ids(BAD_UTF8, SURROGATE, OVERLONG, TRUNCATED, replace=True),
    ),
    Case("tok-empty-string", "tokenizer", q(b""), check=expect_ids(b"")),
    Case("tok-empty-strings", "tokenizer", q(b"", b"a", b""), check=expect_ids(b"", b"a", b"")),
    Case(
        "tok-nul-bytes",
        "tokenizer",
        q(b"a\x00b", b"\x00" * 64),
        check=expect_ids(b"a\x00b", b"\x00" * 64),
    ),
    Case(
        "tok-over-byte-limit",
        "tokenizer",
        q(b"x" * (BIG + 1)),
        ("max_bytes_per_request", str(BIG)),
    ),
    Case(
        "tok-over-byte-limit-summed-rows",
        "tokenizer",
        q(b"x" * (BIG // 2), b"y" * (BIG // 2 + 1)),
        ("max_bytes_per_request",),
    ),
    Case(
        "tok-10000-rows",
        "tokenizer",
        q(*[b"row"] * 10_000),
        ("batch-size must be <= 256",),
    ),
    Case(
        "tok-over-row-limit",
        "tokenizer_replace",
        q(*[b"row"] * 17),
        ("17 rows", "limit is 16"),
    ),
    Case(
        "tok-wrong-datatype-int32",
        "tokenizer",
        lambda ref: [("QUERY", _i32([[1], [2]]), "INT32")],
        ("data-type is 'INT32'", "QUERY", "expects 'BYTES'"),
    ),
    Case(
        "tok-wrong-shape-2x2",
        "tokenizer",
        lambda ref: [("QUERY", np.array([[b"a", b"b"], [b"c", b"d"]], np.object_), "BYTES")],
        ("shape", "QUERY"),
    ),
    Case(
        "tok-wrong-shape-3d",
        "tokenizer",
        lambda ref: [("QUERY", np.array([[[b"a"]]], np.object_), "BYTES")],
        ("shape", "QUERY"),
    ),
    Case(
        "tok-missing-input",
        "tokenizer",
        lambda ref: [],
        ("QUERY",),
    ),
    Case("tok-unknown-input-name", "tokenizer", q(b"hello", name="TEXT"), ("TEXT",)),
    Case(
        "tok-extra-unknown-input",
        "tokenizer",
        lambda ref: [("QUERY", _b(b"hello"), "BYTES"), ("EXTRA", _b(b"x"), "BYTES")],
        ("EXTRA",),
    ),
    Case(
        "tok-path-and-command-text-is-only-text",
        "tokenizer",
        q(b"../../etc/passwd", b"$(rm -rf /); `id` | cat /dev/zero"),
        check=expect_ids(b"../../etc/passwd", b"$(rm -rf /); `id` | cat /dev/zero"),
    ),
    # --- tokenizer: <|endoftext|> under each special-token policy -------------------------
    Case(
        "tok-eot-disallowed-default",
        "tokenizer",
        q(("a" + EOT).encode()),
        ("disallowed special token", EOT),
    ),
    Case(
        "tok-eot-allowed-all",
        "tokenizer_allow_all",
        q(("a" + EOT + "b").encode()),
        check=lambda r, ref: _eq(tok_rows(r), [[64, 50256, 65]]),
    ),
    Case(
        "tok-eot-ordinary",
        "tokenizer_ordinary",
        q(("a" + EOT).encode()),
        check=lambda r, ref: _eq(tok_rows(r), [[64, 27, 91, 437, 1659, 5239, 91, 29]]),
    ),
    Case(
        "tok-eot-partial-is-text",
        "tokenizer",
        q(b"<|endoftext|", b"|endoftext|>"),
        check=expect_ids(b"<|endoftext|", b"|endoftext|>"),
    ),
    # --- detokenizer ------------------------------------------------------------------------
    Case("detok-negative-id", "detokenizer", detok([[[31373, -1]]], [[2]]), ("-1", "out of range")),
    Case(
        "detok-id-n-vocab",
        "detokenizer",
        detok([[[31373, N_VOCAB]]], [[2]]),
        (str(N_VOCAB), "out of range"),
    ),
    Case(
        "detok-id-int32-max",
        "detokenizer",
        detok([[[2**31 - 1]]], [[1]]),
        (str(2**31 - 1), "out of range"),
    ),
    Case(
        "detok-bad-id-past-length-ignored",
        "detokenizer",
        detok([[[31373, -5]]], [[1]]),
        check=expect_text(b"hello"),
    ),
    Case(
        "detok-length-past-row",
        "detokenizer",
        detok([[[31373, 995]]], [[3]]),
        ("SEQUENCE_LENGTH", "[0, 2]"),
    ),
    Case(
        "detok-negative-length",
        "detokenizer",
        detok([[[31373, 995]]], [[-1]]),
        ("SEQUENCE_LENGTH", "[0, 2]"),
    ),
    Case(
        "detok-beams-mismatch",
        "detokenizer",
        detok([[[31373], [995]]], [[1]]),
        ("TOKENS_BATCH", "SEQUENCE_LENGTH", "beams"),
    ),
    Case(
        "detok-batch-mismatch",
        "detokenizer",
        detok([[[31373]], [[995]]], [[1]]),
        ("TOKENS_BATCH", "batch size does not match other inputs"),
    ),
    Case(
        "detok-invalid-utf8-replace",
        "detokenizer",
        detok(lambda ref: [[[single(ref, b"\xff"), single(ref, b"\xe2")]]], [[2]]),
        check=expect_text("\ufffd\ufffd".encode()),
    ),
    Case(
        "detok-invalid-utf8-strict",
        "detokenizer_strict",
        detok(lambda ref: [[[31373, single(ref, b"\xe2")]]], [[2]]),
        ("utf-8",),
    ),
    Case("detok-empty", "detokenizer", detok([[[31373]]], [[0]]), check=expect_text(b"")),
    Case(
        "detok-nul",
        "detokenizer",
        detok(lambda ref: [[[64, single(ref, b"\x00"), 65]]], [[3]]),
        check=expect_text(b"a\x00b"),
    ),
    Case(
        "detok-over-token-limit",
        "detokenizer_strict",
        detok([[[64] * 65]], [[65]]),
        ("65 tokens", "limit is 64"),
    ),
    Case(
        "detok-10000-rows",
        "detokenizer",
        detok([[[64]]] * 10_000, [[1]] * 10_000),
        ("batch-size must be <= 256",),
    ),
    Case(
        "detok-wrong-datatype-int64",
        "detokenizer",
        detok([[[31373]]], [[1]], dtype="INT64"),
        ("data-type is 'INT64'", "TOKENS_BATCH", "expects 'INT32'"),
    ),
    Case(
        "detok-wrong-datatype-bytes",
        "detokenizer",
        lambda ref: [
            ("TOKENS_BATCH", np.array([[[b"1"]]], np.object_), "BYTES"),
            ("SEQUENCE_LENGTH", _i32([[1]]), "INT32"),
        ],
        ("data-type is 'BYTES'", "TOKENS_BATCH", "expects 'INT32'"),
    ),
    Case(
        "detok-wrong-shape-2d",
        "detokenizer",
        lambda ref: [
            ("TOKENS_BATCH", _i32([[31373, 995]]), "INT32"),
            ("SEQUENCE_LENGTH", _i32([[2]]), "INT32"),
        ],
        ("shape", "TOKENS_BATCH"),
    ),
    Case(
        "detok-missing-input",
        "detokenizer",
        lambda ref: [("TOKENS_BATCH", _i32([[[31373]]]), "INT32")],
        ("SEQUENCE_LENGTH",),
    ),
    Case(
        "detok-unknown-input-name",
        "detokenizer",
        detok([[[31373]]], [[1]], tokens_name="IDS"),
        ("IDS",),
    ),
    # --- ensemble ---------------------------------------------------------------------------
    Case("ens-max-tokens-0", "ensemble", ens(b"Hello", 0), ("request_output_len", "[1, 256]")),
    Case("ens-max-tokens-negative", "ensemble", ens(b"Hello", -3), ("request_output_len", "-3")),
    Case("ens-max-tokens-too-large", "ensemble", ens(b"Hello", 257), ("request_output_len", "257")),
    Case(
        "ens-max-tokens-int32-max",
        "ensemble",
        ens(b"Hello", 2**31 - 1),
        ("request_output_len", str(2**31 - 1)),
    ),
    Case("ens-invalid-utf8", "ensemble", ens(BAD_UTF8, 4), ("invalid utf-8",)),
    Case("ens-eot", "ensemble", ens(EOT.encode(), 4), ("disallowed special token",)),
    Case("ens-empty-prompt", "ensemble", ens(b"", 4), check=expect_completion),
    Case("ens-nul-prompt", "ensemble", ens(b"a\x00b", 4), check=expect_completion),
    Case(
        "ens-over-byte-limit",
        "ensemble",
        ens(b"x" * (BIG + 1), 4),
        ("max_bytes_per_request",),
    ),
    Case(
        "ens-over-context",
        "ensemble",
        ens(b" a" * 1000, 100),
        ("exceed the context of 1024",),
    ),
    Case(
        "ens-wrong-datatype",
        "ensemble",
        ens(b"", 4, text_dtype="INT32"),
        ("data-type is 'INT32'", "text_input", "expects 'BYTES'"),
    ),
    Case("ens-missing-input", "ensemble", ens(b"Hello", 4, drop="max_tokens"), ("max_tokens",)),
    Case("ens-unknown-input", "ensemble", ens(b"Hello", 4, extra=True), ("temperature",)),
    Case(
        "ens-100-rows",
        "ensemble",
        lambda ref: [
            ("text_input", _b(*[b"x"] * 100), "BYTES"),
            ("max_tokens", _i32([[1]] * 100), "INT32"),
        ],
        ("batch-size must be <= 64",),
    ),
    # --- gpt2 -------------------------------------------------------------------------------
    Case(
        "gpt2-id-out-of-range",
        "gpt2",
        gpt2([[31373, N_VOCAB]], [[2]], [[2]]),
        ("input_ids", "outside [0, 50257)"),
    ),
    Case(
        "gpt2-negative-id",
        "gpt2",
        gpt2([[31373, -1]], [[2]], [[2]]),
        ("input_ids", "outside [0, 50257)"),
    ),
    Case("gpt2-length-past-row", "gpt2", gpt2([[31373]], [[5]], [[2]]), ("input_lengths", "5")),
    Case(
        "gpt2-wrong-datatype",
        "gpt2",
        gpt2([[31373]], [[1]], [[2]], dtype="INT64"),
        ("data-type is 'INT64'", "input_ids", "expects 'INT32'"),
    ),
]
