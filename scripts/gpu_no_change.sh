#!/usr/bin/env bash
# One GPU-machine call: "no behaviour change" of a refactor, this tree against a tree before it,
# alternated on one machine so that host and clock drift fall on both alike.
#
#   BEFORE=.before ROUNDS=2 bash scripts/gpu_no_change.sh
#
# BEFORE names a folder holding the earlier tree's package (gputok/, its _core and
# _corpus_native prebuilt for sm_90 and CPython 3.12). To make it, on the dev machine:
#   git worktree add /tmp/before REV && (cd /tmp/before && GPU_BUILD_DIR=/tmp/gpub_before \
#     PY=$PWD/.venv/bin/python bash scripts/gpu_carry.sh build)
#   mkdir -p .before && cp -r /tmp/before/backend_src/gputok .before/ && \
#     cp /tmp/before/.gpucarry/gpu/_*.so .before/gputok/
# Carry .before beside .gpucarry, .whl and .carry (scripts/gpu_carry.sh).
#
# Each round runs, for this tree ("after") and then BEFORE:
#   bench/bench_gpu.py --quick (the tokenizer alone; the same script drives both packages)
#   bench/bench_corpus.py, 1 GPU x 4 Dask workers, Parquet, SCALE x the bench corpus in SHARDS
#     shards, REPEAT timed runs, every shard hash checked against gigatoken's
# The summary's last lines are each run's figures; logs and tables go under $OUT.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gputok_no_change}
BEFORE=${BEFORE:?BEFORE: the earlier package folder}
ROUNDS=${ROUNDS:-2}
STAGES=${STAGES:-gpu,corpus}
mkdir -p "$OUT"
S=$OUT/summary.txt
: >"$S"
t0=$(date +%s)
note() { echo "$*" | tee -a "$S"; }
lap() { note "  [$(($(date +%s) - t0)) s] $*"; }
has() { [[ ",$STAGES," == *",$1,"* ]]; }
OUT=$OUT/check bash scripts/gpu_check.sh build >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
[ -f .cache/corpus/corpus-bench.jsonl ] ||
  python3 bench/corpus.py unbundle --bundle .carry/corpus-bench.jsonl.xz >"$OUT/corpus.log" 2>&1
export PYTHONUNBUFFERED=1
note "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(nproc) cores"
lap "set-up"

pkg() { [ "$1" = after ] && echo "$PWD/backend_src" || echo "$PWD/$BEFORE"; }
gpu_quick() {  # $1 tree, $2 round
  PYTHONPATH=/tmp/site:$(pkg "$1") timeout 90 python3 bench/bench_gpu.py --quick \
    --deadline-s "${GPU_DEADLINE:-45}" --out "$OUT/bg-$1-$2" >"$OUT/bg-$1-$2.log" 2>&1
  lap "bench_gpu --quick ($1, round $2): rc=$?"
  grep -E "^\|" "$OUT/bg-$1-$2/results.md" | sed "s/^/$1 $2 /" >>"$OUT/bench_gpu_rows.txt"
}
corpus() {  # $1 tree, $2 round
  PYTHONPATH=/tmp/site:$(pkg "$1") timeout 150 python3 bench/bench_corpus.py --workers 1 \
    --workers-per-gpu 4 --scale "${SCALE:-16}" --shards "${SHARDS:-64}" --repeat "${REPEAT:-5}" \
    --work-dir /dev/shm/gputok-nc --no-docs --parquet-decoders auto >"$OUT/corpus-$1-$2.log" 2>&1
  rm -rf /dev/shm/gputok-nc
  lap "corpus ($1, round $2): rc=$?"
  grep -E "gigatoken \(|gputok x1, |mismatch" "$OUT/corpus-$1-$2.log" | cut -c17- | sed "s/^/$1 $2 /" | tee -a "$S"
}
for r in $(seq 1 "$ROUNDS"); do
  for tree in after before; do
    has gpu && gpu_quick $tree "$r"
    has corpus && corpus $tree "$r"
  done
done
find bench/results -name 'corpus-*.json' -newer "$OUT/setup.log" -exec cp {} "$OUT/" \; 2>/dev/null
cat "$S"
