"""Serving search, scenario sweeps, soak and pool-cap check on the GPU machine, in one command.

Stages (`--stages`, any subset; they always run in this order):

- `search` (issue 5): a model_analyzer-style search by hand over the `tokenizer` model's
  instance count, `max_batch_size` and `dynamic_batching.max_queue_delay_microseconds`
  (9 configurations, 3 with --quick, or `--configs`). For each one: a throwaway copy of
  model_repository/tokenizer with that config.pbtxt, one server, the config checked through
  the server's /config endpoint, then perf_analyzer at 4K tokens / concurrency 64
  (throughput) and 128 tokens / concurrency 16 (p50/p99). Choice rule: the highest 4K
  throughput among the configurations whose 128-token p99 is at most 1.10 x the current
  default's, and only if it beats the default's 4K throughput by at least 5% (less is within
  the noise of 1.5 s windows): else the default stays.
- `poolcap` (issue 6): the tokenizer with `pool_limit_bytes` small (1 MiB): one request larger
  than the cap (with small batch-mates) must fail alone with gputok's DeviceMemoryError
  message (the model maps MemoryError to INTERNAL, HTTP 500); the small requests and a later
  one must return tiktoken's ids. Raw KServe v2 JSON over urllib (no tritonclient there).
  Skipped, with a note, when the tokenizer runs on CPU (no device pool).
- `sweep`: one server with the whole model_repository (tokenizer with the chosen config, gpt2
  `--gpt2-config`), plus the two baselines; then perf_analyzer_configs' scenarios against it,
  by their own `main(argv)`: concurrency sweep (128 and 4K tokens, concurrency 1..128),
  request-rate sweep (128 tokens), HTTP vs gRPC, and the ensemble with its server-side
  overhead (ensemble latency minus the sum of its steps, ensemble.py).
- `soak` (issue 6): perf_analyzer_configs/soak.py's run_soak on the ensemble (gpt2
  `model_config: gpt2`, the 124M architecture and the largest the model offers, random
  weights, on the GPU) at concurrency 32 for `--soak-seconds`, sampling RSS and fds of
  tritonserver and every stub and GPU memory (total, and per process where nvidia-smi lists
  our pids); growth after warm-up; passes with 0 failed requests.

Everything lands in --out as a few files: results.json (all stages), summary.md (all
tables), search.csv, sweep.csv, soak_samples.csv, soak.png (with matplotlib) and raw.tar.gz
(perf_analyzer CSVs and reports, server logs); they are rewritten after every stage, so a command cut short still
returns what finished. `--budget-s` skips (or shortens the soak) what would not fit.

GPU machine (docs/perf_analyzer.md has the set-up and the split over several commands: all
four stages take ~16 minutes there):

    PYTHONPATH=/tmp/pt:/tmp/gt python3 scripts/gpu_serve_search.py --out /tmp/ss \\
        --wheels .carry/serve-gpu --pa /tmp/pa --gputok-site /tmp/gt --stages search,poolcap

CPU machine (all four stages, about 4 minutes):

    .venv/bin/python scripts/gpu_serve_search.py --out /tmp/ss --quick
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAC = ROOT / "perf_analyzer_configs"
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(PAC))

STAGES = ("search", "poolcap", "sweep", "soak")
P99_SLACK = 1.10  # a configuration may not make the 128-token p99 worse than this x default's
MIN_GAIN = 1.05  # ... and must beat the default's 4K throughput by this much to replace it
PA_EXTRA_S = 1.5  # one perf_analyzer run beyond its windows: start, connect, drain
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[search {time.monotonic() - T0:6.0f}s] {msg}", file=sys.stderr, flush=True)


# -- tokenizer configurations -----------------------------------------------------------------
@dataclass(frozen=True)
class TokConfig:
    instances: int  # instance_group count (KIND_AUTO: per GPU)
    max_batch_size: int
    queue_delay_us: int  # dynamic_batching.max_queue_delay_microseconds

    @property
    def name(self) -> str:
        return f"i{self.instances}_b{self.max_batch_size}_d{self.queue_delay_us}"

    @classmethod
    def parse(cls, spec: str) -> TokConfig:
        """`2,256,100` or `instances=2,max_batch_size=256,queue_delay_us=100`."""
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        if all("=" in p for p in parts):
            kv = dict(p.split("=", 1) for p in parts)
            return cls(int(kv["instances"]), int(kv["max_batch_size"]), int(kv["queue_delay_us"]))
        i, b, d = (int(p) for p in parts)
        return cls(i, b, d)

    def spec(self) -> str:
        return f"instances={self.instances},max_batch_size={self.max_batch_size},queue_delay_us={self.queue_delay_us}"


def search_configs(default: TokConfig, quick: bool) -> list[TokConfig]:
    """One axis at a time from the default, plus a combination: 9 of the 36-point grid
    (instances 1/2/4 x max_batch_size 64/256/1024 x delay 0/100/500/2000 us)."""
    d = default
    if quick:
        cands = [
            d,
            TokConfig(d.instances, d.max_batch_size, 0),
            TokConfig(2, d.max_batch_size, d.queue_delay_us),
        ]
    else:
        cands = [
            d,
            *(TokConfig(d.instances, d.max_batch_size, q) for q in (0, 100, 2000)),
            *(TokConfig(d.instances, b, d.queue_delay_us) for b in (64, 1024)),
            *(TokConfig(i, d.max_batch_size, d.queue_delay_us) for i in (2, 4)),
            TokConfig(2, 1024, 100),
        ]
    return list(dict.fromkeys(cands))  # order kept, duplicates (when the default moved) dropped


# -- config.pbtxt editing ---------------------------------------------------------------------
def _mask(text: str) -> str:
    """`text` with comments and string contents blanked (same length), so that searching for
    fields and brackets cannot match inside them."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out[i + 1 : min(j, n)] = " " * (min(j, n) - i - 1)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _depths(masked: str) -> list[int]:
    depth, out = 0, []
    for c in masked:
        if c in "}]":
            depth -= 1
        out.append(depth)
        if c in "{[":
            depth += 1
    return out


