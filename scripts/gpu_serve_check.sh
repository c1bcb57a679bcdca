#!/usr/bin/env bash
# Serving check on the GPU machine in one call: the model repository on GPU instances of the
# tritonserver that nvidia-pytriton 0.7.0 bundles, checked over HTTP by
# scripts/gpu_serve_check.py (ids against tiktoken, a bad request alone, batching, the
# ensemble). Needs `bash scripts/gpu_carry.sh build,serve` here first, then
#   run(carry=[".gpucarry", ".servecarry"], command="bash scripts/gpu_serve_check.sh")
# Results: $OUT/serve/summary.json and the server's log.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_serve_check}
mkdir -p "$OUT"
bash scripts/gpu_check.sh build >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
mkdir -p /tmp/site
tar -C /tmp/site -xJf .servecarry/pytriton-trimmed.tar.xz
export PYTHONPATH=/tmp/site:$PWD/backend_src
timeout ${STEP_TIMEOUT:-520} python3 scripts/gpu_serve_check.py --out "$OUT/serve" \
  --wheels .servecarry --gputok-site "$PWD/backend_src"
