"""_corpus_native.parquet_schema: a footer's top-level names and one column's leaf, read
without pyarrow, against pyarrow's own reading of the same files; and read_parquet's native
layout (parquet_chunks.native_layout) taken only for plain string columns."""

from __future__ import annotations

import io

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from gputok import _corpus_native as native  # noqa: E402
from gputok import corpus as C  # noqa: E402
from gputok.corpus import parquet_chunks  # noqa: E402


def _footer(table: pa.Table, **kw) -> tuple[bytes, bytes]:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    data = buf.getvalue()
    n = int.from_bytes(data[-8:-4], "little")
    return data, data[-8 - n : -8]


TABLES = {
    "flat": pa.table({"id": [1, 2], "text": ["a", "b"], "score": [0.5, 1.0]}),
    "nested before": pa.table(
        {
            "meta": pa.array([{"x": 1, "y": "u"}, {"x": 2, "y": "v"}]),
            "tags": pa.array([["a"], ["b", "c"]]),
            "text": ["a", "b"],
        }
    ),
    "text first, required": pa.Table.from_arrays(
        [pa.array(["a", "b"]), pa.array([1, 2])],
        schema=pa.schema([pa.field("text", pa.string(), nullable=False), ("n", pa.int64())]),
    ),
    "binary": pa.table({"text": pa.array([b"a", b"b"], pa.binary())}),
}


@pytest.mark.parametrize("name", list(TABLES))
def test_schema_matches_pyarrow(name, tmp_path):
    table = TABLES[name]
    data, footer = _footer(table)
    names, leaf, typ, rep, conv, logical, plain = native.parquet_schema(footer, "text")
    assert [n.decode() for n in names] == table.schema.names
    path = tmp_path / "f.parquet"
    path.write_bytes(data)
    schema = pq.ParquetFile(path).schema
    want = next(i for i in range(len(schema)) if schema.column(i).path == "text")
    assert leaf == want
    assert typ == 6  # BYTE_ARRAY
    field = table.schema.field("text")
    assert rep == (1 if field.nullable else 0)
    assert (conv, logical) == ((0, 1) if pa.types.is_string(field.type) else (-1, -1))
    assert plain  # a string or binary top-level leaf: the page reader takes it


def test_a_nested_or_missing_column_is_no_leaf():
    _, footer = _footer(TABLES["nested before"])
    assert native.parquet_schema(footer, "y")[1] == -1  # meta.y: not top-level
    assert native.parquet_schema(footer, "meta")[1] == -1  # a group
    assert native.parquet_schema(footer, "nope")[1] == -1


@pytest.mark.parametrize("cut", [0, 1, 7, 40])
def test_a_cut_footer_is_corrupt_never_a_crash(cut):
    _, footer = _footer(TABLES["nested before"])
    with pytest.raises(native.ParquetCorrupt):
        native.parquet_schema(footer[:cut], "text")


def _layout(tmp_path, table: pa.Table, **kw):
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **kw)
    with open(path, "rb") as f:
        return parquet_chunks.native_layout(f, str(path), "text", lambda: None)


def test_plain_string_columns_take_the_native_layout(tmp_path):
    lay = _layout(tmp_path, pa.table({"text": ["ab"] * 10, "n": list(range(10))}), row_group_size=4)
    assert lay is not None
    assert lay.rows == [4, 4, 2]
    assert lay.num_rows == 10
    assert lay.leaf == (0, 1)


@pytest.mark.parametrize(
    "table",
    [
        pa.table({"text": [1, 2]}),  # not BYTE_ARRAY
        pa.table({"text": pa.array([{"a": "x"}, {"a": "y"}])}),  # a group
        pa.table({"text": pa.array([["x"], ["y"]])}),  # repeated
        pa.table({"other": ["x", "y"]}),  # no such column
    ],
)
def test_other_columns_leave_the_file_to_pyarrow(tmp_path, table):
    assert _layout(tmp_path, table) is None


def test_a_dictionary_column_reads_as_its_strings_on_both_decoders(tmp_path):
    """A pandas categorical: BYTE_ARRAY pages, a dictionary type in Arrow's schema."""
    values = ["b", "a", "b", "c"]
    table = pa.table({"text": pa.array(values).dictionary_encode()})
    path = tmp_path / "f.parquet"
    pq.write_table(table, path)
    for decoder in (native.parquet_decode, None):
        docs = []
        for b in C.read_parquet(str(path), "text", 1 << 20, decoder=decoder):
            docs += b.doc_list()
        assert docs == [v.encode() for v in values]


def test_regression_a_path_that_is_not_utf8_is_a_corpus_error(tmp_path):
    """fuzz_parquet (seed 5, input 11787): a footer whose path_in_schema was mutated into bytes
    that are not UTF-8 let a UnicodeDecodeError out of read_parquet."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import parquet_craft as pc

    body, md = pc.split_file(pc.pyarrow_file(["a", "b"]))
    pc.column_meta(md)[3] = (9, (8, [b"\xfe\xff"]))
    path = tmp_path / "bad-path.parquet"
    path.write_bytes(pc.join_file(body, md))
    with open(path, "rb") as f:
        footer, _size = parquet_chunks.read_footer(f, str(path))
    assert native.parquet_footer(footer, 0)[1][0]["path"] == "\ufffd\ufffd"
    for decoder in (native.parquet_decode, None):
        try:
            docs = [d for b in C.read_parquet(str(path), "text", 1 << 20, decoder=decoder)
                    for d in b.doc_list()]  # fmt: skip
        except C.CorpusInputError:
            continue
        assert docs == [b"a", b"b"]
