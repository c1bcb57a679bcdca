"""bench/bench_corpus.py's report: the Markdown table of a run and its place in the day's note."""

from __future__ import annotations

import os
from pathlib import Path

SECTION = "## Corpus tokenization"


def _decoder(r: dict) -> str:
    """A gputok result's Parquet decoder (results from before the setting: the page reader)."""
    return r.get("parquet_decoder", "gputok")


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def _header(rep: dict) -> tuple[str, list[str]]:
    """The subsection's heading and the lines above its table: machine, command, input, method."""
    m, inp = rep["machine"], rep["input"]
    gpu = f", GPUs: {', '.join(m['gpus'])}" if m["gpus"] else ", no GPU"
    heading = f"### {rep['date']}, {m['host']} ({m['cores']} cores{gpu})"
    vers = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    lines = [
        heading,
        "",
        f"- Machine: `{m['host']}`, {m['cores']} cores, {m['cpu']}{gpu}; Python "
        f"{m['python']}; {vers}",
        f"- Command: `{rep['command']}`",
        f"- Input: corpus profile `{inp['profile']}` × {inp['scale']} ({inp['documents']} "
        f"documents, {inp['bytes'] / 1e6:.1f} MB of UTF-8 text, {inp['tokens'] / 1e6:.2f} M "
        f"tokens with <|endoftext|>) in {inp['shards']} {inp['format']} shards, read from the "
        "page cache"
        + (
            "; repeated text flatters pretoken caches (gigatoken's most)"
            if inp["scale"] > 1
            else ""
        ),
        f"- Timed: read, tokenize, uint16 + <|endoftext|>, write .bin/.idx with their hashes ({rep.get('hash', 'sha256')}), "
        + ("no fsync (--no-fsync), " if rep["no_fsync"] else "fsync, ")
        + ("" if rep.get("early_writeback", True) or rep["no_fsync"] else "no early writeback, ")
        + "rename, manifest; cluster start-up, tokenizer loading and a warm-up run excluded. "
        "Median of "
        f"{rep['repeat']} run(s). gigatoken: the same pipeline in one process, "
        f"{rep['gigatoken']['shards_at_once']} shard(s) at once, its rayon pool on all cores "
        "(and, in the Dask rows, on W worker processes with cores / W rayon threads each). "
        "gputok: `G GPU × P` is P worker processes on each of G GPUs; each worker runs "
        "`threads/worker` shards at once (Dask threads sharing its one tokenizer); `tok. "
        "threads`: gputok CPU threads per call; `vs 1 GPU`: against one GPU with as many "
        "workers per GPU. Every gputok run's shards are byte-identical to gigatoken's (same hash).",
        f"- 1-min load average at the start: {rep['loadavg_start'][0]:.1f} (other work on the "
        "machine skews figures)",
        "",
        "| contender | workers | device | threads/worker (shards at once) | tok. threads | "
        "min batch MB | seconds | GB/s of text | M tokens/s | vs gigatoken | vs 1 GPU | "
        "host cores busy |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    return heading, lines


def _contender_rows(rep: dict) -> tuple[list[str], float]:
    """gigatoken's and the null pipeline's rows, in process and on Dask; and gigatoken's best
    GB/s among them."""
    m, g = rep["machine"], rep["gigatoken"]
    lines = [
        f"| gigatoken `encode_batch` | 1 process | cpu | {g['shards_at_once']} | {m['cores']} | "
        f"{g['min_batch_mb']:g} | {g['median_s']:.3f} | {g['GBps']:.3f} | {g['Mtokps']:.1f} | "
        f"1.00× | – | {_pct(g.get('cpu_busy'))} |"
    ]
    if "null" in rep:
        nl = rep["null"]
        lines.append(
            f"| pipeline alone (no tokenizer) | 1 process | – | {nl['shards_at_once']} | – | "
            f"{nl['min_batch_mb']:g} | {nl['median_s']:.3f} | {nl['GBps']:.3f} | – | "
            f"{nl['GBps'] / g['GBps']:.2f}× | – | {_pct(nl.get('cpu_busy'))} |"
        )
    best_g = g["GBps"]
    for c in rep.get("dask_contenders", []):
        ok = "" if c["exact"] else " **MISMATCH**"
        label = "gigatoken `encode_batch`" if c["name"] == "gigatoken" else "pipeline alone"
        if c["name"] == "gigatoken":
            best_g = max(best_g, c["GBps"])
        lines.append(
            f"| {label}{ok}, Dask | {c['workers']} processes | cpu | {c['threads_per_worker']} | "
            f"{m['cores'] // max(1, c['workers'])} | – | {c['median_s']:.3f} | {c['GBps']:.3f} | "
            f"– | {c['GBps'] / g['GBps']:.2f}× | – | {_pct(c.get('cpu_busy'))} |"
        )
    return lines, best_g


def _gputok_row(rep: dict, r: dict) -> str:
    """One gputok run's row."""
    g = rep["gigatoken"]
    ok = "" if r["exact"] else " **MISMATCH**"
    # "vs 1": against one GPU with as many workers per GPU (one CPU worker off GPUs).
    base = [
        x["GBps"]
        for x in rep["gputok"]
        if (
            (x.get("gpus"), x.get("workers_per_gpu")) == (1, r.get("workers_per_gpu"))
            or (not r.get("gpus") and x["workers"] == 1)
        )
        and _decoder(x) == _decoder(r)
    ]
    one = base[0] if base else None
    vs1 = f"{r['GBps'] / one:.2f}×" if one else "–"
    who = f"{r['gpus']} GPU × {r['workers_per_gpu']}" if r.get("gpus") else str(r["workers"])
    if _decoder(r) != "auto":
        who += f", Parquet by {_decoder(r)}"
    return (
        f"| **gputok corpus**{ok} | {who} | {'/'.join(r['devices'])} | "
        f"{r['threads_per_worker']} | {r['threads']} | {r['min_batch_mb']:g} | "
        f"{r['median_s']:.3f} | {r['GBps']:.3f} | {r['Mtokps']:.1f} | "
        f"{r['GBps'] / g['GBps']:.2f}× | {vs1} | {_pct(r.get('cpu_busy'))} |"
    )


def markdown(rep: dict) -> tuple[str, str]:
    heading, lines = _header(rep)
    rows, best_g = _contender_rows(rep)
    lines += rows
    lines += [_gputok_row(rep, r) for r in rep["gputok"]]
    if best_g != rep["gigatoken"]["GBps"]:
        lines += [
            "",
            f"gigatoken's best here is {best_g:.3f} GB/s (Dask); per GPU against it: "
            + ", ".join(
                f"{r['gpus']} GPU × {r['workers_per_gpu']}"
                + (f" ({_decoder(r)})" if _decoder(r) != "auto" else "")
                + f": {r['GBps'] / max(1, r['gpus']) / best_g:.2f}×"
                for r in rep["gputok"]
                if r.get("gpus")
            ),
        ]
    return heading, "\n".join(lines) + "\n"


def write_docs(path: Path, heading: str, body: str) -> None:
    """Put ``body`` under SECTION, replacing a subsection with the same heading; the rest of
    the file (other engineers' sections) is kept as it is."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    lines = text.rstrip("\n").split("\n")
    try:
        start = lines.index(SECTION)
    except ValueError:
        lines += [
            "",
            SECTION,
            "",
            "`bench/bench_corpus.py`: end-to-end `gputok corpus` "
            "throughput vs gigatoken on all cores (docs/corpus.md).",
            "",
        ]
        start = lines.index(SECTION)
    end = next((j for j in range(start + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
    section = lines[start:end]
    new = body.rstrip("\n").split("\n")
    if heading in section:
        i = section.index(heading)
        j = next(
            (k for k in range(i + 1, len(section)) if section[k].startswith("### ")), len(section)
        )
        section[i:j] = [*new, ""]
    else:
        while section and section[-1] == "":
            section.pop()
        section += ["", *new, ""]
    lines[start:end] = section
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines).rstrip("\n") + "\n")
    os.replace(tmp, path)
