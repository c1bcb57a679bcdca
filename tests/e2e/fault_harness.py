"""Fault injection against a real `gputok-serve`: a catalogue of malformed requests over HTTP
and gRPC, sent one after another while 8 clients send valid requests.

Every case must end one of three ways, recorded per case:
- `refused`: HTTP 4xx, or a gRPC status other than OK / INTERNAL / UNAVAILABLE / UNKNOWN;
- `json-500`: one of the 20 cases of TRITON_JSON_500_CASES (a body that is not JSON, or JSON
  whose fields have the wrong type), which Triton's HTTP frontend answers with 500: it reports
  the errors of its JSON wrapper as INTERNAL (see TRITON_JSON_500_CASES); a 500 to any other
  case fails;
- `restarted`: the request killed tritonserver or a stub and gputok-serve had it ready again
  within 30 s.
Valid requests must all succeed with tiktoken's ids, except those that failed while the server
was down for a restart. No Python-backend shared-memory region of any server of the run may be
left once it has stopped. Run by tests/e2e/test_fault_harness.py (figures with `-s`; set
GPUTOK_FAULTS_JSON=path to keep every case's outcome).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from served import (
    DEEP_NESTING,
    DEEP_NESTING_OUTSIDE_DATA,
    SHAPE_OVERFLOW,
    Served,
    ValidLoad,
    grpc_raw,
    http_raw,
    truncated_bytes,
)

READY_AGAIN_S = 30.0
I32 = "INT32"


def i32(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}i", *v)


def bstr(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(s)) + s for s in items)


@dataclass
class Case:
    name: str
    protocol: str  # http | grpc
    send: Callable[[Served], object]  # returns (status, body) for HTTP, a status string for gRPC
    # "served": Triton reads this odd request as a valid one and answers it (checked, so that
    # a change shows up); None: it must be refused or survived
    expect: str | None = None


def _post(body: bytes, model: str = "tokenizer", path: str = "infer"):
    def send(s: Served):
        import urllib.error
        import urllib.request

        url = f"http://127.0.0.1:{s.http}/v2/models/{model}/{path}"
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode("utf-8", "replace")[:200]
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")[:200]
        except OSError as e:
            return 0, repr(e)

    return send


def _json(obj, model: str = "tokenizer"):
    return _post(json.dumps(obj).encode(), model)


def _q(data, shape=(1, 1), dtype="BYTES", name="QUERY", **extra) -> dict:
    return {
        "inputs": [{"name": name, "shape": list(shape), "datatype": dtype, "data": data, **extra}]
    }


def _detok(tokens, t_shape, lengths, l_shape, t_dtype=I32, l_dtype=I32) -> dict:
    return {
        "inputs": [
            {"name": "TOKENS_BATCH", "shape": t_shape, "datatype": t_dtype, "data": tokens},
            {"name": "SEQUENCE_LENGTH", "shape": l_shape, "datatype": l_dtype, "data": lengths},
        ]
    }


def _bin(model: str, inputs: list[tuple[str, str, list[int], bytes]], declared=None, hlen=None):
    """HTTP binary extension; `declared` overrides binary_data_size, `hlen` the header length."""

    def send(s: Served):
        header = {
            "inputs": [
                {
                    "name": n,
                    "shape": shape,
                    "datatype": dt,
                    "parameters": {"binary_data_size": len(raw) if declared is None else declared},
                }
                for n, dt, shape, raw in inputs
            ]
        }
        payload = b"".join(raw for *_, raw in inputs)
        return http_raw(s.http, model, header, payload, header_length=hlen)

    return send


def _grpc(model: str, inputs: list[tuple[str, str, list[int], bytes]]):
    return lambda s: grpc_raw(s.grpc, model, inputs)


def _grpc_typed(model: str, build: Callable):
    """A gRPC request built field by field (typed contents, parameters, outputs)."""

    def send(s: Served):
        import grpc
        from tritonclient.grpc import service_pb2, service_pb2_grpc

        req = service_pb2.ModelInferRequest(model_name=model)
        build(req)
        with grpc.insecure_channel(f"127.0.0.1:{s.grpc}") as ch:
            try:
                service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelInfer(req, timeout=30)
            except grpc.RpcError as e:
                return f"{e.code().name}: {e.details()}"
        return "OK"

    return send


# The cases Triton's HTTP frontend answers with 500 (server and common at r24.10, unchanged on
# main in 2026): http_server.cc makes every error of its JSON wrapper (TritonJson: rapidjson's
# parse errors, MemberAsArray, IndexAsUInt, AsUInt, AsString, AsBool) INTERNAL, which
# HttpCodeFromError maps to 500. No model sees them and no option changes it (docs/reliability.md).
TRITON_JSON_500_CASES = frozenset(
    [f"http-not-json-{i}" for i in range(7)]
    + [f"http-wrong-json-{i}" for i in range(6)]
    + ["http-dtype-BOOL", "http-shape-[-1, 1]", "http-shape-[1, -1]", "http-data-number"]
    + ["http-data-null", "http-data-object", "http-bin-size-negative"]
)


def http_cases() -> list[Case]:
    c: list[Case] = []

    def add(name, send, expect=None):
        json_500 = f"http-{name}" in TRITON_JSON_500_CASES
        c.append(Case(f"http-{name}", "http", send, expect or ("json-500" if json_500 else None)))

    # not JSON, or JSON of the wrong shape
    # an empty body: Triton 2.51 passes it on as a request with no inputs; the tokenizer of
    # 2026-11-25 11:24 answered an empty row, the one on main at 12:00 refused it with 400
    add("empty-body", _post(b""), expect="refused-or-served")
    for i, body in enumerate(
        [b"{", b"[", b"x", b'{"inputs": [', b'{"inputs": [}', b"\xff\xfe", b'{"a":1}garbage']
    ):
        add(f"not-json-{i}", _post(body))
    for i, obj in enumerate(
        [None, 1, [], "s", {}, {"inputs": 5}, {"inputs": [5]}, {"inputs": [{}]}, {"inputs": []}]
    ):
        add(f"wrong-json-{i}", _json(obj))
    add("no-model", _json(_q(["a"]), model="no_such_model"))
    add("bad-version", _post(json.dumps(_q(["a"])).encode(), "tokenizer/versions/abc"))
    add("unknown-input", _json(_q(["a"], name="TEXT")))
    add("two-inputs", _json({"inputs": _q(["a"])["inputs"] * 2}))
    add("unknown-output", _json({**_q(["a"]), "outputs": [{"name": "NOPE"}]}))
    for dt in ("INT32", "FP32", "BOOL", "UINT8", "INT64", "FP16", "XYZ", ""):
        add(f"dtype-{dt or 'empty'}", _json(_q([1], dtype=dt)))
    for shape in ([], [0], [1], [2, 2], [-1, 1], [1, -1], [1, 1, 1], [2**63 - 1, 1], [257, 1]):
        add(f"shape-{shape}", _json(_q(["a"], shape=shape)))
    add("data-count-short", _json(_q(["a"], shape=(2, 1))))
    add("data-count-long", _json(_q(["a", "b", "c"], shape=(2, 1))))
    add("data-number", _json(_q([1])))
    add("data-null", _json(_q(None)))
    add("data-object", _json(_q({"a": 1})))
    add(
        "data-missing", _json({"inputs": [{"name": "QUERY", "shape": [1, 1], "datatype": "BYTES"}]})
    )
    add("data-nested-deeper", _json(_q([[["a"]]])), expect="served")  # Triton flattens `data`
    add("special-token", _json(_q(["a<|endoftext|>b"])))
    add("over-byte-limit", _json(_q(["a" * (4 * 2**20 + 1)])))
    add("rows-over-batch", _json(_q(["a"] * 300, shape=(300, 1))))
    add("param-weird", _json({**_q(["a"]), "parameters": {"x": [1, 2]}}))
    add("crash-shape-overflow", _post(SHAPE_OVERFLOW, "detokenizer"))
    add("crash-deep-nesting", _post(DEEP_NESTING))
    add("crash-deep-nesting-outside-data", _post(DEEP_NESTING_OUTSIDE_DATA))
    # the binary-tensor extension
    for prefix in (0xFFFFFFFF, 100, 5, 2**31):
        q = [("QUERY", "BYTES", [1, 1], truncated_bytes(prefix))]
        add(f"bin-truncated-{prefix}", _bin("tokenizer", q))
    add("bin-invalid-utf8", _bin("tokenizer", [("QUERY", "BYTES", [1, 1], bstr(b"a\xffb"))]))
    add(
        "bin-two-strings-one-row", _bin("tokenizer", [("QUERY", "BYTES", [1, 1], bstr(b"a", b"b"))])
    )
    add("bin-short-prefix", _bin("tokenizer", [("QUERY", "BYTES", [1, 1], b"\x01\x00")]))
    add(
        "bin-size-over-body",
        _bin("tokenizer", [("QUERY", "BYTES", [1, 1], bstr(b"a"))], declared=10**6),
    )
    add(
        "bin-size-negative",
        _bin("tokenizer", [("QUERY", "BYTES", [1, 1], bstr(b"a"))], declared=-5),
    )
    add(
        "bin-header-len-over",
        _bin("tokenizer", [("QUERY", "BYTES", [1, 1], bstr(b"a"))], hlen=10**6),
    )
    # a header length that is not a number: Triton reads the whole body as JSON, and the
    # binary part as trailing bytes; the 11:24 run (2026-11-25) answered it, runs of main from
    # 12:00 on refused it with a 4xx. Either is safe.
    add(
        "bin-header-len-junk",
        _bin("tokenizer", [("QUERY", "BYTES", [1, 1], bstr(b"a"))], hlen="x"),
        expect="refused-or-served",
    )
    # detokenizer
    d = "detokenizer"
    add("detok-negative-id", _json(_detok([-1], [1, 1, 1], [1], [1, 1]), d))
    add("detok-id-too-big", _json(_detok([50257], [1, 1, 1], [1], [1, 1]), d))
    add("detok-id-int-max", _json(_detok([2**31 - 1], [1, 1, 1], [1], [1, 1]), d))
    add("detok-length-past-row", _json(_detok([1, 2], [1, 1, 2], [3], [1, 1]), d))
    add("detok-length-negative", _json(_detok([1, 2], [1, 1, 2], [-1], [1, 1]), d))
    add("detok-beams-disagree", _json(_detok([1, 2], [1, 2, 1], [1], [1, 1]), d))
    add("detok-batch-disagree", _json(_detok([1, 2], [2, 1, 1], [1], [1, 1]), d))
    add("detok-fp32-tokens", _json(_detok([1.5], [1, 1, 1], [1], [1, 1], t_dtype="FP32"), d))
    add("detok-int64-lengths", _json(_detok([1], [1, 1, 1], [1], [1, 1], l_dtype="INT64"), d))
    add(
        "detok-missing-lengths",
        _json({"inputs": _detok([1], [1, 1, 1], [1], [1, 1])["inputs"][:1]}, d),
    )
    add(
        "detok-bin-short",
        _bin(
            d, [("TOKENS_BATCH", I32, [1, 1, 2], i32(1)), ("SEQUENCE_LENGTH", I32, [1, 1], i32(1))]
        ),
    )
    add(
        "detok-bin-long",
        _bin(
            d,
            [
                ("TOKENS_BATCH", I32, [1, 1, 1], i32(1, 2, 3)),
                ("SEQUENCE_LENGTH", I32, [1, 1], i32(1)),
            ],
        ),
    )
    add(
        "detok-bin-empty-huge-shape",
        _bin(
            d, [("TOKENS_BATCH", I32, [1, 1, 2**40], b""), ("SEQUENCE_LENGTH", I32, [1, 1], i32(1))]
        ),
    )
    return c


def grpc_cases() -> list[Case]:
    c: list[Case] = []

    def add(name, send, expect=None):
        c.append(Case(f"grpc-{name}", "grpc", send, expect))

    t, d = "tokenizer", "detokenizer"
    for prefix in (0xFFFFFFFF, 100, 5, 2**31):
        add(
            f"raw-truncated-{prefix}",
            _grpc(t, [("QUERY", "BYTES", [1, 1], truncated_bytes(prefix))]),
        )
    add("raw-invalid-utf8", _grpc(t, [("QUERY", "BYTES", [1, 1], bstr(b"\xc3\x28"))]))
    add("raw-two-strings-one-row", _grpc(t, [("QUERY", "BYTES", [1, 1], bstr(b"a", b"b"))]))
    add("raw-short-prefix", _grpc(t, [("QUERY", "BYTES", [1, 1], b"\x01")]))
    add("raw-empty", _grpc(t, [("QUERY", "BYTES", [1, 1], b"")]))
    add("raw-special-token", _grpc(t, [("QUERY", "BYTES", [1, 1], bstr(b"<|endoftext|>"))]))
    add("raw-wrong-dtype", _grpc(t, [("QUERY", I32, [1, 1], i32(1))]))
    add("raw-unknown-dtype", _grpc(t, [("QUERY", "NOPE", [1, 1], bstr(b"a"))]))
    add("raw-shape-3d", _grpc(t, [("QUERY", "BYTES", [1, 1, 1], bstr(b"a"))]))
    add("raw-shape-negative", _grpc(t, [("QUERY", "BYTES", [-1, 1], bstr(b"a"))]))
    add("raw-shape-huge", _grpc(t, [("QUERY", "BYTES", [2**62, 1], bstr(b"a"))]))
    add("raw-rows-over-batch", _grpc(t, [("QUERY", "BYTES", [300, 1], bstr(*[b"a"] * 300))]))
    add("raw-unknown-input", _grpc(t, [("TEXT", "BYTES", [1, 1], bstr(b"a"))]))
    add("raw-no-model", _grpc("no_such_model", [("QUERY", "BYTES", [1, 1], bstr(b"a"))]))
    add("raw-two-inputs", _grpc(t, [("QUERY", "BYTES", [1, 1], bstr(b"a"))] * 2))

    def extra_raw(req):
        q = req.inputs.add(name="QUERY", datatype="BYTES")
        q.shape.extend([1, 1])
        req.raw_input_contents.extend([bstr(b"a"), bstr(b"b")])

    add("raw-extra-contents", _grpc_typed(t, extra_raw), expect="served")  # extra ignored

    def no_raw(req):
        q = req.inputs.add(name="QUERY", datatype="BYTES")
        q.shape.extend([1, 1])

    add("no-contents", _grpc_typed(t, no_raw))

    def typed_and_raw(req):
        q = req.inputs.add(name="QUERY", datatype="BYTES")
        q.shape.extend([1, 1])
        q.contents.bytes_contents.append(b"a")
        req.raw_input_contents.append(bstr(b"a"))

    add("typed-and-raw", _grpc_typed(t, typed_and_raw))

    def int_for_bytes(req):
        q = req.inputs.add(name="QUERY", datatype="BYTES")
        q.shape.extend([1, 1])
        q.contents.int_contents.append(7)

    add("int-contents-for-bytes", _grpc_typed(t, int_for_bytes))

    def typed_count(req):
        q = req.inputs.add(name="QUERY", datatype="BYTES")
        q.shape.extend([2, 1])
        q.contents.bytes_contents.append(b"a")

    add("typed-count-short", _grpc_typed(t, typed_count))

    def unknown_output(req):
        q = req.inputs.add(name="QUERY", datatype="BYTES")
        q.shape.extend([1, 1])
        q.contents.bytes_contents.append(b"a")
        req.outputs.add(name="NOPE")

    add("unknown-output", _grpc_typed(t, unknown_output))

    def bad_version(req):
        req.model_version = "abc"
        no_raw(req)

    add("bad-version", _grpc_typed(t, bad_version))
    ln = ("SEQUENCE_LENGTH", I32, [1, 1], i32(1))
    add("detok-raw-short", _grpc(d, [("TOKENS_BATCH", I32, [1, 1, 2], i32(1)), ln]))
    add("detok-raw-long", _grpc(d, [("TOKENS_BATCH", I32, [1, 1, 1], i32(1, 2)), ln]))
    add("detok-raw-odd-bytes", _grpc(d, [("TOKENS_BATCH", I32, [1, 1, 1], b"\x01\x02\x03"), ln]))
    add("detok-negative-id", _grpc(d, [("TOKENS_BATCH", I32, [1, 1, 1], i32(-5)), ln]))
    add("detok-id-too-big", _grpc(d, [("TOKENS_BATCH", I32, [1, 1, 1], i32(60000)), ln]))
    add(
        "detok-length-past-row",
        _grpc(
            d, [("TOKENS_BATCH", I32, [1, 1, 1], i32(1)), ("SEQUENCE_LENGTH", I32, [1, 1], i32(9))]
        ),
    )
    add("detok-batch-disagree", _grpc(d, [("TOKENS_BATCH", I32, [2, 1, 1], i32(1, 2)), ln]))
    add("detok-wrong-dtype", _grpc(d, [("TOKENS_BATCH", "FP32", [1, 1, 1], i32(1)), ln]))
    add("detok-missing-lengths", _grpc(d, [("TOKENS_BATCH", I32, [1, 1, 1], i32(1))]))
    add("detok-shape-overflow", _grpc(d, [("TOKENS_BATCH", I32, [1, 2**31, 2**31], i32(1)), ln]))
    add("crash-stub-shape-2^62", _grpc(d, [("TOKENS_BATCH", I32, [1, 1, 2**62], b""), ln]))
    return c


def all_cases() -> list[Case]:
    cases = http_cases() + grpc_cases()
    names = [x.name for x in cases]
    assert len(set(names)) == len(names), "case names must be distinct"
    return cases


REFUSED_GRPC = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "OUT_OF_RANGE",
    "FAILED_PRECONDITION",
    "UNIMPLEMENTED",
    "RESOURCE_EXHAUSTED",
)
# Triton 2.51's HTTP frontend answers errors of its own JSON handling (a body that is not JSON,
# or JSON whose fields have the wrong type) with 500: TritonJson's errors are INTERNAL.
TRITON_JSON_500 = ("failed to parse the request JSON buffer", "Unable to parse ")


def classify(case: Case, answer, restarted: bool) -> str:
    if restarted:
        return "restarted"
    if case.protocol == "http":
        status, body = answer
        json_500 = case.expect == "json-500" and any(m in body for m in TRITON_JSON_500)
        outcome = (
            "refused"
            if 400 <= status < 500
            else "json-500"
            if status == 500 and json_500
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
        "json_500": sum(1 for v in outcomes.values() if v == "json-500"),
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
