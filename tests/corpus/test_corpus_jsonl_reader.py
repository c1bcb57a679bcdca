"""The JSONL reader's Arrow path (blocks sized to the cores, retried larger when a record
straddles two) against the line-by-line reader on hostile lines: the same documents, or the
same error naming the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputok.corpus import CorpusInputError
from gputok.corpus import readers as R

LONG = "long \\n \u00e9 " * 900  # ~10 KB: longer than the test's 1 KB blocks

# (lines, the Arrow path takes the file)
CASES = {
    "escapes": (['{"text": "a\\"b\\\\c\\/d\\b\\f\\n\\r\\t e"}'], True),
    "unicode escapes": (['{"text": "\\u00e9\\u4e2d\\u0041"}'], True),
    "surrogate pair": (['{"text": "x\\ud83d\\ude00y"}'], True),
    "raw non-ASCII": (['{"text": "caf\u00e9 \u4e2d\u6587 \U0001f600"}'], True),
    "other fields": (['{"id": 1, "meta": {"a": [1, 2]}, "text": "t", "z": null}'], True),
    "blank and CRLF": (['{"text": "a"}\r', "", "   ", '{"text": "b"}'], True),
    "record longer than a block": ([json.dumps({"text": LONG}), '{"text": "after"}'], True),
    "many records across blocks": ([json.dumps({"text": f"r{i} " * 30}) for i in range(200)], True),
    "empty string": (['{"text": ""}'], True),
    "lone high surrogate": (['{"text": "a\\ud800b"}'], False),
    "lone low surrogate": (['{"text": "a\\udc00b"}'], False),
    "reversed pair": (['{"text": "\\ude00\\ud83d"}'], False),
    "bad JSON": (['{"text": "ok"}', '{"text": nope}'], False),
    "truncated": (['{"text": "ok"}', '{"text": "unterminated'], False),
    "not an object": (['{"text": "ok"}', '["text"]'], False),
    "missing field": (['{"text": "ok"}', '{"body": "x"}'], False),
    "null field": (['{"text": null}'], False),
    "number field": (['{"text": "ok"}', '{"text": 12}'], False),
    "object field": (['{"text": {"a": 1}}'], False),
    "duplicate key": (['{"text": "a", "text": "b"}'], False),
    "raw invalid UTF-8": (['{"text": "ok"}', b'{"text": "a\xff b"}'], False),
}

ERRORS = {"bad JSON", "truncated", "not an object", "missing field", "null field"}
ERRORS |= {"number field", "object field", "raw invalid UTF-8"}


def _docs(batches) -> list[bytes]:
    out = []
    for b in batches:
        for d in b.doc_list():
            out.append(d if isinstance(d, bytes) else d.encode("utf-8", "surrogatepass"))
    return out


def _read(fn):
    try:
        return "ok", _docs(fn())
    except CorpusInputError as e:
        return "error", str(e)


@pytest.mark.parametrize("name", list(CASES))
def test_arrow_reader_equals_line_by_line(tmp_path: Path, name: str):
    lines, fast = CASES[name]
    path = tmp_path / "in.jsonl"
    raw = [x if isinstance(x, bytes) else x.encode("utf-8") for x in lines]
    path.write_bytes(b"\n".join(raw) + b"\n")
    p = str(path)
    want = _read(lambda: R._read_jsonl_python(p, "text", "strict", 1 << 20))
    arrow = R._read_jsonl_arrow(p, "text", 1 << 20, 1, block_bytes=1024)
    assert (arrow is not None) == fast, name
    got = _read(lambda: R.read_jsonl(p, "text", "strict", 1 << 20))
    assert got == want
    if fast:
        assert got[0] == "ok" and got[1], got
        assert _docs(arrow) == want[1]
    elif name in ERRORS:
        assert got[0] == "error" and got[1].startswith(f"{p}:{len(lines)}: "), got
    else:  # the line-by-line reader's documents (lone surrogates kept, the last key wins)
        assert got[0] == "ok" and got[1], got


def test_block_sizes_follow_the_cores():
    mb = 1 << 20
    assert R._jsonl_block_bytes(22 * mb, 2) == 11 * mb
    assert R._jsonl_block_bytes(22 * mb, 16) == -(-22 * mb // 16)
    assert R._jsonl_block_bytes(100, 16) == R.JSONL_MIN_BLOCK_BYTES
    assert R._jsonl_block_bytes(1 << 30, 1) == R.JSONL_MAX_BLOCK_BYTES >> 2
