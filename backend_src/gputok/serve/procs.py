"""Ports, processes and process memory, read from the OS: free ports for a server, the
process group and the Python-backend stubs of a tritonserver (Linux /proc), and blanking the
API key in a child's argv.
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

# tritonserver prints nothing before it has parsed its options, so from its first line of
# output on, the key can be blanked in its argv (TritonServer.start).
KEY_MASK = "*"


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on (or holds) the port. SO_REUSEADDR, as Triton's own
    listeners set it: without it, the connections a just-stopped server closed (TIME_WAIT, up
    to 60 s) made a restart on the same port fail with "already in use" (
    tests/e2e/test_restart.py), although tritonserver itself could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_ports(n: int = 3, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct free ports, ascending (for a server's HTTP, gRPC and metrics ports)."""
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port(host))
    return sorted(ports)


def _processes() -> Iterator[tuple[Path, int, int]]:
    """(/proc entry, parent pid, process group) of every process (Linux; none elsewhere)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            yield entry, int(fields[1]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue


def process_group(pgid: int) -> list[int]:
    """Pids of the processes in process group `pgid` (Linux /proc; empty elsewhere)."""
    return [int(entry.name) for entry, _, group in _processes() if group == pgid]


STUB_COMM = "triton_python_b"  # the stub's name as /proc/PID/comm keeps it (15 bytes)
DEAD_STUB = "unknown (a stub found dead)"


def stub_processes(server_pid: int) -> dict[int, str]:
    """{pid: model} of the Python-backend stubs that tritonserver `server_pid` started (Linux
    /proc; empty elsewhere). The stub's command line names the model's folder. A stub that
    died is a zombie Triton 2.51 never reaps, with an empty command line: it is listed by its
    name, as DEAD_STUB, so a stub killed before the supervisor first looks (a client can
    reach Triton as soon as it is ready) is still seen dead."""
    out: dict[int, str] = {}
    for entry, ppid, _ in _processes():
        if ppid != server_pid:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv == [b""] and (entry / "comm").read_text().strip() == STUB_COMM:
                out[int(entry.name)] = DEAD_STUB
                continue
        except OSError:
            continue
        if argv and argv[0].endswith(b"triton_python_backend_stub"):
            model = (
                Path(argv[1].decode(errors="replace")).parent.parent.name if len(argv) > 1 else "?"
            )
            out[int(entry.name)] = model
    return out


def alive(pid: int) -> bool:
    """Whether process `pid` runs: a zombie is dead (a stub Triton has not reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def dead_stub_cause(stubs: dict[int, str]) -> str | None:
    """Why the server can no longer serve, when a stub of `stubs` ({pid: model}) has died;
    else None. Shared by gputok-serve's supervisor and the Docker entry point."""
    dead = sorted({model for pid, model in stubs.items() if not alive(pid)})
    if not dead:
        return None
    return (
        f"the Python-backend stub of model(s) {', '.join(dead)} died; Triton 2.51 does not "
        "restart a stub and keeps reporting ready while every request to it fails"
    )


def scrub_argv(pid: int, secret: str) -> int:
    """Overwrite every copy of `secret` in process `pid`'s argv with `KEY_MASK`s, in place, so
    /proc/PID/cmdline (readable by every local user) no longer shows it. Returns how many
    copies were blanked. tritonserver 2.51 takes the restricted-API key only as an argument and
    copies it into its own strings while parsing, so blanking the original afterwards is safe.
    Needs ptrace access to `pid` (our own child qualifies); raises OSError otherwise."""
    if not secret:
        return 0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    arg_start, arg_end = int(fields[45]), int(fields[46])  # stat fields 48 and 49
    needle = secret.encode()
    done = 0
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
        mem.seek(arg_start)
        args = mem.read(arg_end - arg_start)
        at = args.find(needle)
        while at >= 0:
            mem.seek(arg_start + at)
            mem.write(KEY_MASK.encode() * len(needle))
            done += 1
            at = args.find(needle, at + len(needle))
    return done


def die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to send SIGTERM when the parent exits."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except OSError:
        pass  # not Linux/glibc: the atexit-free path is then only SIGTERM/Ctrl-C handling


def wait_group_gone(pgid: int, timeout: float) -> None:
    """Wait until no process of group `pgid` is left (a SIGKILLed stub may take a moment to
    exit, and its regions must not be unlinked while it could still map them anew)."""
    deadline = time.monotonic() + timeout
    while process_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
