"""Tokenizer.encode_buffer_flat: documents as slices of one bytes-like buffer (Arrow's layout)
must give exactly encode_batch_flat's result for the same documents as bytes, and refuse bad
bounds with clear errors instead of reading outside the buffer."""

from __future__ import annotations

import threading

import numpy as np
import pytest

DOCS = [
    b"hello world",
    b"",
    "héllo wörld 日本語 🙂\n\n  x".encode(),
    b"a <|endoftext|> b",
    b"",
    "Привет, мир! It's 12345 tokens\t\tand   spaces  ".encode(),
]
BAD = [b"good one", b"bad \xff\xfe here", b"fine", b"cut \xe6\x97"]


def _pack(docs: list[bytes], dtype=np.int64, lead: bytes = b"") -> tuple[bytes, np.ndarray]:
    """(lead + concatenated docs, boundaries offset by len(lead))."""
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    return lead + b"".join(docs), (offsets + len(lead)).astype(dtype)


def _same(got, want):
    assert got[0].dtype == np.int32 and got[1].dtype == np.int64
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tolist() == want[1].tolist()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("threads", [0, 1, 3])
def test_equals_encode_batch_flat(tok, dtype, threads):
    data, offsets = _pack(DOCS, dtype)
    want = tok.encode_batch_flat(DOCS, num_threads=threads, disallowed_special=())
    assert want[0].size > 20  # the comparison has something in it
    _same(tok.encode_buffer_flat(data, offsets, num_threads=threads, disallowed_special=()), want)


def test_corpus_documents(tok, corpus):
    docs = [d.encode("utf-8", "surrogatepass") for d in corpus[:120]]
    data, offsets = _pack(docs, lead=b"ignored prefix ")
    got = tok.encode_buffer_flat(data, offsets, disallowed_special=())
    _same(got, tok.encode_batch_flat(docs, disallowed_special=()))


@pytest.mark.parametrize("kind", ["bytes", "bytearray", "memoryview", "numpy", "pyarrow"])
def test_any_bytes_like(tok, kind):
    data, offsets = _pack(DOCS)
    if kind == "pyarrow":
        buf = pytest.importorskip("pyarrow").py_buffer(data)
    elif kind == "numpy":
        buf = np.frombuffer(data, dtype=np.uint8)
    else:
        buf = {"bytes": bytes, "bytearray": bytearray, "memoryview": memoryview}[kind](data)
    _same(
        tok.encode_buffer_flat(buf, offsets, disallowed_special=()),
        tok.encode_batch_flat(DOCS, disallowed_special=()),
    )


def test_spans_with_gaps_any_order_and_overlaps(tok):
    text = "alpha\x1e\nβeta gamma\x1e\n\x1e\ndelta 日本".encode()
    spans = np.array([[0, 5], [7, 18], [20, 20], [22, len(text)], [0, 5], [3, 12]])
    docs = [text[a:b] for a, b in spans]
    want = tok.encode_batch_flat(docs, disallowed_special=())
    _same(tok.encode_buffer_flat(text, spans, disallowed_special=()), want)
    _same(tok.encode_buffer_flat(text, spans.astype(np.int32), disallowed_special=()), want)


def test_offsets_as_list_and_other_int_dtypes(tok):
    data, offsets = _pack(DOCS)
    want = tok.encode_batch_flat(DOCS, disallowed_special=())
    _same(tok.encode_buffer_flat(data, offsets.tolist(), disallowed_special=()), want)
    _same(tok.encode_buffer_flat(data, offsets.astype(np.uint16), disallowed_special=()), want)
    # A non-contiguous view (every row's start column) is accepted, copied once.
    spans = np.stack([offsets[:-1], offsets[1:]], axis=1)
    _same(tok.encode_buffer_flat(data, spans[::1], disallowed_special=()), want)


def test_no_documents(tok):
    ids, offsets = tok.encode_buffer_flat(b"abc", np.array([2]))
    assert ids.size == 0 and offsets.tolist() == [0]
    ids, offsets = tok.encode_buffer_flat(b"", np.zeros((0, 2), dtype=np.int64))
    assert ids.size == 0 and offsets.tolist() == [0]


def test_special_token_policy_as_encode_batch_flat(tok):
    data, offsets = _pack(DOCS)
    with pytest.raises(ValueError, match="disallowed special token '<|endoftext|>' in text 3"):
        tok.encode_buffer_flat(data, offsets)  # disallowed_special="all", as tiktoken
    got = tok.encode_buffer_flat(data, offsets, allowed_special="all")
    want = tok.encode_batch_flat(DOCS, allowed_special="all")
    _same(got, want)
    assert tok.eot_token in got[0].tolist()
    assert tok.eot_token not in tok.encode_buffer_flat(data, offsets, disallowed_special=())[0]


