"""Parquet files, mutated, whole-file through the corpus reader (gputok.corpus.read_parquet) on
both decoders: gputok's page reader (its footers and schema read natively) and Arrow, and
its top-level column names as the run's --field check reads them. The contract: every batch, or a
CorpusInputError naming the file; never a crash, another exception, a hang (20 s per input)
or a batch over its bounds; and where both decoders read a file, the same documents.

Seeds are pyarrow's layouts (pages v1/v2, dictionary and PLAIN, snappy / none / zstd, small
pages, statistics, page indexes, several row groups, nulls) and hand-built RLE runs
(tests/corpus/parquet_craft.py). Each input mutates one seed: bytes flipped, overwritten, inserted,
cut; a footer or page-header integer set to a boundary value (through a Thrift codec, so the
structure still parses); footers swapped between seeds.

    .venv/bin/python fuzz/fuzz_parquet.py --budget 5000 --seed 1 [--seconds 60] [--only 17]
"""

from __future__ import annotations

import collections
import io
import os
import random
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "corpus"))
import parquet_craft as pc  # noqa: E402
from _common import Finding, parse_args, run  # noqa: E402

BATCH = 1 << 20  # small batches: more of the reader's batching logic per input
MAX_BATCHES = 64  # a valid file that expands (an RLE run) is read this far, not to its end
SECONDS_PER_INPUT = 20
BOUNDARY = [0, 1, -1, 2, 7, 8, 255, 2**15, 2**31 - 1, -(2**31), 2**32, 2**62, 2**63 - 1]


def _seeds() -> list[bytes]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(0)
    words = ["héllo", "日本語", "🙂", "the", " ", "\n", "x" * 40, "<|endoftext|>", ""]
    vals = [
        "".join(rng.choice(words) for _ in range(rng.choice([0, 1, 5, 30]))) for _ in range(120)
    ]
    vals += vals[:30]  # repeats: dictionary hits
    out = []
    layouts = [
        {},
        {"use_dictionary": False},
        {"data_page_version": "2.0"},
        {"data_page_version": "2.0", "compression": "none"},
        {"compression": "none"},
        {"data_page_size": 300, "dictionary_pagesize_limit": 400},
        {"data_page_size": 200, "data_page_version": "2.0", "use_dictionary": False},
        {"write_page_checksum": True, "write_statistics": True, "write_page_index": True},
        {"compression": "zstd"},
        {"row_group_size": 40},
    ]
    for i, kw in enumerate(layouts):
        nullable = i % 2 == 0
        field = pa.field("text", pa.string(), nullable=nullable)
        t = pa.Table.from_arrays([pa.array(vals, pa.string())], schema=pa.schema([field]))
        b = io.BytesIO()
        pq.write_table(t, b, **kw)
        out.append(b.getvalue())
    b = io.BytesIO()  # a null row, and a binary column beside an int one
    pq.write_table(pa.table({"id": list(range(5)), "text": [b"a", None, b"c", b"", b"e"]}), b)
    out.append(b.getvalue())
    out.append(pc.rle_bomb(3000))
    out.append(pc.rle_bomb(40, value="日本".encode()))
    # codecs only Arrow decompresses (their chunks' page headers walked first), and a
    # dictionary of one long value that every row references
    for kw in ({"compression": "gzip", "row_group_size": 40}, {"compression": "brotli"}):
        b = io.BytesIO()
        pq.write_table(pa.table({"text": pa.array(vals, pa.string())}), b, **kw)
        out.append(b.getvalue())
    out.append(pc.dictionary_bomb(value_bytes=4096, rows=3000))
    return out


SEEDS: list[bytes] = []
OUTCOMES: collections.Counter = collections.Counter()  # (ours, Arrow's): read / error / capped


def _int_fields(node, path=()):
    """(path, type) of every integer field in a decoded Thrift struct tree."""
    if isinstance(node, dict):
        for fid, (t, v) in node.items():
            if t in (pc.I16, pc.I32, pc.I64, pc.BYTE):
                yield path + (fid,), t
            elif t == pc.STRUCT:
                yield from _int_fields(v, path + (fid,))
            elif t in (pc.LIST, pc.SET) and v[0] == pc.STRUCT:
                for k, item in enumerate(v[1]):
                    yield from _int_fields(item, path + (fid, k))


def _set(node, path, value) -> None:
    for step in path[:-1]:
        t, v = node[step] if isinstance(node, dict) else (None, node[step])
        node = v[1] if t in (pc.LIST, pc.SET) else v
    t, _ = node[path[-1]]
    if t == pc.BYTE:
        value &= 0xFF
    node[path[-1]] = (t, value)


def _mutate_struct(rng: random.Random, tree: dict) -> None:
    fields = list(_int_fields(tree))
    for _ in range(rng.randint(1, 3)):
        if fields:
            path, _t = rng.choice(fields)
            v = rng.choice(BOUNDARY) if rng.random() < 0.7 else rng.randint(-1000, 100_000)
            _set(tree, path, v)


def _footer_mutation(rng: random.Random, data: bytes) -> bytes:
    body, md = pc.split_file(data)
    _mutate_struct(rng, md)
    return pc.join_file(body, md)


