#!/usr/bin/env python3
"""Scenario: HTTP vs gRPC at a fixed concurrency. Ours vs the baselines (gigatoken, tiktoken, HF), same server and run.

Writes results/protocols.csv (see _common.py).

    python perf_analyzer_configs/protocols.py                   # 128 and 1k tokens, concurrency 8
    python perf_analyzer_configs/protocols.py --sizes 4k --concurrency 64
"""

from __future__ import annotations

import sys

from _common import base_parser, run_matrix


def main(argv: list[str] | None = None) -> int:
    p = base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="128,1k", help="input sizes (make_inputs.py names)")
    p.add_argument("--concurrency", type=int, default=8)
    a = p.parse_args(argv)
    settings = [
        (s, proto, [f"--concurrency-range={a.concurrency}"])
        for s in a.sizes.split(",")
        if s
        for proto in ("http", "grpc")
    ]
    return run_matrix("protocols", a, settings)


if __name__ == "__main__":
    sys.exit(main())