def _field_re(field: str) -> re.Pattern:
    return re.compile(rf"(?<![\w.]){re.escape(field)}\s*:\s*([^\s#}}\],]+)")


def _block(masked: str, depth: list[int], block: str) -> tuple[int, int] | None:
    """(index after the opening bracket, index of the closing one) of a top-level block."""
    for m in re.finditer(rf"(?<![\w.]){re.escape(block)}\s*:?\s*([{{\[])", masked):
        if depth[m.start()] != 0:
            continue
        start = m.end()
        for k in range(start, len(masked)):
            if masked[k] in "}]" and depth[k] == 0:
                return start, k
        raise ValueError(f"unbalanced brackets after {block}")
    return None


def pbtxt_fields(text: str, field: str, block: str | None = None) -> list[tuple[int, int, str]]:
    """(start, end, value) of every `field: value` at the top level, or directly inside the
    top-level `block { }` (or inside the messages of the list `block [ { } ]`)."""
    masked = _mask(text)
    depth = _depths(masked)
    lo, hi, want = 0, len(text), 0
    if block is not None:
        span = _block(masked, depth, block)
        if span is None:
            return []
        lo, hi = span
        want = 1 if masked[lo - 1] == "{" else 2
    return [
        (m.start(1), m.end(1), text[m.start(1) : m.end(1)])
        for m in _field_re(field).finditer(masked, lo, hi)
        if depth[m.start()] == want
    ]


def set_pbtxt_field(text: str, field: str, value: int | str, block: str | None = None) -> str:
    """Set `field` (top level, or in `block`) to `value`: every occurrence is replaced; a
    missing field is added (a missing `{ }` block too); a missing list block is an error."""
    found = pbtxt_fields(text, field, block)
    for start, end, _ in reversed(found):
        text = text[:start] + str(value) + text[end:]
    if found:
        return text
    masked = _mask(text)
    if block is None:
        m = re.search(r"^name\s*:.*$", masked, re.M)
        at = m.end() if m else 0
        return f"{text[:at]}\n{field}: {value}\n{text[at:]}"
    span = _block(masked, _depths(masked), block)
    if span is None:
        return f"{text.rstrip()}\n\n{block} {{\n  {field}: {value}\n}}\n"
    if masked[span[0] - 1] != "{":
        raise ValueError(f"no {field} in the list {block}; add it to the config by hand")
    return f"{text[: span[0]]}\n  {field}: {value}{text[span[0] :]}"


def apply_config(config: Path, cfg: TokConfig) -> None:
    """Write `cfg` into a (throwaway) tokenizer config.pbtxt and read it back."""
    text = config.read_text()
    text = set_pbtxt_field(text, "max_batch_size", cfg.max_batch_size)
    text = set_pbtxt_field(
        text, "max_queue_delay_microseconds", cfg.queue_delay_us, "dynamic_batching"
    )
    text = set_pbtxt_field(text, "count", cfg.instances, "instance_group")
    if read_config(text) != cfg:
        raise ValueError(f"{config}: wrote {cfg}, read back {read_config(text)}")
    config.write_text(text)


def read_config(text: str) -> TokConfig:
    def one(field: str, block: str | None = None) -> int:
        vals = {int(v) for _, _, v in pbtxt_fields(text, field, block)}
        if len(vals) != 1:
            raise ValueError(f"config.pbtxt: {field} is {sorted(vals) or 'missing'}")
        return vals.pop()

    return TokConfig(
        one("count", "instance_group"),
        one("max_batch_size"),
        one("max_queue_delay_microseconds", "dynamic_batching"),
    )


def served_config(http_url: str, model: str = "tokenizer") -> TokConfig:
    """The configuration as the server parsed it (/v2/models/<model>/config)."""
    with urllib_get(f"http://{http_url}/v2/models/{model}/config") as r:
        c = json.load(r)
    return TokConfig(
        sum(int(g.get("count", 1)) for g in c.get("instance_group", [])),
        int(c.get("max_batch_size", 0)),
        int(c.get("dynamic_batching", {}).get("max_queue_delay_microseconds", 0)),
    )


def urllib_get(url: str):
    import urllib.request

    return urllib.request.urlopen(url, timeout=30)  # noqa: S310 (loopback URL we built)


