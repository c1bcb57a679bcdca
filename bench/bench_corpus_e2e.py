#!/usr/bin/env python3
"""`gputok corpus` from the command line against gigatoken's own file path, end to end.

Not a test. Each contender is a fresh process, timed from spawn to exit (imports, cluster
start-up and tokenizer loads included), turning input shards into the same output: per input
file, ``.bin`` (uint16 ids, <|endoftext|> after every document) and ``.idx`` (int64 document
offsets). Both write without fsync (``--no-fsync``); gputok also hashes its files.

* **gputok**: ``python -m gputok corpus IN -o OUT --no-fsync --no-progress --no-dashboard``
  at its defaults (in process below its threshold, else a local Dask cluster; small shards
  grouped into tasks), plus EXTRA arguments (``--gputok-args``).
* **gigatoken** (on all cores): ``Tokenizer.encode_files`` on ``JsonlFileSource`` /
  ``ParquetFileSource`` / ``TextFileSource`` over up to ``--gigatoken-call-gb`` of input
  files per call, each call's ids cut per file (the documents per file are known from the
  generator) and written as above (gputok's native uint16 packer) on writer threads while
  the next call encodes.
  Its configuration: ``Tokenizer.from_tiktoken(ranks, pretokenizer="gpt2")`` or
  ``Tokenizer(hf)``, both timed on the first configuration, the faster kept.
* **start-up alone**: each contender on one 100 KB shard (gputok ``--in-process`` and
  ``--cluster``).

Rounds: ``--rounds N`` runs each configuration N times, the contenders alternated (gigatoken,
then gputok, each round), and reports each one's median round with every round's time: three
rounds of gputok on 1 GB of code in 1 MB text shards took 0.89, 0.71 and 0.69 s in one call
(H200 host, 2026-12-02), so one round can misstate a ratio by a quarter.

Exactness: for the first, middle and last shard of every configuration, both contenders'
``.bin`` and ``.idx`` must be equal byte for byte (and non-empty), else the row says so.

Inputs, generated here: ``diverse`` (the pinned bench corpus, bench/corpus.py, repeated to
the size: repeats flatter pretoken caches, both contenders' alike) and ``code`` (this
machine's Python standard library ``.py`` files, repeated). Sizes are of UTF-8 text.

    python3 bench/bench_corpus_e2e.py --sizes-gb 0.01 --shard-mb 1,4 --formats jsonl \\
        --corpora diverse --json /tmp/e2e.json             # tiny local check
    python3 bench/bench_corpus_e2e.py --sizes-gb 1,10 --deadline-s 260 --json $OUT/e2e.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GIGATOKEN_JOB = REPO / "bench" / "corpus_e2e_gigatoken.py"
TEXT_SEP = "\x1e\n"  # the text format's document separator (never in the documents used)
MB = 1 << 20


def log(msg: str) -> None:
    print(f"[e2e {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ inputs


def load_docs(corpus: str, profile: str = "bench") -> list[str]:
    """The documents of ``corpus``: non-empty, without the text separator or NUL.
    ``profile``: bench/corpus.py's profile for ``diverse`` ("ci" is a 4 MB cut of it)."""
    if corpus == "diverse":
        sys.path.insert(0, str(REPO / "bench"))
        import corpus as bench_corpus

        texts = [t for _, t in bench_corpus.read_jsonl(bench_corpus.ensure(profile, False))]
    elif corpus == "code":
        texts = []
        for p in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
            try:
                texts.append(p.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, OSError):
                continue
    else:
        raise SystemExit(f"unknown corpus {corpus!r}")
    return [t for t in texts if t and TEXT_SEP not in t and "\0" not in t]


def plan_shards(docs: list[str], text_bytes: int, shard_bytes: int) -> list[tuple[int, int]]:
    """Documents (cyclic indices into docs) per shard: [(first, end)), about ``shard_bytes``
    of text each, ``text_bytes`` in all."""
    lens = [len(d.encode()) for d in docs]
    shards, start, k, got, cur = [], 0, 0, 0, 0
    while got < text_bytes:
        n = lens[k % len(docs)]
        got, cur, k = got + n, cur + n, k + 1
        if cur >= shard_bytes or got >= text_bytes:
            shards.append((start, k))
            start, cur = k, 0
    return shards


_RECORDS: dict = {}


def _records(fmt: str, docs: list[str]) -> list:
    """Each document as the format stores it, made once per corpus and format (JSON escaping
    a GB of documents one by one took longer than the runs)."""
    key = (fmt, id(docs))
    if key not in _RECORDS:
        if fmt == "jsonl":
            _RECORDS[key] = [
                (json.dumps({"text": d}, ensure_ascii=False) + "\n").encode() for d in docs
            ]
        elif fmt == "text":
            _RECORDS[key] = [d.encode() for d in docs]
        else:
            _RECORDS[key] = docs
    return _RECORDS[key]


