#!/usr/bin/env python3
"""A thread's timeline from a py-spy speedscope profile (scripts/gpu_corpus_profile.sh): each
run of consecutive samples with the same innermost frames, with its start and end in seconds
of that thread's samples. Not a test.

    python3 bench/corpus_profile_timeline.py prof-jsonl-1-20.json --thread MainThread
    python3 bench/corpus_profile_timeline.py prof-jsonl-1-20.json --threads   # list them
"""

from __future__ import annotations

import argparse
import json


def runs(profile: dict, frames: list, depth: int, min_s: float):
    """(start, end, label) of each run of samples whose innermost ``depth`` frames match."""
    t, start, prev = 0.0, 0.0, None
    for stack, w in zip(profile["samples"], profile["weights"], strict=True):
        names = [
            f"{frames[i]['name']}@{frames[i].get('file', '').rsplit('/', 1)[-1]}" for i in stack
        ]
        label = " < ".join(reversed(names[-depth:]))
        if label != prev:
            if prev is not None and t - start >= min_s:
                yield start, t, prev
            start, prev = t, label
        t += w
    if prev is not None and t - start >= min_s:
        yield start, t, prev


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--thread", default="MainThread", help="part of the thread's name")
    ap.add_argument("--threads", action="store_true", help="list the threads and stop")
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--min-s", type=float, default=0.0, help="hide runs shorter than this")
    args = ap.parse_args(argv)
    with open(args.profile) as f:
        d = json.load(f)
    frames = d["shared"]["frames"]
    for p in d["profiles"]:
        if args.threads:
            print(f"{p['name']}: {len(p['samples'])} samples, {sum(p['weights']):.3f} s")
            continue
        first = frames[p["samples"][0][0]]["name"] if p["samples"] and p["samples"][0] else ""
        if args.thread not in p["name"] and args.thread not in first:
            continue
        print(f"== {p['name']}")
        for a, b, label in runs(p, frames, args.depth, args.min_s):
            print(f"{a:7.3f}-{b:7.3f} {label[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
