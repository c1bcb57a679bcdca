#!/usr/bin/env bash
# The GPU machine's short-text latency check in one command: the fused kernels' tests,
# bench/bench_gpu_latency.py (where one text's time goes, against gigatoken), Nsight Compute
# on the lean fused kernel, and optionally the large-call envelope and auto's crossover.
#
#   bash scripts/gpu_latency.sh [STAGES]   STAGES: comma list of
#       tests,alltests,mutant,latency,ncu,envelope,crossover (default: tests,latency)
#
# Needs what scripts/gpu_check.sh needs (.gpucarry/gpu prebuilt module, .whl, .carry corpus);
# LAT_VARIANTS, LAT_TOKENS, LAT_PROFILE, LAT_ARGS, LAT_TIMEOUT, MUT_TESTS, NCU_TOKENS, ENV_SIZES, ENV_CONFIGS, ENV_ARGS and CX_ARGS override the stages' inputs.
# Logs and results go under $OUT; a short table is printed last.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_latency}
mkdir -p "$OUT"
STAGES=${1:-tests,latency}
has() { [[ ",$STAGES," == *",$1,"* ]]; }
export PYTHONUNBUFFERED=1 PATH=/usr/local/cuda/bin:$PATH
PY=${PY:-python3}
OUT=$OUT/check bash scripts/gpu_check.sh build,unit >"$OUT/check.log" 2>&1
tail -2 "$OUT/check.log"
export PYTHONPATH=/tmp/site:$PWD/backend_src
[ -f .cache/corpus/corpus-bench.jsonl ] || $PY bench/corpus.py unbundle --bundle .carry/corpus-bench.jsonl.xz >/dev/null 2>&1
if has tests; then
  timeout 200 $PY -m pytest -q -x -p no:cacheprovider tests/gpu/test_fused_lean.py tests/gpu/test_gpu.py tests/gpu/test_gpu_paths.py \
    tests/gpu/test_learned_cache.py \
    -k "lean or fused or tile_edges or small_inputs or long_pieces or pathological or uint16 or learn or cache or threads" >"$OUT/pytest.log" 2>&1
  echo "pytest (fused paths) rc=$? $(tail -1 "$OUT/pytest.log")"
fi
if has alltests; then
  timeout 330 $PY -m pytest -q -p no:cacheprovider -m "not slow" tests/gpu >"$OUT/pytest-all.log" 2>&1
  echo "pytest (GPU, not slow) rc=$? $(tail -1 "$OUT/pytest-all.log")"
fi
if has mutant; then
  # .mut/gputok: a build with a planted bug (.mut/MUTANT says which); MUT_TESTS must fail
  PYTHONPATH=/tmp/site:$PWD/.mut timeout 120 $PY -m pytest -q -x -p no:cacheprovider \
    ${MUT_TESTS:-tests/gpu/test_fused_lean.py} >"$OUT/mutant.log" 2>&1
  rc=$?
  echo "mutant ($(cat .mut/MUTANT 2>/dev/null)): pytest rc=$rc (1: caught) $(tail -1 "$OUT/mutant.log")"
fi
if has ncu; then
  for tokens in $(echo "${NCU_TOKENS:-4096,16384}" | tr , ' '); do
    timeout 120 ncu --target-processes all -k regex:fused_lean --launch-skip 20 --launch-count 1 \
      --cache-control none --clock-control none --section WarpStateStats --section LaunchStats \
      --section SchedulerStats --section InstructionStats \
      $PY bench/bench_gpu_latency.py --tokens "$tokens" --repeat-only 30 >"$OUT/ncu-$tokens.log" 2>&1
    echo "ncu $tokens tokens rc=$?"
    grep -E "Duration|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Executed Ipc A|Registers|Block Limit" \
      "$OUT/ncu-$tokens.log" | head -30
  done
fi
if has envelope; then
  timeout ${ENV_TIMEOUT:-200} $PY bench/bench_envelope.py --sizes-mb "${ENV_SIZES:-1,4,16,64,85}" \
    --configs "${ENV_CONFIGS:-32M:2}" --profile ${ENV_ARGS---single} --out "$OUT" >"$OUT/envelope.md" 2>"$OUT/envelope.log"
  echo "envelope rc=$?"
  grep "gputok gpu call" "$OUT/profile.log" 2>/dev/null | tail -20
fi
if has crossover; then
  timeout ${CX_TIMEOUT:-200} $PY bench/bench_crossover.py --out "$OUT/cx" ${CX_ARGS:-} >"$OUT/crossover.log" 2>&1
  echo "crossover rc=$?"; tail -25 "$OUT/crossover.log"
fi
if has latency; then
  timeout ${LAT_TIMEOUT:-200} $PY bench/bench_gpu_latency.py --out "$OUT" --profile-variants ${LAT_PROFILE:-default,nine,early} \
    ${LAT_TOKENS:+--tokens $LAT_TOKENS} ${LAT_ARGS:-} --variants "${LAT_VARIANTS:-nine=fused_lean:0,early=lean_take_early:1}" \
    >"$OUT/latency.md" 2>"$OUT/latency.log"
  echo "latency rc=$?"
fi
[ -f "$OUT/envelope.md" ] && cat "$OUT/envelope.md"
[ -f "$OUT/latency.md" ] && cat "$OUT/latency.md"
# Only 8 files come back from the device: the logs travel as one archive.
(cd "$OUT" && tar -czf logs.tar.gz --remove-files ./*.log check profile.log 2>/dev/null)
exit 0
