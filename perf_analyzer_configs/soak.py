#!/usr/bin/env python3
"""Soak: perf_analyzer on the `ensemble` for a long time while we watch memory and descriptors.

Starts a tritonserver (gputok._triton_env.TritonServer) on a temporary copy of
model_repository/ with gpt2 switched to `--gpt2-config` (default `tiny`: 2 layers, random
weights; GPT-2 124M on 2 CPU cores answers about 1 request/s, too slow to load the server),
runs perf_analyzer (the `pa` wrapper) on `ensemble` at `--concurrency` for `--duration`
seconds, and samples every `--sample-s` seconds, from /proc, the RSS and the open file
descriptors of tritonserver and of each Python-backend stub, plus GPU memory used when
nvidia-smi exists. After the first `--warmup-frac` of the run it computes growth: the lowest
RSS (GPU memory) of the last third of the samples over the lowest of the first third, and the
highest descriptor count of the last third minus that of the first third. It passes when
perf_analyzer succeeded, the server counted 0 failed inferences, RSS and GPU memory grew less
than `--max-growth-pct` and the descriptor count did not grow (`--max-fd-growth`, default 0).

Writes <out>/soak_samples.csv, <out>/soak_summary.json, <out>/soak.png and perf_analyzer's
CSV and report (<out>/pa.csv, <out>/pa.csv.log). Exit code 0 when it passed, 1 otherwise.

    python perf_analyzer_configs/soak.py                          # 300 s, concurrency 32
    python perf_analyzer_configs/soak.py --duration 20 --concurrency 4 --out /tmp/soak
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PA = HERE / "pa"
sys.path.insert(0, str(HERE))


def log(msg: str) -> None:
    print(f"[soak] {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def make_repository(dst: Path, gpt2_config: str, torch_threads: str) -> Path:
    from gputok._triton_env import copy_models, set_config_parameter

    repo = copy_models(REPO / "model_repository", dst / "repo")
    set_config_parameter(repo / "gpt2" / "config.pbtxt", "model_config", gpt2_config)
    set_config_parameter(repo / "gpt2" / "config.pbtxt", "torch_threads", torch_threads)
    return repo


# -- sampling -------------------------------------------------------------------------------
def rss_kb(pid: int) -> int:
    """VmRSS of one process in KiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def fd_count(pid: int) -> int:
    """Open file descriptors of one process (-1 when it is gone or not ours to read)."""
    try:
        return len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return -1


def _nvidia_smi(query: str) -> str | None:
    """nvidia-smi's csv answer to `query` (e.g. --query-gpu=memory.used), or None without it."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run(
            [exe, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def gpu_used_mib() -> float | None:
    """Memory used on all GPUs together (MiB), or None without nvidia-smi."""
    out = _nvidia_smi("--query-gpu=memory.used")
    try:
        return None if out is None else float(sum(float(x) for x in out.split()))
    except ValueError:
        return None


def gpu_apps_mib() -> dict[int, float] | None:
    """{pid: MiB} of the processes using a GPU (nvidia-smi --query-compute-apps), or None
    without nvidia-smi. In a container the pids may be the host's: then none matches ours."""
    out = _nvidia_smi("--query-compute-apps=pid,used_memory")
    if out is None:
        return None
    apps: dict[int, float] = {}
    for line in out.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                apps[int(parts[0])] = apps.get(int(parts[0]), 0.0) + float(parts[1])
            except ValueError:
                continue
    return apps


class Sampler(threading.Thread):
    """Samples {server, each stub} RSS and fds every `period` seconds until stopped; with
    `per_process_gpu`, also each process's GPU memory (gpu_mib_<name>; None when not listed)."""

    def __init__(
        self, procs: dict[str, int], period: float, t0: float, per_process_gpu: bool = False
    ) -> None:
        super().__init__(daemon=True)
        self.procs, self.period, self.t0 = procs, period, t0
        self.per_process_gpu = per_process_gpu
        self.rows: list[dict] = []
        self.halt = threading.Event()

    def sample(self) -> dict:
        row: dict = {"t_s": round(time.monotonic() - self.t0, 2)}
        for name, pid in self.procs.items():
            row[f"rss_kb_{name}"] = rss_kb(pid)
            row[f"fds_{name}"] = fd_count(pid)
        row["rss_kb_total"] = sum(row[f"rss_kb_{n}"] for n in self.procs)
        row["fds_total"] = sum(max(row[f"fds_{n}"], 0) for n in self.procs)
        row["gpu_used_mib"] = gpu_used_mib()
        if self.per_process_gpu:
            apps = gpu_apps_mib() or {}
            for name, pid in self.procs.items():
                row[f"gpu_mib_{name}"] = apps.get(pid)
        return row

    def run(self) -> None:
        while True:
            self.rows.append(self.sample())
            if self.halt.wait(self.period):
                self.rows.append(self.sample())
                return