def _page_header_mutation(rng: random.Random, data: bytes) -> bytes:
    """An integer of the page header at a column chunk's start (from the footer)."""
    _, md = pc.split_file(data)
    starts = []
    for rg in md.get(4, (0, (0, [])))[1][1]:
        for col in rg[1][1][1]:
            meta = col[3][1]
            starts += [meta[k][1] for k in (9, 11) if k in meta]
    if not starts:
        return data
    at = rng.choice(starts)
    try:
        hdr, end = pc.decode_struct(data, at)
    except (pc.ThriftError, IndexError):
        return data
    _mutate_struct(rng, hdr)
    new = pc.encode_struct(hdr)
    return data[:at] + new + data[end:]  # offsets after it now point elsewhere: fine too


def _byte_mutation(rng: random.Random, data: bytes) -> bytes:
    """Mostly inside the pages (before the footer), where the page reader parses."""
    buf = bytearray(data)
    if not buf:
        return rng.randbytes(rng.randint(1, 64))
    try:
        pages = len(pc.split_file(data)[0]) if rng.random() < 0.8 else len(buf)
    except (pc.ThriftError, ValueError, IndexError):
        pages = len(buf)
    pages = max(1, min(pages, len(buf)))
    k = rng.randrange(5)
    if k == 0:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(pages)] = rng.randrange(256)
    elif k == 1:
        a = rng.randrange(pages)
        n = rng.randint(1, 64)
        buf[a : a + n] = bytes([rng.choice([0, 0xFF, rng.randrange(256)])]) * n
    elif k == 2:
        a = rng.randrange(pages)
        buf[a:a] = rng.randbytes(rng.randint(1, 32))
    elif k == 3:
        a = rng.randrange(pages)
        del buf[a : a + rng.randint(1, 64)]
    else:
        buf = buf[: rng.randrange(len(buf))] if rng.random() < 0.5 else buf[rng.randrange(8) :]
    return bytes(buf)


def mutate(rng: random.Random) -> bytes:
    data = rng.choice(SEEDS)
    for _ in range(rng.randint(1, 2)):
        k = rng.randrange(10)
        try:
            if k < 3:
                data = _footer_mutation(rng, data)
            elif k < 5:
                data = _page_header_mutation(rng, data)
            elif k == 5:
                other = rng.choice(SEEDS)
                data = pc.split_file(data)[0] + other[len(pc.split_file(other)[0]) :]
            else:
                data = _byte_mutation(rng, data)
        except (pc.ThriftError, KeyError, IndexError, TypeError, ValueError):
            data = _byte_mutation(rng, data)  # a previous mutation left no footer to decode
    return data


def _read(path: str, decoder) -> tuple[list[bytes], bool] | None:
    """The documents (and whether all were read), or None on CorpusInputError."""
    from gputok import corpus as C

    docs, batches = [], 0
    try:
        for b in C.read_parquet(path, "text", BATCH, min_batch_bytes=1, decoder=decoder):
            if b.docs is None and b.arrow is None:  # the page reader's spans
                sp = b.spans()
                if len(sp) and (sp.min() < 0 or sp.max() > len(b.data)):
                    raise Finding(f"a span outside the pages: {sp.min()}..{sp.max()}")
                if len(sp) > max(1, BATCH // 16):
                    raise Finding(f"a batch of {len(sp)} rows over its bound")
            docs += b.doc_list()
            batches += 1
            if batches >= MAX_BATCHES:
                return docs, False
    except C.CorpusInputError as e:
        if path not in str(e):
            raise Finding(f"an error that does not name the file: {e}") from e
        return None
    return docs, True


def _alarm(signum, frame):
    raise Finding(f"an input took over {SECONDS_PER_INPUT} s")


def one(rng: random.Random, i: int) -> None:
    from gputok import _corpus_native
    from gputok import corpus as C

    data = mutate(rng)
    fd, path = tempfile.mkstemp(prefix="gputok-fuzz-", suffix=".parquet", dir=TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        signal.alarm(SECONDS_PER_INPUT)
        try:
            names = C.readers._parquet_names(path)  # the run's --field check: never raises
            if names is not None and not all(isinstance(n, str) for n in names):
                raise Finding(f"column names that are not str: {names!r}")
            ours = _read(path, _corpus_native.parquet_decode)
            arrow = _read(path, None)
        finally:
            signal.alarm(0)
    finally:
        os.unlink(path)
    OUTCOMES[
        tuple("error" if r is None else "read" if r[1] else "capped" for r in (ours, arrow))
    ] += 1
    if ours is not None and arrow is not None and ours[1] and arrow[1] and ours[0] != arrow[0]:
        raise Finding(f"the decoders disagree: {len(ours[0])} documents against {len(arrow[0])}")


TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None

if __name__ == "__main__":
    args = parse_args()
    SEEDS[:] = _seeds()
    signal.signal(signal.SIGALRM, _alarm)
    status = run("fuzz_parquet", one, args)
    print("outcomes (page reader, Arrow):", dict(OUTCOMES.most_common()))
    sys.exit(status)
