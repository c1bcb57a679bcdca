"""Exit codes, URL parsing and error classification shared by the library and every subcommand.

One table holds for every `gputok-client` subcommand (docs/serving.md, "Exit codes"):
"""

from __future__ import annotations

import re
import socket
from urllib.parse import urlsplit

OK = 0
NOT_READY = 1  # the server answers, but it or a model is not ready (health)
INPUT = 2  # bad arguments, an unreadable file, or the server rejected the input (INVALID_ARG)
UNREACHABLE = 3  # nothing answered after --retries (down, restarting, timed out)
WRONG_PROTOCOL = 4  # the port speaks the other protocol (HTTP vs gRPC) or is not Triton
SERVER = 5  # the server failed the request (INTERNAL, a model it does not serve)

EXIT_CODES = {
    OK: "success",
    NOT_READY: "the server answers, but it or a model is not ready (health)",
    INPUT: "bad arguments or file, or the server rejected the input (INVALID_ARG)",
    UNREACHABLE: "the server could not be reached after --retries",
    WRONG_PROTOCOL: "the port speaks the other protocol (HTTP vs gRPC)",
    SERVER: "the server failed the request (INTERNAL error, model not served)",
}

DEFAULT_PORTS = {"http": 8000, "grpc": 8001}


class ClientError(RuntimeError):
    """A request failed; `code` is the CLI's exit code for it (the table above)."""

    def __init__(self, msg: str, code: int = INPUT):
        super().__init__(msg)
        self.code = code

    @property
    def retryable(self) -> bool:
        """The server was unreachable (not the input at fault): the same call may succeed later."""
        return self.code == UNREACHABLE


def parse_url(url: str | None, protocol: str | None) -> tuple[str, str]:
    """(protocol, "host:port") from `http://h:p`, `grpc://h:p` or `h:p` (+ protocol, default http).

    The scheme decides the protocol; a `protocol` that disagrees with it is an error.
    """
    if protocol not in (None, "http", "grpc"):
        raise ClientError(f"protocol must be http or grpc, not {protocol!r}")
    if not url:
        proto = protocol or "http"
        return proto, f"127.0.0.1:{DEFAULT_PORTS[proto]}"
    if "://" not in url:
        url = f"{protocol or 'http'}://{url}"
    elif protocol and not url.lower().startswith(protocol + "://"):
        raise ClientError(f"--url {url} names another protocol than --protocol {protocol}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "grpc"):
        raise ClientError(f"--url scheme must be http:// or grpc://, not {parts.scheme}://")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ClientError(f"--url takes host:port only, not a path: {url}")
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError as e:
        raise ClientError(f"--url {url}: {e}") from None
    if not parts.hostname:
        raise ClientError(f"--url {url} has no host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return scheme, f"{host}:{port}"


def speaks_http(hostport: str, timeout: float = 2.0) -> bool:
    """True when the port answers an HTTP/1.1 request (an HTTP port given to a gRPC client)."""
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as s:
            s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(5) == b"HTTP/"
    except (OSError, ValueError):
        return False


# A server that is stopping unloads its models before it closes its ports, so a request that
# arrives in between is answered "Request for unknown model: 'tokenizer' has no available
# versions" (seen over gRPC as NOT_FOUND, 2026-11-22). The model exists and comes back with the
# server: retry. A model that was never there is "... is not found" and is not retried.
_MODEL_UNLOADED = "has no available versions"
# CANCELLED: a stopping server cancels the gRPC calls in flight ("[StatusCode.CANCELLED]
# CANCELLED", 2026-11-23); this client never cancels its own, and tokenizing is idempotent.
_UNREACHABLE_MARKERS = (
    "cancelled",
    "unavailable",
    "connection",
    "refused",
    "reset",
    "broken pipe",
    "timed out",
    "deadline",
    "not ready",
)


def classify(e: Exception, protocol: str, hostport: str) -> tuple[int, str]:
    """(exit code, message) for an exception raised by tritonclient."""
    text = str(e)
    low = text.lower()
    status = str(getattr(e, "status", lambda: "")() or "").lower()
    if protocol == "http" and "expected http/" in low:
        # geventhttpclient's HTTPParseError('Expected HTTP/', 8): an HTTP/2 (gRPC) answer
        return WRONG_PROTOCOL, _wrong_protocol(hostport, "grpc")
    if protocol == "grpc" and "socket closed" in low and speaks_http(hostport):
        return WRONG_PROTOCOL, _wrong_protocol(hostport, "http")
    if _MODEL_UNLOADED in low:
        return UNREACHABLE, text
    if "restricted" in low or "unauthorized" in low:
        return INPUT, text + " (pass --api-key KEY or set GPUTOK_API_KEY; docs/security.md)"
    if "invalid" in status or "400" in status or "invalid_arg" in low:
        return INPUT, hint(text)
    if any(m in low or m in status for m in _UNREACHABLE_MARKERS) or isinstance(
        e, (ConnectionError, OSError)
    ):
        return UNREACHABLE, text
    return SERVER, text


def _wrong_protocol(hostport: str, other: str) -> str:
    names = {"http": "HTTP", "grpc": "gRPC"}
    mine = names["grpc" if other == "http" else "http"]
    return (
        f"{hostport} does not speak {mine}: it looks like Triton's {names[other]} port. "
        f"Use --url {other}://{hostport}, or the {mine} port that gputok-serve prints"
    )


_UTF8 = re.compile(r"invalid UTF-8 in text \d+ at byte offset \d+ \(byte 0x[0-9a-fA-F]+\)")
_SPECIAL = re.compile(r"disallowed special token '([^']*)'( in text \d+)?")


def hint(text: str) -> str:
    """Replace gputok's Python-keyword advice with the CLI flags and server settings that exist."""
    m = _UTF8.search(text)
    if m:
        return (
            f"{m.group(0)}: pass --errors replace to substitute U+FFFD (or set the tokenizer's "
            "utf8_errors to replace in its config.pbtxt)"
        )
    m = _SPECIAL.search(text)
    if m:
        tok = m.group(1)
        return (
            f"the input holds the special token {tok!r}{m.group(2) or ''}, which the server "
            "refuses by default: "
            f"pass --allowed-special {tok} (or all) to encode it as its special id, or set the "
            'tokenizer\'s disallowed_special to "" in its config.pbtxt to encode it as '
            "ordinary text"
        )
    return text
