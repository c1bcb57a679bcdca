#!/usr/bin/env python3
"""Scenario: request-rate sweep (open loop). Ours vs the baselines (gigatoken, tiktoken, HF), same server, same run.

perf_analyzer's `--request-rate-range` sends requests at fixed rates whatever the latency, so
p99 shows where each model stops keeping up. Writes results/rate.csv (see _common.py).

    python perf_analyzer_configs/rate_sweep.py                            # 128 tokens, 50..200/s
    python perf_analyzer_configs/rate_sweep.py --sizes 1k --rates 100,400,1600
"""

from __future__ import annotations

import sys

from _common import base_parser, run_matrix


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="128", help="input sizes (make_inputs.py names)")
    p.add_argument("--rates", default="50,100,200", help="comma list of requests per second")
    p.add_argument("--protocol", default="grpc", choices=["http", "grpc"])
    a = p.parse_args(argv)
    settings = [
        (s, a.protocol, [f"--request-rate-range={r}"])
        for s in a.sizes.split(",")
        if s
        for r in a.rates.split(",")
        if r
    ]
    return run_matrix("rate", a, settings)


if __name__ == "__main__":
    sys.exit(main())
