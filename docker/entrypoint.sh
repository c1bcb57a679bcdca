#!/usr/bin/env bash
# Container entry point: tritonserver on /models. Extra arguments go to tritonserver.
# GPUTOK_GPT2_WEIGHTS=/path (a mounted Hugging Face GPT-2 folder) sets the gpt2 model's weights_dir.
set -euo pipefail
if [ -n "${GPUTOK_GPT2_WEIGHTS:-}" ]; then
  sed -i "s|key: \"weights_dir\" value: { string_value: \"[^\"]*\" }|key: \"weights_dir\" value: { string_value: \"${GPUTOK_GPT2_WEIGHTS}\" }|" \
    /models/gpt2/config.pbtxt
fi
exec tritonserver \
  --model-repository=/models \
  --model-control-mode=none \
  --strict-readiness=true \
  --disable-auto-complete-config \
  --http-address=0.0.0.0 --http-port=8000 \
  --grpc-address=0.0.0.0 --grpc-port=8001 \
  --metrics-address=0.0.0.0 --metrics-port=8002 \
  "$@"