def _write_shard(path: Path, fmt: str, docs: list[str], first: int, end: int) -> None:
    recs = _records(fmt, docs)
    part = [recs[i % len(recs)] for i in range(first, end)]
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"text": part}), path, row_group_size=2048)
    elif fmt == "text":
        path.write_bytes(TEXT_SEP.encode().join(part))
    else:
        path.write_bytes(b"".join(part))


def write_inputs(d: Path, fmt: str, docs: list[str], text_bytes: int, shard_bytes: int):
    """Input files in ``d`` -> (paths, documents per file, text bytes)."""
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    ext = {"jsonl": "jsonl", "text": "txt", "parquet": "parquet"}[fmt]
    shards = plan_shards(docs, text_bytes, shard_bytes)
    _records(fmt, docs)  # once, before the writer threads
    paths = [d / f"part{k:05d}.{ext}" for k in range(len(shards))]
    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        list(
            pool.map(
                lambda a: _write_shard(a[0], fmt, docs, *a[1]), zip(paths, shards, strict=True)
            )
        )
    lens = [len(x.encode()) for x in docs]
    total = sum(lens[i % len(docs)] for a, b in shards for i in range(a, b))
    return paths, [b - a for a, b in shards], total


# ------------------------------------------------------------------ contenders


def run_gputok(in_dir: Path, out: Path, fmt: str, extra: list[str]) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "gputok",
        "corpus",
        str(in_dir),
        "-o",
        str(out),
        "--format",
        fmt,
        "--no-fsync",
        "--no-progress",
        "--no-dashboard",
        "--overwrite",
        *extra,
    ]
    if fmt == "text":
        cmd += ["--text-separator", TEXT_SEP]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"gputok corpus failed ({p.returncode}): {p.stderr[-2000:]}")
    done = next(line for line in p.stdout.splitlines() if line.startswith("done:"))
    m = re.search(
        r"\(start-up ([\d.]+) s: ([^;]*); (\d+) task\(s\) (in process|on the cluster)", done
    )
    return {
        "wall_s": wall,
        "startup_s": float(m.group(1)) if m else None,
        "startup_steps": m.group(2) if m else None,
        "tasks": int(m.group(3)) if m else None,
        "in_process": bool(m and m.group(4) == "in process"),
        "cmd": " ".join(cmd[1:]).replace(TEXT_SEP, "\\x1e\\n"),
        "summary": done,
    }


