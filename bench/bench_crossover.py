#!/usr/bin/env python3
"""Where device="auto" should switch from the CPU path to the GPU: measure, fit, check.

Run on the GPU machine: ``python bench/bench_crossover.py --out DIR``.

1. Grid: calls of B bytes (256 B .. 4 MB) over R texts (1 .. 4096, at least 32 bytes each),
   cut from the bench corpus (the CI corpus where it is absent), each timed on gputok's CPU
   path and on its GPU path (``gpt2(device="cpu")`` and ``gpt2(device="cuda")``), through
   ``encode_batch_flat`` and, for one text, ``encode_to_numpy`` too. Each repeat takes the next
   of several different cuts, so the CPU's pretoken cache is not warmer than a real caller's.
2. Fit: the rule "CPU while B + R * bytes_per_row < cpu_below_bytes" whose worst slowdown
   against the faster path, over the grid, is least (then the mean slowdown).
3. Check: ``gpt2(device="cuda", cpu_below_bytes=..., bytes_per_row=...)`` with the fitted
   rule (auto_fit), the built-in rule given as arguments (auto_rule: nothing learned) and
   ``gpt2()`` as built (auto_default: the built-in rule and the routes it learns near it),
   timed again beside both paths on the same grid, and on single texts and batches up to
   ``--envelope-mb``; and what building ``encode()``'s list costs per token. The JSON keeps
   auto_default's learned buckets (``learned_routes``).
4. Streams: calls of 8 KB .. 1 MB over 1 .. 64 texts, each path timed in bursts of calls back
   to back (a stream, whose CPU pool stays awake), the paths' bursts in turn; the fitted
   ``stream_below_bytes`` (CPU in a stream while B + R * bytes_per_row is below it, with the
   built-in bytes_per_row), and ``gpt2()`` as built timed the same way.

The rule's constants live in backend_src/csrc/tokenizer.cpp (kCpuBelowBytes,
kBytesPerRow, kStreamBelowBytes); copy the fitted ones there with this run's date, device and
command. ``--stream-only``: step 4 alone.
Writes DIR/crossover.json and prints a short table last.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import gputok  # noqa: E402

# Characters per call (bytes are counted after cutting): dense around the crossover (3-16 K).
BYTES = [256, 1 << 10, 2 << 10, 3 << 10, 4 << 10, 5 << 10, 6 << 10, 7 << 10, 8 << 10, 10 << 10]
BYTES += [12 << 10, 16 << 10, 32 << 10, 128 << 10, 1 << 20, 4 << 20]
ROWS = [1, 4, 16, 64, 256, 1024, 4096]
MIN_ROW_BYTES = 32
CUTS = 5  # different texts per grid point, taken in turn


def log(*a):
    print(*a, flush=True)


def device_name() -> str:
    try:
        q = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
        return subprocess.run(q, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        return "unknown GPU"


def corpus_text(limit_chars: int) -> str:
    from corpus_fixture import load_corpus

    for profile in ("bench", "ci"):
        try:
            docs = load_corpus(profile)
            break
        except Exception as e:  # the bench corpus is built on demand; fall back to CI's
            log(f"corpus {profile!r} unavailable: {e}")
    text = "\n".join(docs)
    while len(text) < limit_chars:
        text += "\n" + text
    return text[:limit_chars]


def make_calls(text: str, nbytes: int, rows: int, cuts: int = CUTS) -> list[list[str]]:
    """`cuts` calls of `rows` texts of nbytes // rows bytes each (to 3 bytes: whole UTF-8
    characters), from different places. Until 2026-11-29 texts were cut by characters, so a
    point's calls differed up to 1.5x in bytes (multilingual text) under one label, and a
    stream's timings of 12-18 KB mixed the CPU path's one-thread and split calls."""
    per = max(1, nbytes // rows)
    span = per * rows
    step = max(span, (len(text) - span) // cuts)

    def cut(start: int) -> str:
        return text[start : start + per].encode()[:per].decode(errors="ignore")

    return [[cut(c * step + i * per) for i in range(rows)] for c in range(cuts)]


def timed(fns: dict, calls, budget_s: float, min_runs: int = 5, max_runs: int = 400) -> dict:
    """{name: median seconds of fn(call)}: the calls taken in turn after one warm-up of each, the
    functions interleaved call by call so that drift in the machine's speed hits all alike."""
    for fn in fns.values():
        for c in calls:
            fn(c)
    times: dict[str, list[float]] = {name: [] for name in fns}
    end = time.perf_counter() + budget_s * len(fns)
    k = 0
    while k < min_runs or (k < max_runs and time.perf_counter() < end):
        c = calls[k % len(calls)]
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(c)
            times[name].append(time.perf_counter() - t0)
        k += 1
    return {name: statistics.median(t) for name, t in times.items()}


