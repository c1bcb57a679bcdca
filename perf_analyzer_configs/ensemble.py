#!/usr/bin/env python3
"""Scenario: the `ensemble` (tokenizer -> gpt2 -> detokenizer) under perf_analyzer.

Serves the whole model_repository/ (or --model-repository) next to the baselines and runs
perf_analyzer on `ensemble` with prompts of about 128 / 512 tokens and `max_tokens` 16
(inputs/ens_*.json). For an ensemble, perf_analyzer's `-f` also writes one CSV per composing
model in some versions; 2.49.0 did not here, but its report (the `.log` next to each CSV)
lists every composing model's server-side latency. The ensemble's server-side overhead over
its steps is its own average request latency minus the sum of theirs; this script parses the
logs and writes results/ensemble_overhead.csv next to results/ensemble.csv. Client round
trips of calling the models one by one are not included. There is no baseline ensemble
yet, so this measures ours only.

    python perf_analyzer_configs/ensemble.py --concurrency 1,4
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from _common import REPO, base_parser, log, run_matrix

LATENCY = re.compile(r"Avg request latency: (\d+) usec")


def overhead(log_path: Path) -> dict | None:
    """{ensemble_us, steps_us, overhead_us, overhead_pct} from one perf_analyzer report."""
    text = log_path.read_text()
    if "Composing models:" not in text:
        return None
    head, steps = text.rsplit("Composing models:", 1)
    own = LATENCY.findall(head)
    parts = [int(x) for x in LATENCY.findall(steps)]
    if not own or not parts:
        return None
    ens, total = int(own[-1]), sum(parts)
    return {
        "ensemble_us": ens,
        "steps_us": total,
        "overhead_us": ens - total,
        "overhead_pct": f"{100.0 * (ens - total) / ens:.2f}",
    }


def write_overhead(out_dir: Path) -> None:
    rows = []
    for path in sorted((out_dir / "ensemble").glob("*.csv.log")):
        r = overhead(path)
        if r is not None:
            rows.append({"run": path.name.removesuffix(".csv.log"), **r})
    if not rows:
        return
    out = out_dir / "ensemble_overhead.csv"
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        log(
            f"{r['run']}: ensemble {r['ensemble_us']} us, steps {r['steps_us']} us, "
            f"overhead {r['overhead_us']} us ({r['overhead_pct']}%)"
        )


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="ens_128", help="ens_128,ens_512")
    p.add_argument("--concurrency", default="1,4", help="comma list")
    p.add_argument("--protocol", default="grpc", choices=["http", "grpc"])
    p.set_defaults(models="ensemble", model_repository=REPO / "model_repository")
    a = p.parse_args(argv)
    loads = [[f"--concurrency-range={c}"] for c in a.concurrency.split(",") if c]
    settings = [(s, a.protocol, load) for s in a.sizes.split(",") if s for load in loads]
    rc = run_matrix("ensemble", a, settings)
    write_overhead(Path(a.out))
    return rc


if __name__ == "__main__":
    sys.exit(main())
