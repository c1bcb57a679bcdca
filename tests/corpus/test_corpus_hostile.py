"""The corpus run survives any file: a malformed or hostile Parquet file fails its own shard
with an error naming the file and the reason, fast and in bounded memory, on both decoders,
while the other shards complete; native entry points refuse out-of-range arguments instead
of crashing. Each crafted file (tests/corpus/parquet_craft.py) is read in a child process, so that a
regression that aborts or runs away fails its test instead of the whole session."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")
import parquet_craft as pc  # noqa: E402

from gputok import _corpus_native  # noqa: E402
from gputok import corpus as C  # noqa: E402

HERE = Path(__file__).parent
BATCH = 32 << 20  # the default batch_bytes: memory must stay under 2x it

_READ = textwrap.dedent(
    """
    import json, resource, sys, time
    from gputok import _corpus_native
    from gputok import corpus as C
    path, decoder, batch, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    expansion = float(sys.argv[5])
    dec = None if decoder == "arrow" else _corpus_native.parquet_decode
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t, rows, batches, widest, out = time.perf_counter(), 0, 0, 0, {}
    try:
        for b in C.read_parquet(path, "text", batch, decoder=dec, max_expansion=expansion):
            rows += len(b)
            batches += 1
            widest = max(widest, len(b))
            if batches >= limit:
                break
        out["ok"] = rows
    except C.CorpusInputError as e:
        out["error"] = str(e)
    except Exception as e:
        out["other"] = f"{type(e).__name__}: {e}"
    out["seconds"] = time.perf_counter() - t
    out["rss_growth"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    out["batches"], out["widest"] = batches, widest
    print(json.dumps(out))
    """
)


def _read_in_child(
    path: Path, decoder: str, batch: int = BATCH, limit: int = 1 << 30, expansion: float = 64
) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", _READ, str(path), decoder, str(batch), str(limit), str(expansion)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"the reader died (rc {r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


DECODERS = ["gputok", "arrow"]

CRAFTED = {
    # pyarrow's ColumnChunkMetaData throws through a noexcept accessor: rc 134 before
    "required-over-levels": (pc.required_with_levels, "Definition level"),
    # bytearray(8 GiB) before any check: 8.3 GB RSS before
    "claims-8-gib": (pc.claims_gib, "outside the file's"),
    # a 2^28-row RLE run for a row group of 2 rows: 56 s and 8.3 GB before
    "rle-bomb-2-rows": (lambda: pc.rle_bomb(1 << 28, rg_rows=2), "268435456 values for 2 rows"),
    # valid files, decompression bombs: 149 bytes that are 2^28 rows (1.34 GB of text; a
    # corpus run took 126 s and wrote 3.2 GB for it before); 4 KB that are 4 GiB of text,
    # with the row group's byte count as small as a writer makes it (Arrow read it in batches
    # of 2^20 rows: 46 s and 5.6 GiB before)
    "rle-bomb-2^28-rows": (lambda: pc.rle_bomb(1 << 28), "the footer claims 268435456 rows"),
    "rle-bomb-4-gib-of-text": (
        lambda: pc.rle_bomb(1 << 20, value=b"x" * 4096, rg_bytes=200),
        "decodes to more than 16777216 bytes",
    ),
    # valid files by pyarrow, pages Arrow decompresses: one 512 KB dictionary value that
    # 100,000 rows reference, 468 bytes with zstd (Arrow materialised 4,096 rows a batch, 2 GiB:
    # 12-15 s and 3.0-3.5 GiB before); the same in gzip; 20 MB of text whose zstd pages
    # claim more than the file's budget, refused before Arrow decompresses them
    "zstd-dictionary-bomb": (pc.dictionary_bomb, "decodes to more than 16777216 bytes by row"),
    "gzip-dictionary-bomb": (
        lambda: pc.dictionary_bomb(compression="gzip"),
        "decodes to more than 16777216 bytes by row",
    ),
    # each row the one before as its prefix (DELTA_BYTE_ARRAY): 4,096 rows of 512 KB in 461 bytes
    "zstd-delta-prefix-bomb": (pc.delta_prefix_bomb, "decodes to more than 16777216 bytes by row"),
    "zstd-pages-claim-20-mib": (
        lambda: pc.pyarrow_file(["a" * (1 << 20)] * 20, compression="zstd", use_dictionary=False),
        "the pages claim 20971",
    ),
    # read as its v2 content by the page reader, as 0 rows by Arrow: the decoders disagreed
    "page-type-without-its-header": (pc.page_type_without_its_header, "0 rows read of the 150"),
}


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("name", list(CRAFTED))
def test_crafted_file_fails_alone_fast_and_small(tmp_path, name, decoder):
    make, reason = CRAFTED[name]
    p = tmp_path / f"{name}.parquet"
    p.write_bytes(make())
    got = _read_in_child(p, decoder)
    assert "error" in got, got
    assert str(p) in got["error"] and reason in got["error"], got
    assert got["seconds"] < 5, got
    assert got["rss_growth"] < 2 * BATCH, got


@pytest.mark.parametrize("decoder", DECODERS)
def test_rle_bomb_that_is_consistent_streams_in_bounded_memory(tmp_path, decoder):
    """A footer that agrees with its 2^28-row RLE run is a valid file (2^28 copies of one
    document): with the expansion limit lifted it is read, a batch at a time, each batch's
    spans bounded by the batch, never the row group's 4 GiB of spans."""
    p = tmp_path / "bomb.parquet"
    p.write_bytes(pc.rle_bomb(1 << 28))
    got = _read_in_child(p, decoder, limit=8, expansion=0)
    assert got["ok"] > 0 and got["batches"] == 8, got
    assert got["widest"] <= BATCH // 16 or decoder == "arrow", got
    assert got["rss_growth"] < 2 * BATCH, got


def test_small_rle_run_reads_as_arrow_does(tmp_path):
    import pyarrow.parquet as pq

    p = tmp_path / "run.parquet"
    p.write_bytes(pc.rle_bomb(5000, value="héllo".encode()))
    want = [v.encode() for v in pq.read_table(p).column("text").to_pylist()]
    assert len(want) == 5000
    for dec in (None, _corpus_native.parquet_decode):
        got = []
        for b in C.read_parquet(str(p), "text", 4096, min_batch_bytes=1, decoder=dec):
            got += b.doc_list()
        assert got == want
    # the page reader's batches hold at most target / 16 rows
    sizes = [
        len(b) for b in C.read_parquet(str(p), "text", 4096, decoder=_corpus_native.parquet_decode)
    ]
    assert sum(sizes) == 5000 and max(sizes) <= 4096 // 16


def test_run_reports_the_bad_shards_and_writes_the_good(tmp_path):
    """A real local cluster of worker processes: the crafted files fail their shards, named
    with the reason; the good file's shard is written and verifies; no worker dies."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a_good.parquet").write_bytes(pc.pyarrow_file([f"document {i}" for i in range(300)]))
    for name, (make, _) in CRAFTED.items():
        (d / f"b_{name}.parquet").write_bytes(make())
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "gputok", "corpus", str(d), "-o", str(out), "--workers", "2"]
        + ["--no-progress", "--no-dashboard", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr[-3000:]
    err = r.stderr
    n = len(CRAFTED)
    assert f"{n} of {n + 1} shard(s) failed" in err and "KilledWorker" not in err, err[-3000:]
    for name, (_, reason) in CRAFTED.items():
        assert f"b_{name}.parquet" in err and reason in err, err[-3000:]
    man = json.loads((out / "manifest.json").read_text())
    assert [s["source"] for s in man["shards"]] == ["a_good.parquet"]
    assert C.verify_entry(str(out), man["shards"][0]) is None
    assert C.verify_corpus(out) == ["manifest says the run is not complete"]


def test_a_chunk_of_many_tiny_pages_is_refused_before_arrow_reads_it(tmp_path):
    """The walk of a chunk's page headers (before Arrow reads it) costs a few µs of Python a
    page: a chunk of more than 4,096 pages averaging under 256 bytes fails its shard (a GB of
    7-byte pages would take minutes). The page reader reads the same file itself."""
    p = tmp_path / "pages.parquet"
    p.write_bytes(pc.many_empty_pages())
    got = _read_in_child(p, "arrow")
    assert "more than 4096 pages in a column chunk of" in got.get("error", ""), got
    assert str(p) in got["error"] and got["seconds"] < 5, got
    assert _read_in_child(p, "gputok").get("ok") == 3
    few = tmp_path / "few.parquet"
    few.write_bytes(pc.many_empty_pages(4000))
    assert _read_in_child(few, "arrow").get("ok") == 3


def test_max_expansion_option_sets_the_limit(tmp_path):
    """`gputok corpus --max-expansion`: 2^20 + 1 rows of "hello" in a 150-byte file are more
    than the default allows (16 bytes a row, 16 MiB); 0 lifts the limit and the shard is
    written; a negative value is refused before any work."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "bomb.parquet").write_bytes(pc.rle_bomb((1 << 20) + 1))

    def run(out: str, *extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "gputok", "corpus", str(d), "-o", str(tmp_path / out)]
        cmd += ["--no-progress", "--device", "cpu", "--in-process", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    r = run("default")
    assert r.returncode == 1 and "the footer claims 1048577 rows" in r.stderr, r.stderr[-2000:]
    r = run("lifted", "--max-expansion", "0")
    assert r.returncode == 0, r.stderr[-2000:]
    man = json.loads((tmp_path / "lifted" / "manifest.json").read_text())
    assert [s["documents"] for s in man["shards"]] == [(1 << 20) + 1]
    r = run("negative", "--max-expansion", "-1")
    assert r.returncode != 0 and "max_expansion must be 0 (no limit) or more" in r.stderr


# --------------------------------------------------------------- native entry points

_NATIVE = textwrap.dedent(
    """
    import numpy as np
    from gputok import _corpus_native
    try:
        {call}
        print("returned")
    except (ValueError, NotImplementedError) as e:
        print(type(e).__name__, e)
    """
)


@pytest.mark.parametrize(
    "call",
    [
        # signed overflow in offset + size, then a read far outside the buffer: SIGSEGV before
        '_corpus_native.parquet_decode(b"\\0" * 16, "UNCOMPRESSED", 1, 0, [(2**62, 2**63 - 1, 1)])',
        '_corpus_native.parquet_decode(b"\\0" * 16, "UNCOMPRESSED", 1, 0, [(8, 2**63 - 1, 1)])',
        '_corpus_native.parquet_decode(b"\\0" * 16, "UNCOMPRESSED", 1, 0, [(-1, 4, 1)])',
        # offsets[-1] - offsets[0] overflows int64: SIGSEGV before
        "_corpus_native.pack_uint16(np.arange(4, dtype=np.int32), np.array([-2**63, 2**63 - 1]), 0)",
        "_corpus_native.pack_uint16(np.arange(4, dtype=np.int32), np.array([2**63 - 9, 2**63 - 1]), 0)",
        '_corpus_native.parquet_footer(b"\\x19\\xfc" + b"\\x00" * 10, 0)',
        '_corpus_native.parquet_footer(b"", 0)',
        # the page-header walk before Arrow reads a chunk: a truncated header, a length past
        # the page, more values than the page holds
        '_corpus_native.parquet_page_header(b"\\x15\\x04")',
        '_corpus_native.parquet_plain_max_length(b"\\x05\\x00\\x00\\x00ab", 1)',
        '_corpus_native.parquet_plain_max_length(b"", 2**62)',
    ],
)
def test_native_entry_points_refuse_out_of_range_arguments(call):
    r = subprocess.run(
        [sys.executable, "-c", _NATIVE.format(call=call)], capture_output=True, text=True
    )
    assert r.returncode == 0, f"crashed (rc {r.returncode}): {r.stderr[-1000:]}"
    assert r.stdout.startswith(("ValueError", "ParquetCorrupt", "NotImplementedError")) or (
        call.startswith("_corpus_native.parquet_footer") and r.stdout.startswith("returned")
    ), r.stdout


def test_pack_uint16_checks_offsets_natively():
    ids = np.arange(4, dtype=np.int32)
    for offs, match in (
        ([-(2**63), 2**63 - 1], "int64"),
        ([0, 5], "past the end"),
        ([3, 1], "non-decreasing"),
    ):
        with pytest.raises(ValueError, match=match):
            _corpus_native.pack_uint16(ids, np.array(offs, dtype=np.int64), 0)
    out, ends, bad = _corpus_native.pack_uint16(ids, np.array([1, 3], dtype=np.int64), 9)
    assert out.tolist() == [0, 1, 9] and ends.tolist() == [3] and bad == -1  # ids from offsets[0]


def test_parquet_decode_budget_refuses_before_allocating():
    """A page header claiming more decompressed bytes than the caller's budget is refused
    (ParquetUnsupported: the reader then hands the chunk to Arrow)."""
    data = pc.rle_bomb(10)
    body, md = pc.split_file(data)
    meta = pc.column_meta(md)
    start, size = meta[11][1], meta[7][1]
    chunk = data[start : start + size]
    got = _corpus_native.parquet_decode(chunk, "UNCOMPRESSED", 10, 0)
    assert got.rows == 10 and len(got.spans(100)) == 10
    with pytest.raises(_corpus_native.ParquetUnsupported, match="budget"):
        _corpus_native.parquet_decode(chunk, "UNCOMPRESSED", 10, 0, max_bytes=4)


def test_read_parquet_wraps_pyarrows_errors(tmp_path):
    """pyarrow's OSError / ValueError come out as CorpusInputError naming the file."""
    p = tmp_path / "notparquet.parquet"
    p.write_bytes(b"PAR1" + b"\x00" * 40 + b"PAR1")
    with pytest.raises(C.CorpusInputError, match="notparquet.parquet"):
        list(C.read_parquet(str(p), "text", BATCH))
