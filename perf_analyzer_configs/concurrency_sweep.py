#!/usr/bin/env python3
"""Scenario: concurrency sweep. Ours vs the baselines (gigatoken, tiktoken, HF), same server, same run.

For each input size (tokens per request: 128, 1k, 4k, ...), perf_analyzer's
`--concurrency-range` against `tokenizer`, `preprocessing_tiktoken` and `preprocessing_hf`;
writes results/concurrency.csv (see _common.py). The issue-5 GPU target reads this CSV at 4k
tokens and concurrency 64: `--sizes 4k --concurrency 1:64:x2` style ranges are given as
perf_analyzer's start:end:step (linear steps), so pass e.g. `--concurrency 1,8,64` for a list.

    python perf_analyzer_configs/concurrency_sweep.py                     # CPU defaults
    python perf_analyzer_configs/concurrency_sweep.py --sizes 128,4k --concurrency 1,16,64
"""

from __future__ import annotations

import sys

from _common import base_parser, run_matrix


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="128,1k,4k", help="input sizes (make_inputs.py names)")
    p.add_argument(
        "--concurrency",
        default="1,4,16",
        help="comma list of concurrencies, or one perf_analyzer range start:end:step",
    )
    p.add_argument("--protocol", default="grpc", choices=["http", "grpc"])
    a = p.parse_args(argv)
    if ":" in a.concurrency:
        loads = [[f"--concurrency-range={a.concurrency}"]]
    else:
        loads = [[f"--concurrency-range={c}"] for c in a.concurrency.split(",") if c]
    settings = [(s, a.protocol, load) for s in a.sizes.split(",") if s for load in loads]
    return run_matrix("concurrency", a, settings)


if __name__ == "__main__":
    sys.exit(main())
