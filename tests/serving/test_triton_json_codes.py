"""libgputok_triton_codes.so (backend_src/csrc/serve/triton_error_codes.cpp) and its wiring
(gputok.serve.json_codes), without a server: which of Triton's error messages it relabels from
INTERNAL to INVALID_ARG, that it is found in the build, and that gputok-serve and the Docker
entry point preload it unless told not to. tests/e2e/test_json_codes.py serves it for real."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from gputok.serve import container, json_codes
from gputok.serve.cli import build_parser, options

INTERNAL, NOT_FOUND, INVALID_ARG = 1, 2, 3

# What Triton 2.51's HTTP frontend creates for malformed bodies (the fault harness's messages,
# tests/e2e/fault_cases.py TRITON_JSON_500_CASES; TritonJson's readers in triton_json.h).
CLIENT_JSON_ERRORS = [
    "failed to parse the request JSON buffer: Invalid value. at 0",
    "failed to parse the request JSON buffer: Missing a name for object member. at 1",
    "attempt to access non-existing object member 'inputs'",
    "attempt to access non-existing array index '3'",
    "attempt to access JSON non-array as array",
    "attempt to access JSON non-unsigned-integer as unsigned-integer",
    "attempt to access JSON non-string as string",
    "attempt to access JSON non-boolean as boolean",
]
# Left as they are: Triton's own faults (its JSON writers), and anything not TritonJson's.
OTHER_ERRORS = [
    "attempt to add JSON member 'x' to non-object",
    "attempt to append JSON member to non-array",
    "Stub process 'tokenizer_0_0' is not healthy.",
    "Unable to parse 'inputs': something else",  # a wrapper's text alone is not a reader's
    "",
]


@pytest.fixture(scope="module")
def lib():
    so = ctypes.CDLL(str(json_codes.codes_library()))
    so.gputok_relabels_json_error.argtypes = [ctypes.c_int, ctypes.c_char_p]
    so.gputok_relabels_json_error.restype = ctypes.c_int
    return so


def test_the_build_has_the_library():
    lib = json_codes.codes_library()
    assert lib.name == json_codes.LIB_NAME and lib.stat().st_size > 0


@pytest.mark.parametrize("msg", CLIENT_JSON_ERRORS)
def test_json_reader_errors_are_relabelled(lib, msg):
    assert lib.gputok_relabels_json_error(INTERNAL, msg.encode()) == 1


@pytest.mark.parametrize("msg", OTHER_ERRORS)
def test_other_errors_are_not(lib, msg):
    assert lib.gputok_relabels_json_error(INTERNAL, msg.encode()) == 0


@pytest.mark.parametrize("code", [0, NOT_FOUND, INVALID_ARG, 4, 5, 6, 7])
def test_only_internal_is_relabelled(lib, code):
    assert lib.gputok_relabels_json_error(code, CLIENT_JSON_ERRORS[0].encode()) == 0


def test_a_null_message_is_not_relabelled(lib):
    assert lib.gputok_relabels_json_error(INTERNAL, None) == 0


def test_with_preload_puts_it_first_once():
    lib = Path("/x/libgputok_triton_codes.so")
    assert json_codes.with_preload({}, lib)["LD_PRELOAD"] == str(lib)
    env = json_codes.with_preload({"LD_PRELOAD": f"/a.so:{lib} /b.so", "K": "v"}, lib)
    assert env["LD_PRELOAD"] == f"{lib} /a.so /b.so" and env["K"] == "v"


def test_a_missing_library_names_the_way_out(monkeypatch):
    monkeypatch.setattr(json_codes, "LIB_NAME", "libno_such_thing.so")
    with pytest.raises(json_codes.MissingCodesLibrary, match="--triton-json-500"):
        json_codes.codes_library()


def test_gputok_serve_preloads_it_unless_told():
    repo = Path("/m")
    assert options(build_parser().parse_args([]), repo, None).json_errors_400
    assert not options(build_parser().parse_args(["--triton-json-500"]), repo, None).json_errors_400


def test_the_container_preloads_it_unless_told():
    lib = str(json_codes.codes_library())
    assert container.server_env({"LD_PRELOAD": "/a.so"})["LD_PRELOAD"] == f"{lib} /a.so"
    for keep in ("1", "true", "yes"):
        env = container.server_env({json_codes.KEEP_500_ENV: keep})
        assert "LD_PRELOAD" not in env