# -- servers, perf_analyzer -------------------------------------------------------------------
class Ctx:
    """What every stage shares: folders, the stub environment, perf_analyzer settings."""

    def __init__(self, args) -> None:
        self.args = args
        self.out: Path = args.out
        self.work = Path(tempfile.mkdtemp(prefix="gputok-search-"))
        self.raw = self.work / "raw"  # what goes into raw.tar.gz
        self.raw.mkdir()
        self.stub_env: Path | None = None
        self.results: dict = {"started_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        self.md: dict[str, str] = {}
        self.csvs: dict[str, list[dict]] = {}


def cache_stub_check() -> None:
    """TritonServer checks the stub environment (a Python that imports numpy, torch,
    transformers, gputok: seconds) on every construction; the search builds ~10 servers."""
    import gputok._triton_env as te

    orig, cache = te.check_stub_env, {}

    def cached(stub_bin, need=("numpy", "gputok")):
        key = (str(stub_bin), tuple(need))
        if key not in cache:
            cache[key] = orig(stub_bin, need)
        return cache[key]

    te.check_stub_env = cached


def baseline_repository(ctx: Ctx, cfg: TokConfig) -> Path:
    """A copy of the baselines with ours' max_batch_size, queue delay and instance count (issue
    5: "same max_batch_size, dynamic batching and instance count as ours")."""
    from gputok._triton_env import copy_models, set_config_parameter

    dst = ctx.work / f"baselines_{cfg.name}"
    if not dst.exists():
        names = [p.name for p in (PAC / "baseline_repository").iterdir() if p.is_dir()]
        copy_models(PAC / "baseline_repository", dst, names)
        for name in names:
            apply_config(dst / name / "config.pbtxt", cfg)
        # the copies cannot find the repository's files by walking up from their folder
        files = {
            "preprocessing_hf": {
                "vocab_file": ROOT / ".cache/gpt2/vocab.json",
                "merges_file": ROOT / ".cache/gpt2/merges.txt",
            },
            "preprocessing_tiktoken": {
                "ranks_file": ROOT / "backend_src/gputok/data/gpt2.tiktoken"
            },
        }
        for name, params in files.items():
            for key, path in params.items():
                if (dst / name).is_dir():
                    set_config_parameter(dst / name / "config.pbtxt", key, str(path))
    return dst


@contextlib.contextmanager
def serve(ctx: Ctx, repo: Path, log_name: str, baselines: TokConfig | None = None):
    from gputok._triton_env import ServerOptions, TritonServer, free_ports

    http, grpc, metrics = free_ports(3)
    need = ("numpy", "gputok")
    if (repo / "gpt2").is_dir():
        need += ("torch", "transformers")
    extra = [f"--model-repository={baseline_repository(ctx, baselines)}"] if baselines else []
    log_path = ctx.raw / f"{log_name}.server.log"
    srv = TritonServer(
        ServerOptions(
            model_repository=repo,
            http_port=http,
            grpc_port=grpc,
            metrics_port=metrics,
            extra_args=extra,
        ),
        stub_env=ctx.stub_env,
        need=need,
        log_path=log_path,
    )
    t = time.monotonic()
    srv.start()
    try:
        srv.wait_ready(timeout=300)
        srv.ready_s = round(time.monotonic() - t, 1)
        srv.log_file = log_path
        log(f"server ready in {srv.ready_s} s ({log_name})")
        yield srv
    finally:
        code = srv.stop()
        if code not in (0, None):
            log(f"server exit code {code}; log in raw.tar.gz: {log_path.name}")


def tokenizer_devices(log_path: Path) -> list[str]:
    """gputok's device of every tokenizer instance, from the model's start-up log line."""
    text = log_path.read_text(errors="replace")
    return re.findall(r"tokenizer: numpy [^,]*, gputok device (\w+)", text)


def pa_args(window_ms: int, max_trials: int) -> argparse.Namespace:
    return argparse.Namespace(window_ms=window_ms, stability=999, max_trials=max_trials)


def pa_point(args, model: str, size: str, conc: int, url: str, csv_path: Path) -> dict:
    """One perf_analyzer run through _common.run_pa (one retry); its first CSV row."""
    from _common import run_pa

    load = [f"--concurrency-range={conc}"]
    rc = run_pa(args, model, size, "grpc", url, load, csv_path)
    if rc != 0:
        rc = run_pa(args, model, size, "grpc", url, load, csv_path)
    if rc != 0 or not csv_path.is_file():
        tail = Path(str(csv_path) + ".log").read_text(errors="replace")[-400:]
        return {"rc": rc, "error": tail}
    row = next(csv.DictReader(csv_path.open()))
    us = {
        k: float(row[v])
        for k, v in (("queue_us", "Server Queue"), ("compute_us", "Server Compute Infer"))
        if row.get(v)
    }
    return {
        "rc": 0,
        "infer_per_s": round(float(row["Inferences/Second"]), 1),
        "p50_ms": round(float(row["p50 latency"]) / 1e3, 3),
        "p99_ms": round(float(row["p99 latency"]) / 1e3, 3),
        **us,
    }


# -- inputs -----------------------------------------------------------------------------------
def ensure_inputs(ctx: Ctx, names: tuple[str, ...] = ("128", "4k", "ens_128")) -> str:
    """perf_analyzer_configs/inputs/ files for `names`: the corpus-built ones when present
    (make_inputs.py; carry the folder), else strings cut from the Python standard library's
    sources and sized with tiktoken (as gpu_serve_bench.py; the GPU image has no corpus)."""
    from _common import INPUTS, _file_name

    manifest_path = INPUTS / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"files": {}}
    missing = [
        n
        for n in names
        if not (INPUTS / _file_name(n)).is_file() or _file_name(n) not in manifest["files"]
    ]
    if not missing:
        return f"{INPUTS} ({manifest.get('corpus', '?')} corpus)"
    from gpu_serve_check import stdlib_token_ids

    enc, ids = stdlib_token_ids()
    INPUTS.mkdir(parents=True, exist_ok=True)
    spec = {
        "128": (128, 64),
        "4k": (4096, 16),
        "1k": (1024, 32),
        "ens_128": (128, 16),
        "ens_512": (512, 16),
    }
    for k, name in enumerate(missing):
        n, count = spec[name]
        base = k * 7919  # different strings for every file
        rows = [enc.decode(ids[base + i * n : base + (i + 1) * n]) for i in range(count)]
        if name.startswith("ens_"):
            data = [{"text_input": [r], "max_tokens": [16]} for r in rows]
        else:
            data = [{"QUERY": [r]} for r in rows]
        (INPUTS / _file_name(name)).write_text(json.dumps({"data": data}, ensure_ascii=False))
        manifest["files"][_file_name(name)] = {
            "tokens": [len(enc.encode_ordinary(r)) for r in rows],
            "bytes": [len(r.encode()) for r in rows],
        }
    manifest.setdefault("corpus", "python-stdlib")
    manifest_path.write_text(json.dumps(manifest, indent=1))
    log(f"inputs {missing}: cut from the Python standard library's sources into {INPUTS}")
    return f"{INPUTS} (python stdlib sources for {missing})"


