#!/usr/bin/env bash
# One GPU-machine call: nvCOMP's batched snappy against gputok's snappy kernels in the corpus
# tool's Parquet path, and the "no behaviour change" check of the corpus module's split.
#
#   1. exactness: the page reader's tests with the GPU decoder on both engines (each held to the
#      CPU decoder byte for byte), and the corpus module's own tests;
#   2. bench/bench_parquet.py: decoding alone, one process, kernels vs nvCOMP vs the CPU;
#   3. bench/bench_corpus.py: the corpus run, 1 GPU x 4 workers, --parquet-decoders
#      auto (the kernels) and gputok-nvcomp, against gigatoken's hashes;
#   4. where BEFORE names a folder with the package of the tree before the split (gputok/ with
#      its prebuilt _core), the same corpus run on it (auto);
#   5. bench/bench_gpu.py --quick (the tokenizer alone; --deadline-s bounds it).
#
# Carried (64 MiB in all): .whl and .carry (scripts/gpu_carry.sh), .gpucarry/gpu with _core and
# _corpus_native for CPython 3.12, and .nvcomp/libnvcomp.so.6.xz: the library of the
# nvidia-libnvcomp-cu12 wheel, which the machine cannot download (no network):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_28_x86_64 -d /tmp/nvc nvidia-libnvcomp-cu12==6.0.0.12
#   unzip -p /tmp/nvc/nvidia_libnvcomp_cu12-*.whl nvidia/libnvcomp/lib64/libnvcomp.so.6 \
#     | xz -9 -T2 >.nvcomp/libnvcomp.so.6.xz          # 48 MB -> 26 MB
# Logs and results under $OUT; the last lines are a short table.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_nvcomp_ab}
mkdir -p "$OUT"
S=$OUT/summary.txt
: >"$S"
note() { echo "$*" | tee -a "$S"; }
t0=$(date +%s)
STAGES=${STAGES:-tests,parquet,corpus,before,gpu}  # a comma list of the steps below
has() { [[ ",$STAGES," == *",$1,"* ]]; }
lap() { note "  [$(($(date +%s) - t0)) s] $*"; }
bash scripts/gpu_check.sh build >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD/backend_src PYTHONUNBUFFERED=1
mkdir -p /tmp/nvcomp && xz -dc .nvcomp/libnvcomp.so.6.xz >/tmp/nvcomp/libnvcomp.so.6
export LD_LIBRARY_PATH=/tmp/nvcomp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -f .cache/corpus/corpus-bench.jsonl ] ||
  python3 bench/corpus.py unbundle --bundle .carry/corpus-bench.jsonl.xz >"$OUT/corpus.log" 2>&1
note "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(nproc) cores"
lap "set-up"

# Separate processes: a fault inside nvCOMP on hostile input would end its process's context.
T="tests/corpus/test_parquet_pages.py tests/corpus/test_parquet_snappy.py"
has tests && for k in "gpu and (bench_like or hand_built or every_tag or offset_zero)" \
  "nvcomp and not property" "nvcomp and property"; do
  timeout 45 python3 -m pytest -q -p no:cacheprovider -x $T tests/corpus/test_corpus_native.py \
    -k "$k" >"$OUT/pytest.log" 2>&1
  cat "$OUT/pytest.log" >>"$OUT/pytest-all.log"
  lap "pytest -k '$k': $(tail -1 "$OUT/pytest.log")"
done

if has parquet; then
  timeout 45 python3 bench/bench_parquet.py --dir /tmp/pq --decoders gpu,nvcomp,cpu --repeat 3 \
    >"$OUT/bench_parquet.log" 2>&1
  lap "bench_parquet"; grep "GB/s" "$OUT/bench_parquet.log" | tee -a "$S"
fi

corpus() {  # corpus run: $1 label, then bench_corpus.py's arguments
  local label=$1; shift
  timeout 70 python3 bench/bench_corpus.py --workers 1 --workers-per-gpu 4 --scale "${SCALE:-16}" --shards 64 \
    --repeat 3 --work-dir /dev/shm/gputok-ab --no-docs "$@" >"$OUT/corpus-$label.log" 2>&1
  rm -rf /dev/shm/gputok-ab
  lap "corpus ($label)"; grep -E "gigatoken \(|gputok x1, " "$OUT/corpus-$label.log" | cut -c17- | tee -a "$S"
}
has corpus && corpus branch --parquet-decoders auto,gputok-nvcomp
if has before && [ -n "${BEFORE:-}" ] && [ -d "$BEFORE/gputok" ]; then
  PYTHONPATH=/tmp/site:$BEFORE corpus before --parquet-decoders auto
fi
if has gpu; then
  timeout 50 python3 bench/bench_gpu.py --quick --deadline-s "${GPU_DEADLINE:-25}" \
    --out "$OUT/bench_gpu" >"$OUT/bench_gpu.log" 2>&1
  lap "bench_gpu --quick"; tail -30 "$OUT/bench_gpu/results.md" | tee -a "$S"
fi
find bench/results -name 'corpus-*.json' -newer "$OUT/setup.log" -exec cp {} "$OUT/" \; 2>/dev/null

cat "$S"