def run_gigatoken(job: dict) -> dict:
    """The gigatoken contender in a fresh process (bench/corpus_e2e_gigatoken.py)."""
    t = time.perf_counter()
    p = subprocess.run(
        [sys.executable, str(GIGATOKEN_JOB), json.dumps(job)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"gigatoken job failed: {p.stderr[-2000:]}")
    return {"wall_s": wall, **json.loads(p.stdout.strip().splitlines()[-1])}


def same_output(g_out: Path, t_out: Path, n: int) -> tuple[bool, int]:
    """(first, middle and last shards equal, tokens compared); both non-empty."""
    checked = 0
    for k in sorted({0, n // 2, n - 1}):
        for ext in ("bin", "idx"):
            a = (g_out / f"shard_{k:05d}.{ext}").read_bytes()
            b = (t_out / f"g{k:05d}.{ext}").read_bytes()
            if a != b or len(a) <= 8:
                return False, checked
            checked += len(a) // 2 if ext == "bin" else 0
    return True, checked


# ------------------------------------------------------------------ driver


def _secs(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def _median_run(rs: list[dict]) -> dict:
    """The round of median wall time (the lower middle one of an even count)."""
    return sorted(rs, key=lambda x: x["wall_s"])[(len(rs) - 1) // 2]


def one_config(args, work: Path, corpus: str, docs, fmt: str, gb: float, shard_mb: float) -> dict:
    """Inputs for one configuration, both contenders on them, the exactness check."""
    in_dir, g_out, t_out = work / "in", work / "out-gputok", work / "out-gigatoken"
    t = time.perf_counter()
    paths, ndocs, text_bytes = write_inputs(in_dir, fmt, docs, int(gb * 1e9), int(shard_mb * MB))
    row = {
        "corpus": corpus,
        "format": fmt,
        "size_gb": text_bytes / 1e9,
        "shard_mb": shard_mb,
        "shards": len(paths),
        "input_bytes": sum(p.stat().st_size for p in paths),
        "gen_s": time.perf_counter() - t,
    }
    for d in (g_out, t_out):
        shutil.rmtree(d, ignore_errors=True)
    job = {
        "out": str(t_out),
        "format": fmt,
        "paths": [str(p) for p in paths],
        "docs": ndocs,
        "call_bytes": int(args.gigatoken_call_gb * 1e9),
        "config": args.gigatoken_config,
    }
    modes = ["--in-process", "--cluster"] if shard_mb in args.both_modes else [None]
    runs: dict[str, list[dict]] = {}
    for _ in range(max(1, args.rounds)):  # alternated: a host's drift hits both alike
        shutil.rmtree(t_out, ignore_errors=True)
        runs.setdefault("gigatoken", []).append(run_gigatoken(job))
        for mode in modes:
            r = run_gputok(in_dir, g_out, fmt, [mode] * bool(mode) + args.gputok_args.split())
            r["exact"], r["tokens_compared"] = same_output(g_out, t_out, len(paths))
            runs.setdefault(f"gputok {mode}" if mode else "gputok", []).append(r)
    for key, rs in runs.items():  # each contender's median round, with every round's time
        row[key] = {**_median_run(rs), "rounds_s": [x["wall_s"] for x in rs]}
        if key.startswith("gputok"):
            row[key]["exact"] = all(x["exact"] for x in rs)
    if mode:  # both forced: the row's figure is what the default would have chosen
        from gputok.corpus.tasks import IN_PROCESS_BELOW_BYTES

        here = row["input_bytes"] < IN_PROCESS_BELOW_BYTES
        row["gputok"] = row["gputok --in-process" if here else "gputok --cluster"]
    row["exact"] = all(row[k]["exact"] for k in row if k.startswith("gputok"))
    row["tokens_compared"] = row["gputok"]["tokens_compared"]
    if mode and args.other_gigatoken:
        other = "hf" if job["config"] == "tiktoken" else "tiktoken"
        row[f"gigatoken {other}"] = r = run_gigatoken({**job, "config": other})
        log(f"  gigatoken {other}: {r['wall_s']:.2f} s (encode {r['encode_s']:.2f})")
    row["speedup"] = row["gigatoken"]["wall_s"] / row["gputok"]["wall_s"]
    for d in (g_out, t_out, in_dir):
        shutil.rmtree(d, ignore_errors=True)
    g, k = row["gputok"], row["gigatoken"]
    log(
        f"{corpus} {fmt} {row['size_gb']:.2f} GB {shard_mb} MB x{len(paths)}: gputok "
        f"{g['wall_s']:.2f} s (start-up {g['startup_s']}, {g['tasks']} tasks, "
        f"{'in process' if g['in_process'] else 'cluster'}), gigatoken {k['wall_s']:.2f} s "
        f"(encode {k['encode_s']:.2f}), {row['speedup']:.2f}x, exact={row['exact']}; rounds "
        f"{_secs(g['rounds_s'])} / {_secs(k['rounds_s'])}"
    )
    return row


def startup_alone(args, work: Path, docs) -> list[dict]:
    """Each contender on one 100 KB JSONL shard: what a run costs before real work."""
    in_dir = work / "tiny"
    paths, ndocs, _ = write_inputs(in_dir, "jsonl", docs, 100_000, 1 << 30)
    rows = []
    for mode in ("--in-process", "--cluster"):
        r = run_gputok(in_dir, work / "tiny-out", "jsonl", [mode, *args.gputok_args.split()])
        rows.append({"who": f"gputok {mode}", **r})
    for config in ("tiktoken", "hf"):
        job = {
            "out": str(work / "tiny-g"),
            "format": "jsonl",
            "paths": [str(p) for p in paths],
            "docs": ndocs,
            "call_bytes": 1 << 40,
            "config": config,
        }
        rows.append({"who": f"gigatoken {config}", **run_gigatoken(job)})
    for r in rows:
        log(f"start-up alone, {r['who']}: {r['wall_s']:.2f} s")
    shutil.rmtree(work / "tiny-out", ignore_errors=True)
    shutil.rmtree(work / "tiny-g", ignore_errors=True)
    return rows


def grid(args) -> list[tuple[str, str, float, float]]:
    """(corpus, format, GB, shard MB) in run order: sizes first, then corpora, formats,
    shard sizes; --extra adds configurations (corpus:format:GB:MB, comma separated)."""
    out = [
        (c, f, float(g), float(s))
        for g in filter(None, args.sizes_gb.split(","))
        for c in args.corpora.split(",")
        for f in args.formats.split(",")
        for s in args.shard_mb.split(",")
    ]
    for spec in filter(None, args.extra.split(",")):
        c, f, g, s = spec.split(":")
        out.append((c, f, float(g), float(s)))
    return out


def _device() -> str:
    try:
        p = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        gpu = p.stdout.strip().splitlines()[0] if p.stdout.strip() else "no GPU"
    except (OSError, subprocess.SubprocessError):
        gpu = "no GPU"
    return f"{gpu}, {os.cpu_count()} host cores"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes-gb", default="1")
    ap.add_argument("--shard-mb", default="1,4,20,100")
    ap.add_argument("--formats", default="jsonl,text,parquet")
    ap.add_argument("--corpora", default="diverse,code")
    ap.add_argument("--extra", default="", help="more configurations, corpus:format:GB:MB,...")
    ap.add_argument("--work-dir", default="/dev/shm/gputok-e2e")
    ap.add_argument(
        "--deadline-s",
        type=float,
        default=1e9,
        help="start no configuration after this many seconds (est. by size)",
    )
    ap.add_argument("--gputok-args", default="", help="more `gputok corpus` arguments")
    ap.add_argument("--gigatoken-config", default="tiktoken", choices=("tiktoken", "hf"))
    ap.add_argument("--gigatoken-call-gb", type=float, default=2.0)
    ap.add_argument("--no-startup", action="store_true")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="times each contender runs each configuration, alternated; the median is reported",
    )
    ap.add_argument(
        "--other-gigatoken",
        action="store_true",
        help="at --both-modes, gigatoken's other configuration too",
    )
    ap.add_argument(
        "--both-modes",
        default="20",
        help="shard MB at which gputok runs forced --in-process and --cluster (the row's "
        "figure is the one its default picks)",
    )
    ap.add_argument("--diverse-profile", default="bench", help="bench/corpus.py profile")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--write-only",
        metavar="DIR",
        help="write the first configuration's inputs there, run nothing",
    )
    return ap


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.write_only:
        corpus, fmt, gb, mb = grid(args)[0]
        docs = load_docs(corpus, args.diverse_profile)
        paths, _, text = write_inputs(Path(args.write_only), fmt, docs, int(gb * 1e9), int(mb * MB))
        print(f"{len(paths)} {fmt} files, {text / 1e9:.2f} GB of text in {args.write_only}")
        return 0
    args.both_modes = {float(x) for x in args.both_modes.split(",") if x}
    t0, work = time.perf_counter(), Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    rep = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": _device(),
        "argv": sys.argv,
        "rows": [],
        "skipped": [],
    }
    docs = {c: load_docs(c, args.diverse_profile) for c in sorted({c for c, *_ in grid(args)})}
    if not args.no_startup:
        rep["startup"] = startup_alone(args, work, docs[min(docs)])
    for corpus, fmt, gb, shard_mb in grid(args):
        if time.perf_counter() - t0 + 6 + 8 * gb > args.deadline_s:
            rep["skipped"].append([corpus, fmt, gb, shard_mb])
            continue
        try:
            rep["rows"].append(one_config(args, work, corpus, docs[corpus], fmt, gb, shard_mb))
        except (RuntimeError, SystemExit, OSError) as e:
            log(f"{corpus} {fmt} {gb} GB {shard_mb} MB failed: {e}")
            rep["rows"].append(
                {
                    "corpus": corpus,
                    "format": fmt,
                    "size_gb": gb,
                    "shard_mb": shard_mb,
                    "error": str(e)[-500:],
                }
            )
        if args.json:
            Path(args.json).write_text(json.dumps(rep, indent=1))
    print(table(rep))
    return 0


def table(rep: dict) -> str:
    lines = [
        f"{rep['device']}, {rep['date']}",
        "| corpus | format | GB | shard MB | shards | gputok s (start-up) | tasks | "
        "gigatoken s | gputok GB/s | gigatoken GB/s | x | exact |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rep["rows"]:
        if "error" in r:
            lines.append(
                f"| {r['corpus']} | {r['format']} | {r['size_gb']} | {r['shard_mb']} | "
                f"error: {r['error'][:80]} |"
            )
            continue
        g, k = r["gputok"], r["gigatoken"]
        where = "in" if g["in_process"] else "cl"
        lines.append(
            f"| {r['corpus']} | {r['format']} | {r['size_gb']:.2f} | {r['shard_mb']:g} | "
            f"{r['shards']} | {g['wall_s']:.2f} ({g['startup_s']}) | {g['tasks']} {where} | "
            f"{k['wall_s']:.2f} | {r['size_gb'] / g['wall_s']:.2f} | "
            f"{r['size_gb'] / k['wall_s']:.2f} | {r['speedup']:.2f} | {r['exact']} |"
        )
    for r in rep["rows"]:
        for key in (
            "gputok --in-process",
            "gputok --cluster",
            "gigatoken hf",
            "gigatoken tiktoken",
        ):
            if key in r:
                lines.append(
                    f"{r['corpus']} {r['format']} {r['size_gb']:.2f} GB {r['shard_mb']:g} "
                    f"MB, {key}: {r[key]['wall_s']:.2f} s"
                )
    for r in rep.get("startup", []):
        lines.append(f"start-up alone, {r['who']}: {r['wall_s']:.2f} s")
    if rep["skipped"]:
        lines.append(f"skipped (deadline): {rep['skipped']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
