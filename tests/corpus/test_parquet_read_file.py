"""_corpus_native.parquet_read_file (csrc/corpus/parquet_file.cpp): a small Parquet file read
in one native call gives the documents the rest of read_parquet gives, and leaves to that
reader (None) every file it does not take whole, which then reads it or names what is wrong."""

from __future__ import annotations

import os

import pytest
from page_decoders import make_values, pa, pq, read_docs
from parquet_craft import claims_gib, pyarrow_file

from gputok import _corpus_native as native
from gputok import corpus as C

LIMIT, OUT, ROWS = 16 << 20, 64 << 20, 1 << 20
LAYOUTS = [
    {},
    {"use_dictionary": False},
    {"data_page_version": "2.0"},
    {"compression": "none"},
    {"data_page_size": 700, "data_page_version": "2.0", "use_dictionary": False},
    {"write_page_checksum": True, "write_statistics": True, "write_page_index": True},
]


def _docs(pages) -> list[bytes]:
    spans = pages.spans(1 << 30, 0)
    data = bytes(pages.pages)
    return [data[a:b] for a, b in spans]


@pytest.mark.parametrize("kw", LAYOUTS, ids=range(len(LAYOUTS)))
@pytest.mark.parametrize("nullable", [True, False], ids=["optional", "required"])
def test_whole_files_read_as_arrow_reads_them(tmp_path, kw, nullable):
    values = make_values(700, seed=len(kw))
    field = pa.field("text", pa.string(), nullable=nullable)
    table = pa.Table.from_arrays([pa.array(values, pa.string())], schema=pa.schema([field]))
    p = tmp_path / "a.parquet"
    pq.write_table(table, p, row_group_size=250, **kw)
    got = native.parquet_read_file(str(p), "text", LIMIT, OUT, ROWS)
    assert got is not None
    pages, size, rows, rg_bytes = got
    assert size == os.path.getsize(p) and rows == 700 and rg_bytes > 0
    want = [v.encode() for v in values]
    assert _docs(pages) == want
    assert [v.encode() for v in pq.read_table(p).column("text").to_pylist()] == want  # Arrow


def test_read_parquet_takes_it_whole(tmp_path, monkeypatch):
    """The page reader's per-row-group path is not reached for a whole file."""
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": ["x", "y", "z"]}), p)
    monkeypatch.setattr(
        C.parquet, "native_layout", lambda *a: pytest.fail("read through the per-file path")
    )
    assert read_docs(p, native.parquet_decode) == [b"x", b"y", b"z"]


def _undecided(tmp_path, data: bytes, column: str = "text", **kw) -> object:
    p = tmp_path / "u.parquet"
    p.write_bytes(data)
    args = {"group_limit": LIMIT, "max_out": OUT, "max_rows": ROWS, **kw}
    return native.parquet_read_file(str(p), column, **args)


@pytest.mark.parametrize(
    "name",
    ["zstd", "not a string", "no such column", "over the group limit", "more rows claimed"],
)
def test_files_it_does_not_take_whole_are_left_undecided(tmp_path, name):
    table = pa.table({"text": make_values(300, seed=2), "n": list(range(300))})
    if name == "zstd":
        data = pyarrow_file(make_values(300, seed=2), compression="zstd")
        assert _undecided(tmp_path, data) is None
        return
    p = tmp_path / "t.parquet"
    pq.write_table(table, p)
    data = p.read_bytes()
    if name == "not a string":
        assert _undecided(tmp_path, data, column="n") is None
    elif name == "no such column":
        assert _undecided(tmp_path, data, column="body") is None
    elif name == "over the group limit":
        assert _undecided(tmp_path, data, group_limit=100) is None
    else:
        assert _undecided(tmp_path, data, max_rows=299) is None
        assert _undecided(tmp_path, data, max_rows=300) is not None


@pytest.mark.parametrize("path", ["", "missing.parquet", "a\0b", "."])
def test_paths_it_cannot_read_are_left_undecided(tmp_path, path):
    assert (
        native.parquet_read_file(str(tmp_path / path) if path else "", "text", LIMIT, OUT, ROWS)
        is None
    )


def test_a_bomb_still_fails_before_anything_is_read(tmp_path):
    """A footer claiming GiBs: left to read_parquet's own checks, which name it."""
    p = tmp_path / "bomb.parquet"
    p.write_bytes(claims_gib(8))
    assert native.parquet_read_file(str(p), "text", LIMIT, OUT, ROWS) is None
    with pytest.raises(C.CorpusInputError, match="outside the file"):
        read_docs(p, native.parquet_decode)


def test_a_null_names_its_row(tmp_path):
    p = tmp_path / "n.parquet"
    pq.write_table(pa.table({"text": ["a", None, "c"]}), p)
    with pytest.raises(native.ParquetNull):
        native.parquet_read_file(str(p), "text", LIMIT, OUT, ROWS)
    with pytest.raises(C.CorpusInputError, match="row 1: column 'text' is null"):
        read_docs(p, native.parquet_decode)
