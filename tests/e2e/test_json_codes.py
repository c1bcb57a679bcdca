"""A request body that is not JSON, or JSON of the wrong types, gets HTTP 400 from gputok-serve
(libgputok_triton_codes.so preloaded: gputok.serve.preload), and Triton 2.51's 500 with
`--triton-json-500`: each of the 20 such cases of the fault catalogue
(fault_cases.TRITON_JSON_500_CASES), against a real tritonserver; a valid request is answered
the same either way."""

from __future__ import annotations

import json
import urllib.request

import pytest
from fault_cases import TRITON_JSON_500_CASES, http_cases
from served import Served

pytestmark = pytest.mark.e2e

QUERY = {"inputs": [{"name": "QUERY", "shape": [1, 1], "datatype": "BYTES", "data": ["hello"]}]}


@pytest.mark.parametrize("keep_500", [False, True], ids=["default", "triton-json-500"])
def test_malformed_json_is_400_unless_told(tmp_path, keep_500):
    cases = [c for c in http_cases() if c.name in TRITON_JSON_500_CASES]
    assert len(cases) == len(TRITON_JSON_500_CASES) == 20
    s = Served(tmp_path, *(["--triton-json-500"] if keep_500 else []))
    try:
        s.wait_ready(300)
        answers = {c.name: c.send(s) for c in cases}
        url = f"http://127.0.0.1:{s.http}/v2/models/tokenizer/infer"
        with urllib.request.urlopen(url, data=json.dumps(QUERY).encode(), timeout=30) as r:
            ok = json.loads(r.read())
        assert s.ready()  # none of them hurt the server
    finally:
        s.close()
    want = 500 if keep_500 else 400
    wrong = {k: v for k, v in answers.items() if v[0] != want}
    assert wrong == {}
    # Triton's message is kept word for word: only the code changes
    for _status, body in answers.values():
        assert "failed to parse the request JSON buffer" in body or "Unable to parse " in body
    assert ok["outputs"][0]["data"] == [31373]
