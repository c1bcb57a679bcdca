"""The fault-injection harness (tests/e2e/fault_harness.py; docs/reliability.md): over 100
distinct malformed requests over HTTP and gRPC against a supervised gputok-serve while 8
clients send valid requests. Each case is refused with 4xx (a body that is not JSON too, which
Triton 2.51 alone answers with 500), or survived by a restart within 30 s; no valid request fails outside a
restart; no shared-memory region of the run's servers is left."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fault_harness import all_cases, run
from served import Served

pytestmark = pytest.mark.e2e


def test_fault_harness(tmp_path, ref):
    cases = all_cases()
    assert len(cases) >= 100
    assert {c.protocol for c in cases} == {"http", "grpc"}
    s = Served(tmp_path)
    try:
        s.wait_ready(300)
        result = run(s, ref, cases)
    finally:
        s.close()
    regions = result.pop("regions")
    assert regions, "no region of the run's servers was seen"
    figures = {k: v for k, v in result.items() if k != "outcomes"}
    print("\n" + json.dumps(figures, indent=1))
    if os.environ.get("GPUTOK_FAULTS_JSON"):
        Path(os.environ["GPUTOK_FAULTS_JSON"]).write_text(json.dumps(result, indent=1))
    assert result["failed_cases"] == {}
    served_as_valid = len(result["served_as_valid"])
    assert result["refused"] + result["restarted"] + served_as_valid == len(cases)
    assert result["restarted"] >= 2  # the known crashes were sent and survived
    assert all(t < 30 for t in result["restart_ready_s"])
    assert result["valid_ok"] > 100
    assert result["valid_wrong"] == 0
    assert result["valid_failed_otherwise_count"] == 0, result["valid_failed_otherwise"]
    leaked = [r for r in regions if (Path("/dev/shm") / r).exists()]
    print(f"{len(regions)} regions used by the run's servers, {len(leaked)} left")
    assert leaked == [], leaked
