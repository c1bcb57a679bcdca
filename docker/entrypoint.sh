#!/usr/bin/env bash
# Container entry point: tritonserver on /models (gputok.serve.container). Extra arguments go to
# tritonserver. The API key comes from GPUTOK_API_KEY_FILE (a mounted secret) or GPUTOK_API_KEY,
# never from the command line: a --http-restricted-api / --grpc-restricted-protocol argument is
# refused (docs/security.md).
# GPUTOK_GPT2_WEIGHTS=/path (a mounted Hugging Face GPT-2 folder) sets the gpt2 model's weights_dir.
set -euo pipefail
if [ -n "${GPUTOK_GPT2_WEIGHTS:-}" ]; then
  sed -i "s|key: \"weights_dir\" value: { string_value: \"[^\"]*\" }|key: \"weights_dir\" value: { string_value: \"${GPUTOK_GPT2_WEIGHTS}\" }|" \
    /models/gpt2/config.pbtxt
fi
exec python3 -m gputok.serve.container "$@"
