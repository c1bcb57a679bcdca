"""gputok-serve's supervision without a real server: the crash cause, the restart and
crash-loop decisions, freeing only a dead server's shared memory, the API key's sources, and
blanking the key in a child's command line. The real crashes are in tests/e2e/test_supervisor.py."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from gputok import _triton_env as te
from gputok.serve import cli, procs, shm
from gputok.serve.supervisor import EXIT_CRASH_LOOP, RestartPolicy, Supervisor, crash_cause


def test_crash_cause_names_the_signal_and_the_last_error():
    tail = 'I1125 model.py] "settings utf8_errors=replace"\nSignal (11) received.\n'
    assert crash_cause(-11, tail).startswith("tritonserver was killed by SIGSEGV (exit code -11)")
    assert "last error: Signal (11) received." in crash_cause(-11, tail)
    # an info line that merely contains the word "error" is not an error
    assert "utf8_errors" not in crash_cause(-11, tail)
    assert (
        crash_cause(1, "E1125 x] boom\n")
        == "tritonserver exited with code 1; last error: E1125 x] boom"
    )


class FakeServer:
    """Stands in for TritonServer: each start() runs `script` (a shell command) as the server;
    it is 'ready' while alive."""

    def __init__(self, scripts: list[str]):
        self.scripts = scripts
        self.starts = 0
        self.proc: subprocess.Popen | None = None
        self.tail: list[str] = []
        self._pump = None
        self.shm_regions: set[str] = set()
        self.last_freed = (0, 0)
        self.stops = 0

    def start(self):
        script = self.scripts[min(self.starts, len(self.scripts) - 1)]
        self.starts += 1
        self.proc = subprocess.Popen(["sh", "-c", script])
        return self

    def is_ready(self):
        return self.proc.poll() is None

    def track_shm(self):
        return self.shm_regions

    def stop(self, timeout=30.0):
        self.stops += 1
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        return self.proc.returncode


FAST = RestartPolicy(max_restarts=2, window_s=60, backoff_s=(0.01,), poll_s=0.02)
SEGV_AFTER_A_WHILE = "sleep 0.3; kill -SEGV $$"


def run_supervisor(server, policy, stop_after: float | None = None):
    logs: list[str] = []
    stop = threading.Event()
    if stop_after is not None:
        threading.Timer(stop_after, stop.set).start()
    code = Supervisor(server, policy, stop, log=logs.append).run()
    return code, logs


def test_restarts_after_a_crash_then_stops_cleanly():
    server = FakeServer([SEGV_AFTER_A_WHILE, "sleep 30"])
    code, logs = run_supervisor(server, FAST, stop_after=2.0)
    assert code == 0
    assert server.starts == 2, logs
    assert any("killed by SIGSEGV" in m for m in logs), logs
    assert any("restarting tritonserver" in m for m in logs), logs
    assert server.proc.poll() is not None  # stopped at the end


def test_crash_loop_gives_up_after_max_restarts():
    server = FakeServer([SEGV_AFTER_A_WHILE])
    t0 = time.monotonic()
    code, logs = run_supervisor(server, FAST)
    assert code == EXIT_CRASH_LOOP
    assert server.starts == FAST.max_restarts + 1, logs
    assert "giving up: 3 crashes within 60 s (--max-restarts 2)" in logs[-1]
    assert time.monotonic() - t0 < 20


def test_max_restarts_zero_never_restarts():
    server = FakeServer([SEGV_AFTER_A_WHILE])
    code, logs = run_supervisor(server, RestartPolicy(max_restarts=0, poll_s=0.02))
    assert server.starts == 1 and code == -11, logs


def test_a_server_that_never_came_up_is_not_retried():
    """A set-up error (a model that fails to load: exit 1 before ready) fails fast."""
    server = FakeServer(["exit 1"])
    server.is_ready = lambda: False
    code, logs = run_supervisor(server, FAST)
    assert code == 1 and server.starts == 1, logs


def test_a_crash_before_the_supervisor_saw_ready_is_restarted():
    """Regression (CI, 2026-11-29): Triton answered ready to a client before the supervisor's
    poll saw it, the client's request killed it (SIGSEGV), and gputok-serve took the crash
    for a set-up error and stopped. A death by a signal is a crash whenever it comes."""
    server = FakeServer(["kill -SEGV $$", "sleep 30"])
    server.is_ready = lambda: server.starts > 1 and server.proc.poll() is None
    code, logs = run_supervisor(server, FAST, stop_after=2.0)
    assert code == 0 and server.starts == 2, logs
    assert any("killed by SIGSEGV" in m for m in logs), logs
    assert any(m.startswith("ready again") for m in logs), logs


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")
def test_a_stub_dead_before_the_first_look_is_seen():
    """Regression: a stub killed before the supervisor first listed the stubs (a client can
    reach Triton as soon as it is ready) is a zombie with an empty command line; it was not
    listed, so its death was never seen and Triton kept answering ready. Measured on Triton
    2.51: a SIGKILLed stub stays a zombie named triton_python_b."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import ctypes; ctypes.CDLL(None).prctl(15, b'triton_python_b', 0, 0, 0)",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while procs.alive(child.pid):  # until it is a zombie (never reaped before wait())
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)
        assert Path(f"/proc/{child.pid}").exists(), "reaped: not a zombie"
        assert procs.stub_processes(os.getpid()) == {child.pid: procs.DEAD_STUB}
    finally:
        child.wait()