def growth(rows: list[dict], key: str, start_s: float, agg=min) -> dict:
    """Growth of `key` after `start_s`: `agg` of the last third of the samples minus `agg` of
    the first third. RSS uses min, the floor: the gpt2 stub's RSS swings by 2x with the batch
    size (430-1060 MiB in the 5-minute run; glibc gives freed activations back), so a few
    samples' median says where in the swing they fell, while a leak raises the floor.
    Descriptors use max, so the drop when perf_analyzer disconnects cannot hide a leak."""
    vals = [r[key] for r in rows if r["t_s"] >= start_s and r[key] is not None]
    if len(vals) < 3:
        return {"samples": len(vals)}
    k = len(vals) // 3
    first, last = agg(vals[:k]), agg(vals[-k:])
    return {
        "samples": len(vals),
        "first": first,
        "last": last,
        "min": min(vals),
        "median": statistics.median(vals),
        "max": max(vals),
        "growth": last - first,
        "growth_pct": round(100.0 * (last - first) / first, 3) if first else None,
    }


def server_stats(http_url: str) -> dict[str, dict]:
    """{model: {success, fail, executions}} from Triton's statistics endpoint."""
    with urllib.request.urlopen(f"http://{http_url}/v2/models/stats", timeout=30) as r:
        stats = json.load(r)
    out = {}
    for m in stats.get("model_stats", []):
        s = m.get("inference_stats", {})
        out[m["name"]] = {
            "success": int(s.get("success", {}).get("count", 0)),
            "fail": int(s.get("fail", {}).get("count", 0)),
            "executions": int(m.get("execution_count", 0)),
        }
    return out


