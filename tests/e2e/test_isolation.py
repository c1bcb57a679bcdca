"""Request isolation (docs/reliability.md, "One malformed request, many clients"): while 8
clients send valid requests over HTTP and gRPC, BYTES tensors whose length prefix claims more
bytes than follow are sent over both protocols. gputok-serve refuses each before Triton's
dynamic batcher sees it (libgputok_triton_strings.so, preloaded), so each malformed request
fails alone (400 / INVALID_ARGUMENT) and no valid request fails, batched (the default) or
without the batcher (`--isolate-requests`). With `--no-string-check`, Triton 2.51 fails the
malformed request's batch-mates with its error: pinned here, so a Triton that fixes it shows up
as a failure (and the check is shown to be what keeps them apart)."""

from __future__ import annotations

import time

import pytest
from served import Served, ValidLoad, grpc_truncated_query, http_truncated_query

pytestmark = pytest.mark.e2e

PREFIXES = (0xFFFFFFFF, 100, 5, 2**31)
ROUNDS = 10  # x 4 prefixes = 40 malformed requests per protocol


def attack(s: Served) -> list[str]:
    answers = []
    for _ in range(ROUNDS):
        for prefix in PREFIXES:
            status, body = http_truncated_query(s.http, prefix)
            answers.append(f"http {status} {body[:80]}")
            answers.append(f"grpc {grpc_truncated_query(s.grpc, prefix)[:80]}")
            time.sleep(0.02)
    return answers


def run(tmp_path, ref, *flags: str) -> tuple[ValidLoad, list[str]]:
    s = Served(tmp_path, *flags)
    try:
        s.wait_ready(300)
        with ValidLoad(s.http, s.grpc, ref) as load:
            time.sleep(0.5)
            answers = attack(s)
            time.sleep(0.5)
        assert s.ready() and "restarting" not in s.text(), s.text()[-2000:]
    finally:
        s.close()
    print(
        f"\n{flags or 'default'}: {load.count('ok')} valid answered, {load.count('error')} "
        f"failed, {load.count('wrong')} wrong; malformed answered {sorted(set(a[:9] for a in answers))}"
    )
    return load, answers


@pytest.mark.parametrize("flags", [(), ("--isolate-requests",)], ids=["batched", "isolated"])
def test_malformed_strings_fail_alone(tmp_path, ref, flags):
    load, answers = run(tmp_path, ref, *flags)
    assert load.count("ok") > 100
    assert load.count("wrong") == 0
    assert load.errors() == []
    assert len(answers) == 2 * ROUNDS * len(PREFIXES)
    for a in answers:
        assert a.startswith(("http 400", "grpc INVALID_ARGUMENT")), a
        assert "incomplete string data" in a or "unexpected" in a or "expecting" in a, a


def test_batched_without_the_string_check_fails_batch_mates_on_triton_2_51(tmp_path, ref):
    """Why the string check is preloaded: the same run without it."""
    load, _ = run(tmp_path, ref, "--no-string-check")
    assert load.count("wrong") == 0
    assert load.errors(), "no batch-mate failed: Triton fixed it? update docs/reliability.md"
    assert all("incomplete string data" in e for e in load.errors()), load.errors()[:3]