def test_invalid_utf8_strict_names_document_and_offset(tok):
    data, offsets = _pack(BAD, lead=b"\xff")  # invalid bytes outside every document: unread
    with pytest.raises(ValueError, match=r"invalid UTF-8 in text 1 at byte offset 4 \(byte 0xff\)"):
        tok.encode_buffer_flat(data, offsets)
    with pytest.raises(ValueError, match=r"invalid UTF-8 in text 1 at byte offset 4") as flat:
        tok.encode_batch_flat(BAD)
    with pytest.raises(ValueError) as buf:
        tok.encode_buffer_flat(data, offsets)
    assert str(buf.value) == str(flat.value)
    # A document cut inside a character is invalid on its own.
    with pytest.raises(ValueError, match=r"text 0 at byte offset 4"):
        tok.encode_buffer_flat(BAD[3], [0, len(BAD[3])])
    # Only the documents' bytes are read: the valid one alone encodes.
    got = tok.encode_buffer_flat(data, offsets[:2], disallowed_special=())
    assert got[0].tolist() == tok.encode(BAD[0]) and got[1].tolist() == [0, 2]


def test_invalid_utf8_replace_is_cpython_replacement(tok, ref):
    data, offsets = _pack(BAD)
    got = tok.encode_buffer_flat(data, offsets, errors="replace")
    _same(got, tok.encode_batch_flat(BAD, errors="replace"))
    for i, d in enumerate(BAD):
        row = got[0][got[1][i] : got[1][i + 1]].tolist()
        assert row == ref.encode_ordinary(d.decode("utf-8", "replace"))
    assert "\ufffd" in tok.decode(got[0].tolist())


@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        ([0, 5, 3, 11], r"offsets\[1:3\] \[5, 3\) is not a range inside the buffer of 11 bytes"),
        ([0, 5, 12], r"offsets\[1:3\] \[5, 12\) is not a range inside the buffer of 11 bytes"),
        ([-1, 5], r"offsets\[0:2\] \[-1, 5\) is not a range"),
        ([[0, 5], [6, 20]], r"span 1 \[6, 20\) is not a range inside the buffer of 11 bytes"),
        ([[4, 2]], r"span 0 \[4, 2\) is not a range"),
        ([], r"shape \(n \+ 1,\) or \(n, 2\), got \(0,\)"),
        ([[0, 1, 2]], r"shape \(n \+ 1,\) or \(n, 2\), got \(1, 3\)"),
        (np.zeros((2, 2, 2), dtype=np.int64), r"got \(2, 2, 2\)"),
        (np.uint64(2**63) + np.zeros(2, dtype=np.uint64), "do not fit in int64"),
    ],
)
def test_bad_offsets_raise_value_error(tok, offsets, match):
    with pytest.raises(ValueError, match=match):
        tok.encode_buffer_flat(b"hello world", offsets)


@pytest.mark.parametrize(
    ("data", "offsets", "match"),
    [
        (b"hello", np.array([0.0, 5.0]), "offsets must be an integer array, got dtype float64"),
        (b"hello", np.array([True, False]), "offsets must be an integer array, got dtype bool"),
        (b"hello", ["0", "5"], "offsets must be an integer array"),
        ("hello", [0, 5], "bytes-like object is required, not 'str'"),
        (["hello"], [0, 5], "bytes-like object is required, not 'list'"),
        (np.arange(12).reshape(3, 4)[:, ::2], [0, 1], "contiguous"),
    ],
)
def test_bad_types_raise_type_or_value_error(tok, data, offsets, match):
    with pytest.raises((TypeError, ValueError), match=match):
        tok.encode_buffer_flat(data, offsets)


def test_core_checks_dtype_itself(tok):
    """The native entry point takes only int32/int64 (the wrapper converts the others)."""
    with pytest.raises(TypeError, match="offsets must be int32 or int64, got float64"):
        tok._core.encode_flat_buffer(b"ab", np.array([0.0, 2.0]), [], [], "strict", 0)
    with pytest.raises(ValueError, match="C-contiguous int32/int64 array"):
        tok._core.encode_flat_buffer(b"ab", np.array([0, 9, 2, 9])[::2], [], [], "strict", 0)


def test_releases_the_gil(tok, corpus):
    """Another Python thread keeps running while one long call encodes: the longest pause
    between its ticks is far shorter than the call (holding the GIL, it would span it)."""
    import time

    # Long enough to tell on any machine: double the input until one call takes >= 0.2 s (a
    # fixed input took 0.047 s on a fast CI run, under the 0.05 s the check needs).
    docs = [d.encode() for d in corpus[:100]]
    while True:
        data, offsets = _pack(docs)
        t = time.perf_counter()
        tok.encode_buffer_flat(data, offsets, num_threads=1, disallowed_special=())
        if time.perf_counter() - t >= 0.2 or len(docs) >= 100 * 2**8:
            break
        docs = docs * 2
    stamps, done = [], threading.Event()

    def tick():
        while not done.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0)

    t = threading.Thread(target=tick)
    t.start()
    try:
        time.sleep(0.01)
        t0 = time.perf_counter()
        tok.encode_buffer_flat(data, offsets, num_threads=1, disallowed_special=())
        t1 = time.perf_counter()
    finally:
        done.set()
        t.join()
    during = np.array([s for s in stamps if t0 <= s <= t1] + [t0, t1])
    during.sort()
    assert t1 - t0 > 0.05, "the call is too short to tell"
    assert np.diff(during).max() < 0.5 * (t1 - t0)
