#!/usr/bin/env bash
# Serving figures on the GPU machine in one call: our tokenizer against the gigatoken baseline
# (scripts/gpu_serve_bench.py --plan; isolated and batched, GPU and CPU path), then the
# streaming time to first text (bench/bench_stream_ttft.py). Needs, made here first:
#   bash scripts/gpu_carry.sh build,serve,pa    (.gpucarry/gpu, .servecarry with pa.tar.xz)
#   .whl/ holding only the gigatoken, awkward and awkward_cpp wheels (the baseline's needs)
# 64 MiB travel in all (the tree included): carry only the folders it runs from (backend_src,
# model_repository, perf_analyzer_configs, scripts, bench) and the module xz'd
# (.gpucarry/gpu/_core*.so.xz, 3.7 -> 0.9 MB; unpacked here), without test_device_tables.
# then run(command="bash scripts/gpu_serve_bench.sh") from a tree holding them.
# MODELS: the models of every plan (default tokenizer,preprocessing_gigatoken; add
# preprocessing_ceiling for the Python model's bound, scripts/serve_plan.py).
# PLAN_A runs before the streaming step, PLAN_B after it (each stops at its budget in s,
# counted from its own start); PLAN_B= (set, empty) skips PLAN_B, TTFT_TIMEOUT=0 the streaming
# step. (Until 2026-11-29 an empty PLAN_B ran the default plan: `:-` took empty as unset.)
# Results (at most 8 files come back from the device): $OUT/sb/serve_results.{json,jsonl},
# $OUT/sb/raw-*.tar.gz (perf_analyzer CSVs, server logs, inputs), $OUT/ttft.json, build.log.
# Every point is printed as a table row when measured: run it with `2>&1 | tee $OUT/console.log`.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_serve_bench}
G="1,2,4,8,16,32,64,128"
PLAN_A=${PLAN_A:-"iso:auto:0:4k,128:$G;batch:auto:0:4k,128:$G"}
PLAN_B=${PLAN_B-"iso:auto:0:4k,128:1,8,64:min;iso:cpu:0:4k,128:1,8,64;iso:auto:8:4k,128:64"}
WINDOW_MS=${WINDOW_MS:-500}
mkdir -p "$OUT" /tmp/pt /tmp/pa
t0=$(date +%s)
for f in .gpucarry/gpu/*.so.xz; do [ -f "$f" ] && xz -dkf "$f"; done
OUT=/tmp/gputok_check bash scripts/gpu_check.sh build >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
tar -C /tmp/pt -xJf .servecarry/pytriton-trimmed.tar.xz
tar -C /tmp/pa -xJf .servecarry/pa.tar.xz
# gpu_check.sh installed .whl/ (gigatoken, awkward) into /tmp/site
export PYTHONPATH=/tmp/pt:$PWD/backend_src:/tmp/site
echo "setup: $(( $(date +%s) - t0 )) s"
bench() {
  timeout "$1" python3 scripts/gpu_serve_bench.py --out "$OUT/sb" --wheels .servecarry --pa /tmp/pa \
    --gputok-site "$PWD/backend_src" --extra-site /tmp/site --gpus 0 --plan "$2" \
    --models "${MODELS:-tokenizer,preprocessing_gigatoken}" --window-ms "$WINDOW_MS" --budget-s "$3" 2>&1
}
bench "${A_TIMEOUT:-200}" "$PLAN_A" "${A_BUDGET:-170}"
[ "${TTFT_TIMEOUT:-90}" -gt 0 ] && PERF_ANALYZER=/tmp/pa/perf_analyzer LD_LIBRARY_PATH=/tmp/pa:${LD_LIBRARY_PATH:-} \
  timeout "${TTFT_TIMEOUT:-90}" python3 bench/bench_stream_ttft.py --prompt-source stdlib \
  --stub-env /tmp/gputok-stub-env --requests 60 --stream-max-tokens 8 --out "$OUT/ttft.json" 2>&1 | tail -5
[ -n "$PLAN_B" ] && bench "${B_TIMEOUT:-120}" "$PLAN_B" "${B_BUDGET:-90}"
echo "total: $(( $(date +%s) - t0 )) s"
