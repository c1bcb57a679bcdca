#!/usr/bin/env bash
# Prepare, on the dev machine, what a GPU-machine call carries (the device has no network and
# gets only the working tree plus up to 8 git-ignored paths, 64 MiB in all):
#
#   .whl/                    wheels the GPU image lacks: gigatoken + awkward (benchmarks'
#                            reference), dask + distributed and their missing needs (corpus)
#   .gpucarry/gpu/           the extensions (_core, _corpus_native), the served tritonserver's
#                            libgputok_triton_*.so and the device unit test, prebuilt with nvcc for
#                            sm_90 against CPython 3.12 (scripts/gpu_check.sh uses them, and
#                            rebuilds there if they do not import)
#   .carry/corpus-bench.jsonl.xz   the 85 MB benchmark corpus, xz'd (~15 MB)
#   .servecarry/             (only when asked for: serve) the tritonserver of nvidia-pytriton
#                            0.7.0 from this venv, trimmed to the server, its libraries without
#                            libpython and the CPython 3.12 stub (xz, ~27 MB), and a numpy
#                            1.26.4 cp312 wheel for the stub's environment (~18 MB); carry it
#                            with .gpucarry only (64 MiB in all): scripts/gpu_serve_check.sh
#
#   .servecarry/pa.tar.xz    (only when asked for: pa) perf_analyzer from this venv's
#                            tritonclient 2.49.0 wheel, Debian's libb64.so.0d and pip's
#                            libcudart.so.12 (~5 MB): scripts/gpu_serve_bench.sh
#
#   .whl/py_spy-*.whl and an unstripped .gpucarry/gpu/_core*.so
#                            (only when asked for: profile) for scripts/gpu_profile_workers.sh:
#                            py-spy names _core's native frames only in an unstripped module; it
#                            is the release module's own link without pybind11's strip step, so
#                            `strip` of it gives the release module back byte for byte
#
#   bash scripts/gpu_carry.sh [whl,build,corpus,serve,pa,profile]   (default: whl,build,corpus)
#
# Then e.g. run(carry=[".whl", ".gpucarry", ".carry"], command="bash scripts/gpu_check.sh") or
# "bash scripts/gpu_corpus_bench.sh". These folders are git-ignored and do not survive a fresh
# checkout: this script is how they are made again (2026-11-23: a new checkout had lost them).
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-whl,build,corpus}
# GPU_BUILD_DIR: where the sm_90 module is built (several checkouts on one machine each need
# their own); GPU_CARRY_DIR: where the built module and test binary are put (.gpucarry/gpu).
B=${GPU_BUILD_DIR:-/tmp/gputok_gpu312}
G=${GPU_CARRY_DIR:-.gpucarry/gpu}
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
  PY312=${PY312:-$(ls /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1 || true)}
  [ -n "$PY312" ] || PY312=$(command -v python3.12 || true)
  [ -n "$PY312" ] || { echo "no CPython 3.12 here to build the GPU machine's module against" >&2; exit 1; }
  cmake -S backend_src -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DPython_EXECUTABLE="$PY312" -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" >/dev/null
  ninja -C $B >/dev/null
  mkdir -p "$G"
  cp $B/_core.cpython-312-*.so $B/_corpus_native.cpython-312-*.so $B/libgputok_triton_*.so \
    $B/test_device_tables "$G/"
  ls -la "$G"
fi

if has profile; then
  [ -f $B/build.ninja ] || { echo "profile needs the build step first (gpu_carry.sh build,profile)" >&2; exit 1; }
  ls .whl/py_spy-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux_2_5_x86_64 \
    --platform manylinux1_x86_64 -d .whl py-spy==0.4.3
  sed 's|POST_BUILD = .*/strip .*|POST_BUILD = :|' $B/build.ninja > $B/build-unstripped.ninja
  rm -f $B/_core.cpython-312-*.so
  ninja -C $B -f build-unstripped.ninja _core >/dev/null
  cp $B/_core.cpython-312-*.so "$G/"
  rm -f $B/_core.cpython-312-*.so  # the next plain build links and strips it again
  ls -la "$G" .whl/py_spy-*.whl
fi

if has serve; then
  S=.servecarry
  mkdir -p $S
  SP=$($PY -c "import site; print(site.getsitepackages()[0])")
  [ -d "$SP/pytriton/tritonserver" ] || { echo "nvidia-pytriton is not in $PY's environment (make setup)" >&2; exit 1; }
  T=$(mktemp -d)
  mkdir -p "$T/pytriton/tritonserver/python_backend_stubs" "$T/nvidia_pytriton.libs"
  cp "$SP/pytriton/__init__.py" "$T/pytriton/"
  cp -r "$SP/pytriton/tritonserver/bin" "$SP/pytriton/tritonserver/backends" "$SP/pytriton/tritonserver/caches" "$T/pytriton/tritonserver/"
  cp -r "$SP/pytriton/tritonserver/python_backend_stubs/3.12" "$T/pytriton/tritonserver/python_backend_stubs/"
  cp "$SP"/nvidia_pytriton.libs/* "$T/nvidia_pytriton.libs/"
  rm -f "$T"/nvidia_pytriton.libs/libpython3-*  # the stub links the machine's own libpython3.12
  tar -C "$T" -cJf $S/pytriton-trimmed.tar.xz .
  rm -rf "$T"
  ls $S/numpy-1.26.4-cp312-*.whl >/dev/null 2>&1 || python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d $S numpy==1.26.4
  du -sh $S
fi

if has pa; then
  mkdir -p .servecarry
  T=$(mktemp -d)
  cudart=$($PY -c "import nvidia.cuda_runtime as m, pathlib; print(pathlib.Path(m.__path__[0], 'lib', 'libcudart.so.12'))")
  b64=$(ldd "$(dirname "$PY")/perf_analyzer" | awk '/libb64.so.0d/ {print $3}')
  [ -f "$cudart" ] && [ -f "$b64" ] || { echo "perf_analyzer's libraries not found (make setup)" >&2; exit 1; }
  cp "$(dirname "$PY")/perf_analyzer" "$cudart" "$b64" "$T/"
  tar -C "$T" -cJf .servecarry/pa.tar.xz .
  rm -rf "$T"
  ls -la .servecarry/pa.tar.xz
fi

if has corpus; then
  [ -f .carry/corpus-bench.jsonl.xz ] || $PY bench/corpus.py bundle
fi
du -shc .whl .gpucarry .carry 2>/dev/null | tail -1
