"""csrc/corpus/read_jsonl.cpp (``_corpus_native.read_jsonl_files``): a joined call's small
JSONL files read, and their string field taken out, in one native call. Where it decides a
file, its documents are json.loads's (the reference: readers._read_jsonl_python reads line by
line with json.loads); anything else it hands back undecided (JSONL_NOT_PLAIN), and the file
goes to read_jsonl."""

from __future__ import annotations

import errno
import json
import os

import pytest

from gputok import corpus as C

native = pytest.importorskip("gputok._corpus_native")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NOT_PLAIN = native.JSONL_NOT_PLAIN


def reference(data: bytes, field: str = "text") -> list[bytes] | None:
    """The documents the Python path gives (strict UTF-8), or None where it raises."""
    docs = []
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
            return None
        try:
            docs.append(obj[field].encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate
            return None
    return docs


def read(tmp_path, data: bytes, field: str = "text", name: str = "a.jsonl"):
    """(documents or None where undecided, the call's result tuple)."""
    path = tmp_path / name
    path.write_bytes(data)
    got = native.read_jsonl_files([str(path)], field.encode(), max_bytes=len(data) + 16)
    buf, spans, docs, sizes, _mtimes, failed, err, _offset = got
    if failed != -1:
        assert err == NOT_PLAIN and failed == 0 and len(docs) == 0
        return None, got
    assert sizes.tolist() == [len(data)] and docs.tolist() == [len(spans)]
    return [buf[a:b].tobytes() for a, b in spans.tolist()], got


DECIDED = [
    b'{"text": "hello"}\n{"text": "world"}\n',
    b'{"text":"no newline at the end"}',
    b'{"text": ""}\n',
    b'\n\n  \n\t\r\n{"text": "after blank lines"}\n\n',
    b'{"text": "crlf"}\r\n{"text": "lines"}\r\n',
    b'{"text": "esc \\" \\\\ \\/ \\b \\f \\n \\r \\t end"}\n',
    b'{"text": "\\u00e9\\u20ac\\ud83d\\ude00\\u0000\\u001f\\uFFFF"}\n',
    '{"text": "raw UTF-8: é € 😀 中文"}\n'.encode(),
    b'{"id": 1, "text": "field second", "meta": {"a": [1, 2.5, -3e+10, true, false, null]}}\n',
    b'{"a": {"text": "nested: not the field"}, "text": "top level"}\n',
    b'{ "text" : "spaces" , "n" : -0.0E-7 }  \n',
    b'{"text": "x", "s": "\\u00e9\\"\\\\", "k\xc3\xa9y": "\xe2\x82\xac"}\n',
    b'{"te\\u0078t": "escaped key", "\\u00e9\\n": 1, "tex\\u0074x": "not the field"}\n',
    b'{"text": "' + b"abcdefgh" * 5 + b'\\"quoted\\" and \\\\ ' + b"x" * 17 + b'\\u00e9"}\n',
    b'{"text": "deep", "d": ' + b"[" * 63 + b"]" * 63 + b"}\n",
    b'{"text": "big int", "n": ' + b"1" * 4300 + b"}\n",
]


@pytest.mark.parametrize("data", DECIDED, ids=range(len(DECIDED)))
def test_decided_records_give_json_loads_documents(tmp_path, data):
    want = reference(data)
    assert want is not None
    got, _ = read(tmp_path, data)
    assert got == want


def test_the_field_is_any_key_json_loads_matches(tmp_path):
    data = b'{"": "empty name", "te\\u0301": "e acute"}\n'
    assert read(tmp_path, data, "")[0] == reference(data, "") == [b"empty name"]
    assert read(tmp_path, data, "te\u0301")[0] == reference(data, "te\u0301") == [b"e acute"]


UNDECIDED = {
    "missing field": b'{"other": "x"}\n',
    "empty object": b"{}\n",
    "null field": b'{"text": null}\n',
    "number field": b'{"text": 5}\n',
    "object field": b'{"text": {"a": "b"}}\n',
    "repeated field": b'{"text": "a", "text": "b"}\n',
    "repeated field, one escaped": b'{"text": "a", "te\\u0078t": "b"}\n',
    "lone high surrogate": b'{"text": "\\ud800"}\n',
    "lone low surrogate": b'{"text": "\\udc00"}\n',
    "high then not low": b'{"text": "\\ud800\\u0041"}\n',
    "lone surrogate elsewhere": b'{"text": "x", "o": "\\udfff"}\n',
    "NaN": b'{"text": "x", "n": NaN}\n',
    "Infinity": b'{"text": "x", "n": -Infinity}\n',
    "invalid UTF-8 in the field": b'{"text": "\xff"}\n',
    "invalid UTF-8 elsewhere": b'{"text": "x", "o": "\xc3("}\n',
    "too deep": b'{"text": "x", "d": ' + b"[" * 64 + b"]" * 64 + b"}\n",
    "record over two lines": b'{"text":\n "x"}\n',
    "two records on a line": b'{"text": "a"} {"text": "b"}\n',
    "trailing comma": b'{"text": "a",}\n',
    "BOM": b'\xef\xbb\xbf{"text": "a"}\n',
    "form feed line": b'{"text": "a"}\n\x0c\n',
    "raw control character": b'{"text": "a\tb"}\n',
    "raw newline in a string": b'{"text": "a\nb"}\n',
    "raw control character, long string": b'{"text": "' + b"abcdefgh" * 3 + b'\x01 and on"}\n',
    "lone surrogate, long string": b'{"text": "' + b"abcdefgh" * 3 + b'\\udc00 and on"}\n',
    "array record": b'["text"]\n',
    "string record": b'"text"\n',
    "too long an integer": b'{"text": "x", "n": ' + b"1" * 4301 + b"}\n",
    "leading zero": b'{"text": "x", "n": 01}\n',
    "bad escape": b'{"text": "\\x41"}\n',
    "short unicode escape": b'{"text": "\\u00e"}\n',
    "truncated": b'{"text": "abc',
    "truncated after the string": b'{"text": "abc"',
    "unquoted key": b'{text: "a"}\n',
    "single quotes": b"{'text': 'a'}\n",
    "True": b'{"text": "a", "b": True}\n',
    "bare minus": b'{"text": "a", "n": -}\n',
    "dot without digits": b'{"text": "a", "n": 1.}\n',
    "NUL outside strings": b'{"text": "a"}\x00\n',
}


@pytest.mark.parametrize("data", list(UNDECIDED.values()), ids=list(UNDECIDED))
def test_anything_else_is_handed_back_undecided(tmp_path, data):
    got, result = read(tmp_path, data)
    assert got is None, got
    assert 0 <= result[-1] <= len(data)  # where it stopped


def test_regression_a_wrong_parser_would_differ_from_json_loads(tmp_path):
    """Each undecided case above is one where json.loads raises, or gives documents the
    native reader must not guess at (the repeated field: json.loads keeps the last)."""
    assert reference(UNDECIDED["repeated field"]) == [b"b"]
    assert reference(UNDECIDED["repeated field, one escaped"]) == [b"b"]
    assert reference(UNDECIDED["NaN"]) == [b"x"]
    assert reference(UNDECIDED["form feed line"]) == [b"a"]
    assert reference(UNDECIDED["lone surrogate elsewhere"]) == [b"x"]
    assert reference(UNDECIDED["too long an integer"]) is None


def test_files_in_order_stop_at_the_first_not_decided(tmp_path):
    paths = []
    for name, data in [
        ("a", b'{"text": "a1"}\n{"text": "a2"}\n'),
        ("b", b'{"text": "b1"}\n'),
        ("c", b'{"text": null}\n'),
        ("d", b'{"text": "d1"}\n'),
    ]:
        (tmp_path / f"{name}.jsonl").write_bytes(data)
        paths.append(str(tmp_path / f"{name}.jsonl"))
    buf, spans, docs, sizes, mtimes, failed, err, offset = native.read_jsonl_files(
        paths, b"text", max_bytes=1 << 20
    )
    assert (failed, err) == (2, NOT_PLAIN) and 0 <= offset <= 16
    assert docs.tolist() == [2, 1] and sizes.tolist() == [30, 15]
    assert [buf[a:b].tobytes() for a, b in spans.tolist()] == [b"a1", b"a2", b"b1"]
    assert mtimes.tolist() == [os.stat(p).st_mtime_ns for p in paths[:2]]


def test_unreadable_files_and_bounds(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b'{"text": "a"}\n')
    ok = str(tmp_path / "a.jsonl")
    for paths, want in [
        ([ok, str(tmp_path / "gone.jsonl")], errno.ENOENT),
        ([ok, str(tmp_path)], errno.EINVAL),  # a directory
        ([ok, "bad\0path"], errno.EINVAL),
    ]:
        got = native.read_jsonl_files(paths, b"text", max_bytes=1 << 20)
        assert got[5:7] == (1, want) and got[2].tolist() == [1]
    got = native.read_jsonl_files([ok], b"text", max_bytes=5)
    assert got[5:7] == (0, errno.EFBIG)
    with pytest.raises(ValueError):
        native.read_jsonl_files([ok], b"text", max_bytes=-1)


# -- Hypothesis: generated records are decided and equal json.loads; mutated ones, where
# decided, still equal it.

_text = st.text(st.characters(codec="utf-8"), max_size=40)
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False, allow_infinity=False), _text,
)  # fmt: skip
_json = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=12,
)
_record = st.tuples(
    _text, st.dictionaries(_text.filter(lambda k: k != "text"), _json, max_size=4),
    st.integers(0, 4), st.booleans(),
)  # fmt: skip


