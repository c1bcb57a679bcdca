#!/usr/bin/env bash
# `make sanitize`: builds gputok's native module with ASan + UBSan in its own build folder
# (build/sanitize, never the editable build), stages it beside the Python package, and runs
# every fuzz/fuzz_*.py harness against it with libasan preloaded into CPython.
#   FUZZ_BUDGET  inputs per harness (default 2000)
#   FUZZ_SECONDS stop each harness after this long (default 0: no limit; `make test` uses 20)
#   FUZZ_SEED    the first seed (default 0); a run is reproducible from (seed, budget)
#   FUZZ_ONLY    a glob of harness names to run (default fuzz_*)
# Any finding aborts the harness (halt_on_error, UBSan's -fno-sanitize-recover) and the
# target fails. CPython's own allocations are not freed at exit, so detect_leaks=0.
# Run with `FUZZ_BUDGET=200000 make sanitize` for the long run (docs/security.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VPY=$ROOT/.venv/bin/python
BUILD=$ROOT/build/sanitize
STAGE=$BUILD/stage
log() { printf '\033[1m[sanitize]\033[0m %s\n' "$*" >&2; }

flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
mkdir -p "$BUILD"
log "configuring and building the ASan+UBSan module in $BUILD (CPU path only)"
cmake -S backend_src -B "$BUILD" -DGPUTOK_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DPython_EXECUTABLE="$VPY" -Dpybind11_DIR="$($VPY -c 'import pybind11; print(pybind11.get_cmake_dir())')" \
  >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" >"$BUILD/build.log" 2>&1 ||
  { tail -50 "$BUILD/build.log"; exit 1; }

# The staged package: the sources (linked) and every sanitized extension module of the build.
rm -rf "$STAGE" && mkdir -p "$STAGE/gputok"
for f in backend_src/gputok/*; do
  case $f in *.so) ;; *) ln -s "$ROOT/$f" "$STAGE/gputok/" ;; esac
done
cp "$BUILD"/*.so "$STAGE/gputok/"

asan=$(g++ -print-file-name=libasan.so)
ubsan=$(g++ -print-file-name=libubsan.so)
export GPUTOK_SANITIZED_STAGE=$STAGE
# Python objects from malloc, not pymalloc's arenas: ASan sees an over-read past a bytes object
# only when the object is a malloc block of its own.
export PYTHONMALLOC=malloc
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
budget=${FUZZ_BUDGET:-2000}
seed=${FUZZ_SEED:-0}
seconds=${FUZZ_SECONDS:-0}
status=0
for h in fuzz/${FUZZ_ONLY:-fuzz_*}.py; do
  log "$h: $budget inputs (at most ${seconds}s, 0: no limit) from seed $seed"
  LD_PRELOAD="$asan $ubsan" "$VPY" "$h" --sanitized --budget "$budget" --seconds "$seconds" --seed "$seed" ||
    { status=1; log "$h FAILED (the finding is above)"; }
done
exit $status