# -- estimates --------------------------------------------------------------------------------
def plan(args, on_gpu: bool) -> dict:
    """Parameters of every stage, and the estimated seconds each takes."""
    q = args.quick
    search_w = args.window_ms or (1000 if q else 1500)
    sweep_w = args.window_ms or 1000
    p = {
        "search_window_ms": search_w,
        "sweep_window_ms": sweep_w,
        "conc_sizes": "128,4k",
        "concurrency": "1,16" if q else "1,16,64,128",
        "rates": ("1000,4000" if q else "1000,2000,4000")
        if on_gpu
        else ("50,100" if q else "50,100,200"),
        "protocol_sizes": "128" if q else "128,4k",
        "protocol_conc": 16 if on_gpu else 8,
        "ens_conc": "1" if q else "1,16",
        "soak_s": args.soak_seconds if args.soak_seconds is not None else (30 if q else 300),
        "soak_conc": args.soak_concurrency or (32 if on_gpu or not q else 8),
    }
    # seconds: server start + stop with the tokenizer alone / the whole repository and the
    # baselines (CPU: measured; GPU: guessed, torch and CUDA start-up in every stub), and the
    # cost of one perf_analyzer run beyond its windows (1.0 s measured on the CPU machine)
    start_tok, start_full = (12, 45) if on_gpu else (6, 15)
    pa = lambda w: args.max_trials * w / 1000 + PA_EXTRA_S  # noqa: E731
    n_cfg = len(args.configs.split(";")) if args.configs else (3 if q else 9)
    n = lambda s: len([x for x in str(s).split(",") if x])  # noqa: E731
    sweep_runs = 3 * (
        n(p["conc_sizes"]) * n(p["concurrency"]) + n(p["rates"]) + 2 * n(p["protocol_sizes"])
    )
    sweep_runs += n(p["ens_conc"])
    p["estimate_s"] = {
        "setup": 25 if args.wheels else 3,
        "search": round(n_cfg * (start_tok + 2 * pa(search_w) + 4)),
        "poolcap": start_tok + 15,
        "sweep": round(start_full + sweep_runs * pa(sweep_w) + 10),
        "soak": round(start_full + p["soak_s"] * 1.05 + 20),
    }
    p["sweep_runs"] = sweep_runs
    return p


def left(args) -> float:
    return args.budget_s - (time.monotonic() - T0)


# -- stage: search ----------------------------------------------------------------------------
def stage_search(ctx: Ctx, default: TokConfig, p: dict) -> TokConfig:
    from _common import warm_up

    from gputok._triton_env import copy_models

    args = ctx.args
    cfgs = (
        [TokConfig.parse(s) for s in args.configs.split(";")]
        if args.configs
        else search_configs(default, args.quick)
    )
    if default not in cfgs:
        cfgs.insert(0, default)  # the choice rule compares against it
    pa = pa_args(p["search_window_ms"], args.max_trials)
    rows: list[dict] = []
    ctx.results["search"] = {"rule": RULE, "default": asdict(default), "rows": rows}
    per_cfg: list[float] = []
    for cfg in cfgs:
        need = sum(per_cfg) / len(per_cfg) if per_cfg else p["estimate_s"]["search"] / len(cfgs)
        if left(args) < need + 5:
            rows.append({**asdict(cfg), "config": cfg.name, "skipped": "budget"})
            log(f"{cfg.name}: skipped (budget: {left(args):.0f} s left, one takes ~{need:.0f} s)")
            continue
        t = time.monotonic()
        d = ctx.work / "search" / cfg.name
        shutil.rmtree(d, ignore_errors=True)
        repo = copy_models(ROOT / "model_repository", d / "repo", ["tokenizer"])
        apply_config(repo / "tokenizer" / "config.pbtxt", cfg)
        row: dict = {**asdict(cfg), "config": cfg.name}
        try:
            with serve(ctx, repo, f"search_{cfg.name}") as srv:
                row["ready_s"] = srv.ready_s
                got = served_config(srv.http_url)
                row["served_instance_count"] = got.instances
                row["devices"] = ",".join(sorted(set(tokenizer_devices(srv.log_file)))) or "?"
                row["instances_started"] = len(tokenizer_devices(srv.log_file))
                if (
                    got.max_batch_size != cfg.max_batch_size
                    or got.queue_delay_us != cfg.queue_delay_us
                ):
                    raise RuntimeError(f"server reports {got}, wrote {cfg}")
                warm_up({"http": srv.http_url}, ["tokenizer"], "4k", n=8)
                for key, size, conc in (("4k_c64", "4k", 64), ("128_c16", "128", 16)):
                    r = pa_point(
                        pa,
                        "tokenizer",
                        size,
                        conc,
                        srv.grpc_url,
                        ctx.raw / "search" / f"{cfg.name}_{key}.csv",
                    )
                    row.update({f"{key}_{k}": v for k, v in r.items()})
        except Exception as e:  # noqa: BLE001 - one configuration failing must not end the search
            row["error"] = f"{type(e).__name__}: {str(e)[-600:]}"
            log(f"{cfg.name}: {row['error']}")
        shutil.rmtree(d, ignore_errors=True)
        row["wall_s"] = round(time.monotonic() - t, 1)
        per_cfg.append(row["wall_s"])
        rows.append(row)
        log(json.dumps(row))
        write_outputs(ctx)  # after every configuration: a timeout keeps what was measured
    chosen, why = choose(rows, default)
    ctx.results["search"].update(chosen=asdict(chosen), chosen_name=chosen.name, why=why)
    ctx.csvs["search"] = rows
    ctx.md["search"] = search_markdown(rows, default, chosen, why)
    print(ctx.md["search"], flush=True)
    return chosen


RULE = (
    f"highest 4K-token throughput (concurrency 64) among the configurations whose 128-token "
    f"p99 (concurrency 16) is at most {P99_SLACK:.2f} x the default's; it replaces the default "
    f"only if its throughput is at least {MIN_GAIN:.2f} x the default's"
)


def _ok(r: dict) -> bool:
    return r.get("4k_c64_rc") == 0 and r.get("128_c16_rc") == 0 and "error" not in r


