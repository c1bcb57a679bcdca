#!/usr/bin/env bash
# The GPU machine's large-call check in one command: the device unit test (with the chunked
# lanes run) and memcheck, the GPU and chunk-pipeline tests, then bench/bench_envelope.py
# (gputok's GPU path against gigatoken, calls 1 MB-1 GB as docs and as one str, single texts
# 64 tokens-100 MB) and, when OLD_GPUTOK names a directory holding an older gputok package,
# that package's calls with its per-stage profile, for before/after in the same run.
#
#   bash scripts/gpu_envelope.sh [STAGES]   STAGES: comma list of unit,memcheck,pytests,old,bench,
#                                           run in that order (default: all, in this order)
#   bench's settings: SIZES (MB, comma list), CONFIGS (GPU tunings), REPS (timed calls per size;
#   default: by size, 20 at 1 MB down to 2 at 1 GB), BENCH_TIMEOUT (seconds)
#
# Needs what scripts/gpu_check.sh needs (.gpucarry/gpu prebuilt module, .whl, .carry corpus).
# Logs and results go under $OUT.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_envelope}
mkdir -p "$OUT"
STAGES=${1:-unit,memcheck,pytests,old,bench}
export PYTHONUNBUFFERED=1 PATH=/usr/local/cuda/bin:$PATH
PY=${PY:-python3}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
  nproc; } | tee "$OUT/device.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
cp .gpucarry/gpu/_core.cpython-*.so backend_src/gputok/
export PYTHONPATH=/tmp/site:$PWD/backend_src
[ -f .cache/corpus/corpus-bench.jsonl ] || $PY bench/corpus.py unbundle --bundle .carry/corpus-bench.jsonl.xz >"$OUT/corpus.log" 2>&1
V=backend_src/gputok/data/gpt2.tiktoken
unit() {
  timeout 60 .gpucarry/gpu/test_device_tables $V >"$OUT/unit.log" 2>&1; echo "unit rc=$? $(tail -1 "$OUT/unit.log")"
}
memcheck() {
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 .gpucarry/gpu/test_device_tables $V small \
    >"$OUT/memcheck.log" 2>&1; echo "memcheck rc=$? $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
}
pytests() {
  timeout ${TEST_TIMEOUT:-240} $PY -m pytest -q -x -p no:cacheprovider -m "not slow" tests/gpu/test_chunk_pipeline.py \
    tests/gpu/test_gpu.py tests/gpu/test_gpu_paths.py tests/gpu/test_gpu_resources.py tests/gpu/test_encode_uint16.py >"$OUT/pytest.log" 2>&1
  echo "pytest rc=$? $(tail -1 "$OUT/pytest.log")"
}
old() {
  [ -n "${OLD_GPUTOK:-}" ] || return 0
  GPUTOK_GPU_PROFILE=${OLD_PROFILE:-1} PYTHONPATH=/tmp/site:$OLD_GPUTOK timeout ${OLD_TIMEOUT:-150} \
    $PY bench/bench_envelope.py --old ${OLD_ARGS:-} --sizes-mb ${OLD_SIZES:-64,85,256} --out "$OUT" \
    >"$OUT/old.md" 2>"$OUT/old-profile.log"
  echo "old rc=$?"; cat "$OUT/old.md"
}
bench() {
  timeout ${BENCH_TIMEOUT:-300} $PY bench/bench_envelope.py --single --profile --out "$OUT" \
    --sizes-mb ${SIZES:-1,4,16,64,85,256,1024} --configs "${CONFIGS:-16M:2,64M:1}" ${REPS:+--reps $REPS} >"$OUT/envelope.md" 2>"$OUT/envelope.log"
  echo "bench rc=$?"; tail -3 "$OUT/envelope.log"; cat "$OUT/envelope.md"
}
for stage in ${STAGES//,/ }; do "$stage"; done
# Only 8 files come back from the device: the logs travel as one archive.
(cd "$OUT" && tar -czf logs.tar.gz --remove-files ./*.log old.md 2>/dev/null)
