"""The bad-input matrix: every case through HTTP and gRPC against the real server.

Each case sends one request, raw through tritonclient (so datatypes, shapes and input names can
be wrong), at the same moment as valid tokenizer requests and valid requests to the case's own
model, so that they can share a dynamic batch. A bad case must get INVALID_ARG (HTTP 400 /
gRPC INVALID_ARGUMENT) with a message naming the problem; a case that is valid (empty strings,
NUL bytes, `errors=replace`, a special-token policy that allows the text) must return exact
ids. Every valid batch-mate must succeed and be exact, and afterwards the next valid request
must be exact (the autouse fixture in conftest.py checks that the server is still ready).

Variant models (`tokenizer_replace`, `tokenizer_allow_all`, `tokenizer_ordinary`,
`detokenizer_strict`) exist only in the fixture's test repository (conftest.TEST_VARIANTS).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from bad_input_cases import (
    CASES,
    GOOD_TEXTS,
    Case,
    detok,
    ens,
    expect_completion,
    expect_ids,
    expect_text,
    gpt2,
    q,
)

pytestmark = pytest.mark.e2e


def _module(protocol: str):
    import tritonclient.grpc as g
    import tritonclient.http as h

    return h if protocol == "http" else g


def _infer(triton, protocol: str, model: str, inputs: list):
    """One raw inference on a fresh client (tritonclient's HTTP client is not thread-safe)."""
    m = _module(protocol)
    url = triton.http_url if protocol == "http" else triton.grpc_url
    c = m.InferenceServerClient(url)
    try:
        ins = []
        for name, arr, dt in inputs:
            x = m.InferInput(name, list(arr.shape), dt)
            x.set_data_from_numpy(arr)
            ins.append(x)
        return c.infer(model, ins)
    finally:
        c.close()


def _good_requests(ref, model: str) -> list[tuple[str, list, Callable]]:
    """Valid (model, inputs, check) requests to send alongside a case."""
    good = [("tokenizer", q(t.encode())(ref), expect_ids(t.encode())) for t in GOOD_TEXTS]
    if model.startswith("tokenizer_"):
        good += [(model, q(t.encode())(ref), expect_ids(t.encode())) for t in GOOD_TEXTS[:2]]
    elif model.startswith("detokenizer"):
        for t in GOOD_TEXTS[:2]:
            ids = ref.encode_ordinary(t)
            assert ids, "reference returned empty ids"
            good.append((model, detok([[ids]], [[len(ids)]])(ref), expect_text(t.encode())))
    elif model == "ensemble":
        good.append((model, ens(b"Once upon a time", 2)(ref), expect_completion))
    elif model == "gpt2":

        def gen_ok(r, ref):
            assert r.as_numpy("output_ids").shape[:2] == (1, 1)
            assert 1 <= int(r.as_numpy("sequence_length")[0, 0]) <= 2

        good.append((model, gpt2([[31373, 995]], [[2]], [[2]])(ref), gen_ok))
    return good


def _concurrently(fns):
    barrier = threading.Barrier(len(fns))

    def run(fn):
        barrier.wait()
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - returned for the test to inspect
            return e

    with ThreadPoolExecutor(len(fns)) as pool:
        return list(pool.map(run, fns))


def test_matrix_has_enough_cases():
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(triton, protocol, ref, case: Case):
    from tritonclient.utils import InferenceServerException

    inputs = case.inputs(ref)
    good = _good_requests(ref, case.model)
    fns = [lambda: _infer(triton, protocol, case.model, inputs)]
    fns += [lambda g=g: _infer(triton, protocol, g[0], g[1]) for g in good]
    out = _concurrently(fns)

    got = out[0]
    if case.error:
        assert isinstance(got, InferenceServerException), f"{case.id} succeeded: {got!r}"
        status = str(got.status())
        want_status = "400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT"
        assert status == want_status, f"status {status}: {got.message()}"
        print(f"{protocol} {case.id}: {got.message()}")  # shown with -s; docs/security.md
        msg = got.message().lower()
        for s in case.error:
            assert s.lower() in msg, f"{s!r} not in error message {got.message()!r}"
    else:
        assert not isinstance(got, Exception), f"{case.id} failed: {got}"
        case.check(got, ref)

    for (model, _, check), r in zip(good, out[1:], strict=True):
        assert not isinstance(r, Exception), f"valid batch-mate for {model} failed: {r}"
        check(r, ref)

    # the next valid request is exact
    after = _infer(triton, protocol, "tokenizer", q(b"hello world", b"after a bad request")(ref))
    expect_ids(b"hello world", b"after a bad request")(after, ref)