def choose(rows: list[dict], default: TokConfig) -> tuple[TokConfig, str]:
    base = next((r for r in rows if r["config"] == default.name and _ok(r)), None)
    if base is None:
        return default, "the default was not measured: kept"
    limit = base["128_c16_p99_ms"] * P99_SLACK
    eligible = [r for r in rows if _ok(r) and r["128_c16_p99_ms"] <= limit]
    best = max(eligible, key=lambda r: r["4k_c64_infer_per_s"])
    gain = best["4k_c64_infer_per_s"] / base["4k_c64_infer_per_s"]
    cfg = TokConfig(best["instances"], best["max_batch_size"], best["queue_delay_us"])
    if cfg == default:
        return (
            default,
            f"the default has the highest eligible 4K throughput (p99 limit {limit:.2f} ms)",
        )
    if gain < MIN_GAIN:
        return (
            default,
            f"best eligible {cfg.name} is only {gain:.3f} x the default at 4K (< {MIN_GAIN}): default kept",
        )
    return (
        cfg,
        f"{cfg.name}: {gain:.2f} x the default's 4K throughput, 128-token p99 {best['128_c16_p99_ms']:.2f} <= {limit:.2f} ms",
    )


def _cell(row: dict, key: str, digits: int = 1) -> str:
    return "–" if row.get(key) is None else f"{row[key]:.{digits}f}"


