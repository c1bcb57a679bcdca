"""The libraries preloaded into tritonserver (backend_src/csrc/serve/, gputok.serve.preload),
without a server: which of Triton's error messages libgputok_triton_codes.so relabels from
INTERNAL to INVALID_ARG; where libgputok_triton_strings.so's walk of a BYTES input finds its
last element cut short; that both are in the build; and that gputok-serve and the Docker entry
point preload them unless told not to. tests/e2e/test_json_codes.py and
tests/e2e/test_isolation.py serve them for real."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

import pytest

from gputok.serve import container, preload
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
    so = ctypes.CDLL(str(preload.library(preload.JSON_CODES)))
    so.gputok_relabels_json_error.argtypes = [ctypes.c_int, ctypes.c_char_p]
    so.gputok_relabels_json_error.restype = ctypes.c_int
    return so


@pytest.mark.parametrize("name", [preload.JSON_CODES, preload.STRING_CHECK])
def test_the_build_has_the_library(name):
    lib = preload.library(name)
    assert lib.name == name and lib.stat().st_size > 0


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


def test_with_preload_puts_them_first_once():
    a, b = Path("/x/liba.so"), Path("/x/libb.so")
    assert preload.with_preload({}, [a])["LD_PRELOAD"] == str(a)
    env = preload.with_preload({"LD_PRELOAD": f"/o.so:{a} /p.so", "K": "v"}, [a, b])
    assert env["LD_PRELOAD"] == f"{a} {b} /o.so /p.so" and env["K"] == "v"
    assert "LD_PRELOAD" not in preload.with_preload({}, [])


def test_a_missing_library_names_the_way_out():
    with pytest.raises(preload.MissingLibrary, match="make setup"):
        preload.library("libno_such_thing.so")


def test_gputok_serve_preloads_them_unless_told():
    def opts(*argv):
        return options(build_parser().parse_args(list(argv)), Path("/m"), None)

    assert opts().json_errors_400 and opts().check_strings
    assert not opts("--triton-json-500").json_errors_400 and opts("--triton-json-500").check_strings
    assert not opts("--no-string-check").check_strings and opts("--no-string-check").json_errors_400


def test_the_container_preloads_them_unless_told():
    codes, strings = (str(preload.library(n)) for n in (preload.JSON_CODES, preload.STRING_CHECK))
    env = container.server_env({"LD_PRELOAD": "/a.so"})
    assert env["LD_PRELOAD"] == f"{codes} {strings} /a.so"
    for keep in ("1", "true", "yes"):
        env = container.server_env({preload.KEEP_500_ENV: keep})
        assert env["LD_PRELOAD"] == strings
    env = container.server_env({preload.STRING_CHECK_ENV: "0"})
    assert env["LD_PRELOAD"] == codes
    env = container.server_env({preload.STRING_CHECK_ENV: "0", preload.KEEP_500_ENV: "1"})
    assert "LD_PRELOAD" not in env


# libgputok_triton_strings.so: core's walk of a BYTES input's elements (ValidateBytesInputs),
# and the bytes of the last element that are missing where the data ends inside it.


@pytest.fixture(scope="module")
def strings():
    so = ctypes.CDLL(str(preload.library(preload.STRING_CHECK)))
    so.gputok_missing_string_bytes.argtypes = [
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_size_t,
    ]
    so.gputok_missing_string_bytes.restype = ctypes.c_uint64
    return so


def missing(so, *buffers: bytes) -> int:
    keep = [ctypes.create_string_buffer(b, len(b)) for b in buffers]
    bases = (ctypes.c_void_p * len(keep))(*[ctypes.cast(k, ctypes.c_void_p) for k in keep])
    sizes = (ctypes.c_size_t * len(keep))(*[len(b) for b in buffers])
    return so.gputok_missing_string_bytes(bases, sizes, len(keep))


def elements(*texts: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(t)) + t for t in texts)


def test_whole_elements_miss_nothing(strings):
    assert missing(strings) == 0
    assert missing(strings, b"") == 0
    assert missing(strings, elements(b"hello")) == 0
    assert missing(strings, elements(b"", b"a", b"\xff" * 300)) == 0
    data = elements(b"hello", b"world", b"")
    for cut in range(1, len(data)):  # the same bytes in two buffers, cut anywhere
        assert missing(strings, data[:cut], data[cut:]) == 0, cut


@pytest.mark.parametrize("prefix", [0xFFFFFFFF, 2**31, 100, 5])
def test_a_truncated_last_element_is_found(strings, prefix):
    # the fault harness's attack: a length indicator that claims more bytes than follow
    body = struct.pack("<I", prefix) + b"abcd"
    assert missing(strings, body) == prefix - 4
    assert missing(strings, elements(b"ok") + body) == prefix - 4
    assert missing(strings, body[:6], body[6:]) == prefix - 4


def test_a_split_length_indicator_is_left_to_core(strings):
    # core refuses it itself ("incomplete string length indicator"); the walk stops there
    assert missing(strings, b"\x05\x00", b"\x00\x00abc") == 0
    assert missing(strings, elements(b"a") + b"\x05\x00") == 0
