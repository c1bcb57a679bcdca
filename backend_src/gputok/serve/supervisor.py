"""Keep tritonserver up: restart it when it crashes or a Python-backend stub dies.

Triton 2.51 can be killed by one request (SIGSEGV on an HTTP body whose shape is
[1, 2^31, 2^31] or whose `data` nests 50,000 `[`; a gRPC request that kills a stub), and it never
restarts a dead stub while it keeps reporting ready. The supervisor watches the server and its
stubs every `poll_s`; on a death it logs the cause, kills what is left of the process group,
unlinks the shared-memory regions the server left in /dev/shm, waits a backoff and starts it
again on the same ports. More than `max_restarts` crashes within `window_s` is a crash loop: it
gives up with a message and exit code 4, so an outer supervisor (docker `--restart`, systemd)
sees a failure. docs/reliability.md has the measured times.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gputok.serve.procs import dead_stub_cause
from gputok.serve.triton import ServeError, TritonServer, stub_processes

EXIT_CRASH_LOOP = 4
EXIT_STUB_DIED = 3  # with max_restarts 0: a dead stub stops the server, as before supervision


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5  # crashes tolerated within window_s; 0 = never restart
    window_s: float = 300.0
    backoff_s: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0)  # then the last value again
    ready_timeout_s: float = 600.0
    poll_s: float = 0.5


def crash_cause(code: int | None, log_tail: str) -> str:
    """A one-line cause from tritonserver's exit code and its last log lines."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        what = f"tritonserver was killed by {name} (exit code {code})"
    else:
        what = f"tritonserver exited with code {code}"
    m = re.search(r"Signal \((\d+)\) received", log_tail)
    if m and (code is None or code >= 0):
        what += f" after Signal ({m.group(1)})"
    lines = log_tail.splitlines()
    # the crash's own words first (a signal, an uncaught exception), else Triton's last error
    hints = [x.strip() for x in lines if re.match(r"\s*(terminate called|what\(\)|Signal \()", x)]
    hints = hints or [x.strip() for x in lines if re.match(r"\s*E\d{4}", x)]
    return what + (f"; last error: {hints[-1][:300]}" if hints else "")


class Supervisor:
    """Runs `server` until `stop` is set; restarts it on crashes per `policy`."""

    def __init__(
        self,
        server: TritonServer,
        policy: RestartPolicy,
        stop: threading.Event,
        log: Callable[[str], None] | None = None,
        on_ready: Callable[[TritonServer], None] | None = None,
    ) -> None:
        self.server = server
        self.policy = policy
        self.stop = stop
        self.log = log or (lambda msg: print(f"gputok-serve: {msg}", file=sys.stderr, flush=True))
        self.on_ready = on_ready
        self.restarts = 0
        self.crashes: deque[float] = deque()

    def run(self) -> int:
        ever_ready = False
        try:
            while not self.stop.is_set():
                t0 = time.monotonic()
                self.server.start()
                cause = self._wait_ready()
                if cause is None and not self.stop.is_set():
                    if self.restarts:
                        self.log(f"ready again {time.monotonic() - t0:.1f} s after the restart")
                    ever_ready = True
                    if self.on_ready is not None:
                        self.on_ready(self.server)
                    cause = self._watch()
                if cause is None:  # asked to stop
                    return 0
                code = self.server.proc.poll()
                if not ever_ready and not _killed(code):
                    # Never came up and exited by itself (a model that does not load: exit 1)
                    # or timed out: a set-up error, not a crash to retry. A signal is a crash
                    # even here: Triton answers ready before our poll sees it, and a client's
                    # request can kill it in between (CI, 2026-11-29).
                    self.server.stop(timeout=5)
                    self.log(cause)
                    return code or 1
                code = self._after_crash(cause)
                if code is not None:
                    return code
        finally:
            self.server.stop()
        return 0

    def _wait_ready(self) -> str | None:
        """None once ready (or asked to stop), else why the server did not come up."""
        deadline = time.monotonic() + self.policy.ready_timeout_s
        next_track = 0.0
        while not self.stop.is_set():
            if self.server.proc.poll() is not None:
                self.server._pump and self.server._pump.join(timeout=5)
                return crash_cause(self.server.proc.returncode, "".join(self.server.tail))
            if time.monotonic() >= next_track:  # a crash before ready leaves regions too
                self.server.track_shm()  # a walk of /proc: every poll_s, not every 0.1 s
                next_track = time.monotonic() + self.policy.poll_s
            if self.server.is_ready():
                self.server.track_shm()
                return None
            if time.monotonic() > deadline:
                return f"tritonserver not ready after {self.policy.ready_timeout_s:.0f} s"
            self.stop.wait(0.1)
        return None

    def _watch(self) -> str | None:
        """Poll until the server or a stub dies (the cause) or `stop` is set (None)."""
        stubs = stub_processes(self.server.proc.pid)
        while not self.stop.wait(self.policy.poll_s):
            proc = self.server.proc
            if proc.poll() is not None:
                self.server._pump and self.server._pump.join(timeout=5)
                return crash_cause(proc.returncode, "".join(self.server.tail))
            self.server.track_shm()
            cause = dead_stub_cause(stubs)
            if cause is not None:
                return cause
        return None

    def _after_crash(self, cause: str) -> int | None:
        """Log, clean up, and decide: an exit code to give up with, or None to restart."""
        code = self.server.proc.returncode if self.server.proc.poll() is not None else None
        self.server.stop(timeout=5)  # kills what is left of the group, frees its regions
        n, size = self.server.last_freed
        self.log(f"{cause}; freed {n} shared-memory region(s) it left, {size / 2**20:.1f} MiB")
        now = time.monotonic()
        self.crashes.append(now)
        while self.crashes and now - self.crashes[0] > self.policy.window_s:
            self.crashes.popleft()
        if self.policy.max_restarts == 0:
            self.log("not restarting (--max-restarts 0)")
            return EXIT_STUB_DIED if "stub" in cause else (code or 1)
        if len(self.crashes) > self.policy.max_restarts:
            self.log(
                f"giving up: {len(self.crashes)} crashes within {self.policy.window_s:.0f} s "
                f"(--max-restarts {self.policy.max_restarts}); the last: {cause}. Fix the "
                "cause or let your supervisor restart gputok-serve (docs/reliability.md)."
            )
            return EXIT_CRASH_LOOP
        delay = self.policy.backoff_s[min(len(self.crashes), len(self.policy.backoff_s)) - 1]
        self.restarts += 1
        self.log(f"restarting tritonserver in {delay:g} s (restart {self.restarts})")
        self.stop.wait(delay)
        return None


def _killed(code: int | None) -> bool:
    """Whether tritonserver died of a signal (a crash), not by its own exit or not at all."""
    return code is not None and code < 0


__all__ = ["EXIT_CRASH_LOOP", "RestartPolicy", "ServeError", "Supervisor", "crash_cause"]
