#!/usr/bin/env bash
# Prepare, on the dev machine, what a GPU-machine call carries (the device has no network and
# gets only the working tree plus up to 8 git-ignored paths, 64 MiB in all):
#
#   .whl/                    wheels the GPU image lacks: gigatoken + awkward (benchmarks'
#                            reference), dask + distributed and their missing needs (corpus)
#   .gpucarry/gpu/           the extension and the device unit test, prebuilt with nvcc for
#                            sm_90 against CPython 3.12 (scripts/gpu_check.sh uses them, and
#                            rebuilds there if they do not import)
#   .carry/corpus-bench.jsonl.xz   the 85 MB benchmark corpus, xz'd (~15 MB)
#
#   bash scripts/gpu_carry.sh [whl,build,corpus]      (default: all three)
#
# Then e.g. run(carry=[".whl", ".gpucarry", ".carry"], command="bash scripts/gpu_check.sh") or
# "bash scripts/gpu_corpus_bench.sh". These folders are git-ignored and do not survive a fresh
# checkout: this script is how they are made again (2026-11-23: a new checkout had lost them).
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-whl,build,corpus}
has() { [[ ",$WHAT," == *",$1,"* ]]; }
PY=${PY:-.venv/bin/python}

if has whl; then
  mkdir -p .whl
  # The GPU image has pyarrow, numpy, cloudpickle, toolz, msgpack, psutil, pyyaml, jinja2,
  # click, fsspec, sortedcontainers, urllib3, packaging (KINDS.md); these it lacks.
  pins=$(grep -hE '^(gigatoken|awkward|awkward_cpp|dask|distributed)==' requirements/*.txt | sort -u)
  extra="tornado==6.5.2 tblib==3.1.0 zict==3.0.0 partd==1.4.2 locket==1.0.0"
  for spec in $pins $extra; do
    name=${spec%%==*}
    ls .whl/ | grep -qi "^${name//-/_}-\|^${name}-" && continue
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64 \
      --platform manylinux_2_34_x86_64 --platform any -d .whl "$spec"
  done
  du -sh .whl
fi

if has build; then
  B=/tmp/gputok_gpu312
  PY312=${PY312:-$(ls /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1 || true)}
  [ -n "$PY312" ] || PY312=$(command -v python3.12 || true)
  [ -n "$PY312" ] || { echo "no CPython 3.12 here to build the GPU machine's module against" >&2; exit 1; }
  cmake -S backend_src -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DPython_EXECUTABLE="$PY312" -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" >/dev/null
  ninja -C $B >/dev/null
  mkdir -p .gpucarry/gpu
  cp $B/_core.cpython-312-*.so $B/test_device_tables .gpucarry/gpu/
  ls -la .gpucarry/gpu
fi

if has corpus; then
  [ -f .carry/corpus-bench.jsonl.xz ] || $PY bench/corpus.py bundle
fi
du -shc .whl .gpucarry .carry 2>/dev/null | tail -1
