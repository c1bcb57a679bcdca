"""The fault harness's catalogue (tests/e2e/fault_harness.py sends it): 113 distinct malformed
requests, 77 over HTTP and 36 over gRPC, each a Case whose send() puts it on the wire, in the
order they are sent. Case.expect names the few odd requests Triton serves or answers with 500."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass

from served import (
    DEEP_NESTING,
    DEEP_NESTING_OUTSIDE_DATA,
    SHAPE_OVERFLOW,
    Served,
    grpc_raw,
    http_raw,
    truncated_bytes,
)

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


# The cases Triton 2.51's HTTP frontend alone answers with 500 (server and common at r24.10,
# unchanged on main in 2026): http_server.cc makes every error of its JSON wrapper (TritonJson:
# rapidjson's parse errors, MemberAsArray, IndexAsUInt, AsUInt, AsString, AsBool) INTERNAL,
# which HttpCodeFromError maps to 500. gputok-serve preloads libgputok_triton_codes.so, which
# makes them 400 (gputok.serve.preload); `--triton-json-500` keeps Triton's 500s
# (tests/e2e/test_json_codes.py checks both).
TRITON_JSON_500_CASES = frozenset(
    [f"http-not-json-{i}" for i in range(7)]
    + [f"http-wrong-json-{i}" for i in range(6)]
    + ["http-dtype-BOOL", "http-shape-[-1, 1]", "http-shape-[1, -1]", "http-data-number"]
    + ["http-data-null", "http-data-object", "http-bin-size-negative"]
)


def http_cases() -> list[Case]:
    c: list[Case] = []

    def add(name, send, expect=None):
        c.append(Case(f"http-{name}", "http", send, expect))

    for group in (_http_bodies, _http_fields, _http_binary, _http_detokenizer):
        group(add)
    return c


def _http_bodies(add: Callable) -> None:
    """Not JSON, or JSON of the wrong shape."""
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


def _http_fields(add: Callable) -> None:
    """JSON requests with one field wrong: model, version, input, output, datatype, shape,
    data, a limit, and the bodies that crash Triton itself."""
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


def _http_binary(add: Callable) -> None:
    """The binary-tensor extension: strings, sizes and header lengths that lie."""
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


def _http_detokenizer(add: Callable) -> None:
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


def grpc_cases() -> list[Case]:
    c: list[Case] = []

    def add(name, send, expect=None):
        c.append(Case(f"grpc-{name}", "grpc", send, expect))

    for group in (_grpc_raw_cases, _grpc_typed_cases, _grpc_detokenizer):
        group(add)
    return c


def _grpc_raw_cases(add: Callable) -> None:
    """Tokenizer requests whose raw_input_contents, datatype, shape, input or model is wrong."""
    t = "tokenizer"
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


def _grpc_typed_cases(add: Callable) -> None:
    """Tokenizer requests built field by field: typed contents, parameters, outputs."""
    t = "tokenizer"

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


def _grpc_detokenizer(add: Callable) -> None:
    d = "detokenizer"
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


def all_cases() -> list[Case]:
    cases = http_cases() + grpc_cases()
    names = [x.name for x in cases]
    assert len(set(names)) == len(names), "case names must be distinct"
    return cases
