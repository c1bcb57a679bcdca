"""Serving benchmark plans: which repository a point is served from, and the perf_analyzer grid.

A plan is a list of settings, each one tritonserver serving our `tokenizer` beside the
`preprocessing_gigatoken` baseline (and any other baseline named), both with the same
instance count and the same batching, measured by perf_analyzer one model after the other in
the same server run:

    MODE:DEVICE:INSTANCES:SIZES:CONCURRENCIES[:OUTPUTS][;...]
    iso:auto:0:128,4k:1,2,4,8,16,32,64,128;batch:cpu:2:4k:64;iso:auto:0:4k:64:min

- MODE `iso`: every model that takes strings served without the dynamic batcher, as
  `gputok-serve --isolate-requests` serves them (gputok/serve/isolate.py);
  `batch`: the repository's dynamic batcher kept, as `gputok-serve` serves them by default.
- DEVICE: our tokenizer's `device` parameter: `auto` (cuda on a GPU instance) or `cpu` (its
  CPU path, on whatever instance KIND_AUTO gives).
- INSTANCES: the count of every model served (ours and the baselines alike); 0 keeps the
  configs' own counts (equal in the repository: 2).
- OUTPUTS: `all` (default): ours and the gigatoken baseline declare TensorRT-LLM's eleven
  outputs, and perf_analyzer, which has no flag to name outputs, gets nine tensors per response
  from each (the baseline returns ours' values since 2026-11-27; it returned two before);
  `min`: every model declares only `INPUT_ID` and `REQUEST_INPUT_LEN`, which is what a client
  naming those two (gputok-client) costs.

The configs are edited as text, not through `gputok.serve.pbtxt` (which needs tritonclient's
protobuf schema): the GPU machine's image has neither. tests/serving/test_serve_bench_plan.py checks
these edits against pbtxt's reading and isolate.py's rule on this machine.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ROOT / "perf_analyzer_configs" / "baseline_repository"
MODES = ("iso", "batch")
GIGATOKEN = "preprocessing_gigatoken"
# The gigatoken baseline with no tokenizer (its `ceiling` parameter): what any tokenizer served
# by that Python model, with those outputs, can reach; made from the baseline's folder here.
CEILING = "preprocessing_ceiling"
DEVICES = ("auto", "cpu")


@dataclass(frozen=True)
class Setting:
    mode: str  # "iso" | "batch"
    device: str  # our tokenizer's device parameter: "auto" | "cpu"
    instances: int  # 0: the configs' own counts
    sizes: tuple[str, ...]
    concurrencies: tuple[int, ...]
    outputs: str = "all"  # "all" | "min" (every model declares INPUT_ID, REQUEST_INPUT_LEN only)

    @property
    def label(self) -> str:
        tail = "-min" if self.outputs == "min" else ""
        return f"{self.mode}-{self.device}-i{self.instances or 'cfg'}{tail}"


def parse_plan(spec: str) -> list[Setting]:
    """`MODE:DEVICE:INSTANCES:SIZES:CONCS;...` -> settings; ValueError on a malformed one."""
    out = []
    for part in (p.strip() for p in spec.split(";")):
        if not part:
            continue
        fields = part.split(":")
        if len(fields) not in (5, 6):
            raise ValueError(f"plan entry {part!r}: want MODE:DEVICE:INSTANCES:SIZES:CONCS")
        mode, device, inst, sizes, concs = fields[:5]
        outputs = fields[5] if len(fields) == 6 else "all"
        if mode not in MODES or device not in DEVICES or outputs not in ("all", "min"):
            raise ValueError(
                f"plan entry {part!r}: mode in {MODES}, device in {DEVICES}, outputs all|min"
            )
        setting = Setting(
            mode,
            device,
            int(inst),
            tuple(s for s in sizes.split(",") if s),
            tuple(int(c) for c in concs.split(",") if c),
            outputs,
        )
        if setting.instances < 0 or not setting.sizes or min(setting.concurrencies) < 1:
            raise ValueError(f"plan entry {part!r}: instances >= 0, sizes and concurrencies >= 1")
        out.append(setting)
    return out


def drop_dynamic_batching(text: str) -> str:
    """config.pbtxt text without its `dynamic_batching { ... }` block (braces balanced)."""
    m = re.search(r"(?m)^\s*dynamic_batching\s*\{", text)
    if not m:
        return text
    depth, i = 0, m.end() - 1
    while i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[: m.start()] + text[i + 1 :]
        i += 1
    raise ValueError("unbalanced dynamic_batching block")


def set_instance_count(text: str, count: int) -> str:
    new, n = re.subn(r"(?m)^(\s*count:\s*)\d+", rf"\g<1>{count}", text)
    if n != 1:
        raise ValueError(f"expected one instance_group count, found {n}")
    return new


def set_parameter(text: str, key: str, value: str) -> str:
    pat = (
        rf'(parameters\s*\{{\s*key:\s*"{re.escape(key)}"\s*value:\s*\{{\s*string_value:\s*)"[^"]*"'
    )
    new, n = re.subn(pat, rf'\g<1>"{value}"', text)
    if n != 1:
        raise ValueError(f"expected one parameter {key!r}, found {n}")
    return new


def keep_outputs(text: str, keep: tuple[str, ...]) -> str:
    """config.pbtxt text whose `output [ ... ]` list holds only the outputs named in `keep`."""
    m = re.search(r"(?m)^output\s*\[", text)
    if not m:
        raise ValueError("no output list")
    end = text.index("\n]", m.end())
    blocks = re.findall(r"\{[^{}]*\}", text[m.end() : end])
    kept = [b for b in blocks if re.search(r'name:\s*"([^"]+)"', b).group(1) in keep]
    if len(kept) != len(keep):
        raise ValueError(f"outputs {keep} not all declared")
    return text[: m.end()] + "\n  " + ",\n  ".join(kept) + text[end:]


def build_repository(dest: Path, setting: Setting, baselines: tuple[str, ...]) -> Path:
    """A throwaway repository at `dest`: our tokenizer and `baselines`, edited for `setting`."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "model_repository" / "tokenizer", dest / "tokenizer", ignore=ignore)
    for name in baselines:
        src = BASELINES / (GIGATOKEN if name == CEILING else name)
        shutil.copytree(src, dest / name, ignore=ignore)
    for name in ("tokenizer", *baselines):
        config = dest / name / "config.pbtxt"
        text = config.read_text()
        if name == CEILING:
            text = text.replace(f'name: "{GIGATOKEN}"', f'name: "{CEILING}"', 1)
            text = set_parameter(text, "ceiling", "true")
        if setting.mode == "iso":
            text = drop_dynamic_batching(text)
        if setting.instances:
            text = set_instance_count(text, setting.instances)
        if name == "tokenizer" and setting.device != "auto":
            text = set_parameter(text, "device", setting.device)
        if setting.outputs == "min" and "REQUEST_INPUT_LEN" in text:
            text = keep_outputs(text, ("INPUT_ID", "REQUEST_INPUT_LEN"))
        config.write_text(text)
    return dest