def api_calls(tok):
    """The two call shapes: a batch (encode_batch_flat) and one text (encode_to_numpy)."""
    return {
        "batch": lambda call: tok.encode_batch_flat(call),
        "one": lambda call: tok.encode_to_numpy(call[0]),
    }


def measure_grid(text: str, toks: dict, budget_s: float) -> list[dict]:
    """[{bytes, rows, api, <tok name>: seconds}] over the grid."""
    points = []
    for nbytes in BYTES:
        for rows in ROWS:
            if nbytes // rows < MIN_ROW_BYTES:
                continue
            calls = make_calls(text, nbytes, rows)
            real = sum(len(t.encode()) for t in calls[0])
            for api in ("batch", "one") if rows == 1 else ("batch",):
                p = {"bytes": real, "rows": rows, "api": api}
                p.update(timed({n: api_calls(t)[api] for n, t in toks.items()}, calls, budget_s))
                points.append(p)
                log(
                    f"{real:>9} B x {rows:>5} {api:<5} "
                    + " ".join(f"{n} {p[n] * 1e6:9.1f} us" for n in toks)
                )
    return points


def slowdowns(points, below: int, per_row: int) -> list[float]:
    """The chosen path's time over the faster path's, per point, under a rule."""
    out = []
    for p in points:
        cpu = p["bytes"] + p["rows"] * per_row < below
        chosen = p["cpu"] if cpu else p["gpu"]
        out.append(chosen / min(p["cpu"], p["gpu"]))
    return out


