#!/usr/bin/env python3
"""Turn the scenario CSVs (results/<scenario>.csv) into markdown tables and PNG plots.

For every setting (input size, protocol, concurrency or request rate) the table shows each
model's throughput (inferences/s) and client p50/p99 latency, and ours against each baseline:
throughput ratio (ours / baseline, > 1 = ours faster) and p99 ratio (baseline / ours, > 1 =
ours lower). Writes results/report.md and prints it; plots go to results/plots/ (untracked).
The plots the docs show live in docs/perf_analyzer/: to replace them, say so with
`--plots docs/perf_analyzer` (a default that wrote there overwrote tracked files on every run).

    python perf_analyzer_configs/report.py [--results DIR] [--plots DIR]
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OURS = "tokenizer"
BASELINES = ("preprocessing_gigatoken", "preprocessing_tiktoken", "preprocessing_hf")
SHORT = {
    "tokenizer": "ours",
    "preprocessing_gigatoken": "gigatoken",
    "preprocessing_tiktoken": "tiktoken",
    "preprocessing_hf": "HF",
}
SCENARIOS = ("concurrency", "rate", "protocols")


def load_value(row: dict) -> str:
    for key in ("Concurrency", "Request Rate"):
        if row.get(key):
            return row[key]
    return ""


def read(path: Path) -> dict:
    """{(input, tokens, protocol, load): {model: row}} for the rows that perf_analyzer measured."""
    out: dict = defaultdict(dict)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("Inferences/Second"):
                continue
            key = (row["input"], int(row["tokens"]), row["protocol"], load_value(row))
            out[key][row["model"]] = row
    return out


def _num(x: str) -> float:
    return float(x)


def _f(row: dict | None, col: str, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
    if row is None or not row.get(col):
        return "–"
    return fmt.format(_num(row[col]) * scale)


def table(scenario: str, data: dict) -> str:
    load_name = "rate (req/s)" if scenario == "rate" else "concurrency"
    head = [
        "input (tokens)",
        "protocol",
        load_name,
        *(f"{SHORT[m]} infer/s" for m in (OURS, *BASELINES)),
        *(f"{SHORT[m]} p50 / p99 ms" for m in (OURS, *BASELINES)),
        *(f"throughput ×{SHORT[b]}" for b in BASELINES),
        *(f"p99 {SHORT[b]}/ours" for b in BASELINES),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]
    for key in sorted(data, key=lambda k: (k[1], k[2], float(k[3] or 0))):
        rows = data[key]
        ours = rows.get(OURS)
        cells = [f"{key[0]} ({key[1]})", key[2], key[3]]
        cells += [_f(rows.get(m), "Inferences/Second") for m in (OURS, *BASELINES)]
        for m in (OURS, *BASELINES):
            r = rows.get(m)
            cells.append(
                "–"
                if r is None
                else f"{_f(r, 'p50 latency', 1e-3, '{:.2f}')} / {_f(r, 'p99 latency', 1e-3, '{:.2f}')}"
            )
        for b in BASELINES:
            r = rows.get(b)
            ok = ours is not None and r is not None and _num(r["Inferences/Second"]) > 0
            cells.append(
                f"**{_num(ours['Inferences/Second']) / _num(r['Inferences/Second']):.2f}×**"
                if ok
                else "–"
            )
        for b in BASELINES:
            r = rows.get(b)
            ok = ours is not None and r is not None and _num(ours["p99 latency"]) > 0
            cells.append(
                f"{_num(r['p99 latency']) / _num(ours['p99 latency']):.2f}×" if ok else "–"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(scenario: str, data: dict, out_dir: Path, name: str | None = None) -> Path | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    inputs = sorted({(k[0], k[1]) for k in data}, key=lambda x: x[1])
    if not inputs:
        return None
    fig, axes = plt.subplots(1, len(inputs), figsize=(4.2 * len(inputs), 3.6), squeeze=False)
    for ax, (size, tokens) in zip(axes[0], inputs, strict=True):
        keys = [k for k in data if k[0] == size]
        if scenario == "protocols":
            protos = sorted({k[2] for k in keys})
            width = 0.8 / len(protos)
            for j, proto in enumerate(protos):
                k = next(k for k in keys if k[2] == proto)
                vals = [
                    _num(data[k][m]["Inferences/Second"]) if m in data[k] else 0
                    for m in (OURS, *BASELINES)
                ]
                ax.bar([i + j * width for i in range(3)], vals, width, label=proto)
            ax.set_xticks([i + width * (len(protos) - 1) / 2 for i in range(3)])
            ax.set_xticklabels([SHORT[m] for m in (OURS, *BASELINES)])
            ax.set_ylabel("inferences/s")
        else:
            for m in (OURS, *BASELINES):
                pts = sorted((float(k[3]), data[k][m]) for k in keys if m in data[k] and k[3])
                if not pts:
                    continue
                x = [p[0] for p in pts]
                col = "Inferences/Second" if scenario == "concurrency" else "p99 latency"
                y = [_num(p[1][col]) * (1e-3 if col != "Inferences/Second" else 1) for p in pts]
                ax.plot(x, y, marker="o", label=SHORT[m])
            ax.set_xscale("log", base=2 if scenario == "concurrency" else 10)
            ax.set_yscale("log")
            ax.set_xlabel("concurrency" if scenario == "concurrency" else "request rate (req/s)")
            ax.set_ylabel("inferences/s" if scenario == "concurrency" else "client p99 (ms)")
        ax.set_title(f"{size} input (~{tokens} tokens)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"perf_analyzer: {name or scenario}")
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name or scenario}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, default=HERE / "results", help="scenario CSVs")
    p.add_argument("--plots", type=Path, default=None, help="PNG folder (default RESULTS/plots)")
    p.add_argument("--no-plots", action="store_true", help="tables only")
    a = p.parse_args(argv)
    a.plots = a.plots or a.results / "plots"
    parts = []
    for scenario in SCENARIOS:
        # results/<scenario>.csv and results/<scenario>_<tag>.csv (--tag), one table each
        paths = [a.results / f"{scenario}.csv", *sorted(a.results.glob(f"{scenario}_*.csv"))]
        for path in (p for p in paths if p.is_file()):
            data = read(path)
            parts.append(f"### {path.stem}\n\n{table(scenario, data)}\n")
            png = None if a.no_plots else plot(scenario, data, a.plots, path.stem)
            if png is not None:
                rel = png.relative_to(REPO) if png.is_relative_to(REPO) else png
                parts.append(f"Plot: `{rel}`\n")
    ens = a.results / "ensemble_overhead.csv"
    if ens.is_file():  # written by ensemble.py: server-side latency of the ensemble vs its steps
        lines = [
            "| run | ensemble ms | sum of steps ms | overhead ms | overhead % |",
            "|---|---:|---:|---:|---:|",
        ]
        with open(ens, newline="") as f:
            for r in csv.DictReader(f):
                lines.append(
                    f"| {r['run']} | {int(r['ensemble_us']) / 1e3:.2f} | "
                    f"{int(r['steps_us']) / 1e3:.2f} | {int(r['overhead_us']) / 1e3:.3f} | "
                    f"{r['overhead_pct']} |"
                )
        parts.append("### ensemble overhead (server side)\n\n" + "\n".join(lines) + "\n")
    if not parts:
        print(f"no scenario CSVs in {a.results}; run a scenario first", file=sys.stderr)
        return 1
    md = "\n".join(parts)
    (a.results / "report.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
