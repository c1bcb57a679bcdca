"""Fault injection against a real `gputok-serve`: a catalogue of malformed requests over HTTP
and gRPC (tests/e2e/fault_cases.py), sent one after another while 8 clients send valid requests.

Every case must end one of two ways, recorded per case:
- `refused`: HTTP 4xx, or a gRPC status other than OK / INTERNAL / UNAVAILABLE / UNKNOWN (the
  20 cases of TRITON_JSON_500_CASES too, which Triton 2.51 alone answers with 500 and
  gputok-serve with 400: gputok.serve.preload);
- `restarted`: the request killed tritonserver or a stub and gputok-serve had it ready again
  within 30 s.
(Or, for the few odd requests the catalogue lists as such, be served as valid.)
Valid requests must all succeed with tiktoken's ids, except those that failed while the server
was down for a restart. No Python-backend shared-memory region of any server of the run may be
left once it has stopped. Run by tests/e2e/test_fault_harness.py (figures with `-s`; set
GPUTOK_FAULTS_JSON=path to keep every case's outcome).
"""

from __future__ import annotations

import time

from fault_cases import Case, all_cases
from served import Served, ValidLoad

READY_AGAIN_S = 30.0

REFUSED_GRPC = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "OUT_OF_RANGE",
    "FAILED_PRECONDITION",
    "UNIMPLEMENTED",
    "RESOURCE_EXHAUSTED",
)


def classify(case: Case, answer, restarted: bool) -> str:
    if restarted:
        return "restarted"
    if case.protocol == "http":
        status, body = answer
        outcome = (
            "refused"
            if 400 <= status < 500
            else "served"
            if status == 200
            else f"FAILED http {status} {body[:120]}"
        )
    else:
        text = str(answer)
        outcome = (
            "refused"
            if text.startswith(REFUSED_GRPC)
            else "served"
            if text == "OK"
            else f"FAILED grpc {text[:160]}"
        )
    if outcome == "served" and case.expect not in ("served", "refused-or-served"):
        return f"FAILED served {str(answer)[:120]}"
    if case.expect == "served" and outcome != "served":
        return f"FAILED expected to be served, got {outcome}"
    return outcome


def run(served: Served, ref, cases: list[Case] | None = None) -> dict:
    """Send every case while `ValidLoad` runs; returns the per-case outcomes and the figures."""
    cases = cases or all_cases()
    outcomes: dict[str, str] = {}
    windows: list[tuple[float, float]] = []  # (attack sent, ready again): restarts
    restart_s: list[float] = []
    regions: set[str] = set()  # every Python-backend region a server of the run used
    with ValidLoad(served.http, served.grpc, ref) as load:
        time.sleep(0.5)
        for case in cases:
            regions |= _regions(served)
            pids = _server_pids(served)
            n = served.text().count("ready again")
            t0 = time.monotonic()
            answer = case.send(served)
            restarted = _went_down(pids)
            if restarted:
                while (
                    served.text().count("ready again") <= n
                    and time.monotonic() - t0 < READY_AGAIN_S
                ):
                    time.sleep(0.05)
                took = time.monotonic() - t0
                if served.text().count("ready again") <= n or not served.ready():
                    outcomes[case.name] = f"FAILED not ready {took:.1f} s after the crash"
                    continue
                restart_s.append(round(took, 1))
                windows.append((t0, time.monotonic() + 0.5))
            outcomes[case.name] = classify(case, answer, restarted)
        time.sleep(0.5)
    excused = [
        e for e in load.events if e[1] == "error" and any(a <= e[0] <= b for a, b in windows)
    ]
    unexcused = [e for e in load.events if e[1] == "error" and e not in excused]
    return {
        "cases": len(cases),
        "http_cases": sum(1 for c in cases if c.protocol == "http"),
        "grpc_cases": sum(1 for c in cases if c.protocol == "grpc"),
        "refused": sum(1 for v in outcomes.values() if v == "refused"),
        "served_as_valid": sorted(k for k, v in outcomes.items() if v == "served"),
        "restarted": sum(1 for v in outcomes.values() if v == "restarted"),
        "failed_cases": {k: v for k, v in outcomes.items() if v.startswith("FAILED")},
        "restart_ready_s": restart_s,
        "valid_ok": load.count("ok"),
        "valid_wrong": load.count("wrong"),
        "valid_failed_during_restart": len(excused),
        "valid_failed_otherwise": [d for _, _, d in unexcused][:20],
        "valid_failed_otherwise_count": len(unexcused),
        # seconds from the end of the closest restart window to each such failure
        "valid_failed_otherwise_after_window_s": sorted(
            {round(min((e[0] - b for _, b in windows), default=-1), 1) for e in unexcused}
        )[:20],
        "outcomes": outcomes,
        "regions": sorted(regions | _regions(served)),
    }


def _regions(served: Served) -> set[str]:
    try:
        return served.regions()
    except (AssertionError, OSError):  # between a crash and the restart: no server to read
        return set()


def _server_pids(served: Served) -> list[int]:
    from gputok._triton_env import process_group

    pid = served.server_pid()
    return [pid, *process_group(pid)]


def _went_down(pids: list[int]) -> bool:
    """Did the case kill tritonserver or one of its stubs? A dying server takes a moment:
    look for 1.5 s (a stub's death shows at once, the server's within its teardown)."""
    from pathlib import Path

    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return True
            if state in ("Z", "X"):
                return True
        time.sleep(0.05)
    return False