def _line(rec) -> bytes:
    doc, others, at, ascii_ = rec
    items = list(others.items())
    items.insert(min(at, len(items)), ("text", doc))
    return json.dumps(dict(items), ensure_ascii=ascii_).encode("utf-8")


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(recs=st.lists(_record, max_size=8), blank=st.sampled_from([b"\n", b"\r\n", b"\n\n"]))
def test_property_generated_jsonl_is_decided_and_exact(tmp_path, recs, blank):
    data = blank.join(_line(r) for r in recs)
    got, _ = read(tmp_path, data)
    assert got == [r[0].encode("utf-8") for r in recs] == reference(data)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    recs=st.lists(_record, min_size=1, max_size=4),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.binary(max_size=3)), max_size=4),
)
def test_property_mutated_jsonl_is_undecided_or_exact(tmp_path, recs, edits):
    data = bytearray(b"\n".join(_line(r) for r in recs))
    for at, new in edits:
        k = at % (len(data) + 1)
        data[k : k + len(new)] = new
    got, _ = read(tmp_path, bytes(data))
    if got is not None:
        assert got == reference(bytes(data))


def test_a_joined_run_takes_jsonl_together_and_hands_undecided_files_on(tmp_path, monkeypatch):
    """In a run, plain JSONL files are read by one native call; a file it does not decide
    goes to read_jsonl (Arrow, then json.loads), and the files after it are read together
    again. Every shard equals a run with the native reader off."""
    from gputok.corpus import group_files

    inp = tmp_path / "in"
    inp.mkdir()
    for k in range(6):
        recs = [{"text": f"doc {k}.{j} é", "n": j} for j in range(20)]
        lines = [json.dumps(r) for r in recs]
        if k == 2:
            lines.append('{"text": "kept by json.loads", "n": NaN}')
        (inp / f"s{k}.jsonl").write_text("\n".join(lines) + "\n")
    calls = []
    real = native.read_jsonl_files

    def spy(paths, *a, **kw):
        got = real(paths, *a, **kw)
        calls.append((len(got[2]), got[5]))  # (files read, the first not: -1 none)
        return got

    monkeypatch.setattr(native, "read_jsonl_files", spy)
    kw = {"format": "jsonl", "device": "cpu", "progress": False, "log": lambda m: None}
    run = C.tokenize_corpus([str(inp)], tmp_path / "out", in_process=True, **kw)
    assert len(run.written) == 6
    assert sum(n for n, _ in calls) == 5  # all but the one with NaN, read natively
    assert any(failed != -1 for _, failed in calls) and any(n >= 2 for n, _ in calls)

    monkeypatch.setattr(group_files, "_together", lambda spec: False)
    C.tokenize_corpus([str(inp)], tmp_path / "ref", in_process=True, **kw)
    for f in sorted((tmp_path / "ref").glob("s*")):
        assert (tmp_path / "out" / f.name).read_bytes() == f.read_bytes(), f.name


def test_read_jsonl_tries_the_native_reader_first(tmp_path, monkeypatch):
    """A shard read alone (larger than a joined call takes) goes through the native reader
    too; a file it does not decide gets Arrow's or json.loads's documents, as before."""
    from gputok.corpus import readers

    calls = []
    real = native.read_jsonl_files

    def spy(paths, *a, **kw):
        got = real(paths, *a, **kw)
        calls.append(got[5])
        return got

    monkeypatch.setattr(native, "read_jsonl_files", spy)
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"text": f"doc {i} \u00e9"}) + "\n" for i in range(50)))
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"text": "a", "n": NaN}\n{"text": "b"}\n')
    docs = []
    for path in (plain, odd):
        for b in readers.read_jsonl(str(path), "text", "strict", 64, min_batch_bytes=64):
            s = b.spans() if b.docs is None else None
            docs.append(b.docs or [bytes(memoryview(b.data)[x:y]) for x, y in s])
    assert calls == [-1, 0]
    assert len(docs) > 2  # the plain file in several batches
    assert sum(docs[:-1], []) == [f"doc {i} \u00e9".encode() for i in range(50)]
    assert [d if isinstance(d, bytes) else d.encode() for d in docs[-1]] == [b"a", b"b"]
