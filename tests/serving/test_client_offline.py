"""gputok-client without a server: URLs, exit codes, hints, arguments, output files, request plans.

The same points against a real server are in tests/e2e/test_client_cli.py.
"""

from __future__ import annotations

import argparse
import os
import stat

import numpy as np
import pytest

from gputok_client import errors
from gputok_client.cli import _save_atomically, build_parser, main
from gputok_client.errors import ClientError, parse_url
from gputok_client.plan import Limits, allowed_specials, make_plan


@pytest.mark.parametrize(
    "url, protocol, want",
    [
        ("http://127.0.0.1:8000", None, ("http", "127.0.0.1:8000")),
        ("grpc://127.0.0.1:8001", None, ("grpc", "127.0.0.1:8001")),
        ("http://127.0.0.1:8000/", None, ("http", "127.0.0.1:8000")),
        ("GRPC://localhost:9", "grpc", ("grpc", "localhost:9")),
        ("127.0.0.1:8000", None, ("http", "127.0.0.1:8000")),
        ("127.0.0.1:8001", "grpc", ("grpc", "127.0.0.1:8001")),
        ("grpc://h", None, ("grpc", "h:8001")),
        (None, "grpc", ("grpc", "127.0.0.1:8001")),
        (None, None, ("http", "127.0.0.1:8000")),
        ("http://[::1]:8000", None, ("http", "[::1]:8000")),
    ],
)
def test_regression_url_scheme_picks_the_protocol(url, protocol, want):
    """gputok-serve prints `http://127.0.0.1:8000`; pasted into --url it failed with
    tritonclient's "url should not include the scheme" and an AttributeError from its __del__."""
    assert parse_url(url, protocol) == want


@pytest.mark.parametrize(
    "url, protocol, match",
    [
        ("ftp://h:1", None, "scheme must be http:// or grpc://"),
        ("http://h:1", "grpc", "names another protocol"),
        ("http://h:1/v2/models", None, "host:port only"),
        ("http://h:notaport", None, "notaport"),
    ],
)
def test_bad_urls_are_input_errors(url, protocol, match):
    with pytest.raises(ClientError, match=match) as ei:
        parse_url(url, protocol)
    assert ei.value.code == errors.INPUT


def test_health_of_a_server_that_is_down_exits_3_like_tokenize(capsys):
    """One exit-code table: `health` exited 1 against a server that is down, `tokenize` 3."""
    from gputok._triton_env import free_port

    port = free_port()
    assert main(["--url", f"http://127.0.0.1:{port}", "health"]) == errors.UNREACHABLE
    assert '"live": false' in capsys.readouterr().out
    rc = main(["--url", f"http://127.0.0.1:{port}", "--retries", "0", "tokenize", "x"])
    assert rc == errors.UNREACHABLE


def test_wrong_protocol_is_its_own_exit_code():
    """HTTP to a gRPC port: geventhttpclient's ('Expected HTTP/', 8) was exit 2 (input rejected)."""
    e = type("HTTPParseError", (Exception,), {})("Expected HTTP/", 8)
    code, msg = errors.classify(e, "http", "127.0.0.1:8001")
    assert code == errors.WRONG_PROTOCOL
    assert "--url grpc://127.0.0.1:8001" in msg


def test_exit_codes_are_distinct_and_in_the_help():
    assert sorted(errors.EXIT_CODES) == [0, 1, 2, 3, 4, 5]
    text = build_parser().format_help()
    for code, meaning in errors.EXIT_CODES.items():
        assert f"{code}  {meaning}" in text


def test_hints_name_flags_that_exist():
    """gputok's messages advise Python keywords (errors='replace', allowed_special={...});
    the CLI's must name its own flags, and those flags must exist."""
    utf8 = "invalid UTF-8 in text 0 at byte offset 3 (byte 0xff); pass errors='replace' to sub"
    special = (
        "Encountered text corresponding to disallowed special token '<|endoftext|>' in text 2."
        "\nIf you want ... `allowed_special={'<|endoftext|>', ...}`."
    )
    tokenize = build_parser()._subparsers._group_actions[0].choices["tokenize"]
    flags = {s for a in tokenize._actions for s in a.option_strings}
    for msg, flag in ((utf8, "--errors"), (special, "--allowed-special")):
        out = errors.hint(msg)
        assert flag in out and flag in flags
        assert "errors='replace'" not in out and "allowed_special={" not in out


def test_every_argument_has_help():
    parser = build_parser()
    parsers = [parser, *parser._subparsers._group_actions[0].choices.values()]
    missing = [
        f"{p.prog} {a.dest}"
        for p in parsers
        for a in p._actions
        if not isinstance(a, argparse._SubParsersAction) and not a.help
    ]
    assert not missing


def test_text_and_file_together_are_refused(tmp_path, capsys):
    """`tokenize TEXT --file F` silently ignored TEXT."""
    f = tmp_path / "in.txt"
    f.write_text("hello")
    assert main(["--url", "127.0.0.1:1", "tokenize", "other", "--file", str(f)]) == errors.INPUT
    assert "either TEXT or --file" in capsys.readouterr().err


def test_output_files_get_the_umask_mode(tmp_path):
    """mkstemp's 0600 leaked into every output file; open() would give 0666 less the umask."""
    old = os.umask(0o022)
    try:
        _save_atomically(tmp_path / "ids.npy", np.arange(3, dtype=np.int32))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ids.npy").stat().st_mode) == 0o644
    assert np.load(tmp_path / "ids.npy").tolist() == [0, 1, 2]


def test_plan_fits_the_server_limits_and_stitches_in_order():
    rows = [b"hello world " * 50, b"", b"x<|endoftext|>y", b"short"]
    plan = make_plan(rows, target=64, hard_max=128, specials=allowed_specials("all"))
    lim = Limits(rows=3, bytes=200)
    groups = plan.groups(lim)
    assert [i for g in groups for i in g] == list(range(len(plan.pieces)))
    for g in groups:
        assert len(g) <= 3 and sum(plan.pieces[i][2] - plan.pieces[i][1] for i in g) <= 200
    assert all(b - a <= 128 for _, a, b in plan.pieces)
    fake = [np.array([i], np.int32) for i in range(len(plan.pieces))]
    out = plan.assemble(fake)
    assert len(out) == 4 and out[1].size == 0
    assert 50256 in out[2].tolist() and out[2].tolist().index(50256) == 1


def test_allowed_special_values():
    assert allowed_specials("") == {}
    assert allowed_specials("all") == {b"<|endoftext|>": 50256}
    assert allowed_specials("<|endoftext|>") == {b"<|endoftext|>": 50256}
    with pytest.raises(ValueError, match="unknown special token"):
        allowed_specials("<|fim|>")