def search_markdown(rows: list[dict], default: TokConfig, chosen: TokConfig, why: str) -> str:
    lines = [
        "## Search: tokenizer instances x max_batch_size x max_queue_delay_microseconds",
        "",
        f"Rule: {RULE}. Default: `{default.name}`. **Chosen: `{chosen.name}`** ({why}).",
        "",
        "| config | instances | max_batch_size | queue delay µs | device | 4K c64 infer/s | 4K c64 p99 ms | 128 c16 infer/s | 128 c16 p50 ms | 128 c16 p99 ms | server ready s | note |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        f = functools.partial(_cell, r)
        note = (
            r.get("skipped")
            or r.get("error", "")[:80]
            or ("**chosen**" if r["config"] == chosen.name else "")
        )
        if r["config"] == default.name:
            note = (note + " default").strip()
        lines.append(
            f"| `{r['config']}` | {r['instances']} | {r['max_batch_size']} | {r['queue_delay_us']} | {r.get('devices', '–')} "
            f"| {f('4k_c64_infer_per_s', 0)} | {f('4k_c64_p99_ms', 2)} | {f('128_c16_infer_per_s', 0)} "
            f"| {f('128_c16_p50_ms', 2)} | {f('128_c16_p99_ms', 2)} | {f('ready_s')} | {note} |"
        )
    return "\n".join(lines) + "\n"


# -- stage: poolcap ---------------------------------------------------------------------------
DEVICE_MEMORY = re.compile(r"device memory|pool limit|out of memory|cudaMalloc", re.I)


def stage_poolcap(ctx: Ctx, cfg: TokConfig) -> None:
    from gpu_serve_check import reference, tokenize

    from gputok._triton_env import copy_models, set_config_parameter

    args = ctx.args
    d = ctx.work / "poolcap"
    repo = copy_models(ROOT / "model_repository", d / "repo", ["tokenizer"])
    config = repo / "tokenizer" / "config.pbtxt"
    apply_config(config, cfg)
    set_config_parameter(config, "pool_limit_bytes", str(args.pool_cap_bytes))
    enc = reference()
    src = "".join(
        f.read_text(errors="replace")
        for f in sorted(Path(json.__file__).parent.parent.glob("*.py"))
    ).replace("<|endoftext|>", "")
    big = src[: args.big_request_bytes]  # ASCII-heavy: about as many bytes as characters
    small = [
        "Hello, world!",
        "def f(x):\n    return x * 2\n",
        "日本語のテキスト 🎉",
        "DON'T stop 's",
    ]
    r: dict = {
        "pool_limit_bytes": args.pool_cap_bytes,
        "big_request_bytes": len(big.encode()),
        "config": cfg.name,
    }
    ctx.results["poolcap"] = r
    with serve(ctx, repo, "poolcap") as srv:
        base = f"http://{srv.http_url}"
        devices = tokenizer_devices(srv.log_file)
        r["devices"] = devices
        code, rows = tokenize(base, small)
        r["small_first"] = {
            "http": code,
            "exact": code == 200 and rows == enc.encode_ordinary_batch(small),
        }
        if "cuda" not in devices:
            r["status"] = "skipped"
            r["note"] = (
                f"the tokenizer runs on {','.join(sorted(set(devices))) or '?'}: gputok's device memory pool (and "
                "pool_limit_bytes) applies to cuda instances only; only the small-request path was checked"
            )
            log(f"poolcap: {r['note']}")
        else:
            barrier = threading.Barrier(1 + len(small))

            def one(texts):
                barrier.wait()
                return tokenize(base, texts)

            with ThreadPoolExecutor(1 + len(small)) as pool:  # the big one among batch-mates
                out = list(pool.map(one, [[big], *([s] for s in small)]))
            (bcode, berr), mates = out[0], out[1:]
            r["big"] = {"http": bcode, "error": str(berr)[:500] if bcode != 200 else None}
            r["mates_exact"] = all(
                c == 200 and got == [enc.encode_ordinary(s)]
                for (c, got), s in zip(mates, small, strict=True)
            )
            bcode2, berr2 = tokenize(base, [big])
            r["big_again"] = {"http": bcode2, "error": str(berr2)[:300] if bcode2 != 200 else None}
            code, rows = tokenize(base, small)
            r["small_after"] = {
                "http": code,
                "exact": code == 200 and rows == enc.encode_ordinary_batch(small),
            }
            r["ready_after"] = srv.is_ready()
            checks = {
                "big_fails": bcode != 200 and bcode2 != 200,
                "error_names_device_memory": bool(DEVICE_MEMORY.search(str(berr))),
                "mates_exact": r["mates_exact"],
                "small_after_exact": r["small_after"]["exact"],
                "server_ready_after": r["ready_after"],
            }
            r["checks"] = checks
            r["status"] = "passed" if all(checks.values()) else "FAILED"
            log(f"poolcap: {r['status']} {json.dumps(checks)}")
    shutil.rmtree(d, ignore_errors=True)
    lines = ["## Device memory exhaustion (tokenizer `pool_limit_bytes`)", ""]
    lines.append(
        f"Cap {args.pool_cap_bytes} bytes, big request {r['big_request_bytes']} bytes, config `{cfg.name}`, devices {r['devices']}: **{r['status']}**."
    )
    if r.get("note"):
        lines.append(f"\n{r['note']}; small request exact: {r['small_first']['exact']}.")
    if "checks" in r:
        lines += [
            "",
            "| check | result |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in r["checks"].items()),
        ]
        lines.append(f"\nBig request: HTTP {r['big']['http']}: `{r['big']['error']}`")
    ctx.md["poolcap"] = "\n".join(lines) + "\n"


# -- stage: sweep -----------------------------------------------------------------------------
def stage_sweep(ctx: Ctx, cfg: TokConfig, p: dict) -> None:
    import concurrency_sweep
    import ensemble
    import protocols
    import rate_sweep
    import report

    from gputok._triton_env import copy_models, set_config_parameter

    args = ctx.args
    with contextlib.suppress(Exception):  # preprocessing_hf reads .cache/gpt2 (regenerated offline)
        from references import gpt2_files

        gpt2_files()
    d = ctx.work / "sweep"
    repo = copy_models(ROOT / "model_repository", d / "repo")
    apply_config(repo / "tokenizer" / "config.pbtxt", cfg)
    set_config_parameter(repo / "gpt2" / "config.pbtxt", "model_config", args.gpt2_config)
    set_config_parameter(repo / "gpt2" / "config.pbtxt", "torch_threads", args.torch_threads)
    out = ctx.raw / "sweep"
    res: dict = {
        "config": cfg.name,
        "gpt2_config": args.gpt2_config,
        "params": {k: v for k, v in p.items() if k != "estimate_s"},
    }
    ctx.results["sweep"] = res
    common = [
        "--window-ms",
        str(p["sweep_window_ms"]),
        "--max-trials",
        str(args.max_trials),
        "--out",
        str(out),
    ]
    scenarios = [
        (
            "concurrency",
            concurrency_sweep.main,
            ["--sizes", p["conc_sizes"], "--concurrency", p["concurrency"]],
        ),
        # the ensemble early: short, and nothing else measures its overhead (budget order)
        ("ensemble", ensemble.main, ["--sizes", "ens_128", "--concurrency", p["ens_conc"]]),
        (
            "protocols",
            protocols.main,
            ["--sizes", p["protocol_sizes"], "--concurrency", str(p["protocol_conc"])],
        ),
        ("rate", rate_sweep.main, ["--sizes", "128", "--rates", p["rates"]]),
    ]
    n = lambda s: len([x for x in s.split(",") if x])  # noqa: E731
    runs = {
        "concurrency": 3 * n(p["conc_sizes"]) * n(p["concurrency"]),
        "rate": 3 * n(p["rates"]),
        "protocols": 6 * n(p["protocol_sizes"]),
        "ensemble": n(p["ens_conc"]),
    }
    per_run = args.max_trials * p["sweep_window_ms"] / 1000 + PA_EXTRA_S
    with serve(ctx, repo, "sweep", baselines=cfg) as srv:
        res["ready_s"] = srv.ready_s
        res["devices"] = tokenizer_devices(srv.log_file)
        urls = ["--server-url-grpc", srv.grpc_url, "--server-url-http", srv.http_url]
        for name, fn, extra in scenarios:
            need = runs[name] * per_run
            if left(args) < need + 10:
                res[name] = {"skipped": f"budget: {left(args):.0f} s left, needs ~{need:.0f} s"}
                log(f"sweep {name}: {res[name]['skipped']}")
                continue
            t = time.monotonic()
            rc = fn([*common, *urls, *extra])
            res[name] = {"rc": rc, "wall_s": round(time.monotonic() - t, 1)}
            log(f"sweep {name}: rc {rc} in {res[name]['wall_s']} s")
    shutil.rmtree(d, ignore_errors=True)
    parts = [
        f"## Scenario sweeps (tokenizer `{cfg.name}`, gpt2 `{args.gpt2_config}`, devices {res['devices']})",
        "",
    ]
    merged: list[dict] = []
    for scenario in ("concurrency", "rate", "protocols", "ensemble"):
        path = out / f"{scenario}.csv"
        if not path.is_file():
            continue
        with open(path, newline="") as f:
            merged += list(csv.DictReader(f))
        if scenario != "ensemble":
            parts += [f"### {scenario}", "", report.table(scenario, report.read(path)), ""]
    ens_rows = [r for r in merged if r.get("scenario") == "ensemble" and r.get("Inferences/Second")]
    if ens_rows:
        parts += ["### ensemble (client side)", ""]
        parts += [
            "| input | concurrency | infer/s | p50 ms | p99 ms |",
            "|---|---:|---:|---:|---:|",
        ]
        parts += [
            f"| {r['input']} | {r.get('Concurrency')} | {float(r['Inferences/Second']):.1f} "
            f"| {float(r['p50 latency']) / 1e3:.2f} | {float(r['p99 latency']) / 1e3:.2f} |"
            for r in ens_rows
        ]
        parts.append("")
    ens = out / "ensemble_overhead.csv"
    if ens.is_file():
        with open(ens, newline="") as f:
            ov = list(csv.DictReader(f))
        res["ensemble_overhead"] = ov
        parts += [
            "### ensemble overhead (server side: ensemble latency minus the sum of its steps)",
            "",
        ]
        parts += [
            "| run | ensemble ms | sum of steps ms | overhead ms | overhead % |",
            "|---|---:|---:|---:|---:|",
        ]
        parts += [
            f"| {r['run']} | {int(r['ensemble_us']) / 1e3:.2f} | {int(r['steps_us']) / 1e3:.2f} "
            f"| {int(r['overhead_us']) / 1e3:.3f} | {r['overhead_pct']} |"
            for r in ov
        ]
    res["rows"] = [
        {
            k: r.get(k)
            for k in (
                "scenario",
                "model",
                "input",
                "tokens",
                "protocol",
                "rc",
                "Concurrency",
                "Request Rate",
                "Inferences/Second",
                "p50 latency",
                "p99 latency",
            )
            if r.get(k) not in (None, "")
        }
        for r in merged
    ]
    ctx.csvs["sweep"] = merged
    ctx.md["sweep"] = "\n".join(parts) + "\n"


# -- stage: soak ------------------------------------------------------------------------------
def stage_soak(ctx: Ctx, cfg: TokConfig, p: dict) -> None:
    import soak

    args = ctx.args
    duration = p["soak_s"]
    fit = left(args) - (p["estimate_s"]["soak"] - duration * 1.05)
    if fit < duration:
        if fit < 20:
            ctx.results["soak"] = {"skipped": f"budget: {left(args):.0f} s left"}
            ctx.md["soak"] = f"## Soak\n\nSkipped: {ctx.results['soak']['skipped']}.\n"
            return
        log(f"soak: {duration} s does not fit the budget; running {fit:.0f} s")
        duration = int(fit)
    try:
        import matplotlib  # noqa: F401

        png = True
    except ImportError:
        png = False
    out = ctx.raw / "soak"
    s = soak.run_soak(
        duration_s=duration,
        concurrency=p["soak_conc"],
        out=out,
        inputs="ens_128",
        gpt2_config=args.gpt2_config,
        torch_threads=args.torch_threads,
        sample_s=2.0 if args.quick else 5.0,
        png=png,
        stub_env=ctx.stub_env,
        edit_repo=lambda repo: apply_config(repo / "tokenizer" / "config.pbtxt", cfg),
        per_process_gpu=True,
    )
    s["config"] = cfg.name
    ctx.results["soak"] = s
    if (out / "soak_samples.csv").is_file():
        shutil.copy2(out / "soak_samples.csv", ctx.out / "soak_samples.csv")
    if (out / "soak.png").is_file():
        shutil.copy2(out / "soak.png", ctx.out / "soak.png")

    def g(d: dict, unit: float = 1.0) -> str:
        if "first" not in d:
            return "n/a"
        return f"{d['first'] / unit:.1f} → {d['last'] / unit:.1f} ({d['growth_pct']}%)"

    lines = [
        f"## Soak: ensemble (gpt2 `{args.gpt2_config}`), concurrency {p['soak_conc']}, {s.get('elapsed_s')} s, tokenizer `{cfg.name}`",
        "",
        f"**{'PASS' if s.get('passed') else 'FAIL'}**: {s.get('requests', '?')} requests, {s.get('throughput', '?')} infer/s, "
        f"p99 {s.get('p99_latency_us', 0) / 1e3:.1f} ms, failed {s.get('failed_requests')}; warm-up {s.get('warmup_s')} s.",
        "",
        "| what (floor of first third → last third after warm-up) | value |",
        "|---|---|",
        *(f"| RSS {n} MiB | {g(v, 1024)} |" for n, v in s.get("rss_kb", {}).items()),
        *(
            f"| fds {n} | {v.get('first', 'n/a')} → {v.get('last', 'n/a')} |"
            for n, v in s.get("fds", {}).items()
        ),
        f"| GPU memory used, all GPUs (nvidia-smi) MiB | {g(s.get('gpu_used_mib', {}))} |",
        *(f"| GPU memory {n} MiB | {g(v)} |" for n, v in s.get("gpu_mib", {}).items()),
        "",
        f"Checks: {json.dumps(s.get('checks'))}",
    ]
    ctx.md["soak"] = "\n".join(lines) + "\n"


# -- outputs ----------------------------------------------------------------------------------
def write_outputs(ctx: Ctx) -> None:
    out = ctx.out
    ctx.results["elapsed_s"] = round(time.monotonic() - T0, 1)
    (out / "results.json").write_text(
        json.dumps(ctx.results, indent=1, ensure_ascii=False, default=str) + "\n"
    )
    for name, rows in ctx.csvs.items():
        fields: list[str] = []
        for r in rows:
            fields += [k for k in r if k not in fields]
        with open(out / f"{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
    md = [
        f"# gpu_serve_search, {ctx.results['started_utc']}",
        "",
        f"Machine: {ctx.results.get('machine', '?')}",
        "",
    ]
    md += [ctx.md[s] for s in STAGES if s in ctx.md]
    (out / "summary.md").write_text("\n".join(md))
    with tarfile.open(out / "raw.tar.gz", "w:gz") as tar:
        tar.add(ctx.raw, arcname="raw")


def machine() -> str:
    import platform

    gpus = "no GPU"
    if shutil.which("nvidia-smi"):
        with contextlib.suppress(Exception):
            gpus = (
                subprocess.run(
                    ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=20,
                )
                .stdout.strip()
                .replace("\n", ", ")
            )
    return f"{platform.node()}, {os.cpu_count()} cores, {gpus}, Python {platform.python_version()}"


def perf_analyzer_wrapper(pa_dir: Path, work: Path) -> Path:
    """A launcher that puts the carried perf_analyzer's libraries on LD_LIBRARY_PATH for it
    alone (the server and torch must not see the carried libcudart); `pa` runs it through
    PERF_ANALYZER."""
    exe = work / "perf_analyzer"
    exe.write_text(
        "#!/bin/sh\n"
        f'LD_LIBRARY_PATH="{pa_dir.resolve()}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}" '
        f'exec "{(pa_dir / "perf_analyzer").resolve()}" "$@"\n'
    )
    exe.chmod(0o755)
    return exe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stages", default=",".join(STAGES), help="comma list of " + ",".join(STAGES))
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke version: 3 configurations, short windows and soak",
    )
    ap.add_argument(
        "--config",
        default=None,
        help="tokenizer config for poolcap/sweep/soak when search does not run: instances,max_batch_size,queue_delay_us (default: model_repository's)",
    )
    ap.add_argument("--configs", default=None, help="search these instead: 'i,b,d;i,b,d;...'")
    ap.add_argument(
        "--window-ms",
        type=int,
        default=None,
        help="perf_analyzer window (default 1500 search, 1000 sweep; 1000 with --quick)",
    )
    ap.add_argument("--max-trials", type=int, default=3)
    ap.add_argument("--soak-seconds", type=int, default=None, help="default 300 (30 with --quick)")
    ap.add_argument(
        "--soak-concurrency", type=int, default=None, help="default 32 (8 with --quick on CPU)"
    )
    ap.add_argument(
        "--gpt2-config",
        default=None,
        help="gpt2 model_config: gpt2 (124M; default on GPU) | tiny (default on CPU)",
    )
    ap.add_argument("--pool-cap-bytes", type=int, default=1 << 20)
    ap.add_argument(
        "--big-request-bytes", type=int, default=3 << 20, help="under max_bytes_per_request (4 MiB)"
    )
    ap.add_argument(
        "--budget-s", type=float, default=540, help="skip or shorten what would end later than this"
    )
    ap.add_argument(
        "--wheels", default=None, help="GPU machine: folder with a numpy 1.26.4 wheel (stub venv)"
    )
    ap.add_argument(
        "--gputok-site", default=None, help="GPU machine: where gputok was installed (--target)"
    )
    ap.add_argument(
        "--pa",
        type=Path,
        default=None,
        help="folder with perf_analyzer and its libraries (GPU machine)",
    )
    ap.add_argument("--gpus", default=None, help="CUDA_VISIBLE_DEVICES for the servers")
    args = ap.parse_args()
    stages = [s for s in args.stages.split(",") if s]
    bad = [s for s in stages if s not in STAGES]
    if bad:
        ap.error(f"unknown stages {bad}; choose from {STAGES}")
    if args.gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
    on_gpu = shutil.which("nvidia-smi") is not None
    args.gpt2_config = args.gpt2_config or ("gpt2" if on_gpu else "tiny")
    args.torch_threads = "0" if on_gpu else "1"
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = Ctx(args)
    ctx.results["machine"] = machine()
    ctx.results["command"] = " ".join(sys.argv)
    ctx.results["stages"] = stages
    p = plan(args, on_gpu)
    ctx.results["plan"] = p
    est = p["estimate_s"]
    total = est["setup"] + sum(est[s] for s in stages)
    log(
        "estimate: "
        + ", ".join(f"{s} ~{est[s]} s" for s in ["setup", *[s for s in STAGES if s in stages]])
        + f"; total ~{total} s ({total / 60:.1f} min), budget {args.budget_s:.0f} s"
        + (" -> some of it will be skipped or shortened" if total > args.budget_s else "")
    )
    log(f"machine: {ctx.results['machine']}; raw files in {ctx.work}")
    if args.pa is not None:
        os.environ["PERF_ANALYZER"] = str(perf_analyzer_wrapper(args.pa, ctx.work))
    if args.wheels or args.gputok_site:
        from gputok._triton_env import prepare_stub_env

        t = time.monotonic()
        ctx.stub_env = prepare_stub_env(
            Path("/tmp/gputok-stub-env"),
            sys.executable,
            extra_site_dirs=[args.gputok_site] if args.gputok_site else [],
            pip_args=["--no-index", "--find-links", args.wheels] if args.wheels else None,
        ).parent
        log(f"stub environment {ctx.stub_env} in {time.monotonic() - t:.0f} s")
    cache_stub_check()
    ctx.results["inputs"] = ensure_inputs(ctx)
    default = read_config((ROOT / "model_repository" / "tokenizer" / "config.pbtxt").read_text())
    cfg = TokConfig.parse(args.config) if args.config else default
    ctx.results["config_in"] = cfg.name
    rc = 0
    timings = ctx.results.setdefault("stage_wall_s", {})
    for stage in (s for s in STAGES if s in stages):
        t = time.monotonic()
        log(f"stage {stage} (estimate ~{est[stage]} s, {left(args):.0f} s of budget left)")
        try:
            if stage == "search":
                cfg = stage_search(ctx, default if args.config is None else cfg, p)
            elif stage == "poolcap":
                stage_poolcap(ctx, cfg)
                rc |= ctx.results["poolcap"].get("status") == "FAILED"
            elif stage == "sweep":
                stage_sweep(ctx, cfg, p)
            elif stage == "soak":
                stage_soak(ctx, cfg, p)
                rc |= not ctx.results["soak"].get("passed", True)
        except Exception as e:  # noqa: BLE001 - record, go on with the next stage
            import traceback

            ctx.results[f"{stage}_error"] = traceback.format_exc()[-3000:]
            ctx.md[stage] = f"## {stage}\n\nFAILED: `{type(e).__name__}: {str(e)[:500]}`\n"
            log(f"stage {stage} failed: {e}")
            rc = 1
        timings[stage] = round(time.monotonic() - t, 1)
        log(f"stage {stage} done in {timings[stage]} s")
        write_outputs(ctx)
    ctx.results["config_out"] = cfg.spec()
    write_outputs(ctx)
    print((args.out / "summary.md").read_text(), flush=True)
    log(
        f"done in {time.monotonic() - T0:.0f} s; {sorted(x.name for x in args.out.iterdir())} in {args.out}"
    )
    log(f"for a later command: --config {cfg.spec()}")
    shutil.rmtree(ctx.work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