@pytest.fixture
def region():
    """A fake Python-backend region in /dev/shm, removed afterwards whatever happens."""
    if not shm.SHM_DIR.is_dir():
        pytest.skip("needs /dev/shm")
    name = f"{shm.PREFIX}test-{uuid.uuid4()}"
    path = shm.SHM_DIR / name
    path.write_bytes(b"\0" * 4096)
    yield name
    path.unlink(missing_ok=True)


def test_regions_of_a_process_are_found_and_only_they_are_freed(region, tmp_path):
    """A process that maps a region (as the server does) or names it in its arguments (as a
    stub does) is found to use it; unlinking frees exactly the regions named, and never a file
    without the backend's prefix."""
    import os

    mapper = subprocess.Popen(  # the path comes through the environment: found by its maps
        [
            sys.executable,
            "-c",
            "import mmap,os,time; f=open(os.environ['REGION'],'r+b'); m=mmap.mmap(f.fileno(),4096); "
            "print('mapped',flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "REGION": str(shm.SHM_DIR / region)},
    )
    namer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", region])
    try:
        assert mapper.stdout.readline().strip() == "mapped"
        assert region in shm.regions_of([mapper.pid])
        assert region in shm.regions_of([namer.pid])
        assert shm.regions_of([os.getpid()]) == set()
    finally:
        for child in (mapper, namer):
            child.kill()
            child.wait()
    other = tmp_path / "not-a-region"
    other.write_text("x")
    assert shm.unlink_regions([region, "../" + region, "not-a-region"], shm.SHM_DIR) == (1, 4096)
    assert not (shm.SHM_DIR / region).exists()
    assert shm.unlink_regions(["not-a-region"], tmp_path) == (0, 0)
    assert other.exists()
    assert shm.unlink_regions([region]) == (0, 0)  # already gone: nothing, no error


def test_key_never_from_the_command_line(tmp_path, monkeypatch):
    monkeypatch.delenv(cli.KEY_ENV, raising=False)
    parse = cli.build_parser().parse_args
    with pytest.raises(te.ServeError, match="readable by every local user"):
        cli.read_key(parse(["--api-key", "s3cret"]))
    key_file = tmp_path / "key"
    key_file.write_text("s3cret\n")
    assert cli.read_key(parse(["--api-key-file", str(key_file)])) == "s3cret"
    monkeypatch.setenv(cli.KEY_ENV, "from-env")
    assert cli.read_key(parse([])) == "from-env"
    key_file.write_text("a,b")
    with pytest.raises(te.ServeError, match="may not contain"):
        cli.read_key(parse(["--api-key-file", str(key_file)]))
    monkeypatch.delenv(cli.KEY_ENV)
    assert cli.read_key(parse([])) is None


def test_metrics_stay_on_loopback_when_host_is_public():
    args = cli.build_parser().parse_args(["--host", "0.0.0.0"])
    cmd = te.server_command(te.find_dist(), Path("/b"), cli.options(args, Path("/m"), None))
    assert "--http-address=0.0.0.0" in cmd and "--grpc-address=0.0.0.0" in cmd
    assert "--metrics-address=127.0.0.1" in cmd
    args = cli.build_parser().parse_args(["--host", "0.0.0.0", "--metrics-host", "0.0.0.0"])
    cmd = te.server_command(te.find_dist(), Path("/b"), cli.options(args, Path("/m"), None))
    assert "--metrics-address=0.0.0.0" in cmd


def test_scrub_argv_blanks_the_key_in_a_child_command_line():
    secret = f"key-{uuid.uuid4().hex}"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; print(1, flush=True); time.sleep(30)", secret],
        stdout=subprocess.PIPE,
    )
    try:
        child.stdout.readline()
        cmdline = Path(f"/proc/{child.pid}/cmdline")
        assert secret.encode() in cmdline.read_bytes()
        assert te.scrub_argv(child.pid, secret) == 1
        after = cmdline.read_bytes()
        assert secret.encode() not in after and b"*" * len(secret) in after
    finally:
        child.kill()
        child.wait()
