"""On a CPU host, every error- or warning-level line tritonserver itself logs at start-up is one
docs/serving.md ("Log lines on a CPU host") lists and explains.

A new user read the GPU probes' E-level lines (NVML, the CUDA driver helper) as failures. The
docs now say why each appears; this test fails when one appears that they do not hold (the
ensembles' "unable to create stream" line was missing from the list). Lines of gputok's own
models (model.py) are not Triton's probes and are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[2] / "docs" / "serving.md"


def documented() -> list[re.Pattern]:
    """The list's lines as patterns: `...` matches anything, the rest literally."""
    text = DOCS.read_text()
    at = text.index("### Log lines on a CPU host")
    start = text.index("```\n", at) + 4
    block = text[start : text.index("```", start)]
    return [
        re.compile(".*".join(re.escape(p) for p in re.split(r"\s*\.\.\.\s*", line)))
        for line in block.splitlines()
        if line.strip()
    ]


def triton_lines(log: str) -> list[str]:
    """Triton's own E/W lines and bare 'Error:' lines before its services start, with the
    timestamp and pid cut and the source line number dropped (`server.cc:241]` -> `server.cc]`)."""
    out = []
    for line in log.splitlines():
        if "Started HTTPService" in line:
            break
        m = re.match(r"([EW])\d{4} [\d:.]+ +\d+ (\S+?\.cc):\d+\] (.*)", line)
        if m:
            out.append(f"{m.group(1)} {m.group(2)}] {m.group(3)}")
        elif line.startswith("Error:"):
            out.append(line)
    return out


def on_cpu_host() -> bool:
    return not any(Path("/dev").glob("nvidia[0-9]*"))


def test_documented_patterns_are_read():
    pats = documented()
    assert len(pats) >= 5
    assert any(p.match('E server.cc] "CudaDriverHelper has not been initialized."') for p in pats)


@pytest.mark.skipif(not on_cpu_host(), reason="the list is of a CPU host's lines")
def test_every_start_up_error_or_warning_is_explained(triton):
    lines = triton_lines(triton.log_path.read_text(errors="replace"))
    assert any(line.startswith("E ") for line in lines), "no E-level probe line: log not read?"
    pats = documented()
    unexplained = [line for line in lines if not any(p.match(line) for p in pats)]
    assert not unexplained, "not in docs/serving.md's list:\n" + "\n".join(unexplained)
