#!/usr/bin/env bash
# One-time set-up on a fresh machine: system packages, .venv/, Python deps, the gputok build.
# Idempotent: a second run only rebuilds what changed. Used by `make setup` (and so by
# `make test` and `make serve`).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# --- system packages (Debian). cmake/g++ build the core; apt-get download fetches corpus
# sources; libb64-0d is what perf_analyzer links.
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v make >/dev/null || need_apt+=(make)
[ -e /usr/lib/x86_64-linux-gnu/libb64.so.0d ] || need_apt+=(libb64-0d)
if [ ${#need_apt[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    log "apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    log "missing system packages: ${need_apt[*]} (install them, then re-run)"
    [[ " ${need_apt[*]} " == *" cmake "* || " ${need_apt[*]} " == *" g++ "* ]] && exit 1
  fi
fi
# The corpus builder uses `apt-get download`, which needs package lists.
if command -v apt-get >/dev/null && [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock)" ]; then
  log "apt-get update (package lists for the corpus sources)"
  apt-get update -qq || log "apt-get update failed; corpus building may fail"
fi

# --- virtual environment
if [ ! -x .venv/bin/python ]; then
  log "creating .venv with $($PY --version)"
  $PY -m venv .venv
fi
VPY=$ROOT/.venv/bin/python
stamp=.venv/.requirements.sha256
want=$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing Python requirements"
  $VPY -m pip install -q --upgrade pip
  for f in requirements/dev.txt requirements/serve.txt requirements/corpus.txt requirements/perf.txt; do
    [ -f "$f" ] && $VPY -m pip install -q -r "$f"
  done
  # nvidia-pytriton 0.7.0 wants tritonclient~=2.50; we pin 2.49.0 (the last wheel with a
  # perf_analyzer that runs on glibc 2.36) and only use pytriton's server binary.
  [ -f requirements/serve-nodeps.txt ] && $VPY -m pip install -q --no-deps -r requirements/serve-nodeps.txt
  echo "$want" >"$stamp"
fi

# --- build the native extension (CUDA sources compile too where nvcc exists) and the client.
# Skipped when nothing they are built from changed since the last build: `make serve` and
# `make test` run this every time, and a no-op pip build cost 13 of make serve's 26 s start-up
# (2-core machine, 2026-11-25). The stamp hashes the native sources, the package's Python file
# names, the build settings, nvcc's presence and the Python; GPUTOK_FORCE_BUILD=1 rebuilds anyway.
build_key() {
  {
    find backend_src/csrc backend_src/bindings backend_src/CMakeLists.txt backend_src/pyproject.toml \
      client/pyproject.toml -type f ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
    find backend_src/gputok -name '*.py' | sort # the editable finder maps files by name
    command -v nvcc || true
    echo "${GPUTOK_CUDA:-} ${CMAKE_ARGS:-}"
    "$VPY" -c 'import sys; print(sys.version)'
  } | sha256sum | cut -d' ' -f1
}
build_stamp=.venv/.build.sha256
key=$(build_key)
if [ "${GPUTOK_FORCE_BUILD:-0}" = 1 ] || [ "$(cat "$build_stamp" 2>/dev/null)" != "$key" ] ||
  ! "$VPY" -c 'import gputok._core, gputok._corpus_native, gputok_client' 2>/dev/null; then
  # What the build will do: CUDA where nvcc is found, unless CMAKE_ARGS turns it off.
  cuda_build() { command -v nvcc >/dev/null && [[ " ${CMAKE_ARGS:-} " != *"-DGPUTOK_CUDA=OFF"* ]]; }
  log "building gputok ($(cuda_build && echo 'with CUDA' || echo 'CPU only'))"
  rm -f "$build_stamp"
  $VPY -m pip install -q --no-build-isolation --no-deps -e backend_src
  # The client is pure Python: built with the venv's setuptools (no isolated download), and
  # without setuptools' "Editable installation" advice banner, which is a warning of no use here.
  [ -d client ] && [ -f client/pyproject.toml ] &&
    PYTHONWARNINGS=ignore $VPY -m pip install -q --no-build-isolation --no-deps -e client
  echo "$key" >"$build_stamp"
  $VPY -c "import gputok; ok, why = gputok.cuda_available(); print('gputok', gputok.__version__, 'cuda:', ok, why)"
fi
