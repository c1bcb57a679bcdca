"""The Docker image's entry point (gputok.serve.container, run by docker/entrypoint.sh): the API
key comes from a file or the environment only, a key argument is refused, and the key is not
left in tritonserver's command line or environment; a dead Python-backend stub ends the
container (exit code 3). A fake `tritonserver` on PATH stands in for the image's (no Docker
here): it prints a line, records its environment, and waits (or starts and kills a fake stub)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

KEY = "s3cret-key-4711"
FAKE = """#!{python}
import os, sys, time
open(os.environ["FAKE_ENV_OUT"], "w").write("\\n".join(sorted(os.environ)))
print("I1125 fake tritonserver started", flush=True)
time.sleep(60)
"""


def _start(
    tmp_path: Path, *args: str, fake: str = FAKE, **env: str
) -> tuple[subprocess.Popen, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    server = bin_dir / "tritonserver"
    server.write_text(fake.format(python=sys.executable))
    server.chmod(0o755)
    env_out = tmp_path / "env.txt"
    full = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOK_API_KEY")}
    full.update(PATH=f"{bin_dir}:{full['PATH']}", FAKE_ENV_OUT=str(env_out), **env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputok.serve.container", *args],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    return proc, env_out


def _fake_pid(parent: int) -> int:
    for _ in range(200):
        for entry in Path("/proc").iterdir():
            try:
                if (
                    entry.name.isdigit()
                    and int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1])
                    == parent
                ):
                    return int(entry.name)
            except (OSError, IndexError, ValueError):
                continue
        time.sleep(0.05)
    raise AssertionError("the fake tritonserver did not start")


@pytest.mark.parametrize("source", ["file", "env"])
def test_key_from_file_or_env_is_not_left_in_tritonserver(tmp_path, source):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    env = {"GPUTOK_API_KEY_FILE": str(key_file)} if source == "file" else {"GPUTOK_API_KEY": KEY}
    proc, env_out = _start(tmp_path, "--log-verbose=1", **env)
    try:
        assert proc.stdout.readline().startswith(b"I1125 fake tritonserver started")
        pid = _fake_pid(proc.pid)
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        spec = [a for a in argv if a.startswith(b"--http-restricted-api=")]
        assert spec and spec[0].endswith(b":gputok-key=" + b"*" * len(KEY)), argv
        assert KEY.encode() not in b"\0".join(argv)
        assert b"--log-verbose=1" in argv and b"--model-repository=/models" in argv
        names = env_out.read_text().split()
        assert names and not [n for n in names if n.startswith("GPUTOK_API_KEY")], names
        proc.send_signal(signal.SIGTERM)  # forwarded: the fake dies of it, and says so
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("option", ["--http-restricted-api", "--grpc-restricted-protocol"])
def test_a_key_argument_is_refused(tmp_path, option):
    proc, env_out = _start(tmp_path, f"{option}=inference:gputok-key={KEY}")
    try:
        _out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 2
    assert f"{option} is refused" in err.decode() and "GPUTOK_API_KEY_FILE" in err.decode()
    assert not env_out.exists()  # tritonserver never started


def test_no_key_no_restricted_apis_and_bad_keys_refused(tmp_path):
    from gputok.serve.container import command, container_key
    from gputok.serve.triton import ServeError

    assert container_key({}) is None
    assert not [a for a in command([], None) if "restricted" in a]
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ServeError, match="is empty"):
        container_key({"GPUTOK_API_KEY_FILE": str(tmp_path / "empty")})
    with pytest.raises(ServeError, match="may not contain"):
        container_key({"GPUTOK_API_KEY": "a:b=c"})


def test_the_image_isolates_string_models_when_told(tmp_path, monkeypatch):
    """Like gputok-serve, the image serves /models as it is, batched (the preloaded string check
    keeps a malformed string from failing its batch-mates); GPUTOK_ISOLATE_REQUESTS=1 serves
    the string-input Python models without the dynamic batcher, from an isolated copy."""
    from gputok.serve import container, pbtxt

    repo = Path(__file__).resolve().parents[2] / "model_repository"
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert container.served_repository({"TMPDIR": str(tmp_path)}, models=repo) == repo
    for off in ("0", "false"):
        env = {"TMPDIR": str(tmp_path), container.ISOLATE_ENV: off}
        assert container.served_repository(env, models=repo) == repo
    env = {"TMPDIR": str(tmp_path), container.ISOLATE_ENV: "1"}
    served = container.served_repository(env, models=repo)
    assert served != repo and served.is_relative_to(tmp_path)
    tok = pbtxt.read_config(served / "tokenizer" / "config.pbtxt")
    assert not tok.HasField("dynamic_batching")
    assert pbtxt.read_config(repo / "tokenizer" / "config.pbtxt").HasField("dynamic_batching")
    seen = []
    monkeypatch.setattr(container, "run", lambda cmd, key, env: seen.append((cmd, env)) or 0)
    assert container.main([], models=repo) == 0
    cmd, env = seen[0]
    assert cmd[1] == f"--model-repository={repo}"
    assert "libgputok_triton_strings.so" in env["LD_PRELOAD"]
    monkeypatch.setenv(container.ISOLATE_ENV, "1")
    assert container.main([], models=repo) == 0
    assert seen[1][0][1] == f"--model-repository={served}"


FAKE_WITH_STUB = """#!{python}
import os, subprocess, sys, time
from pathlib import Path
body = os.environ["FAKE_STUB_BODY"]
cmd = 'exec -a /opt/tritonserver/backends/python/triton_python_backend_stub "$0" "$1"'
stub = subprocess.Popen(["bash", "-c", cmd, sys.executable, body])
Path(os.environ["FAKE_STUB_PID"]).write_text(str(stub.pid))
while Path(f"/proc/{{stub.pid}}/comm").read_text().strip() != "triton_python_b":
    time.sleep(0.01)
print("I1125 fake tritonserver started", flush=True)
time.sleep(float(os.environ["FAKE_STUB_LIFE"]))
os.kill(stub.pid, 9)  # never reaped: a zombie, as Triton 2.51 leaves a dead stub
time.sleep(60)
"""
STUB_BODY = (
    "import ctypes, time\n"
    "ctypes.CDLL(None).prctl(15, b'triton_python_b', 0, 0, 0)  # the real stub's name\n"
    "time.sleep(60)\n"
)


@pytest.mark.parametrize(
    ("life", "named"), [(0.0, "unknown (a stub found dead)"), (1.5, "detokenizer")]
)
def test_a_dead_stub_ends_the_container(tmp_path, life, named):
    """Triton 2.51 keeps answering ready after a Python-backend stub dies (one gRPC request can
    kill the detokenizer's), and the container kept running, its model failing every request,
    with nothing for `docker run --restart` to see. Now the entry point stops tritonserver and
    exits with 3, naming the stub's model; a stub dead before the first look (life 0) too."""
    body = tmp_path / "models" / "detokenizer" / "1" / "model.py"
    body.parent.mkdir(parents=True)
    body.write_text(STUB_BODY)
    pid_file = tmp_path / "stub.pid"
    proc, _ = _start(
        tmp_path,
        fake=FAKE_WITH_STUB,
        FAKE_STUB_BODY=str(body),
        FAKE_STUB_PID=str(pid_file),
        FAKE_STUB_LIFE=str(life),
    )
    try:
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 3, err.decode()
        assert f"the Python-backend stub of model(s) {named} died" in err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
