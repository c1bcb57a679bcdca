# gputok on Triton Inference Server 24.10 (server 2.51, the same server that `gputok-serve` runs
# from nvidia-pytriton 0.7.0), with the CUDA path built in.
#
#   docker build -t gputok-triton .
#   docker run --gpus all --shm-size=1g --restart unless-stopped -d \
#     -p 127.0.0.1:8000:8000 -p 127.0.0.1:8001:8001 -p 127.0.0.1:8002:8002 gputok-triton
#
# With an API key (docs/security.md): put it in a file readable by you only and mount it; never
# on the command line (`ps` shows every user of the host the arguments of `docker run` and of
# the container's processes, and `docker inspect` shows -e values to the docker group):
#   -v /etc/gputok/key:/run/secrets/gputok_key:ro -e GPUTOK_API_KEY_FILE=/run/secrets/gputok_key
# The entry point (gputok.serve.container) reads it, refuses --http-restricted-api and
# --grpc-restricted-protocol arguments, and blanks the key in tritonserver's argv once the server
# has parsed it. GPUTOK_API_KEY=<key> works too, but shows in `docker inspect`.
# As gputok-serve does, it preloads into tritonserver the string check (a malformed string
# tensor is refused before the dynamic batcher could fail its batch-mates with it) and the JSON
# codes (a body that is not JSON gets 400, not 500); -e GPUTOK_STRING_CHECK=0 and
# -e GPUTOK_TRITON_JSON_500=1 turn them off, -e GPUTOK_ISOLATE_REQUESTS=1 serves the
# string-input models without the batcher (docs/reliability.md).
#
# --restart: Triton 2.51 can be crashed by one malformed request (docs/reliability.md). The
# entry point (gputok.serve.container, PID 1) runs tritonserver and exits with its code, so a
# crash ends the container and Docker starts it again; a Python-backend stub that dies (Triton
# keeps answering ready, its model failing every request) makes it stop tritonserver and exit
# with 3, for the same restart. Outside Docker, gputok-serve restarts the server itself
# (docs/reliability.md has a systemd unit for it).
#
# Inside the container the server listens on all interfaces (or published ports would not
# work); the -p 127.0.0.1:... mappings keep it reachable from this host only, like gputok-serve.
# Real GPT-2 weights: mount a local Hugging Face folder and point the gpt2 model at it:
#   -v /path/to/gpt2:/weights/gpt2:ro -e GPUTOK_GPT2_WEIGHTS=/weights/gpt2
# Not built or run by CI (no Docker there); the tests exercise the same model repository
# through gputok-serve. See docs/serving.md.

# ---- build the gputok wheel with nvcc (the Triton image has the CUDA runtime, not the compiler).
# CUDA 12.6 and Ubuntu 22.04 / Python 3.10, as in tritonserver:24.10-py3. cudart links
# statically, so the wheel needs only the driver at run time.
FROM nvcr.io/nvidia/cuda:12.6.2-devel-ubuntu22.04 AS build
ARG CUDA_ARCHITECTURES="80;86;89;90"
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-dev python3-pip g++ make git \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m pip install --no-cache-dir "cmake>=3.24,<4" scikit-build-core==1.1.2 pybind11==3.1.0 numpy==1.26.4 build
WORKDIR /src
COPY backend_src/ backend_src/
RUN cd backend_src && rm -rf build && \
    GPUTOK_CUDA=ON CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
    python3 -m pip wheel --no-build-isolation --no-deps -w /wheels .

# ---- the server image
FROM nvcr.io/nvidia/tritonserver:24.10-py3
# Pins: requirements/serve.txt's, except where this image forces another (scripts/tests/test_pins.py
# requires a reason here for each):
# - numpy 1.26.4 as there: nvidia-pytriton 0.7.0's Python-backend stub crashes on string inputs
#   with numpy 2 (seen on the CPU machine, 2026-11-21);
# - torch 2.5.1, not 2.13.0: its PyPI wheel is built for CUDA 12.4, which the 24.10 image's
#   CUDA 12.6 driver stack runs;
# - transformers 4.57.6, not 5.23.0: 5.23.0 requires Python >= 3.11 (this image has 3.10) and
#   torch >= 2.6 (its package metadata); 4.57.6 is the newest 4.x.
RUN python3 -m pip install --no-cache-dir numpy==1.26.4 torch==2.5.1 transformers==4.57.6 safetensors==0.8.0
COPY --from=build /wheels/ /wheels/
RUN python3 -m pip install --no-cache-dir --no-deps /wheels/gputok-*.whl && \
    python3 -c "import gputok; print('gputok', gputok.__version__, gputok.cuda_available())"
COPY model_repository/ /models/
COPY docker/entrypoint.sh /usr/local/bin/gputok-entrypoint
RUN chmod +x /usr/local/bin/gputok-entrypoint
EXPOSE 8000 8001 8002
ENTRYPOINT ["/usr/local/bin/gputok-entrypoint"]