def fit(points) -> dict:
    """The (cpu_below_bytes, bytes_per_row) of least worst, then least mean, slowdown (to 1%
    and 0.1%: closer is noise); among equal rules the smallest per-row term, and the middle of
    its best `below` values."""
    belows = sorted({int(1024 * 2 ** (k / 16)) for k in range(0, 161)})  # 1 KB .. 1 MB
    per_rows = [0, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512]
    scored = []
    for b in belows:
        for r in per_rows:
            s = slowdowns(points, b, r)
            scored.append((round(max(s), 2), round(statistics.fmean(s), 3), r, b))
    scored.sort()
    best = [x for x in scored if x[:3] == scored[0][:3]]
    r = best[0][2]
    b = best[len(best) // 2][3]
    worst, mean = scored[0][:2]
    return {"cpu_below_bytes": b, "bytes_per_row": r, "worst": worst, "mean": mean}


def envelope(text: str, toks: dict, max_mb: float) -> list[dict]:
    """Single texts (64 tokens .. max_mb) and batches of 8 KB documents (1 MB .. max_mb)."""
    out = []
    sizes = [256, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    for kind in ("one", "batch"):
        for nbytes in sizes:
            if nbytes > max_mb * (1 << 20) or (kind == "batch" and nbytes < 1 << 20):
                continue
            rows = 1 if kind == "one" else nbytes // 8192
            calls = make_calls(text, nbytes, rows, cuts=3 if nbytes <= 1 << 20 else 1)
            p = {"bytes": sum(len(t.encode()) for t in calls[0]), "rows": rows, "api": kind}
            budget = 0.3 if nbytes <= 1 << 20 else 0.0
            fns = {n: api_calls(t)[kind] for n, t in toks.items()}
            p.update(timed(fns, calls, budget, min_runs=3 if nbytes > 1 << 20 else 5))
            out.append(p)
            log(
                f"envelope {kind:<5} {p['bytes']:>11} B "
                + " ".join(f"{n} {p[n] * 1e3:9.3f} ms" for n in toks)
            )
    return out


def list_cost(text: str, tok, tokens_wanted=(131072, 1048576)) -> list[dict]:
    """What encode()'s list costs per token: encode() minus encode_to_numpy(), against a list
    made one new int per id (ndarray.tolist(), as encode() built it before the int table)."""
    out = []
    for n in tokens_wanted:
        calls = make_calls(text, n * 2, 1, cuts=3)
        arr = tok.encode_to_numpy(calls[0][0])
        t = timed(
            {
                "np": lambda c: tok.encode_to_numpy(c[0]),
                "list": lambda c: tok.encode(c[0]),
                "tolist": lambda c, a=arr: a.tolist(),
            },
            calls,
            0.5,
        )
        t_np, t_list, t_new_ints = t["np"], t["list"], t["tolist"]
        row = {
            "tokens": int(arr.size),
            "encode_to_numpy_ms": t_np * 1e3,
            "encode_ms": t_list * 1e3,
            "list_ns_per_token": (t_list - t_np) * 1e9 / arr.size,
            "tolist_ns_per_token": t_new_ints * 1e9 / arr.size,
        }
        out.append(row)
        log(
            f"list of {row['tokens']} ids: encode {row['encode_ms']:.3f} ms, encode_to_numpy "
            f"{row['encode_to_numpy_ms']:.3f} ms -> {row['list_ns_per_token']:.2f} ns/token "
            f"(new int per id: {row['tolist_ns_per_token']:.2f} ns/token)"
        )
    return out


STREAM_BYTES = [8 << 10, 12 << 10, 16 << 10, 24 << 10, 32 << 10, 48 << 10, 64 << 10, 96 << 10]
STREAM_BYTES += [128 << 10, 192 << 10, 256 << 10, 384 << 10, 512 << 10, 1 << 20]
STREAM_ROWS = [1, 4, 16, 64]


def timed_stream(fns: dict, calls, rounds: int = 7, burst: int = 12) -> dict:
    """{name: median seconds a call} in streams: each round runs every function `burst` times
    back to back (the calls taken in turn), the functions' bursts one after another; a burst's
    first call (which may find the CPU pool asleep) is not counted."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds + 1):
        for name, fn in fns.items():
            stamps = [time.perf_counter()]
            for k in range(burst):
                fn(calls[(r + k) % len(calls)])
                stamps.append(time.perf_counter())
            if r:  # round 0 warms every path
                times[name] += [b - a for a, b in zip(stamps[1:-1], stamps[2:], strict=True)]
    return {name: statistics.median(t) for name, t in times.items()}


def measure_stream(text: str, toks: dict) -> list[dict]:
    points = []
    for nbytes in STREAM_BYTES:
        for rows in STREAM_ROWS:
            calls = make_calls(text, nbytes, rows)
            p = {"bytes": sum(len(t.encode()) for t in calls[0]), "rows": rows, "api": "stream"}
            api = "one" if rows == 1 else "batch"
            p.update(timed_stream({n: api_calls(t)[api] for n, t in toks.items()}, calls))
            points.append(p)
            log(
                f"stream {p['bytes']:>9} B x {rows:>3} "
                + " ".join(f"{n} {p[n] * 1e6:9.1f} us" for n in toks)
            )
    return points


def concurrent_streams(text: str, toks: dict, threads=(2, 4), sizes=(32 << 10, 128 << 10)):
    """Several threads each calling one text back to back on one tokenizer (where the stream
    rule lets one call at a time take the CPU): wall microseconds a call, all threads' calls."""
    from concurrent.futures import ThreadPoolExecutor

    out = []
    for nbytes in sizes:
        calls = make_calls(text, nbytes, 1)
        for n in threads:
            row = {"bytes": nbytes, "threads": n}
            per_thread = 150
            for name, tok in toks.items():

                def work(k, tok=tok, calls=calls, m=per_thread):
                    for i in range(m):
                        tok.encode_to_numpy(calls[(k + i) % len(calls)][0])

                with ThreadPoolExecutor(n) as ex:
                    list(ex.map(work, range(n)))  # warm
                    t0 = time.perf_counter()
                    list(ex.map(work, range(n)))
                    row[name] = (time.perf_counter() - t0) / (n * per_thread)
            out.append(row)
            log(
                f"{n} threads, {nbytes} B: "
                + " ".join(f"{k} {row[k] * 1e6:7.1f} us" for k in toks)
                + " a call"
            )
    return out


def fit_stream(points, per_row: int) -> dict:
    """The stream_below_bytes of least worst, then least mean, slowdown in streams."""
    belows = sorted({int(8192 * 2 ** (k / 16)) for k in range(0, 129)})  # 8 KB .. 2 MB
    scored = []
    for b in belows:
        s = slowdowns(points, b, per_row)
        scored.append((round(max(s), 2), round(statistics.fmean(s), 3), b))
    scored.sort()
    best = [x for x in scored if x[:2] == scored[0][:2]]
    worst, mean, below = best[len(best) // 2]
    return {"stream_below_bytes": below, "bytes_per_row": per_row, "worst": worst, "mean": mean}


def stream_main(meta, out: Path, toks: dict, text: str) -> None:
    """Step 4 over `toks` ("cpu", "gpu", "auto_rule", "auto_default"), written to
    DIR/stream.{json,txt}."""
    points = measure_stream(text, toks)
    rule = fit_stream(points, meta["built_in_rule"][1])
    threads = concurrent_streams(text, toks)
    lines = [
        f"stream crossover {meta['date']} on {meta['device']}, {meta['cpus']} host CPUs",
        f"fitted: CPU in a stream while bytes + rows * {rule['bytes_per_row']} < "
        f"{rule['stream_below_bytes']} (worst {rule['worst']:.3f}x, mean {rule['mean']:.4f}x)",
        f"built-in rule: {meta['built_in_rule']}",
    ]
    for name in ("auto_rule", "auto_default"):
        w, p = worst_of(points, name)
        mean = statistics.fmean(ratio(q, name) for q in points)
        lines.append(
            f"{name:<12} stream worst {w:.3f}x of the faster path at {p['bytes']} B x "
            f"{p['rows']}, mean {mean:.4f}x"
        )
    result = {"meta": meta, "rule": rule, "stream": points, "threads": threads}
    result["learned_routes"] = toks["auto_default"]._core.learned_routes()
    (out / "stream.json").write_text(json.dumps(result, indent=1))
    (out / "stream.txt").write_text("\n".join(lines) + "\n")
    log("\n".join(lines))


def ratio(p: dict, name: str) -> float:
    """Tokenizer `name`'s time at point p over the faster of cpu and gpu."""
    return p[name] / min(p["cpu"], p["gpu"])


def worst_of(points, name: str) -> tuple[float, dict]:
    """The worst ratio of tokenizer `name` against the faster of cpu and gpu, and its point."""
    worst = max(points, key=lambda p: ratio(p, name))
    return ratio(worst, name), worst


def summary(meta, rule, grid2, env, lists) -> str:
    lines = [
        f"crossover {meta['date']} on {meta['device']}, {meta['cpus']} host CPUs",
        f"fitted rule: CPU while bytes + rows * {rule['bytes_per_row']} < "
        f"{rule['cpu_below_bytes']} (grid worst {rule['worst']:.3f}x, mean {rule['mean']:.4f}x)",
        f"built-in rule: {meta['built_in_rule']}",
    ]
    for name in ("auto_fit", "auto_rule", "auto_default"):
        for label, pts in (("grid", grid2), ("envelope", env)):
            if pts:
                w, p = worst_of(pts, name)
                mean = statistics.fmean(ratio(q, name) for q in pts)
                lines.append(
                    f"{name:<12} {label:<8} worst {w:.3f}x of the faster path at "
                    f"{p['bytes']} B x {p['rows']} ({p['api']}), mean {mean:.4f}x"
                )
    for r in lists:
        lines.append(
            f"list of {r['tokens']} ids: {r['list_ns_per_token']:.2f} ns/token "
            f"(one new int per id: {r['tolist_ns_per_token']:.2f})"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "crossover"))
    ap.add_argument("--budget", type=float, default=0.1, help="seconds per point and path")
    ap.add_argument("--envelope-mb", type=float, default=64.0, help="0: no envelope")
    ap.add_argument("--stream-only", action="store_true", help="step 4 (streams) alone")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "device": device_name(),
        "cpus": os.cpu_count(),
        "command": " ".join(["python"] + sys.argv),
        "built_in_rule": gputok.default_crossover(),
    }
    cpu, gpu = gputok.gpt2(device="cpu"), gputok.gpt2(device="cuda")
    auto_default = gputok.gpt2()  # the built-in rule, and the routes it learns near it
    below, per_row, stream_below = gputok.default_crossover()
    auto_rule = gputok.gpt2(  # the built-in rule as given: nothing learned
        cpu_below_bytes=below, bytes_per_row=per_row, stream_below_bytes=stream_below
    )
    streamed = {"cpu": cpu, "gpu": gpu, "auto_rule": auto_rule, "auto_default": auto_default}
    if args.stream_only:
        stream_main(meta, out, streamed, corpus_text(8 << 20))
        return
    text = corpus_text(max(8 << 20, int(args.envelope_mb * (1 << 20)) + (1 << 20)))
    grid = measure_grid(text, {"cpu": cpu, "gpu": gpu}, args.budget)
    rule = fit(grid)
    log(f"fitted: {rule}")
    auto_fit = gputok.gpt2(
        device="cuda",
        cpu_below_bytes=rule["cpu_below_bytes"],
        bytes_per_row=rule["bytes_per_row"],
    )
    toks = {"cpu": cpu, "gpu": gpu, "auto_fit": auto_fit, "auto_rule": auto_rule}
    toks["auto_default"] = auto_default
    grid2 = measure_grid(text, toks, args.budget)
    env = envelope(text, toks, args.envelope_mb) if args.envelope_mb > 0 else []
    lists = list_cost(text, gpu)
    result = {"meta": meta, "rule": rule, "grid": grid, "check": grid2, "envelope": env}
    result["lists"] = lists
    result["learned_routes"] = auto_default._core.learned_routes()
    (out / "crossover.json").write_text(json.dumps(result, indent=1))
    text_summary = summary(meta, rule, grid2, env, lists)
    (out / "summary.txt").write_text(text_summary + "\n")
    log(text_summary)
    stream_main(meta, out, streamed, text[: 8 << 20])


if __name__ == "__main__":
    main()
