#!/usr/bin/env bash
# One command for the GPU machine: build the extension for sm_90, check exactness
# (GPU == CPU == tiktoken), run compute-sanitizer memcheck + racecheck on a small batch,
# and benchmark. Logs and results go under $OUT (default /tmp/gputok_gpu_check).
#
#   bash scripts/gpu_check.sh [STAGES]     STAGES: comma list of
#       build,unit,test,sanitize,slow,bench,benchquick,ablation
#       (default: build,unit,test,sanitize,bench)
#
# Prebuilt artifacts, if present, save the build: .gpucarry/gpu/_core.cpython-312-*.so, the
# corpus tool's .gpucarry/gpu/_corpus_native.cpython-312-*.so and .gpucarry/gpu/test_device_tables
# (built on the dev machine with nvcc 13.0, -arch=sm_90). Prebuilt modules that do not import
# are rebuilt here with cmake + ninja.
# Python packages missing on the machine (gigatoken, awkward) travel as wheels in .whl/.
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/gputok_gpu_check}
mkdir -p "$OUT"
STAGES=${1:-build,unit,test,sanitize,bench}
has() { [[ ",$STAGES," == *",$1,"* ]]; }
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
export PATH=/usr/local/cuda/bin:$PATH

note "gpu_check $(date -u +%FT%TZ) stages=$STAGES"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee -a "$SUMMARY"
nproc | sed 's/^/host cores: /' | tee -a "$SUMMARY"

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$ROOT/backend_src${PYTHONPATH:+:$PYTHONPATH}

BUILD=/tmp/gputok_build
UNIT_BIN=.gpucarry/gpu/test_device_tables
if has build; then
  t0=$(date +%s)
  for f in .gpucarry/gpu/_core.cpython-*.so .gpucarry/gpu/_corpus_native.cpython-*.so \
    .gpucarry/gpu/libgputok_triton_*.so; do
    [ -f "$f" ] && cp "$f" backend_src/gputok/
  done
  if ! $PY -c "import gputok, sys; from gputok import _corpus_native; ok, why = gputok.cuda_available(); sys.exit(0 if ok else 1)" 2>"$OUT/import.err"; then
    note "prebuilt modules unusable ($(tail -1 "$OUT/import.err")); building"
    rm -f backend_src/gputok/_core.*.so backend_src/gputok/_corpus_native.*.so backend_src/gputok/libgputok_triton_*.so
    cmake -S backend_src -B $BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DPython_EXECUTABLE="$(command -v $PY)" -Dpybind11_DIR="$($PY -m pybind11 --cmakedir)" >"$OUT/cmake.log" 2>&1 \
      && ninja -C $BUILD >"$OUT/build.log" 2>&1 || { note "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
    cp $BUILD/_core.*.so $BUILD/_corpus_native.*.so $BUILD/libgputok_triton_*.so backend_src/gputok/
    UNIT_BIN=$BUILD/test_device_tables  # built by CMake beside the module
  fi
  # The image sets PYTHONDONTWRITEBYTECODE=1, so every process compiled gputok's modules and
  # the carried wheels' again (pip installs with --no-compile here): byte-compile them once, as
  # a pip install does, so that whole-command timings do not pay it.
  $PY -m compileall -q -j 0 backend_src/gputok /tmp/site >/dev/null 2>&1 || true
  # The image's own numpy and pyarrow come without .pyc too: every process that imports numpy
  # (gputok and gigatoken alike) spent 0.26-0.30 s compiling it (H100 host, 2026-11-27).
  [ -n "${GPUTOK_NO_PYC:-}" ] || for m in numpy pyarrow; do
    d=$($PY -c "import $m, os; print(os.path.dirname($m.__file__))" 2>/dev/null) \
      && $PY -m compileall -q -j 0 "$d" >/dev/null 2>&1 || true
  done
  $PY -c "import gputok; print('cuda_available', gputok.cuda_available())" | tee -a "$SUMMARY"
  note "build stage: $(( $(date +%s) - t0 )) s"
fi

if has unit; then
  timeout 120 $UNIT_BIN backend_src/gputok/data/gpt2.tiktoken 2>&1 | tee "$OUT/unit.log" | tail -12
  note "unit (device hash table + small encode): $(tail -1 "$OUT/unit.log")"
fi

if has test || has slow || has bench || has benchquick || has ablation; then
  if [ ! -f .cache/corpus/corpus-bench.jsonl ]; then
    B=.carry/corpus-bench.jsonl.xz; [ -f "$B" ] || B=.gpucarry/corpus-bench.jsonl.xz
    $PY bench/corpus.py unbundle --bundle "$B" >"$OUT/corpus.log" 2>&1
  fi
fi

if has test; then
  t0=$(date +%s)
  timeout 330 $PY -m pytest -q -p no:cacheprovider -m "not slow" --timeout=200 tests/gpu/test_gpu.py tests/gpu/test_gpu_paths.py tests/gpu/test_gpu_resources.py \
    tests/gpu/test_encode_uint16.py 2>&1 | tee "$OUT/pytest.log" | tail -40
  note "pytest (not slow): $(tail -1 "$OUT/pytest.log") [$(( $(date +%s) - t0 )) s]"
fi

if has sanitize; then
  for tool in memcheck racecheck; do
    timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $UNIT_BIN backend_src/gputok/data/gpt2.tiktoken small \
      >"$OUT/sanitizer-$tool.log" 2>&1
    note "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1)"
  done
  # The Parquet snappy kernels (corpus/cuda/parquet.cu), through the GPU page reader's tests.
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 $PY -m pytest -q -p no:cacheprovider \
      tests/corpus/test_parquet_pages.py tests/corpus/test_parquet_snappy.py -k "(gpu and (bench_like or hand_built or malformed or every_tag_kind or offset_zero)) or beside or (ablations and 256)" >"$OUT/sanitizer-parquet-$tool.log" 2>&1
    note "compute-sanitizer $tool (Parquet pages): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY| passed' "$OUT/sanitizer-parquet-$tool.log" | tail -2 | tr '\n' ' ')"
  done
fi

if has slow; then
  t0=$(date +%s)
  timeout 500 $PY -m pytest -q -p no:cacheprovider -m slow tests/gpu/test_gpu.py tests/gpu/test_gpu_paths.py tests/gpu/test_gpu_resources.py 2>&1 | tee "$OUT/pytest-slow.log" | tail -20
  note "pytest (slow): $(tail -1 "$OUT/pytest-slow.log") [$(( $(date +%s) - t0 )) s]"
fi

if has bench || has benchquick; then
  q=""; has benchquick && q="--quick"
  timeout 500 $PY bench/bench_gpu.py --out "$OUT" $q 2>&1 | tee "$OUT/bench.log" | tail -40
fi

if has ablation; then
  timeout 200 $PY bench/gpu_ablation.py 2>&1 | tee "$OUT/ablation.log"
fi
note "done $(date -u +%FT%TZ)"
cat "$SUMMARY"