def plot(rows: list[dict], names: list[str], warm_s: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t_s"] for r in rows]
    gpu = any(r["gpu_used_mib"] is not None for r in rows)
    fig, axes = plt.subplots(3 if gpu else 2, 1, figsize=(9, 8 if gpu else 6), sharex=True)
    for n in [*names, "total"]:
        axes[0].plot(t, [r[f"rss_kb_{n}"] / 1024 for r in rows], label=n)
        axes[1].plot(t, [r[f"fds_{n}"] for r in rows], label=n)
    axes[0].set_ylabel("RSS (MiB)")
    axes[1].set_ylabel("open fds")
    if gpu:
        axes[2].plot(t, [r["gpu_used_mib"] or 0 for r in rows], label="GPU used")
        axes[2].set_ylabel("GPU memory (MiB)")
    for ax in axes:
        ax.axvline(warm_s, color="grey", linestyle="--", linewidth=1)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, ncol=3)
    axes[1].legend(fontsize=8, ncol=3)
    axes[-1].set_xlabel("seconds since perf_analyzer started (dashed: end of warm-up)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# -- the run --------------------------------------------------------------------------------
def _start_server(tmp: Path, gpt2_config, torch_threads, edit_repo, stub_env):
    from gputok._triton_env import ServerOptions, TritonServer, free_ports

    repo = make_repository(tmp, gpt2_config, torch_threads)
    if edit_repo is not None:
        edit_repo(repo)
    http, grpc, metrics = free_ports(3)
    srv = TritonServer(
        ServerOptions(model_repository=repo, http_port=http, grpc_port=grpc, metrics_port=metrics),
        stub_env=stub_env,
        need=("numpy", "gputok", "torch", "transformers"),
        log_path=tmp / "tritonserver.log",
    )
    log(f"starting tritonserver (gpt2 {gpt2_config}) on {repo}")
    srv.start()
    return srv


def _process_names(srv) -> dict[str, int]:
    """The server and each stub, by model (several instances: stub_tokenizer_2, ...)."""
    from gputok._triton_env import stub_processes

    procs = {"server": srv.proc.pid}
    for pid, model in sorted(stub_processes(srv.proc.pid).items()):
        name, k = f"stub_{model}", 2
        while name in procs:
            name, k = f"stub_{model}_{k}", k + 1
        procs[name] = pid
    return procs


def _pa_command(url, protocol, data, concurrency, duration_s, csv_path) -> list[str]:
    # perf_analyzer keeps going until 3 windows are "stable"; -s 999 makes any 3
    # stable, so 3 windows of duration/3 give the whole soak as one run.
    window_ms = max(1000, int(duration_s * 1000 / 3))
    return [
        str(PA),
        "-m",
        "ensemble",
        "-i",
        protocol,
        "-u",
        url,
        f"--input-data={data}",
        f"--concurrency-range={concurrency}",
        f"--measurement-interval={window_ms}",
        "--stability-percentage=999",
        "--max-trials=3",
        "--percentile=99",
        "-f",
        str(csv_path),
        "--verbose-csv",
    ]


def _run_pa(cmd: list[str], csv_path: Path, duration_s: float) -> int:
    with open(str(csv_path) + ".log", "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        return subprocess.run(
            cmd, stdout=f, stderr=subprocess.STDOUT, check=False, timeout=duration_s * 3 + 120
        ).returncode


def _measure(srv, summary, data, inputs, protocol, concurrency, duration_s, out, sample_s, ppg):
    """Warm up, sample the processes while perf_analyzer runs; return (rows, procs, rc, elapsed,
    before, after)."""
    from _common import warm_up

    srv.wait_ready(timeout=300)
    urls = {"http": srv.http_url, "grpc": srv.grpc_url}
    log(f"ready: http {srv.http_url}, grpc {srv.grpc_url}")
    warm_up(urls, ["ensemble"], inputs, n=4)
    procs = _process_names(srv)
    summary["processes"] = procs
    before = server_stats(srv.http_url)
    csv_path = out / "pa.csv"
    cmd = _pa_command(urls[protocol], protocol, data, concurrency, duration_s, csv_path)
    summary["perf_analyzer"] = " ".join(cmd)
    t0 = time.monotonic()
    sampler = Sampler(procs, sample_s, t0, ppg)
    sampler.start()
    log(f"perf_analyzer: ensemble, concurrency {concurrency}, {duration_s:.0f} s")
    rc = _run_pa(cmd, csv_path, duration_s)
    sampler.halt.set()
    sampler.join()
    elapsed = time.monotonic() - t0
    return sampler.rows, procs, rc, elapsed, before, server_stats(srv.http_url)


def _judge(summary, rows, names, rc, elapsed, before, after, limits) -> None:
    """Growth of memory, fds and GPU memory after the warm-up, failed requests, and the checks."""
    warmup_frac, max_growth_pct, max_fd_growth, ppg = limits
    summary["perf_analyzer_rc"] = rc
    summary["elapsed_s"] = round(elapsed, 1)
    summary["server_stats"] = {
        m: {k: after[m][k] - before.get(m, {}).get(k, 0) for k in after[m]} for m in after
    }
    summary["failed_requests"] = sum(v["fail"] for v in summary["server_stats"].values())
    warm_s = warmup_frac * elapsed
    summary["warmup_s"] = round(warm_s, 1)
    summary["rss_kb"] = {n: growth(rows, f"rss_kb_{n}", warm_s) for n in [*names, "total"]}
    summary["fds"] = {n: growth(rows, f"fds_{n}", warm_s, max) for n in [*names, "total"]}
    summary["gpu_used_mib"] = growth(rows, "gpu_used_mib", warm_s)
    if ppg:
        summary["gpu_mib"] = {n: growth(rows, f"gpu_mib_{n}", warm_s) for n in names}
    summary["samples"] = len(rows)
    rss_pct = summary["rss_kb"]["total"].get("growth_pct")
    gpu_pct = summary["gpu_used_mib"].get("growth_pct")
    fd_growth = summary["fds"]["total"].get("growth")
    checks = {
        "perf_analyzer_ok": rc == 0,
        "no_failed_requests": summary["failed_requests"] == 0 and not summary.get("pa_errors"),
        "rss_growth_ok": rss_pct is not None and rss_pct < max_growth_pct,
        "gpu_growth_ok": gpu_pct is None or gpu_pct < max_growth_pct,
        "fd_growth_ok": fd_growth is not None and fd_growth <= max_fd_growth,
    }
    summary["checks"] = checks
    summary["passed"] = all(checks.values())


def _write_outputs(out: Path, rows, names, summary, ppg: bool, png: bool) -> None:
    fields = ["t_s", *[f"rss_kb_{n}" for n in names], "rss_kb_total"]
    fields += [*[f"fds_{n}" for n in names], "fds_total", "gpu_used_mib"]
    if ppg:
        fields += [f"gpu_mib_{n}" for n in names]
    with open(out / "soak_samples.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    (out / "soak_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if png:
        title = (
            f"gputok soak: ensemble (gpt2 {summary['gpt2_config']}), concurrency "
            f"{summary['concurrency']}, {summary['elapsed_s']:.0f} s, {summary['date_utc']}"
        )
        plot(rows, names, summary["warmup_s"], out / "soak.png", title)
    log(
        f"{'PASS' if summary['passed'] else 'FAIL'}: {summary.get('requests', '?')} requests "
        f"({summary.get('throughput', '?')} infer/s), failed {summary['failed_requests']}, "
        f"RSS growth {summary['rss_kb']['total'].get('growth_pct')}%, fd growth "
        f"{summary['fds']['total'].get('growth')}, GPU growth "
        f"{summary['gpu_used_mib'].get('growth_pct')}; {out}"
    )


def run_soak(
    duration_s: float = 300.0,
    concurrency: int = 32,
    out: Path = HERE / "results" / "soak",
    protocol: str = "grpc",
    inputs: str = "ens_128",
    gpt2_config: str = "tiny",
    torch_threads: str = "1",
    sample_s: float = 5.0,
    warmup_frac: float = 0.2,
    max_growth_pct: float = 5.0,
    max_fd_growth: int = 0,
    png: bool = True,
    stub_env: Path | None = None,
    edit_repo=None,
    per_process_gpu: bool = False,
) -> dict:
    """Run one soak; return the summary (also written to out/soak_summary.json).

    `stub_env`: the Python-backend environment (TritonServer's; the GPU machine's numpy<2
    venv). `edit_repo(repo)`: called on the temporary repository before the server starts
    (e.g. another tokenizer config). `per_process_gpu`: also sample each process's GPU memory."""
    from _common import input_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = input_file(inputs)
    tmp = Path(tempfile.mkdtemp(prefix="gputok-soak-"))
    keep_tmp = False
    summary: dict = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node()}, {platform.machine()}, {_cores()} cores",
        "command": " ".join(sys.argv) if Path(sys.argv[0]).name == "soak.py" else None,
        "duration_s": duration_s,
        "concurrency": concurrency,
        "protocol": protocol,
        "inputs": inputs,
        "gpt2_config": gpt2_config,
        "torch_threads": torch_threads,
        "sample_s": sample_s,
        "warmup_frac": warmup_frac,
    }
    try:
        srv = _start_server(tmp, gpt2_config, torch_threads, edit_repo, stub_env)
        try:
            measured = _measure(
                srv, summary, data, inputs, protocol, concurrency, duration_s, out, sample_s,
                per_process_gpu,
            )  # fmt: skip
        finally:
            code = srv.stop()
            summary["server_exit_code"] = code
            if code not in (0, None):
                keep_tmp = True
                log(f"server exit code {code}; log kept: {tmp / 'tritonserver.log'}")
    finally:
        if not keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    rows, procs, rc, elapsed, before, after = measured
    csv_path = out / "pa.csv"
    summary.update(_pa_numbers(Path(str(csv_path) + ".log").read_text(), csv_path))
    limits = (warmup_frac, max_growth_pct, max_fd_growth, per_process_gpu)
    _judge(summary, rows, list(procs), rc, elapsed, before, after, limits)
    _write_outputs(out, rows, list(procs), summary, per_process_gpu, png)
    return summary


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _pa_numbers(report: str, csv_path: Path) -> dict:
    """Request count, throughput, p99 latency and any error lines from perf_analyzer."""
    out: dict = {}
    counts = re.findall(r"Request count: (\d+)", report)
    if counts:
        out["requests"] = int(counts[0])  # the first block is the ensemble's own client side
    m = re.search(r"Concurrency: \d+, throughput: ([\d.]+) infer/sec", report)
    if m:
        out["throughput"] = float(m.group(1))
    m = re.search(r"p99 latency: (\d+) usec", report)
    if m:
        out["p99_latency_us"] = int(m.group(1))
    errors = [ln for ln in report.splitlines() if re.search(r"error|failed", ln, re.I)]
    out["pa_errors"] = errors[:10]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=300.0, help="seconds (default 300)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--protocol", default="grpc", choices=["grpc", "http"])
    p.add_argument("--inputs", default="ens_128", help="perf_analyzer_configs/inputs/<name>.json")
    p.add_argument("--gpt2-config", default="tiny", help="gpt2 model_config: tiny | gpt2")
    p.add_argument("--torch-threads", default="1", help="gpt2 torch_threads (0 = torch's)")
    p.add_argument("--sample-s", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--warmup-frac", type=float, default=0.2, help="growth is measured after it")
    p.add_argument("--max-growth-pct", type=float, default=5.0)
    p.add_argument("--max-fd-growth", type=int, default=0)
    p.add_argument("--out", type=Path, default=HERE / "results" / "soak")
    a = p.parse_args(argv)
    s = run_soak(
        duration_s=a.duration,
        concurrency=a.concurrency,
        out=a.out,
        protocol=a.protocol,
        inputs=a.inputs,
        gpt2_config=a.gpt2_config,
        torch_threads=a.torch_threads,
        sample_s=a.sample_s,
        warmup_frac=a.warmup_frac,
        max_growth_pct=a.max_growth_pct,
        max_fd_growth=a.max_fd_growth,
    )
    return 0 if s["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
