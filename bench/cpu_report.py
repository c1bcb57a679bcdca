"""bench_cpu.py's markdown table of a report (split from bench_cpu.py to keep modules short)."""

from __future__ import annotations

from cpu_tokenizers import TOKENIZERS


def fmt_ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "–"
    return f"{a / b:.2f}×"


LABEL = {
    "tiktoken": "tiktoken `encode_ordinary_batch`",
    "hf": "HF tokenizers `encode_batch`",
    "gigatoken": "gigatoken(hf) `encode_batch`",
    "gigatoken-tt": "gigatoken.from_tiktoken `encode_batch`",
    "gputok": "**gputok-CPU `encode_batch_flat`**",
    "gputok-lists": "gputok-CPU `encode_ordinary_batch`",
}
SLABEL = {
    "tiktoken": "tiktoken `encode_ordinary`",
    "hf": "HF tokenizers `encode`",
    "gigatoken": "gigatoken(hf) `encode` (1t) / `encode_batch([t])`",
    "gigatoken-tt": "gigatoken.from_tiktoken `encode` (1t) / `encode_batch([t])`",
    "gputok": "**gputok-CPU** `encode_ordinary` (1t) / `encode_batch_flat([t])`",
}


def markdown(report: dict) -> str:
    m = report["machine"]
    c = report["corpus"]
    lines = [
        f"## CPU, {report['date']}, {m['cores']} cores ({m['cpu']})",
        "",
        f"- Machine: `{m['host']}`, {m['cores']} cores, {m['cpu']}, {m['mem_gib']} GiB, "
        f"Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v),
        f"- Command: `{report['command']}`",
        f"- Corpus: profile `{c['profile']}` (bench/corpus_manifest.json), {c['docs']} documents, "
        f"{c['bytes'] / 1e6:.1f} MB UTF-8, {report.get('tokens', 0) / 1e6:.2f} M tokens; "
        f"mixed English reST docs, Python source, kernel YAML, man pages in ja/zh/ru/de/fr/pl.",
        "- Every output was checked equal to tiktoken's before timing. Median of "
        f"{report['repeat']} warm passes ({report.get('hf_repeat', 1)} for HF) after one cold "
        "pass (pretoken caches are warm in the timed passes; cold MB/s shown beside).",
    ]
    loads = [
        f"{r['loadavg_start'][0]:.1f}" for r in report["runs"].values() if "loadavg_start" in r
    ]
    if loads:
        lines.append(
            f"- 1-min load average when each worker started (other work on the machine "
            f"skews figures): {', '.join(loads)}"
        )
    errs = {f"{t}t {k}": v for t, r in report["runs"].items() for k, v in r["errors"].items()}
    if errs:
        lines.append("- Not measured / failed: " + "; ".join(f"{k}: {v}" for k, v in errs.items()))
    lines += [
        "",
        "| tokenizer | threads | MB/s | M tokens/s | cold MB/s | vs tiktoken | vs gigatoken |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for t, r in report["runs"].items():
        b = r["batch"]
        tt = b.get("tiktoken", {}).get("MBps")
        gg = max((b.get(g, {}).get("MBps") or 0 for g in ("gigatoken", "gigatoken-tt")), default=0)
        for name in TOKENIZERS:
            if name not in b:
                continue
            x = b[name]
            part = ""
            if x.get("bytes") and x["bytes"] < c["bytes"]:
                part = f" (first {x['bytes'] / 1e6:.3g} MB)"
            lines.append(
                f"| {LABEL[name]}{part} | {t} | {x['MBps']:.1f} | {x['Mtokps']:.2f} | {x['cold_MBps']:.1f} | "
                f"{fmt_ratio(x['MBps'], tt)} | {fmt_ratio(x['MBps'], gg)} |"
            )
    for t, r in report["runs"].items():
        s = r["single"]
        if not s:
            continue
        Ls = sorted({int(L) for v in s.values() for L in v})
        any_name = next(iter(s.values()))
        hdr = " | ".join(f"{round(L / 1000)}K" if L >= 1024 else str(L) for L in Ls)
        lines += [
            "",
            f"Single sequence, {t} thread{'s' if int(t) > 1 else ''}: median ms end to end "
            "(str in, ids out); ratio = tiktoken's time / this time. Exact token counts: "
            + ", ".join(f"{any_name[str(L)]['tokens']}" for L in Ls if str(L) in any_name)
            + ".",
            "",
            f"| tokenizer | {hdr} |",
            "|---|" + "---:|" * len(Ls),
        ]
        tts = s.get("tiktoken", {})
        for name in TOKENIZERS:
            if name not in s:
                continue
            cells = []
            for L in Ls:
                v = s[name].get(str(L))
                if not v:
                    cells.append("–")
                    continue
                ref = tts.get(str(L), {}).get("ms")
                ratio = f" ({ref / v['ms']:.1f}×)" if ref and name != "tiktoken" else ""
                cells.append(f"{v['ms']:.3f}{ratio}")
            lines.append(f"| {SLABEL[name]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
